"""Unrolling the input of a convolution layer (im2col): NumPy references and the launcher of ``kernels/conv/im2col.cu``.

``X`` is ``(N, C, H, W)``; filters are ``K x K`` with zero padding ``pad`` and
stride ``stride``.  The unrolled matrix of one sample is ``(C*K*K, H_out*W_out)``:
column ``p = h*W_out + w`` holds every input value output pixel ``(h, w)``
needs, in the order of the flattened filter weights ``(c, i, j)``.
"""

from __future__ import annotations

import numpy as np

from kernels.runtime import blocks_for
from kernels.runtime.loader import launch, load_topic, output_like
from kernels.runtime.versions import KernelVersion, kernel_table, launch_1d

TOPIC = "im2col"
BLOCK = 256


def output_size(H: int, W: int, K: int, pad: int = 0, stride: int = 1) -> tuple[int, int]:
    """(H_out, W_out) of a K x K convolution."""
    H_out = (H + 2 * pad - K) // stride + 1
    W_out = (W + 2 * pad - K) // stride + 1
    if H_out < 1 or W_out < 1:
        raise ValueError(f"a {K}x{K} filter with pad {pad} does not fit a {H}x{W} input")
    return H_out, W_out


def unroll_sequential(x, K: int, pad: int = 0, stride: int = 1) -> np.ndarray:
    """The unrolled matrix of ONE sample ``x`` (C, H, W), written as plain loops (what the kernel parallelises)."""
    C, H, W = x.shape
    H_out, W_out = output_size(H, W, K, pad, stride)
    U = np.zeros((C * K * K, H_out * W_out), dtype=x.dtype)
    for c in range(C):                      # every input channel
        for i in range(K):                  # every filter row
            for j in range(K):              # every filter column: one row of U
                row = c * K * K + i * K + j
                for h in range(H_out):      # every output pixel: one column of U
                    for w in range(W_out):
                        hi, wj = h * stride - pad + i, w * stride - pad + j
                        if 0 <= hi < H and 0 <= wj < W:
                            U[row, h * W_out + w] = x[c, hi, wj]
    return U


