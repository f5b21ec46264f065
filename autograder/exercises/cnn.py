"""Exercises of the chapter "Convolutional layers": direct convolution forward (basic and tiled), max pooling,
and the backward convolution dE/dX, each a step past the kernel the chapter prints.

Layouts as in ``kernels/conv/conv2d.cu``: X is N x C x H x W, the filter bank Wf is M x C x K x K, Y is
N x M x H_out x W_out, all row-major float32.  Each exercise adds what the chapter's kernel does not
handle: the basic forward kernel takes a zero padding and a stride, the tiled one a dilation (its halo
grows to (K - 1) * dilation), max pooling a stride other than the window (overlapping windows), and
the backward convolution the stride of the forward one.  Where those take the chapter's values (no
padding, stride 1, dilation 1, a 2 x 2 window at stride 2) the exercise is the chapter's problem, and
there the chapter's kernel is the speed reference (``ReferenceKernel.solves``); the hidden shapes take
other values, so the printed kernel is no answer.

The convolution exercises use the chapter's launch: blocks of TILE_WIDTH x TILE_WIDTH = 16 x 16
threads over the output map, a grid (maps, H_grid * W_grid tiles, samples), and the kernel receives
W_grid.  Shapes include batch 1, odd sizes, maps smaller than one tile and larger than two, channel
and map counts that are no multiple of anything, filters of size 1 to 7, one shape drawn per student
from the grading secret, and (on the GPU) a large one for timing.  Tolerances are relative to the
sums of |terms|, the size float32 rounding works on.
"""

from __future__ import annotations

import numpy as np

from kernels.conv import conv2d, conv2d_backward, pooling

from ..exercise import Exercise, FormulaMistake, LaunchConfig, ReferenceKernel, ceil_div, reducing, varied as _varied
from ._parts import BLOCK_256, grid_key, one_dimensional_launch, shapes

NAIVE_REFERENCE = conv2d.KERNELS["conv2d_forward_naive"]
TILED_REFERENCE = conv2d.KERNELS["conv2d_forward_tiled"]
POOL_REFERENCE = pooling.KERNELS["max_pool_forward"]
BACKWARD_INPUT_REFERENCE = conv2d_backward.KERNELS["conv2d_backward_input"]

TILE = 16  # TILE_WIDTH of the chapter's kernels; the exercises launch 16 x 16 blocks


def varied(rng: np.random.Generator, shape, mean: float) -> np.ndarray:
    return _varied(rng, shape, mean, spread=0.6)


AXES = "N C H W M K"


def _dims(shape) -> tuple[int, ...]:
    return tuple(int(shape[axis]) for axis in AXES.split())


def _geometry(shape) -> tuple[int, int, int]:
    """(pad, stride, dilation) of a convolution shape: 0, 1 and 1 where the shape does not name them."""
    return int(shape.get("pad", 0)), int(shape.get("stride", 1)), int(shape.get("dilation", 1))


def out_size(shape) -> tuple[int, int]:
    """H_out, W_out of the forward convolution of ``shape``."""
    N, C, H, W, M, K = _dims(shape)
    pad, stride, dilation = _geometry(shape)
    span = (K - 1) * dilation + 1
    return (H + 2 * pad - span) // stride + 1, (W + 2 * pad - span) // stride + 1


def _conv_label(shape):
    N, C, H, W, M, K = _dims(shape)
    extras = ", ".join(f"{key}={shape[key]}" for key in ("pad", "stride", "dilation") if key in shape)
    return f"N={N}, C={C}, {H}x{W}, M={M}, K={K}" + (f", {extras}" if extras else "")


