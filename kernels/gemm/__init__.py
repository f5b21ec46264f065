"""The matrix product of the chapter "Convolution as matrix multiplication": the SGEMM ladder
(``sgemm``), its Hopper rungs (``sgemm_hopper``) and BF16 on the tensor cores (``sgemm_bf16``, versions 12 to 16)."""
