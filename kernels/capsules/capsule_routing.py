"""Squash and routing by agreement (``kernels/capsules/capsule_routing.cu``): NumPy references, launchers, a DigitCaps layer.

Shapes: ``u_hat`` is ``(batch, in_caps, out_caps, out_dim)``, the logits and
coupling coefficients ``c`` are ``(batch, in_caps, out_caps)``, ``s`` and
``v`` are ``(batch, out_caps, out_dim)``.

:class:`DigitCaps` puts the book's kernels together into a trainable layer:
prediction (``capsule_prediction``), routing and squash (this module), and the
backward pass (``capsule_prediction_backward`` and the kernels here).
"""

from __future__ import annotations

import numpy as np

from . import capsule_prediction, capsule_prediction_backward
from ..runtime import Module, blocks_for
from ..runtime.loader import float32_operand, load_topic, result_array
from ..runtime.versions import KernelVersion, kernel_table, launch_1d

TOPIC = "capsule_routing"
BLOCK = 256
SQUASH_EPS = 1e-7  # must equal the #define in capsule_routing.cu
ROUTING_ITERATIONS = 3


def module() -> Module:
    return load_topic(TOPIC)


def _grid(n: int) -> int:
    return max(1, min(blocks_for(n, BLOCK), 65535))


# --------------------------------------------------------------------------- NumPy references (float64)


def squash_reference(s) -> np.ndarray:
    s = np.asarray(s, np.float64)
    norm2 = (s * s).sum(axis=-1, keepdims=True)
    return s * norm2 / ((1.0 + norm2) * np.sqrt(norm2 + SQUASH_EPS))