def convolution(X, Wf, pad: int, stride: int, dilation: int) -> np.ndarray:
    """float64 sum over c, p, q of X[n][c][h*stride - pad + p*dilation][w*stride - pad + q*dilation] Wf[m][c][p][q]
    (0 outside X): the forward convolution without its bias."""
    X = np.asarray(X, np.float64)
    Wf = np.asarray(Wf, np.float64)
    N, C, H, W = X.shape
    M, _, K, _ = Wf.shape
    padded = np.zeros((N, C, H + 2 * pad, W + 2 * pad))
    padded[:, :, pad:pad + H, pad:pad + W] = X
    H_out = (H + 2 * pad - (K - 1) * dilation - 1) // stride + 1
    W_out = (W + 2 * pad - (K - 1) * dilation - 1) // stride + 1
    Y = np.zeros((N, M, H_out, W_out))
    for p in range(K):
        for q in range(K):
            rows = padded[:, :, p * dilation:p * dilation + stride * (H_out - 1) + 1:stride,
                          q * dilation:q * dilation + stride * (W_out - 1) + 1:stride]
            Y += np.einsum("nchw,mc->nmhw", rows, Wf[:, :, p, q])
    return Y


def _conv_secret(rng: np.random.Generator, launch: dict, extra) -> list[dict]:
    """An odd-sized layer per student: maps that need a partial tile, counts that are no multiple of 8, and
    the exercise's own ``extra(rng)`` (padding, stride or dilation)."""
    K = int(rng.choice([2, 3, 5]))
    H = int(rng.integers(TILE + 2, 2 * TILE + 5)) | 1
    W = int(rng.integers(6, TILE + 12)) | 1
    shape = {"N": int(rng.integers(1, 4)), "C": int(rng.integers(2, 8)) | 1, "H": H, "W": W,
             "M": int(rng.integers(3, 12)) | 1, "K": K, **extra(rng)}
    if min(out_size(shape)) < 1:
        shape["W"] = shape["H"]
    return [shape]


def _conv_grid(shape) -> tuple[int, int]:
    H_out, W_out = out_size(shape)
    return ceil_div(H_out, TILE), ceil_div(W_out, TILE)


def _conv_inputs(shape, rng):
    N, C, H, W, M, K = _dims(shape)
    scalars = {key: int(shape[key]) for key in ("pad", "stride", "dilation") if key in shape}
    return {"X": varied(rng, (N, C, H, W), 0.4), "Wf": varied(rng, (M, C, K, K), 0.2),
            "b": varied(rng, (M,), 0.5), "Y": None,
            "N": N, "C": C, "H": H, "W": W, "M": M, "K": K, **scalars, "W_grid": _conv_grid(shape)[1]}


def _conv_reference(inputs):
    pad, stride, dilation = _geometry(inputs)
    Y = convolution(inputs["X"], inputs["Wf"], pad, stride, dilation)
    return {"Y": Y + np.asarray(inputs["b"], np.float64)[None, :, None, None]}


def _conv_scale(inputs):
    pad, stride, dilation = _geometry(inputs)
    Y = convolution(np.abs(inputs["X"]), np.abs(inputs["Wf"]), pad, stride, dilation)
    return {"Y": Y + np.abs(np.asarray(inputs["b"], np.float64))[None, :, None, None]}


def _conv_launch(shape, launch) -> LaunchConfig:
    N, C, H, W, M, K = _dims(shape)
    H_grid, W_grid = _conv_grid(shape)
    return LaunchConfig(grid=(M, H_grid * W_grid, N), block=(TILE, TILE, 1), shared=0)


def _tiled_shared(shape) -> int:
    K = _dims(shape)[5]
    halo = (K - 1) * _geometry(shape)[2]
    return 4 * ((TILE + halo) ** 2 + K * K)


def _tiled_launch(shape, launch) -> LaunchConfig:
    config = _conv_launch(shape, launch)
    return LaunchConfig(grid=config.grid, block=config.block, shared=_tiled_shared(shape))


LAUNCH_TEXT = ("Launched with blocks of 16 x 16 threads (TILE_WIDTH) and grid (M, H_grid * W_grid, N) over the "
               "output map: blockIdx.x is the output map, blockIdx.y the tile (tile row blockIdx.y / W_grid, tile "
               "column blockIdx.y % W_grid), blockIdx.z the sample.")
