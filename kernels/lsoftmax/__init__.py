"""The chapter "Large-margin softmax": the layer's kernels and launchers (``lsoftmax``), the records
of the whole layer's kernels (``layer_facts``), the reproductions of published failures
(``pitfalls``) and the digits experiment (``digits``)."""
