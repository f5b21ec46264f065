"""Networks built from the book's kernels: the digits MLP (:mod:`.mlp`) and LeNet-5 (:mod:`.lenet`)."""