#: The chapter's kernels, with their own arguments (no padding, stride or dilation).
CHAPTER_ORDER = ("X", "Wf", "b", "Y", "N", "C", "H", "W", "M", "K", "W_grid")
CONV_TIMING = {"N": 32, "C": 16, "H": 64, "W": 64, "M": 32, "K": 5}

# (N, C, H, W, M, K, pad, stride).  Visible: what check() runs.  Hidden: batch 1, 1x1 filters, filters as
# large as the padded map, maps below one tile and spanning three, channel counts 1, 3, 7, 13, 17, non-square
# everything, padding 1 to 3 and strides 1 to 3.
PADDED_VISIBLE = shapes(AXES + " pad stride", (
    (1, 1, 5, 5, 1, 3, 1, 1), (2, 3, 9, 8, 4, 3, 0, 2), (1, 6, 14, 14, 16, 5, 2, 1), (2, 2, 20, 21, 5, 5, 1, 2),
    (3, 1, 32, 32, 6, 5, 0, 1)))
PADDED_HIDDEN = shapes(AXES + " pad stride", (
    (1, 1, 1, 1, 1, 1, 0, 1), (1, 13, 7, 7, 3, 7, 3, 2), (2, 7, 37, 19, 9, 4, 1, 1), (1, 3, 12, 40, 17, 1, 0, 3),
    (3, 17, 11, 13, 2, 2, 1, 2), (1, 5, 35, 35, 11, 3, 1, 1)))

CONV2D_FORWARD = Exercise(
    name="conv2d_forward",
    title="Convolution forward with padding and stride: one thread per output pixel",
    signature=("conv2d_forward(const float* X, const float* Wf, const float* b, float* Y, "
               "int N, int C, int H, int W, int M, int K, int pad, int stride, int W_grid)"),
    make_inputs=_conv_inputs,
    reference=_conv_reference,
    error_scale=_conv_scale,
    visible_shapes=PADDED_VISIBLE,
    hidden_shapes=PADDED_HIDDEN,
    secret_shapes=lambda rng, launch: _conv_secret(rng, launch, lambda r: {"pad": int(r.integers(0, 3)),
                                                                           "stride": int(r.integers(1, 3))}),
    launch_keys=(),
    launch_config=_conv_launch,
    correctness_points=6.0,
    speed_points=1.0,
    reductions=reducing("Wf", 1, 2, 3),
    reference_kernel=ReferenceKernel(NAIVE_REFERENCE, arg_order=CHAPTER_ORDER, solves={"pad": 0, "stride": 1}),
    timing_shape={**CONV_TIMING, "pad": 0, "stride": 1},
    label=_conv_label,
    description=("Y[n][m][h][w] = b[m] + sum over c < C, p < K, q < K of X[n][c][h*stride - pad + p][w*stride - pad + q] "
                 "* Wf[m][c][p][q], where a pixel outside the input map (the zero padding) counts as 0, for every "
                 "output pixel h < H_out = (H + 2*pad - K) / stride + 1, w < W_out = (W + 2*pad - K) / stride + 1. "
                 + LAUNCH_TEXT + " Speed is compared with the chapter's conv2d_forward_naive at pad 0, stride 1."),
)

# (N, C, H, W, M, K, dilation): the same kinds of shape, filters spread 1 to 5 pixels apart.
DILATED_VISIBLE = shapes(AXES + " dilation", (
    (1, 1, 5, 5, 1, 3, 1), (2, 3, 9, 8, 4, 3, 2), (1, 6, 14, 14, 16, 5, 1), (2, 2, 20, 21, 5, 5, 2),
    (3, 1, 32, 32, 6, 5, 3)))
