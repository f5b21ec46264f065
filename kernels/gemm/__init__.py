"""The matrix product of the chapter "Convolution as matrix multiplication": the SGEMM ladder
(``sgemm``) and its Hopper rungs (``sgemm_hopper``)."""
