"""The kernels of the chapter "CUDA from Python": indexing, vector addition, SAXPY, a copy, the sum,
and the FP32 peak, each a ``<topic>.cu`` beside its ``<topic>.py``."""
