"""Known failures of published L-Softmax implementations, reproduced in NumPy for the chapter and the tests.

Each function computes one step the way a published implementation did (in
float32 where that code ran in float32), so that the failure can be shown and
tested; the book's layer (``kernels/lsoftmax/lsoftmax.py``) avoids each one:

* :func:`cosine_without_epsilon`: cos(theta) = f / (|W||x|) with no epsilon,
  NaN for an all-zero feature row;
* :func:`psi_derivative_via_acos`: dpsi/dc through theta = acos(c), 0/0 at
  c = +-1;
* :func:`lambda_forward_backward`: lambda's floor applied in the forward pass
  only, so the two passes disagree once lambda reaches it;
* :func:`blend_every_logit`: the lambda blend applied to the whole row of
  logits instead of the label's logit;
* :func:`clamped_softmax_loss`: -log(max(p, FLT_MIN)), which sticks at
  -ln(FLT_MIN) = 87.34 when the label's probability underflows.
"""

from __future__ import annotations

import numpy as np

from .lsoftmax import FLT_MIN, psi_reference


def cosine_without_epsilon(f, a, b) -> np.ndarray:
    """f / (a b) in float32, as the GPU layer without an epsilon: 0 / 0 = NaN for a zero row."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.float32(f) / (np.float32(a) * np.float32(b))


def psi_derivative_via_acos(c, m: int) -> np.ndarray:
    """dpsi/dc = (-1)^k m sin(m theta) / sin(theta) with theta = acos(c), in float32: NaN at c = +-1."""
    c = np.asarray(c, np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = np.arccos(c)
        k = np.clip(np.floor(theta * np.float32(m / np.pi)), 0, m - 1)
        return ((-1.0) ** k * m * np.sin(m * theta) / np.sin(theta)).astype(np.float32)


def lambda_forward_backward(iteration, base=1000.0, gamma=0.12, power=1.0, lambda_min=5.0) -> tuple[float, float]:
    """(lambda of the forward, lambda of the backward) when only the forward applies the floor lambda_min."""
    decayed = base * (1.0 + gamma * iteration) ** (-power)
    return max(lambda_min, decayed), decayed


def blend_every_logit(F, labels, x_norm, w_label_norm, m: int, lam: float) -> np.ndarray:
    """(lam F + onehot * a b psi) / (1 + lam) over the whole row: every other logit shrinks by lam / (1 + lam)."""
    F = np.asarray(F, np.float64)
    rows = np.arange(len(F))
    labels = np.asarray(labels)
    a, b = np.asarray(w_label_norm, np.float64), np.asarray(x_norm, np.float64)
    psi, _ = psi_reference(F[rows, labels] / (a * b), m)
    blended = lam * F / (1 + lam)
    blended[rows, labels] += a * b * psi / (1 + lam)
    return blended


def clamped_softmax_loss(F, labels) -> np.ndarray:
    """Caffe's SoftmaxWithLoss in float32: p = softmax(F), loss = -log(max(p_y, FLT_MIN))."""
    F = np.asarray(F, np.float32)
    e = np.exp(F - F.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    p_label = p[np.arange(len(F)), np.asarray(labels)]
    return -np.log(np.maximum(p_label, np.float32(FLT_MIN)))


def k_from_acos(c, m: int) -> np.ndarray:
    """k = floor(m acos(c) / pi) in float32: NaN-driven garbage once rounding puts c outside [-1, 1]."""
    with np.errstate(invalid="ignore"):
        theta = np.arccos(np.asarray(c, np.float32))
    return np.floor(theta * np.float32(m / np.pi))


__all__ = ["cosine_without_epsilon", "psi_derivative_via_acos", "lambda_forward_backward", "blend_every_logit",
           "clamped_softmax_loss", "k_from_acos"]
