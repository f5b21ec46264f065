"""Layer normalisation of ``kernels/dense/layernorm.cu``: the NumPy reference and one launcher per version.

``X`` is an ``(n, c)`` matrix, one row per sample; ``gamma`` and ``beta`` hold the ``c`` per-feature scales and
shifts.  A shape is ``{"n": rows, "c": features}``.
"""

from __future__ import annotations

import numpy as np

from ..runtime import Module, blocks_for
from ..runtime.loader import float32_operand, load_topic
from ..runtime.versions import KernelVersion, kernel_table, launch_1d

TOPIC = "layernorm"
BLOCK = 128
EPS = 1e-5


def module() -> Module:
    return load_topic(TOPIC)


def layernorm_reference(X, gamma, beta, eps: float = EPS) -> np.ndarray:
    """(X - mean) / sqrt(var + eps) * gamma + beta over each row, in float64 (var the biased variance, as
    PyTorch's ``layer_norm`` takes it)."""
    X = np.asarray(X, np.float64)
    mu = X.mean(axis=1, keepdims=True)
    var = ((X - mu) ** 2).mean(axis=1, keepdims=True)
    return (X - mu) / np.sqrt(var + eps) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)


def layernorm_forward(X, gamma, beta, eps: float = EPS, out=None):
    """Version 1: ``layernorm_forward``, one thread per row."""
    X, gamma, beta = float32_operand(X), float32_operand(gamma), float32_operand(beta)
    n, c = (int(s) for s in X.shape)
    Y = np.empty((n, c), np.float32) if out is None else out
    module().function("layernorm_forward")(X, gamma, beta, Y, n, c, np.float32(eps), grid=blocks_for(n, BLOCK),
                                           block=BLOCK)
    return Y


def _per_row(shape):
    return launch_1d(blocks_for(int(shape["n"]), BLOCK), BLOCK)


KERNELS = kernel_table(
    # X read and Y written once (the two passes for the statistics come from the caches), gamma and beta read
    KernelVersion(TOPIC, "layernorm_forward", layernorm_forward, _per_row,
                  bytes=lambda shape: 4.0 * (2 * int(shape["n"]) * int(shape["c"]) + 2 * int(shape["c"])),
                  flops=lambda shape: 8.0 * int(shape["n"]) * int(shape["c"]), reference=layernorm_reference,
                  number=1, title="one thread per row, the mean and then the variance around it"),
)