def reference(X, K: int, pad: int = 0, stride: int = 1) -> np.ndarray:
    """The unrolled matrices of every sample, ``(N, C*K*K, H_out*W_out)`` (vectorised NumPy)."""
    X = np.asarray(X)
    N, C, H, W = X.shape
    H_out, W_out = output_size(H, W, K, pad, stride)
    Xp = np.pad(X, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    U = np.empty((N, C, K, K, H_out, W_out), dtype=X.dtype)
    for i in range(K):
        for j in range(K):
            U[:, :, i, j] = Xp[:, :, i : i + stride * (H_out - 1) + 1 : stride, j : j + stride * (W_out - 1) + 1 : stride]
    return U.reshape(N, C * K * K, H_out * W_out)


def expansion_ratio(C: int, H: int, W: int, K: int, pad: int = 0, stride: int = 1) -> float:
    """Elements of the unrolled matrix over elements of the input: C*K^2*H_out*W_out / (C*H*W)."""
    H_out, W_out = output_size(H, W, K, pad, stride)
    return (C * K * K * H_out * W_out) / (C * H * W)


def bytes_moved(count: int, C: int, H: int, W: int, K: int, pad: int = 0, stride: int = 1) -> int:
    """The fewest bytes an unroll of ``count`` samples moves: the input read once, U written once."""
    H_out, W_out = output_size(H, W, K, pad, stride)
    return 4 * count * C * (H * W + K * K * H_out * W_out)


def _launch(kernel_name, per_thread, X, K, pad, stride, n0, count, out, shape, sync, prepare_only):
    N, C, H, W = (int(s) for s in (shape or X.shape))
    if isinstance(X, np.ndarray):
        X = np.ascontiguousarray(X, dtype=np.float32)
    count = N - n0 if count is None else int(count)
    if not (0 <= n0 and count >= 1 and n0 + count <= N):
        raise ValueError(f"samples {n0}..{n0 + count} are not within the batch of {N}")
    H_out, W_out = output_size(H, W, K, pad, stride)
    P = H_out * W_out
    threads = count * C * ((P + per_thread - 1) // per_thread)
    if count * C * P >= 2**31:
        raise ValueError(f"{count} samples at once are {count * C * P} (channel, pixel) pairs, over the 32-bit "
                         f"indices of the kernel: unroll fewer samples per launch")
    U = output_like(X, (count, C * K * K, P), np.float32) if out is None else out
    if int(np.prod(U.shape)) < count * C * K * K * P:
        raise ValueError(f"out has shape {tuple(U.shape)}, the unrolled samples are {(count, C * K * K, P)}")
    kernel = load_topic(TOPIC).function(kernel_name)
    enqueue = launch(kernel, (X, U, n0, count, C, H, W, K, pad, stride, H_out, W_out),
                     grid=blocks_for(threads, BLOCK), block=BLOCK, sync=sync, prepare_only=prepare_only)
    return enqueue if prepare_only else U


def im2col_unroll(X, K: int, pad: int = 0, stride: int = 1, *, n0: int = 0, count: int | None = None,
                  out=None, shape=None, sync=True, prepare_only=False):
    """Version 1: unroll samples ``n0 .. n0+count`` of ``X`` into ``out`` (``(count, C*K*K, H_out*W_out)``).

    ``shape`` gives (N, C, H, W) when ``X`` is a flat device buffer; ``out`` may be larger than needed
    (a workspace sized for more samples).
    """
    return _launch("im2col_unroll", 1, X, K, pad, stride, n0, count, out, shape, sync, prepare_only)


def im2col_unroll_vec4(X, K: int, pad: int = 0, stride: int = 1, *, n0: int = 0, count: int | None = None,
                       out=None, shape=None, sync=True, prepare_only=False):
    """Version 2: four output pixels per thread, 16-byte stores; arguments as :func:`im2col_unroll`."""
    return _launch("im2col_unroll_vec4", 4, X, K, pad, stride, n0, count, out, shape, sync, prepare_only)


UNROLL_AXES = (("N", 1), ("n0", 0), ("count", 1), ("C", 1), ("H", 1), ("W", 1), ("K", 1), ("pad", 0), ("stride", 1))


def unroll_dims(shape) -> tuple[int, ...]:
    """``(N, n0, count, C, H, W, K, pad, stride)`` of a shape dict: samples n0 .. n0 + count - 1 of N are unrolled."""
    return tuple(int(shape.get(key, default)) for key, default in UNROLL_AXES)


def _facts(kernel: str, launcher, per_thread: int, **rung) -> KernelVersion:
    def threads(shape) -> int:
        N, n0, count, C, H, W, K, pad, stride = unroll_dims(shape)
        H_out, W_out = output_size(H, W, K, pad, stride)
        return count * C * blocks_for(H_out * W_out, per_thread)

    def nbytes(shape) -> float:
        N, n0, count, C, H, W, K, pad, stride = unroll_dims(shape)
        return float(bytes_moved(count, C, H, W, K, pad, stride))

    return KernelVersion(TOPIC, kernel, launcher, lambda shape: launch_1d(blocks_for(threads(shape), BLOCK), BLOCK),
                         bytes=nbytes, flops=lambda shape: 0.0,  # a copy: no arithmetic
                         reference=reference, **rung)


KERNELS = kernel_table(
    _facts("im2col_unroll", im2col_unroll, 1, number=1, key="unroll",
           title="one thread per (sample, input channel, output pixel), K*K coalesced writes"),
    _facts("im2col_unroll_vec4", im2col_unroll_vec4, 4, number=2, key="unroll_vec4",
           title="four output pixels per thread, 16-byte stores"),
)
