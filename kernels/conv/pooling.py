"""Pooling layers of ``kernels/conv/pooling.cu``: NumPy references and one launcher per version.

``X`` is ``(N, C, H, W)``; a pooling layer of size ``pool`` summarises each
``pool x pool`` window (stride ``pool``) and gives ``(N, C, H // pool, W // pool)``:
rows and columns that do not fill a window are dropped.
"""

from __future__ import annotations

import numpy as np

from ..runtime import Module, blocks_for
from ..runtime.loader import float32_operand, load_topic, result_array
from ..runtime.versions import KernelVersion, LaunchConfig, kernel_table, launch_1d

TOPIC = "pooling"
BLOCK = 256


def module() -> Module:
    return load_topic(TOPIC)


# --------------------------------------------------------------------------- references (float64)


def _windows(X, pool: int) -> np.ndarray:
    """``(N, C, H // pool, W // pool, pool * pool)``: the pixels of every window, in row-major order."""
    X = np.asarray(X, np.float64)
    if X.ndim != 4:
        raise ValueError(f"X must be (N, C, H, W), got shape {X.shape}")
    N, C, H, W = X.shape
    Ho, Wo = H // pool, W // pool
    if Ho == 0 or Wo == 0:
        raise ValueError(f"a {pool} x {pool} window does not fit a {H} x {W} map")
    w = X[:, :, : Ho * pool, : Wo * pool].reshape(N, C, Ho, pool, Wo, pool)
    return w.transpose(0, 1, 2, 4, 3, 5).reshape(N, C, Ho, Wo, pool * pool)


def avg_pool_reference(X, pool: int = 2) -> np.ndarray:
    return _windows(X, pool).mean(axis=-1)


def subsample_bias_sigmoid_reference(X, b, pool: int = 2) -> np.ndarray:
    z = avg_pool_reference(X, pool) + np.asarray(b, np.float64)[None, :, None, None]
    return 1.0 / (1.0 + np.exp(-z))


def max_pool_reference(X, pool: int = 2) -> np.ndarray:
    return _windows(X, pool).max(axis=-1)


def avg_pool_backward_reference(dY, x_shape, pool: int = 2) -> np.ndarray:
    dY = np.asarray(dY, np.float64)
    dX = np.zeros(x_shape)
    N, C, Ho, Wo = dY.shape
    spread = np.repeat(np.repeat(dY, pool, axis=2), pool, axis=3) / (pool * pool)
    dX[:, :, : Ho * pool, : Wo * pool] = spread
    return dX


def max_pool_backward_reference(X, dY, pool: int = 2) -> np.ndarray:
    """dY goes to the first maximum (row-major) of each window; every other pixel gets 0."""
    X = np.asarray(X, np.float64)
    dY = np.asarray(dY, np.float64)
    N, C, H, W = X.shape
    Ho, Wo = H // pool, W // pool
    winner = _windows(X, pool).argmax(axis=-1)  # argmax returns the first maximum
    onehot = (np.arange(pool * pool) == winner[..., None]) * dY[..., None]  # N, C, Ho, Wo, pool*pool
    dX = np.zeros((N, C, H, W))
    dX[:, :, : Ho * pool, : Wo * pool] = (
        onehot.reshape(N, C, Ho, Wo, pool, pool).transpose(0, 1, 2, 4, 3, 5).reshape(N, C, Ho * pool, Wo * pool)
    )
    return dX


# --------------------------------------------------------------------------- launchers


def pooled_shape(x_shape, pool: int) -> tuple[int, int, int, int]:
    if len(x_shape) != 4:
        raise ValueError(f"X must be (N, C, H, W), got shape {tuple(x_shape)}")
    N, C, H, W = (int(s) for s in x_shape)
    if pool < 1 or H // pool == 0 or W // pool == 0:
        raise ValueError(f"a {pool} x {pool} window does not fit a {H} x {W} map")
    return N, C, H // pool, W // pool


def _forward(kernel: str, X, pool: int, out, bias=None):
    X = float32_operand(X)
    shape = pooled_shape(X.shape, pool)
    Y = result_array(out, shape)
    N, C, H, W = (int(s) for s in X.shape)
    count = int(np.prod(shape))
    args = (X, Y) if bias is None else (X, float32_operand(bias), Y)
    module().function(kernel)(*args, N, C, H, W, int(pool), grid=blocks_for(count, BLOCK), block=BLOCK)
    return Y


def avg_pool(X, pool: int = 2, out=None):
    """Version 1: ``avg_pool_forward``."""
    return _forward("avg_pool_forward", X, pool, out)


def subsample_bias_sigmoid(X, b, pool: int = 2, out=None):
    """Version 2: ``subsample_bias_sigmoid_forward``; LeNet's subsampling with a bias per map and a sigmoid."""
    if tuple(np.shape(b)) != (int(X.shape[1]),):
        raise ValueError(f"the bias has shape {tuple(np.shape(b))}, expected ({X.shape[1]},)")
    return _forward("subsample_bias_sigmoid_forward", X, pool, out, bias=b)


