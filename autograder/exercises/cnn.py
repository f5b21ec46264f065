"""Exercises of the chapter "Convolutional layers": direct convolution forward (basic and tiled), max pooling,
and the backward convolution dE/dX.

Layouts as in ``kernels/conv/conv2d.cu``: X is N x C x H x W, the filter bank Wf is
M x C x K x K, Y is N x M x (H - K + 1) x (W - K + 1), all row-major float32; no
padding, stride 1.  The convolution exercises use the chapter's launch: blocks
of TILE_WIDTH x TILE_WIDTH = 16 x 16 threads, a grid (maps, H_grid * W_grid
tiles, samples), and the kernel receives W_grid.  Shapes include batch 1, odd
sizes, maps smaller than one tile and larger than two, channel and map counts
that are no multiple of anything, filters of size 1 to 7, one shape drawn per
student from the grading secret, and (on the GPU) a large one for timing.
Tolerances are relative to the sums of |terms|, the size float32 rounding
works on.
"""

from __future__ import annotations

import numpy as np

from kernels.conv import conv2d, conv2d_backward, pooling

from ..exercise import Exercise, LaunchConfig, ReferenceKernel, ceil_div, varied as _varied
from ._parts import BLOCK_256, from_record, grid_key, one_dimensional_launch, shapes

NAIVE_REFERENCE = conv2d.KERNELS["conv2d_forward_naive"]
TILED_REFERENCE = conv2d.KERNELS["conv2d_forward_tiled"]
POOL_REFERENCE = pooling.KERNELS["max_pool_forward"]
BACKWARD_INPUT_REFERENCE = conv2d_backward.KERNELS["conv2d_backward_input"]

TILE = 16  # TILE_WIDTH of the chapter's kernels; the exercises launch 16 x 16 blocks


def varied(rng: np.random.Generator, shape, mean: float) -> np.ndarray:
    return _varied(rng, shape, mean, spread=0.6)


_conv_dims = conv2d.layer


def _conv_label(shape):
    N, C, H, W, M, K = _conv_dims(shape)
    return f"N={N}, C={C}, {H}x{W}, M={M}, K={K}"


def _conv_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    """An odd-sized layer per student: maps that need a partial tile, counts that are no multiple of 8."""
    K = int(rng.choice([2, 3, 5]))
    H = int(rng.integers(TILE + 2, 2 * TILE + 5)) | 1
    W = int(rng.integers(6, TILE + 12)) | 1
    return [{"N": int(rng.integers(1, 4)), "C": int(rng.integers(2, 8)) | 1, "H": H, "W": W,
             "M": int(rng.integers(3, 12)) | 1, "K": K}]


# (N, C, H, W, M, K).  Visible: what check() runs.  Hidden: batch 1, 1x1 filters, filters as large as
# the map, maps below one tile and spanning three, channel counts 1, 3, 7, 13, 17, non-square everything.
CONV_VISIBLE = shapes("N C H W M K", (
    (1, 1, 5, 5, 1, 3), (2, 3, 9, 8, 4, 3), (1, 6, 14, 14, 16, 5), (2, 2, 20, 21, 5, 5), (3, 1, 32, 32, 6, 5)))
CONV_HIDDEN = shapes("N C H W M K", (
    (1, 1, 1, 1, 1, 1), (1, 13, 7, 7, 3, 7), (2, 7, 37, 19, 9, 4), (1, 3, 12, 40, 17, 1), (3, 17, 11, 13, 2, 2),
    (1, 5, 35, 35, 11, 3)))
CONV_TIMING = {"N": 32, "C": 16, "H": 64, "W": 64, "M": 32, "K": 5}


def _conv_grid(shape) -> tuple[int, int]:
    N, C, H, W, M, K = _conv_dims(shape)
    return ceil_div(H - K + 1, TILE), ceil_div(W - K + 1, TILE)


def _conv_inputs(shape, rng):
    N, C, H, W, M, K = _conv_dims(shape)
    return {"X": varied(rng, (N, C, H, W), 0.4), "Wf": varied(rng, (M, C, K, K), 0.2),
            "b": varied(rng, (M,), 0.5), "Y": None,
            "N": N, "C": C, "H": H, "W": W, "M": M, "K": K, "W_grid": _conv_grid(shape)[1]}


