"""The book's kernels as operators of a deep learning framework.

``torch_capsule``: the capsule prediction of ``kernels/capsules/capsule_prediction.cu`` and its gradients as
the PyTorch op ``torch.ops.dlk.capsule_predict`` (``torch.library.custom_op``, a fake implementation
for tracing, gradients registered); ``torch_capsule_layer``: a capsule layer in PyTorch (routing by
agreement, the margin loss) that takes either that op or the pure-PyTorch product for its predictions.
``torch_attention``: the fused attention forward and backward of ``kernels/attention/`` as ``torch.ops.dlk.attention``;
``torch_transformer_block``: a transformer block that trains with it or with PyTorch's SDPA.
"""
