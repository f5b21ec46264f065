"""The GEMM part's topics: ``sgemm_bf16`` (versions 12 to 16 of the GEMM ladder, BF16 on the tensor cores)."""
