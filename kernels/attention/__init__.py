"""Attention: the unfused product, the one-pass softmax, the fused forward and backward passes in float32
(``attention.cu``) and on the tensor cores in BF16 (``attention_bf16.cu``)."""