DILATED_HIDDEN = shapes(AXES + " dilation", (
    (1, 1, 1, 1, 1, 1, 1), (1, 13, 7, 7, 3, 3, 3), (2, 7, 37, 19, 9, 4, 2), (1, 3, 12, 40, 17, 1, 4),
    (3, 17, 11, 13, 2, 2, 5), (1, 5, 35, 35, 11, 3, 2)))

CONV2D_FORWARD_TILED = Exercise(
    name="conv2d_forward_tiled",
    title="Dilated convolution forward with shared-memory input tiles",
    signature=("conv2d_forward_tiled(const float* X, const float* Wf, const float* b, float* Y, "
               "int N, int C, int H, int W, int M, int K, int dilation, int W_grid)"),
    make_inputs=_conv_inputs,
    reference=_conv_reference,
    error_scale=_conv_scale,
    visible_shapes=DILATED_VISIBLE,
    hidden_shapes=DILATED_HIDDEN,
    secret_shapes=lambda rng, launch: _conv_secret(rng, launch, lambda r: {"dilation": int(r.integers(1, 4))}),
    launch_keys=(),
    launch_config=_tiled_launch,
    correctness_points=6.0,
    speed_points=4.0,
    reductions=reducing("Wf", 1, 2, 3),
    reference_kernel=ReferenceKernel(TILED_REFERENCE, arg_order=CHAPTER_ORDER, solves={"dilation": 1}),
    timing_shape={**CONV_TIMING, "dilation": 1},
    label=_conv_label,
    description=("Y[n][m][h][w] = b[m] + sum over c < C, p < K, q < K of X[n][c][h + p*dilation][w + q*dilation] * "
                 "Wf[m][c][p][q] (a dilated, or atrous, convolution: the filter's taps are dilation pixels apart), "
                 "for every output pixel h < H_out = H - (K - 1)*dilation, w < W_out = W - (K - 1)*dilation. "
                 + LAUNCH_TEXT + " Dynamic shared memory of ((16 + (K - 1)*dilation)^2 + K*K) floats per block is "
                 "provided (extern __shared__ float shared[];): the input tile with its halo of (K - 1)*dilation "
                 "rows and columns, and one K x K filter. Speed is compared with the chapter's conv2d_forward_tiled "
                 "at dilation 1."),
)

# ------------------------------------------------------------ max pooling with a stride of its own

POOL_AXES = "N C H W pool stride"


def _pool_dims(shape):
    return tuple(int(shape[k]) for k in POOL_AXES.split())


def _pool_out(shape) -> tuple[int, int]:
    N, C, H, W, pool, stride = _pool_dims(shape)
    return (H - pool) // stride + 1, (W - pool) // stride + 1


def _pool_label(shape):
    N, C, H, W, pool, stride = _pool_dims(shape)
    return f"N={N}, C={C}, {H}x{W}, pool={pool}, stride={stride}"


def _pool_count(shape) -> int:
    N, C = _pool_dims(shape)[:2]
    return N * C * _pool_out(shape)[0] * _pool_out(shape)[1]


def _pool_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    pool = int(rng.choice([2, 3]))
    return [{"N": int(rng.integers(1, 4)), "C": int(rng.integers(2, 9)) | 1, "H": int(rng.integers(5, 30)) | 1,
             "W": int(rng.integers(5, 30)) | 1, "pool": pool, "stride": int(rng.integers(1, 4))}]


# Visible: overlapping windows (stride below the window), the chapter's stride = window, gaps (stride above).
POOL_VISIBLE = shapes(POOL_AXES, (
    (1, 1, 2, 2, 2, 2), (2, 3, 8, 6, 2, 1), (1, 6, 28, 28, 2, 2), (3, 16, 10, 10, 3, 2), (2, 4, 9, 12, 3, 3)))
POOL_HIDDEN = shapes(POOL_AXES, (
    (1, 1, 3, 3, 3, 3), (1, 7, 11, 13, 2, 1), (2, 5, 7, 5, 3, 2), (3, 3, 17, 16, 4, 3), (1, 2, 5, 9, 1, 1),
    (2, 13, 29, 31, 3, 2)))