def _conv_launch(shape, launch) -> LaunchConfig:
    N, C, H, W, M, K = _conv_dims(shape)
    H_grid, W_grid = _conv_grid(shape)
    return LaunchConfig(grid=(M, H_grid * W_grid, N), block=(TILE, TILE, 1), shared=0)


def _tiled_shared(K: int) -> int:
    return 4 * ((TILE + K - 1) ** 2 + K * K)


def _tiled_launch(shape, launch) -> LaunchConfig:
    config = _conv_launch(shape, launch)
    return LaunchConfig(grid=config.grid, block=config.block, shared=_tiled_shared(_conv_dims(shape)[5]))


CONV_SIGNATURE = "(const float* X, const float* Wf, const float* b, float* Y, int N, int C, int H, int W, int M, int K, int W_grid)"
CONV_DESCRIPTION = ("Y[n][m][h][w] = b[m] + sum over c < C, p < K, q < K of X[n][c][h + p][w + q] * Wf[m][c][p][q], "
                    "for every sample n < N, output map m < M and output pixel h < H - K + 1, w < W - K + 1. "
                    "Launched with blocks of 16 x 16 threads (TILE_WIDTH) and grid (M, H_grid * W_grid, N): "
                    "blockIdx.x is the output map, blockIdx.y the tile (tile row blockIdx.y / W_grid, tile column "
                    "blockIdx.y % W_grid), blockIdx.z the sample.")

#: What the two forward exercises share: the kernel's arguments, inputs, reference and shapes.
CONV_COMMON = dict(make_inputs=_conv_inputs, **from_record(NAIVE_REFERENCE, "Y", ("X", "Wf", "b")),
                   visible_shapes=CONV_VISIBLE, hidden_shapes=CONV_HIDDEN, secret_shapes=_conv_secret, launch_keys=(),
                   timing_shape=CONV_TIMING, label=_conv_label)

CONV2D_FORWARD = Exercise(
    name="conv2d_forward",
    title="Convolution forward: one thread per output pixel",
    signature="conv2d_forward" + CONV_SIGNATURE,
    **CONV_COMMON,
    launch_config=_conv_launch,
    correctness_points=6.0,
    speed_points=1.0,
    reference_kernel=ReferenceKernel(NAIVE_REFERENCE),
    description=CONV_DESCRIPTION,
)

CONV2D_FORWARD_TILED = Exercise(
    name="conv2d_forward_tiled",
    title="Convolution forward with shared-memory input tiles",
    signature="conv2d_forward_tiled" + CONV_SIGNATURE,
    **CONV_COMMON,
    launch_config=_tiled_launch,
    correctness_points=6.0,
    speed_points=4.0,
    reference_kernel=ReferenceKernel(TILED_REFERENCE),
    description=CONV_DESCRIPTION + (" Dynamic shared memory of ((16 + K - 1)^2 + K * K) floats per block is "
                                    "provided (extern __shared__ float shared[];): room for the input tile with "
                                    "its halo and one K x K filter."),
)

# ------------------------------------------------------------ max pooling


def _pool_dims(shape):
    return tuple(int(shape[k]) for k in ("N", "C", "H", "W", "pool"))


def _pool_label(shape):
    N, C, H, W, pool = _pool_dims(shape)
    return f"N={N}, C={C}, {H}x{W}, pool={pool}"