def max_pool(X, pool: int = 2, out=None):
    """Version 3: ``max_pool_forward``."""
    return _forward("max_pool_forward", X, pool, out)


def avg_pool_backward(dY, x_shape, pool: int = 2, out=None):
    """Version 4: ``avg_pool_backward``; dE/dX of shape ``x_shape``."""
    dY = float32_operand(dY)
    if tuple(dY.shape) != pooled_shape(x_shape, pool):
        raise ValueError(f"dY has shape {tuple(dY.shape)}, expected {pooled_shape(x_shape, pool)}")
    N, C, H, W = (int(s) for s in x_shape)
    dX = result_array(out, (N, C, H, W))
    module().function("avg_pool_backward")(dY, dX, N, C, H, W, int(pool),
                                           grid=blocks_for(N * C * H * W, BLOCK), block=BLOCK)
    return dX


def max_pool_backward(X, dY, pool: int = 2, out=None):
    """Version 5: ``max_pool_backward``; dE/dX, the gradient routed to each window's maximum."""
    X, dY = float32_operand(X), float32_operand(dY)
    if tuple(dY.shape) != pooled_shape(X.shape, pool):
        raise ValueError(f"dY has shape {tuple(dY.shape)}, expected {pooled_shape(X.shape, pool)}")
    N, C, H, W = (int(s) for s in X.shape)
    dX = result_array(out, (N, C, H, W))
    module().function("max_pool_backward")(X, dY, dX, N, C, H, W, int(pool),
                                           grid=blocks_for(N * C * H * W, BLOCK), block=BLOCK)
    return dX


FORWARDS = {"avg": avg_pool, "max": max_pool}


# --------------------------------------------------------------------------- the versions' facts

MAP_AXES = ("N", "C", "H", "W", "pool")  # samples, maps, map height and width, window


def _pooled_count(shape) -> int:
    N, C, H, W, pool = (int(shape[a]) for a in MAP_AXES)
    return N * C * (H // pool) * (W // pool)


def _one_thread_per_output(shape) -> LaunchConfig:
    return launch_1d(blocks_for(_pooled_count(shape), BLOCK), BLOCK)


def _forward_bytes(shape) -> float:
    """Every input read once, every pooled output written once."""
    N, C, H, W, _ = (int(shape[a]) for a in MAP_AXES)
    return 4.0 * (N * C * H * W + _pooled_count(shape))


def _forward_flops(shape) -> float:
    """One comparison (or add) per input of each window."""
    return float(_pooled_count(shape) * int(shape["pool"]) ** 2)


def _input_count(shape) -> int:
    N, C, H, W, _ = (int(shape[a]) for a in MAP_AXES)
    return N * C * H * W


def _one_thread_per_input(shape) -> LaunchConfig:
    """The backward kernels: one thread per element of dX."""
    return launch_1d(blocks_for(_input_count(shape), BLOCK), BLOCK)


KERNELS = kernel_table(
    KernelVersion(TOPIC, "avg_pool_forward", avg_pool, _one_thread_per_output, _forward_bytes, _forward_flops,
                  avg_pool_reference, number=1, title="the mean of each window"),
    # the window's sum, then the bias and the sigmoid (an exp, an add and a divide) per output
    KernelVersion(TOPIC, "subsample_bias_sigmoid_forward", subsample_bias_sigmoid, _one_thread_per_output,
                  lambda shape: _forward_bytes(shape) + 4.0 * int(shape["C"]),
                  lambda shape: _forward_flops(shape) + 4.0 * _pooled_count(shape), subsample_bias_sigmoid_reference,
                  number=2, title="LeNet-5's subsampling: the mean, a bias and the sigmoid"),
    KernelVersion(TOPIC, "max_pool_forward", max_pool, _one_thread_per_output, _forward_bytes, _forward_flops,
                  max_pool_reference, number=3, title="the largest value of each window"),
    # dY read once, dX written once; a divide per element of dX
    KernelVersion(TOPIC, "avg_pool_backward", avg_pool_backward, _one_thread_per_input,
                  lambda shape: 4.0 * (_pooled_count(shape) + _input_count(shape)),
                  lambda shape: float(_input_count(shape)), avg_pool_backward_reference,
                  number=4, title="dX of the mean: dY / pool^2 to every pixel of the window"),
    # X and dY read once, dX written once; the windows' maxima found again, one comparison per input of each
    KernelVersion(TOPIC, "max_pool_backward", max_pool_backward, _one_thread_per_input,
                  lambda shape: 4.0 * (_pooled_count(shape) + 2 * _input_count(shape)), _forward_flops,
                  max_pool_backward_reference, number=5, title="dX of the maximum: dY to the window's maximum"),
)