def max_pool(X, pool: int, stride: int) -> np.ndarray:
    """float64 maximum of every pool x pool window of X, windows stride pixels apart (the last that fits)."""
    X = np.asarray(X, np.float64)
    H_out, W_out = (X.shape[2] - pool) // stride + 1, (X.shape[3] - pool) // stride + 1
    Y = np.full(X.shape[:2] + (H_out, W_out), -np.inf)
    for p in range(pool):
        for q in range(pool):
            Y = np.maximum(Y, X[:, :, p:p + stride * (H_out - 1) + 1:stride, q:q + stride * (W_out - 1) + 1:stride])
    return Y


def max_pool_rows_apart(X, pool: int, stride: int, row_pitch: int) -> np.ndarray:
    """float64 max pooling that reads the window's row dy at corner + dy*row_pitch + dx of X's memory (row_pitch W is
    the right one); IndexError where that leaves X."""
    X = np.asarray(X, np.float64)
    planes, (H, W) = X.shape[0] * X.shape[1], X.shape[2:]
    H_out, W_out = (H - pool) // stride + 1, (W - pool) // stride + 1
    corner = (np.arange(planes)[:, None, None] * H * W + np.arange(H_out)[None, :, None] * stride * W
              + np.arange(W_out)[None, None, :] * stride)
    flat = X.ravel()
    Y = np.full(corner.shape, -np.inf)
    for dy in range(pool):
        for dx in range(pool):
            Y = np.maximum(Y, np.take(flat, corner + dy * row_pitch + dx, mode="raise"))
    return Y.reshape(X.shape[:2] + (H_out, W_out))


