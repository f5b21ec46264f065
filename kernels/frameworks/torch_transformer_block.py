"""A pre-norm transformer block in PyTorch whose attention is the book's op or PyTorch's own SDPA.

    x = x + W_o attention(split_heads(W_qkv layer_norm(x)))
    x = x + W_2 gelu(W_1 layer_norm(x))

:func:`training_step` runs it forward, takes a mean-squared loss against a target, differentiates to every
weight (autograd through ``dlk::attention`` or SDPA) and applies plain SGD: the same step with either
attention (:data:`ATTENTIONS`), so that the benchmark can time the two from the same weights.
Needs PyTorch (a GPU for BF16 at useful sizes); the module imports without it.
"""

from __future__ import annotations

from kernels.frameworks import torch_attention

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # torch_attention says what is missing when called
    torch = F = SDPBackend = sdpa_kernel = None


def _sdpa_flash(q, k, v):
    """PyTorch's scaled_dot_product_attention with its FlashAttention-2 backend, causal."""
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


ATTENTIONS = {
    "dlk::attention": lambda q, k, v: torch_attention.attention(q, k, v, causal=True),
    "torch sdpa (flash)": _sdpa_flash,
}


def make_weights(dim: int, hidden: int, *, device, dtype, seed: int = 0) -> dict:
    """The block's weights, drawn once (scaled so that activations stay near unit size), requiring gradients."""
    g = torch.Generator().manual_seed(seed)

    def draw(*shape):
        w = torch.randn(*shape, generator=g) / shape[-1] ** 0.5
        return w.to(device=device, dtype=dtype).requires_grad_(True)

    return {"W_qkv": draw(3 * dim, dim), "W_o": draw(dim, dim), "W_1": draw(hidden, dim), "W_2": draw(dim, hidden)}


def block(weights: dict, x, heads: int, attention):
    """The block on x of shape (batch, N, dim)."""
    batch, n, dim = x.shape
    h = F.layer_norm(x, (dim,))
    qkv = (h @ weights["W_qkv"].T).view(batch, n, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
    q, k, v = (t.contiguous() for t in qkv)                       # each (batch, heads, N, d)
    o = attention(q, k, v).transpose(1, 2).reshape(batch, n, dim)
    x = x + o @ weights["W_o"].T
    return x + F.gelu(F.layer_norm(x, (dim,)) @ weights["W_1"].T) @ weights["W_2"].T


def training_step(weights: dict, x, target, heads: int, attention, learning_rate: float = 1e-2):
    """One step: the loss (a float) before the update; every weight moved by -learning_rate x its gradient."""
    loss = F.mse_loss(block(weights, x, heads, attention).float(), target)
    grads = torch.autograd.grad(loss, list(weights.values()))
    with torch.no_grad():
        for w, g in zip(weights.values(), grads):
            w.sub_(learning_rate * g)
    return loss.detach()