def softmax_reference(logits) -> np.ndarray:
    x = np.asarray(logits, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def weighted_sum_reference(c, u_hat) -> np.ndarray:
    return np.einsum("bij,bijd->bjd", np.asarray(c, np.float64), np.asarray(u_hat, np.float64))


def agreement_reference(u_hat, v) -> np.ndarray:
    return np.einsum("bijd,bjd->bij", np.asarray(u_hat, np.float64), np.asarray(v, np.float64))


def squash_backward_reference(s, grad_v) -> np.ndarray:
    """dE/ds = J^T dE/dv with the squash's Jacobian J = dv/ds, built whole for each capsule vector."""
    s, g = np.asarray(s, np.float64), np.asarray(grad_v, np.float64)
    norm2 = (s * s).sum(axis=-1, keepdims=True)[..., None]  # (..., 1, 1)
    root = np.sqrt(norm2 + SQUASH_EPS)
    f = norm2 / ((1.0 + norm2) * root)
    df = 1.0 / ((1.0 + norm2) * root) - f / (1.0 + norm2) - 0.5 * f / (norm2 + SQUASH_EPS)
    jacobian = f * np.eye(s.shape[-1]) + 2.0 * df * s[..., :, None] * s[..., None, :]
    return np.einsum("...dk,...d->...k", jacobian, g)


def weighted_sum_backward_reference(c, grad_s) -> np.ndarray:
    """dE/du_hat[b, i, j] = c[b, i, j] dE/ds[b, j]: the weighted sum's gradient with c held constant."""
    return np.einsum("bij,bjd->bijd", np.asarray(c, np.float64), np.asarray(grad_s, np.float64))


def routing_reference(u_hat, iterations: int = ROUTING_ITERATIONS):
    """Dynamic routing in float64: returns ``(v, c)``, the output capsules and the last coupling coefficients."""
    u_hat = np.asarray(u_hat, np.float64)
    logits = np.zeros(u_hat.shape[:3])
    for r in range(iterations):
        c = softmax_reference(logits)
        v = squash_reference(weighted_sum_reference(c, u_hat))
        if r < iterations - 1:
            logits = logits + agreement_reference(u_hat, v)
    return v, c


def margin_loss(v, labels, m_plus=0.9, m_minus=0.1, lam=0.5):
    """CapsNet's margin loss, averaged over the batch; returns ``(loss, dloss/dv)``.

    ``L = sum_j T_j max(0, m+ - |v_j|)^2 + lam (1 - T_j) max(0, |v_j| - m-)^2``
    with ``T_j = 1`` for the true class.
    """
    v = np.asarray(v, np.float64)
    length = np.sqrt((v * v).sum(axis=-1) + 1e-12)
    T = np.zeros_like(length)
    T[np.arange(len(labels)), labels] = 1.0
    present = np.maximum(0.0, m_plus - length)
    absent = np.maximum(0.0, length - m_minus)
    loss = (T * present**2 + lam * (1 - T) * absent**2).sum(axis=1).mean()
    dlength = (-2 * T * present + 2 * lam * (1 - T) * absent) / len(labels)
    return float(loss), dlength[..., None] * v / length[..., None]


# --------------------------------------------------------------------------- launchers


def _routing_shapes(u_hat):
    if len(u_hat.shape) != 4:
        raise ValueError(f"u_hat must be (batch, in_caps, out_caps, out_dim), got {tuple(u_hat.shape)}")
    return tuple(int(x) for x in u_hat.shape)


def _over_last_axis(kernel: str, x, out):
    """Steps 1 and 3 launch alike: ``kernel(x, y, rows, length)``, one thread per row of the last axis."""
    x = float32_operand(x)
    length = int(x.shape[-1])
    rows = int(np.prod(x.shape[:-1]))
    y = result_array(out, tuple(x.shape))
    module().function(kernel)(x, y, rows, length, grid=_grid(rows), block=BLOCK)
    return y


def softmax(logits, out=None):
    """1. ``routing_softmax`` over the last axis."""
    return _over_last_axis("routing_softmax", logits, out)


def weighted_sum(c, u_hat, out=None):
    """2. ``routing_weighted_sum``: s = sum_i c u_hat."""
    c, u_hat = float32_operand(c), float32_operand(u_hat)
    batch, in_caps, out_caps, out_dim = _routing_shapes(u_hat)
    s = result_array(out, (batch, out_caps, out_dim))
    module().function("routing_weighted_sum")(c, u_hat, s, batch, in_caps, out_caps, out_dim,
                                              grid=_grid(batch * out_caps * out_dim), block=BLOCK)
    return s


def squash(s, out=None):
    """3. ``squash_forward`` over the last axis."""
    return _over_last_axis("squash_forward", s, out)


def agreement(u_hat, v, logits):
    """4. ``routing_agreement``: ``logits += <u_hat, v>`` in place (``logits`` must be writable)."""
    u_hat, v = float32_operand(u_hat), float32_operand(v)
    batch, in_caps, out_caps, out_dim = _routing_shapes(u_hat)
    module().function("routing_agreement")(u_hat, v, logits, batch, in_caps, out_caps, out_dim,
                                           grid=_grid(batch * in_caps * out_caps), block=BLOCK)
    return logits


def squash_backward(s, grad_v, out=None):
    """5. ``squash_backward``: dE/ds from dE/dv."""
    s, grad_v = float32_operand(s), float32_operand(grad_v)
    dim = int(s.shape[-1])
    n = int(np.prod(s.shape[:-1]))
    grad_s = result_array(out, tuple(s.shape))
    module().function("squash_backward")(s, grad_v, grad_s, n, dim, grid=_grid(n), block=BLOCK)
    return grad_s


def weighted_sum_backward(c, grad_s, out=None):
    """6. ``routing_weighted_sum_backward``: dE/du_hat = c dE/ds, with c held constant."""
    c, grad_s = float32_operand(c), float32_operand(grad_s)
    batch, in_caps, out_caps = (int(x) for x in c.shape)
    out_dim = int(grad_s.shape[-1])
    grad_u_hat = result_array(out, (batch, in_caps, out_caps, out_dim))
    module().function("routing_weighted_sum_backward")(c, grad_s, grad_u_hat, batch, in_caps, out_caps, out_dim,
                                                       grid=_grid(grad_u_hat.size), block=BLOCK)
    return grad_u_hat


def route(u_hat, iterations: int = ROUTING_ITERATIONS):
    """Dynamic routing with the kernels; returns ``(v, c, s)`` (s: the last weighted sum, for the backward pass)."""
    u_hat = float32_operand(u_hat)
    batch, in_caps, out_caps, out_dim = _routing_shapes(u_hat)
    logits = np.zeros((batch, in_caps, out_caps), np.float32)
    for r in range(iterations):
        c = softmax(logits)
        s = weighted_sum(c, u_hat)
        v = squash(s)
        if r < iterations - 1:
            agreement(u_hat, v, logits)
    return v, c, s


# --------------------------------------------------------------------------- a DigitCaps layer


class DigitCaps:
    """Prediction + routing + squash, trainable with the book's kernels.

    ``forward(u)`` returns the output capsules ``v``; ``backward(grad_v)``
    returns ``dE/du`` and stores ``dE/dW`` in ``self.grad_W``.  The gradient
    flows through the last routing iteration with its coupling coefficients
    held constant (no gradient through the logits' updates).
    """

    def __init__(self, in_caps, in_dim, out_caps, out_dim, iterations=ROUTING_ITERATIONS, seed=0, scale=None):
        rng = np.random.default_rng(seed)
        scale = scale if scale is not None else 1.0 / np.sqrt(in_dim)
        self.W = (scale * rng.standard_normal((in_caps, out_caps, out_dim, in_dim))).astype(np.float32)
        self.iterations = iterations
        self.grad_W = np.zeros_like(self.W)

    def forward(self, u):
        self.u = np.ascontiguousarray(u, np.float32)
        u_hat = capsule_prediction.forward(self.u, self.W)
        self.v, self.c, self.s = route(u_hat, self.iterations)
        return self.v

    def backward(self, grad_v):
        grad_s = squash_backward(self.s, np.ascontiguousarray(grad_v, np.float32))
        grad_u_hat = weighted_sum_backward(self.c, grad_s)
        grad_u, self.grad_W = capsule_prediction_backward.gradients(grad_u_hat, self.W, self.u)
        return grad_u

    def forward_reference(self, u):
        return routing_reference(capsule_prediction.forward_reference(u, self.W), self.iterations)[0]


def capsule_lengths(v) -> np.ndarray:
    """|v_j| for every output capsule: the network's score for each class."""
    return np.sqrt((np.asarray(v, np.float64) ** 2).sum(axis=-1))


# --------------------------------------------------------------------------- training on scikit-learn's digits


class PrimaryCaps:
    """Primary capsules from an 8x8 image: a linear map to ``in_caps * in_dim`` numbers, then squash per capsule.

    The linear map is a NumPy matrix product (the dense layer of the MLP
    chapter); the squash and its gradient are the kernels of this module.
    """

    def __init__(self, in_features, in_caps, in_dim, seed=1):
        rng = np.random.default_rng(seed)
        self.shape = (in_caps, in_dim)
        self.P = (rng.standard_normal((in_features, in_caps * in_dim)) / np.sqrt(in_features)).astype(np.float32)
        self.bias = np.zeros(in_caps * in_dim, np.float32)

    def forward(self, x):
        self.x = np.ascontiguousarray(x, np.float32)
        self.pre = (self.x @ self.P + self.bias).reshape(len(x), *self.shape).astype(np.float32)
        return squash(self.pre)

    def backward(self, grad_u):
        grad_pre = squash_backward(self.pre, grad_u).reshape(len(self.x), -1)
        self.grad_P = self.x.T @ grad_pre
        self.grad_bias = grad_pre.sum(axis=0)


def load_digits_split(test_fraction=0.25, seed=0):
    """scikit-learn's 8x8 digits, pixels scaled to [0, 1]: ``(x_train, y_train, x_test, y_test)``."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def accuracy(primary, digitcaps, x, y, batch=256) -> float:
    correct = 0
    for start in range(0, len(x), batch):
        v = digitcaps.forward(primary.forward(x[start:start + batch]))
        correct += int((capsule_lengths(v).argmax(axis=1) == y[start:start + batch]).sum())
    return correct / len(x)


def train_digits(epochs=3, batch=64, lr=0.5, in_caps=32, in_dim=8, out_dim=16, seed=0, log=print):
    """Train PrimaryCaps + DigitCaps with the margin loss and plain SGD; returns ``(primary, digitcaps, history)``."""
    x_train, y_train, x_test, y_test = load_digits_split(seed=seed)
    primary = PrimaryCaps(x_train.shape[1], in_caps, in_dim, seed=seed + 1)
    digitcaps = DigitCaps(in_caps, in_dim, 10, out_dim, seed=seed + 2)
    rng = np.random.default_rng(seed)
    history = []
    for epoch in range(epochs):
        order = rng.permutation(len(x_train))
        losses = []
        for start in range(0, len(order), batch):
            idx = order[start:start + batch]
            v = digitcaps.forward(primary.forward(x_train[idx]))
            loss, grad_v = margin_loss(v, y_train[idx])
            primary.backward(digitcaps.backward(grad_v))
            digitcaps.W -= (lr * digitcaps.grad_W).astype(np.float32)
            primary.P -= (lr * primary.grad_P).astype(np.float32)
            primary.bias -= (lr * primary.grad_bias).astype(np.float32)
            losses.append(loss)
        record = {"epoch": epoch + 1, "loss": float(np.mean(losses)),
                  "test_accuracy": accuracy(primary, digitcaps, x_test, y_test)}
        history.append(record)
        if log:
            log(f"epoch {record['epoch']}: mean margin loss {record['loss']:.4f}, "
                f"test accuracy {record['test_accuracy']:.3f}")
    return primary, digitcaps, history


# --------------------------------------------------------------------------- the versions' facts
# A shape is {"batch", "in_caps", "out_caps", "out_dim"}; every kernel runs a grid-stride loop over its
# outputs on at most 65535 blocks of BLOCK threads.  The two backward kernels have no closed-form
# reference here: the tests check them against finite differences (kernels/tools/gradcheck.py).

ROUTING_AXES = ("batch", "in_caps", "out_caps", "out_dim")


def _sizes(shape) -> tuple[int, int, int, int]:
    return tuple(int(shape[a]) for a in ROUTING_AXES)


def _over(count):
    return lambda shape: launch_1d(_grid(count(*_sizes(shape))), BLOCK)


def _times(factor: float, count):
    """``factor * count(b, i, j, d)`` for a shape: a kernel's bytes or flops, per element it covers."""
    return lambda shape: factor * count(*_sizes(shape))


# What the kernels cover, counted in elements of a shape (b, i, j, d).
def _logits(b, i, j, d):  # a routing logit (or coupling) per sample, in capsule and out capsule
    return b * i * j


def _out_vectors(b, i, j, d):  # the out capsules' vectors (s, v, dE/dv, dE/ds)
    return b * j * d


def _u_hat(b, i, j, d):  # the predictions u_hat (and dE/du_hat)
    return b * i * j * d


KERNELS = kernel_table(
    KernelVersion(TOPIC, "routing_softmax", softmax, _over(lambda b, i, j, d: b * i),
                  bytes=_times(8.0, _logits), flops=_times(4.0, _logits), reference=softmax_reference,
                  number=1, title="the coupling coefficients: a softmax over the logits"),
    KernelVersion(TOPIC, "routing_weighted_sum", weighted_sum, _over(_out_vectors),
                  bytes=_times(4.0, _u_hat), flops=_times(2.0, _u_hat), reference=weighted_sum_reference,
                  number=2, title="s, the weighted sum of the predictions"),
    KernelVersion(TOPIC, "squash_forward", squash, _over(lambda b, i, j, d: b * j),
                  bytes=_times(8.0, _out_vectors), flops=_times(4.0, _out_vectors), reference=squash_reference,
                  number=3, title="v = squash(s)"),
    KernelVersion(TOPIC, "routing_agreement", agreement, _over(_logits),
                  bytes=_times(4.0, _u_hat), flops=_times(2.0, _u_hat), reference=agreement_reference,
                  number=4, title="the agreement added to the logits"),
    # s and dE/dv read, dE/ds written: the out capsules' vectors; two dot products and an update per element
    KernelVersion(TOPIC, "squash_backward", squash_backward, _over(lambda b, i, j, d: b * j),
                  bytes=_times(12.0, _out_vectors), flops=_times(8.0, _out_vectors),
                  reference=squash_backward_reference, number=5, title="the gradient through the squash"),
    # dE/du_hat written once (c and dE/ds are small beside it): one product per element
    KernelVersion(TOPIC, "routing_weighted_sum_backward", weighted_sum_backward, _over(_u_hat),
                  bytes=_times(4.0, _u_hat), flops=_times(1.0, _u_hat), reference=weighted_sum_backward_reference,
                  number=6, title="the gradient through the weighted sum"),
)