POOL_MISTAKES = (
    FormulaMistake("window rows W_out apart",
                   "with the rows of a window W_out = (W - pool) / stride + 1 apart in X instead of W: row dy of the "
                   "window is read at corner + dy*W_out + dx, where corner + dy*W + dx belongs (a row of X is W "
                   "values long).",
                   lambda inputs: {"Y": max_pool_rows_apart(inputs["X"], inputs["pool"], inputs["stride"],
                                                            (inputs["W"] - inputs["pool"]) // inputs["stride"] + 1)}),
)


def _pool_inputs(shape, rng):
    N, C, H, W, pool, stride = _pool_dims(shape)
    # Mean below zero: many windows are all negative (a maximum started at 0 is wrong there).
    return {"X": varied(rng, (N, C, H, W), -0.3), "Y": None, "N": N, "C": C, "H": H, "W": W, "pool": pool,
            "stride": stride}


def _pool_reference(inputs):
    return {"Y": max_pool(inputs["X"], inputs["pool"], inputs["stride"])}


def _pool_scale(inputs):
    return {"Y": np.abs(max_pool(inputs["X"], inputs["pool"], inputs["stride"]))}


MAX_POOL_FORWARD = Exercise(
    name="max_pool_forward",
    title="Max pooling with overlapping windows",
    signature="max_pool_forward(const float* X, float* Y, int N, int C, int H, int W, int pool, int stride)",
    make_inputs=_pool_inputs,
    reference=_pool_reference,
    error_scale=_pool_scale,
    formula_mistakes=POOL_MISTAKES,
    rtol=1e-6,  # the maximum is exact in float32
    atol=1e-30,
    visible_shapes=POOL_VISIBLE,
    hidden_shapes=POOL_HIDDEN,
    secret_shapes=_pool_secret,
    launch_keys=(BLOCK_256, grid_key(_pool_count, "N * C * H_out * W_out", ", one thread per output")),
    launch_config=one_dimensional_launch,
    correctness_points=4.0,
    reductions=reducing("X", 2, 3, kind="max"),
    speed_points=1.0,
    reference_kernel=ReferenceKernel(POOL_REFERENCE, arg_order=("X", "Y", "N", "C", "H", "W", "pool"),
                                     solves={"pool": 2, "stride": 2}),
    timing_shape={"N": 64, "C": 64, "H": 112, "W": 112, "pool": 2, "stride": 2},
    label=_pool_label,
    description=("Y[n][c][i][j] = the largest of X[n][c][i*stride + p][j*stride + q] over p, q < pool, for "
                 "i < H_out = (H - pool) / stride + 1, j < W_out = (W - pool) / stride + 1 (windows stride pixels "
                 "apart: overlapping when stride < pool, as AlexNet's 3 x 3 windows at stride 2). Speed is compared "
                 "with the chapter's max_pool_forward at pool = stride = 2."),
)

# ------------------------------------------------------------ dE/dX of a strided convolution


def _bwd_grid(shape) -> tuple[int, int]:
    N, C, H, W, M, K = _dims(shape)
    return ceil_div(H, TILE), ceil_div(W, TILE)


def _bwd_inputs(shape, rng):
    N, C, H, W, M, K = _dims(shape)
    H_out, W_out = out_size(shape)
    return {"dY": varied(rng, (N, M, H_out, W_out), 0.3), "Wf": varied(rng, (M, C, K, K), 0.2), "dX": None,
            "N": N, "C": C, "H": H, "W": W, "M": M, "K": K, "stride": int(shape["stride"]),
            "W_grid": _bwd_grid(shape)[1]}


def input_gradient(dY, Wf, H: int, W: int, stride: int) -> np.ndarray:
    """float64 dE/dX of a convolution with stride ``stride`` (no padding): every dY[n][m][ho][wo] * Wf[m][c][p][q]
    added at X's pixel (ho*stride + p, wo*stride + q)."""
    dY = np.asarray(dY, np.float64)
    Wf = np.asarray(Wf, np.float64)
    N, M, H_out, W_out = dY.shape
    _, C, K, _ = Wf.shape
    dX = np.zeros((N, C, H, W))
    for p in range(K):
        for q in range(K):
            dX[:, :, p:p + stride * (H_out - 1) + 1:stride, q:q + stride * (W_out - 1) + 1:stride] += np.einsum(
                "nmhw,mc->nchw", dY, Wf[:, :, p, q])
    return dX


def input_gradient_every_tap(dY, Wf, H: int, W: int, stride: int) -> np.ndarray:
    """float64 dE/dX as a kernel gives it that takes every tap p <= h, as at stride 1, with the window (h - p) /
    stride rounded down: dY[n][m][(h - p) // stride][(w - q) // stride] * Wf[m][c][p][q] where the quotient is
    inside dY, whether or not h - p is a multiple of stride."""
    dY, Wf = np.asarray(dY, np.float64), np.asarray(Wf, np.float64)
    N, M, H_out, W_out = dY.shape
    K = Wf.shape[2]
    dX = np.zeros((N, Wf.shape[1], H, W))
    for p in range(K):
        rows = np.arange(H) - p
        row_in = (rows >= 0) & (rows // stride < H_out)
        for q in range(K):
            cols = np.arange(W) - q
            col_in = (cols >= 0) & (cols // stride < W_out)
            taken = dY[:, :, np.clip(rows // stride, 0, H_out - 1)][:, :, :, np.clip(cols // stride, 0, W_out - 1)]
            dX += np.einsum("nmhw,mc->nchw", taken * (row_in[:, None] & col_in[None, :]), Wf[:, :, p, q])
    return dX


BACKWARD_MISTAKES = (
    FormulaMistake("every tap taken",
                   "with every tap p <= h taken, as at stride 1: (h - p) / stride is rounded down for the taps "
                   "between two windows, whose h - p is no multiple of stride and which no window puts over pixel h "
                   "-- only the taps p = h % stride, h % stride + stride, ... (and the same for q and w) add a term.",
                   lambda inputs: {"dX": input_gradient_every_tap(inputs["dY"], inputs["Wf"], inputs["H"], inputs["W"],
                                                                  inputs["stride"])},
                   lambda inputs: {"dX": input_gradient_every_tap(np.abs(inputs["dY"]), np.abs(inputs["Wf"]),
                                                                  inputs["H"], inputs["W"], inputs["stride"])}),
)


def _bwd_reference(inputs):
    return {"dX": input_gradient(inputs["dY"], inputs["Wf"], inputs["H"], inputs["W"], inputs["stride"])}


def _bwd_scale(inputs):
    return {"dX": input_gradient(np.abs(inputs["dY"]), np.abs(inputs["Wf"]), inputs["H"], inputs["W"], inputs["stride"])}


def _bwd_launch(shape, launch) -> LaunchConfig:
    N, C, H, W, M, K = _dims(shape)
    H_grid, W_grid = _bwd_grid(shape)
    return LaunchConfig(grid=(C, H_grid * W_grid, N), block=(TILE, TILE, 1), shared=0)


STRIDED_VISIBLE = shapes(AXES + " stride", (
    (1, 1, 5, 5, 1, 3, 1), (2, 3, 9, 8, 4, 3, 2), (1, 6, 14, 14, 16, 5, 1), (2, 2, 20, 21, 5, 5, 2),
    (3, 1, 32, 32, 6, 5, 3)))
STRIDED_HIDDEN = shapes(AXES + " stride", (
    (1, 1, 1, 1, 1, 1, 1), (1, 13, 7, 7, 3, 7, 2), (2, 7, 37, 19, 9, 4, 2), (1, 3, 12, 40, 17, 1, 3),
    (3, 17, 11, 13, 2, 2, 2), (1, 5, 35, 35, 11, 3, 1)))

CONV2D_BACKWARD_INPUT = Exercise(
    name="conv2d_backward_input",
    title="Convolution backward: dE/dX of a strided convolution",
    signature=("conv2d_backward_input(const float* dY, const float* Wf, float* dX, "
               "int N, int C, int H, int W, int M, int K, int stride, int W_grid)"),
    make_inputs=_bwd_inputs,
    reference=_bwd_reference,
    error_scale=_bwd_scale,
    formula_mistakes=BACKWARD_MISTAKES,
    visible_shapes=STRIDED_VISIBLE,
    hidden_shapes=STRIDED_HIDDEN,
    secret_shapes=lambda rng, launch: _conv_secret(rng, launch, lambda r: {"stride": int(r.integers(1, 4))}),
    launch_keys=(),
    launch_config=_bwd_launch,
    reductions=reducing("Wf", 0, 2, 3),
    correctness_points=6.0,
    speed_points=1.0,
    reference_kernel=ReferenceKernel(BACKWARD_INPUT_REFERENCE,
                                     arg_order=("dY", "Wf", "dX", "N", "C", "H", "W", "M", "K", "W_grid"),
                                     solves={"stride": 1}),
    timing_shape={**CONV_TIMING, "stride": 1},
    label=_conv_label,
    description=("dX[n][c][h][w] = sum over m < M, p < K, q < K of dY[n][m][(h - p) / stride][(w - q) / stride] * "
                 "Wf[m][c][p][q], taking only the terms where h - p and w - q are multiples of stride and the "
                 "quotients lie in 0 <= . < H_out = (H - K) / stride + 1 (resp. W_out), for every element of dX "
                 "(N x C x H x W): the gradient of the convolution Y[n][m][i][j] = sum X[n][c][i*stride + p]"
                 "[j*stride + q] Wf[m][c][p][q]. Launched with blocks of 16 x 16 threads and grid (C, "
                 "H_grid * W_grid, N), tiles over the H x W input map: W_grid = ceil(W / 16). Speed is compared "
                 "with the chapter's conv2d_backward_input at stride 1."),
)

EXERCISES = [CONV2D_FORWARD, CONV2D_FORWARD_TILED, MAX_POOL_FORWARD, CONV2D_BACKWARD_INPUT]
