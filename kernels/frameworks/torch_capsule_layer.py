"""A capsule layer in PyTorch for one training step: predictions, routing by agreement, the margin loss.

The predictions ``u_hat = W u`` come from the function the caller names: the op over the book's
kernels (:func:`kernels.frameworks.torch_capsule.capsule_predict`) or :func:`predict_einsum`, the
product as a framework writes it without a custom op.  Everything after them is the same PyTorch
code either way, so a training step with each measures what the op changes and nothing else.

Routing is the book's (``kernels/capsules/capsule_routing.py``): three iterations, and the coupling
coefficients of the last one held constant in the backward pass (the iterations pick ``c``; no
gradient flows through the updates of the logits), so the gradient reaches ``u_hat`` through the
weighted sum and the squash alone.
"""

from __future__ import annotations

import torch

from .torch_capsule import capsule_predict

ROUTING_ITERATIONS = 3
SQUASH_EPS = 1e-7  # as kernels/capsules/capsule_routing.py: a zero vector stays finite


def predict_einsum(u, W):
    """The pure-PyTorch predictions: one einsum (a batched matrix product over the input capsules)."""
    return torch.einsum("bik,ijdk->bijd", u, W)


#: The two ways of computing the predictions that a training step is measured with.
PREDICTIONS = {"dlk::capsule_predict": capsule_predict, "torch.einsum": predict_einsum}


def squash(s):
    """``|s|^2 / (1 + |s|^2) * s / |s|`` over the last axis: the direction kept, the length in [0, 1)."""
    norm2 = (s * s).sum(dim=-1, keepdim=True)
    return s * norm2 / ((1.0 + norm2) * torch.sqrt(norm2 + SQUASH_EPS))


def route(u_hat, iterations: int = ROUTING_ITERATIONS):
    """Routing by agreement: ``(v, c)``, the output capsules (batch, out_caps, out_dim) and the coefficients."""
    with torch.no_grad():  # the iterations only choose the coupling coefficients
        votes = u_hat.detach()
        logits = votes.new_zeros(votes.shape[:3])
        for _ in range(iterations - 1):
            v = squash(torch.einsum("bij,bijd->bjd", torch.softmax(logits, dim=2), votes))
            logits = logits + torch.einsum("bijd,bjd->bij", votes, v)
        c = torch.softmax(logits, dim=2)
    return squash(torch.einsum("bij,bijd->bjd", c, u_hat)), c


def margin_loss(v, labels, m_plus: float = 0.9, m_minus: float = 0.1, lam: float = 0.5):
    """CapsNet's margin loss on the lengths of the output capsules, averaged over the batch."""
    length = torch.sqrt((v * v).sum(dim=-1) + 1e-12)
    # 1 for the true class (scatter, not one_hot, which checks the labels on the host and so waits for the GPU)
    present = torch.zeros_like(length).scatter_(1, labels[:, None], 1.0)
    loss = present * torch.relu(m_plus - length) ** 2 + lam * (1 - present) * torch.relu(length - m_minus) ** 2
    return loss.sum(dim=1).mean()


def training_step(predict, u, W, labels):
    """Forward (predictions, routing, loss) and backward to ``u`` and ``W``: ``(loss, du, dW)``."""
    v, _ = route(predict(u, W))
    loss = margin_loss(v, labels)
    du, dW = torch.autograd.grad(loss, (u, W))
    return loss.detach(), du, dW