def _pool_count(shape) -> int:
    N, C, H, W, pool = _pool_dims(shape)
    return N * C * (H // pool) * (W // pool)


def _pool_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    pool = int(rng.choice([2, 3]))
    return [{"N": int(rng.integers(1, 4)), "C": int(rng.integers(2, 9)) | 1, "H": int(rng.integers(5, 30)) | 1,
             "W": int(rng.integers(5, 30)) | 1, "pool": pool}]


POOL_VISIBLE = shapes("N C H W pool", (
    (1, 1, 2, 2, 2), (2, 3, 8, 6, 2), (1, 6, 28, 28, 2), (3, 16, 10, 10, 2), (2, 4, 9, 12, 3)))
POOL_HIDDEN = shapes("N C H W pool", (
    (1, 1, 3, 3, 3), (1, 7, 11, 13, 2), (2, 5, 7, 5, 2), (3, 3, 17, 16, 4), (1, 2, 5, 9, 1), (2, 13, 29, 31, 3)))


def _pool_inputs(shape, rng):
    N, C, H, W, pool = _pool_dims(shape)
    # Mean below zero: many windows are all negative (a maximum started at 0 is wrong there).
    return {"X": varied(rng, (N, C, H, W), -0.3), "Y": None, "N": N, "C": C, "H": H, "W": W, "pool": pool}


def _pool_reference(inputs):
    return {"Y": POOL_REFERENCE.reference(inputs["X"], inputs["pool"])}


def _pool_scale(inputs):
    from kernels.conv.pooling import max_pool_reference

    return {"Y": np.abs(max_pool_reference(inputs["X"], inputs["pool"]))}


MAX_POOL_FORWARD = Exercise(
    name="max_pool_forward",
    title="Max pooling",
    signature="max_pool_forward(const float* X, float* Y, int N, int C, int H, int W, int pool)",
    make_inputs=_pool_inputs,
    reference=_pool_reference,
    error_scale=_pool_scale,
    rtol=1e-6,  # the maximum is exact in float32
    atol=1e-30,
    visible_shapes=POOL_VISIBLE,
    hidden_shapes=POOL_HIDDEN,
    secret_shapes=_pool_secret,
    launch_keys=(BLOCK_256, grid_key(_pool_count, "N * C * (H / pool) * (W / pool)", ", one thread per output")),
    launch_config=one_dimensional_launch,
    correctness_points=4.0,
    speed_points=1.0,
    reference_kernel=ReferenceKernel(POOL_REFERENCE),
    timing_shape={"N": 64, "C": 64, "H": 112, "W": 112, "pool": 2},
    label=_pool_label,
    description=("Y[n][c][i][j] = the largest of X[n][c][i*pool + p][j*pool + q] over p, q < pool, for i < H / pool, "
                 "j < W / pool (rounded down: rows and columns that do not fill a window are dropped)."),
)

# ------------------------------------------------------------ dE/dX


def _bwd_grid(shape) -> tuple[int, int]:
    N, C, H, W, M, K = _conv_dims(shape)
    return ceil_div(H, TILE), ceil_div(W, TILE)


def _bwd_inputs(shape, rng):
    N, C, H, W, M, K = _conv_dims(shape)
    return {"dY": varied(rng, (N, M, H - K + 1, W - K + 1), 0.3), "Wf": varied(rng, (M, C, K, K), 0.2), "dX": None,
            "N": N, "C": C, "H": H, "W": W, "M": M, "K": K, "W_grid": _bwd_grid(shape)[1]}


def _bwd_launch(shape, launch) -> LaunchConfig:
    N, C, H, W, M, K = _conv_dims(shape)
    H_grid, W_grid = _bwd_grid(shape)
    return LaunchConfig(grid=(C, H_grid * W_grid, N), block=(TILE, TILE, 1), shared=0)


CONV2D_BACKWARD_INPUT = Exercise(
    name="conv2d_backward_input",
    title="Convolution backward: dE/dX, a convolution with the transposed filter bank",
    signature=("conv2d_backward_input(const float* dY, const float* Wf, float* dX, "
               "int N, int C, int H, int W, int M, int K, int W_grid)"),
    make_inputs=_bwd_inputs,
    **from_record(BACKWARD_INPUT_REFERENCE, "dX", ("dY", "Wf")),
    visible_shapes=CONV_VISIBLE,
    hidden_shapes=CONV_HIDDEN,
    secret_shapes=_conv_secret,
    launch_keys=(),
    launch_config=_bwd_launch,
    correctness_points=6.0,
    speed_points=1.0,
    reference_kernel=ReferenceKernel(BACKWARD_INPUT_REFERENCE),
    timing_shape=CONV_TIMING,
    label=_conv_label,
    description=("dX[n][c][h][w] = sum over m < M, p < K, q < K of dY[n][m][h - p][w - q] * Wf[m][c][p][q], taking "
                 "only the terms with 0 <= h - p < H - K + 1 and 0 <= w - q < W - K + 1, for every element of dX "
                 "(N x C x H x W). Launched with blocks of 16 x 16 threads and grid (C, H_grid * W_grid, N), "
                 "tiles over the H x W input map: W_grid = ceil(W / 16)."),
)

EXERCISES = [CONV2D_FORWARD, CONV2D_FORWARD_TILED, MAX_POOL_FORWARD, CONV2D_BACKWARD_INPUT]
