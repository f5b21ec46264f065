"""Data sets the chapters train on: MNIST's IDX files (:mod:`.mnist_idx`)."""
