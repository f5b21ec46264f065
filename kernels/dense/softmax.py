"""Softmax and cross-entropy of ``kernels/dense/softmax.cu``: NumPy references and one launcher per version.

``Z`` is an ``(n, c)`` matrix of scores (one row per sample, one column per
class), ``labels`` an int32 vector of classes in ``0..c-1``.
"""

from __future__ import annotations

import numpy as np

from ..runtime import DeviceBuffer, Module, blocks_for
from ..runtime.loader import float32_operand, load_topic
from ..runtime.versions import KernelVersion, kernel_table, launch_1d

TOPIC = "softmax"
BLOCK = 128


def module() -> Module:
    return load_topic(TOPIC)


# --------------------------------------------------------------------------- NumPy references (float64)


def softmax_reference(Z) -> np.ndarray:
    Z = np.asarray(Z, np.float64)
    e = np.exp(Z - Z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cross_entropy_reference(Z, labels) -> np.ndarray:
    """Per-sample loss logsumexp(z) - z_t."""
    Z = np.asarray(Z, np.float64)
    m = Z.max(axis=1)
    lse = m + np.log(np.exp(Z - m[:, None]).sum(axis=1))
    return lse - Z[np.arange(len(Z)), np.asarray(labels)]


def cross_entropy_backward_reference(Z, labels) -> np.ndarray:
    """Gradient of the mean loss over the rows: (softmax(Z) - onehot) / n."""
    P = softmax_reference(Z)
    P[np.arange(len(P)), np.asarray(labels)] -= 1.0
    return P / len(P)


# --------------------------------------------------------------------------- launchers


def _labels(labels):
    return labels if isinstance(labels, DeviceBuffer) else np.ascontiguousarray(labels, dtype=np.int32)


def _out(out, shape):
    return np.empty(shape, np.float32) if out is None else out


def _row_softmax(kernel: str, Z, out):
    """Versions 1 and 2 take the same arguments and launch: one thread per row of ``Z``."""
    Z = float32_operand(Z)
    n, c = (int(s) for s in Z.shape)
    P = _out(out, (n, c))
    module().function(kernel)(Z, P, n, c, grid=blocks_for(n, BLOCK), block=BLOCK)
    return P


def softmax_naive(Z, out=None):
    """Version 1: ``softmax_naive`` (overflows for scores above ~88)."""
    return _row_softmax("softmax_naive", Z, out)


def softmax_stable(Z, out=None):
    """Version 2: ``softmax_stable``."""
    return _row_softmax("softmax_stable", Z, out)


def cross_entropy_forward(Z, labels, probs=None, loss=None):
    """Version 3: ``softmax_cross_entropy_forward``; returns (probabilities, per-sample loss)."""
    Z, labels = float32_operand(Z), _labels(labels)
    n, c = (int(s) for s in Z.shape)
    P = _out(probs, (n, c))
    L = _out(loss, (n,))
    module().function("softmax_cross_entropy_forward")(Z, labels, P, L, n, c, grid=blocks_for(n, BLOCK), block=BLOCK)
    return P, L


def cross_entropy_backward(P, labels, out=None):
    """Version 4: ``softmax_cross_entropy_backward``; dZ of the mean loss."""
    P, labels = float32_operand(P), _labels(labels)
    n, c = (int(s) for s in P.shape)
    dZ = _out(out, (n, c))
    module().function("softmax_cross_entropy_backward")(P, labels, dZ, n, c, grid=blocks_for(n * c, BLOCK), block=BLOCK)
    return dZ


# --------------------------------------------------------------------------- the versions' facts
# A shape is {"n": rows, "c": classes}; one thread per row (per element for the backward pass).


def _per_row(shape):
    return launch_1d(blocks_for(int(shape["n"]), BLOCK), BLOCK)


def _nc(shape) -> int:
    return int(shape["n"]) * int(shape["c"])


KERNELS = kernel_table(
    KernelVersion(TOPIC, "softmax_naive", softmax_naive, _per_row, bytes=lambda shape: 8.0 * _nc(shape),
                  flops=lambda shape: 3.0 * _nc(shape), reference=softmax_reference,
                  number=1, title="one thread per row, exp(z) straight away"),
    KernelVersion(TOPIC, "softmax_stable", softmax_stable, _per_row, bytes=lambda shape: 8.0 * _nc(shape),
                  flops=lambda shape: 4.0 * _nc(shape), reference=softmax_reference,
                  number=2, title="the row maximum subtracted first"),
    KernelVersion(TOPIC, "softmax_cross_entropy_forward", cross_entropy_forward, _per_row,
                  # Z read, P written, a label read and a loss written per row
                  bytes=lambda shape: 4.0 * (2 * _nc(shape) + 2 * int(shape["n"])),
                  flops=lambda shape: 4.0 * _nc(shape), reference=cross_entropy_reference,
                  number=3, title="the stable softmax and each row's loss"),
    KernelVersion(TOPIC, "softmax_cross_entropy_backward", cross_entropy_backward,
                  lambda shape: launch_1d(blocks_for(_nc(shape), BLOCK), BLOCK),
                  bytes=lambda shape: 4.0 * (2 * _nc(shape) + int(shape["n"])),
                  flops=lambda shape: 2.0 * _nc(shape), reference=cross_entropy_backward_reference,
                  number=4, title="the loss's gradient, one thread per element"),
)
