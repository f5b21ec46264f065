"""Tools the chapters and tests use beside the kernels: gradient checks, source excerpts, the
roofline's peaks and numbers, nvcc's register and spill report."""
