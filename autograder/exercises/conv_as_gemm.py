"""Exercises of the chapter "Convolution as matrix multiplication": the unroll (im2col) kernel, a
shared-memory tiled SGEMM, and the GEMM step of a convolution forward by unroll + GEMM.

Layouts as in ``kernels/conv/im2col.cu``, ``kernels/gemm/sgemm.cu`` and ``kernels/conv/conv2d_gemm.cu``: row-major
float32; X is N x C x H x W; the unrolled matrix of one sample is (C*K*K) x (H_out*W_out) with row
c*K*K + i*K + j and column h*W_out + w; A is M x K, B is K x N, C = A B is M x N.

Shapes include sizes that are no multiple of any tile (1, primes, one more than a power of two),
skinny matrices (one row or column, an inner dimension of 1 or 7), padding and stride 2, a sample
range that does not start at 0, one shape drawn per student from the grading secret, and a large
one for timing on the GPU.  The unrolled values are copies, so the unroll must be exact; the
products are compared relative to sums of |terms|, the size float32 rounding works on.
"""

from __future__ import annotations

import numpy as np

from kernels.conv import conv2d_gemm, im2col
from kernels.gemm import sgemm

from ..exercise import Exercise, LaunchConfig, LaunchKey, ReferenceKernel, ceil_div, reducing, varied as _varied
from ._parts import BLOCK_256, SHARED, from_record, grid_key, one_dimensional_launch, shapes

IM2COL_REFERENCE = im2col.KERNELS["im2col_unroll"]
SGEMM_REFERENCE = sgemm.KERNELS["sgemm_shared_tiled"]
GEMM_STEP_REFERENCE = conv2d_gemm.KERNELS["conv2d_gemm_batched"]


def varied(rng: np.random.Generator, shape, mean: float) -> np.ndarray:
    return _varied(rng, shape, mean, spread=0.6)  # no exact zeros


def _out_size(H, W, K, pad, stride):
    from kernels.conv.im2col import output_size

    return output_size(H, W, K, pad, stride)


# ------------------------------------------------------------------------------ 1. the unroll kernel


_im2col_dims = im2col.unroll_dims


def _dilation(shape) -> int:
    return int(shape.get("dilation", 1))


def _dilated_out(shape) -> tuple[int, int]:
    """H_out, W_out of the unroll of ``shape`` (its taps ``dilation`` pixels apart)."""
    N, n0, count, C, H, W, K, pad, stride = _im2col_dims(shape)
    span = (K - 1) * _dilation(shape) + 1
    return (H + 2 * pad - span) // stride + 1, (W + 2 * pad - span) // stride + 1


def _im2col_label(shape):
    N, n0, count, C, H, W, K, pad, stride = _im2col_dims(shape)
    return (f"samples {n0}..{n0 + count - 1} of {N}, C={C}, {H}x{W}, K={K}, pad={pad}, stride={stride}, "
            f"dilation={_dilation(shape)}")


def _im2col_columns(shape) -> int:
    """Threads of the one-thread-per-(sample, channel, pixel) launch."""
    N, n0, count, C, H, W, K, pad, stride = _im2col_dims(shape)
    H_out, W_out = _dilated_out(shape)
    return count * C * H_out * W_out


def _im2col_inputs(shape, rng):
    N, n0, count, C, H, W, K, pad, stride = _im2col_dims(shape)
    H_out, W_out = _dilated_out(shape)
    return {"X": varied(rng, (N, C, H, W), 0.5), "U": None, "n0": n0, "count": count, "C": C, "H": H, "W": W,
            "K": K, "pad": pad, "stride": stride, "dilation": _dilation(shape), "H_out": H_out, "W_out": W_out}


def unroll(X, K: int, pad: int, stride: int, dilation: int) -> np.ndarray:
    """float64 unrolled matrices of the samples of X: [s][c K^2 + i K + j][h W_out + w] =
    X[s][c][h stride - pad + i dilation][w stride - pad + j dilation], 0 in the padding."""
    X = np.asarray(X, np.float64)
    S, C, H, W = X.shape
    padded = np.zeros((S, C, H + 2 * pad, W + 2 * pad))
    padded[:, :, pad:pad + H, pad:pad + W] = X
    H_out = (H + 2 * pad - (K - 1) * dilation - 1) // stride + 1
    W_out = (W + 2 * pad - (K - 1) * dilation - 1) // stride + 1
    U = np.zeros((S, C, K, K, H_out, W_out))
    for i in range(K):
        for j in range(K):
            U[:, :, i, j] = padded[:, :, i * dilation:i * dilation + stride * (H_out - 1) + 1:stride,
                                   j * dilation:j * dilation + stride * (W_out - 1) + 1:stride]
    return U.reshape(S, C * K * K, H_out * W_out)


def _im2col_reference(inputs):
    n0, count = inputs["n0"], inputs["count"]
    return {"U": unroll(inputs["X"][n0:n0 + count], inputs["K"], inputs["pad"], inputs["stride"], inputs["dilation"])}


def _im2col_scale(inputs):
    # A copy is exact: the tolerance only forgives nothing but the last bit, and padding must be 0.
    return {"U": np.abs(_im2col_reference(inputs)["U"])}


def _im2col_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    N = int(rng.integers(2, 5))
    n0 = int(rng.integers(0, N))
    H, W = int(rng.integers(5, 24)) | 1, int(rng.integers(5, 24))
    return [{"N": N, "n0": n0, "count": int(rng.integers(1, N - n0 + 1)), "C": int(rng.integers(2, 9)) | 1,
             "H": H, "W": W, "K": int(rng.choice([2, 3, 5])), "pad": int(rng.integers(0, 2)),
             "stride": int(rng.choice([1, 2])), "dilation": int(rng.integers(1, 3)) if min(H, W) >= 11 else 1}]


def _im2col_shapes(rows):
    return shapes("N n0 count C H W K pad stride dilation", rows)


# (N, n0, count, C, H, W, K, pad, stride, dilation).  Visible: the chapter's example (3 maps of 3x3, 2x2
# filters), padding, stride 2, dilations 2 and 3, a sample range.  Hidden: a 1x1 input, 1x1 filters, a
# filter as large as the map, 13 and 17 channels, maps spanning several blocks, a range in the middle of the
# batch, dilations 2 and 3 with padding and stride.
IM2COL_VISIBLE = _im2col_shapes((
    (1, 0, 1, 3, 3, 3, 2, 0, 1, 1), (2, 0, 2, 4, 9, 8, 3, 1, 1, 2), (3, 1, 2, 2, 12, 10, 3, 0, 2, 2),
    (1, 0, 1, 5, 16, 16, 5, 2, 1, 1), (4, 2, 2, 3, 7, 11, 3, 1, 1, 3)))
IM2COL_HIDDEN = _im2col_shapes((
    (1, 0, 1, 1, 1, 1, 1, 0, 1, 1), (2, 1, 1, 13, 6, 6, 6, 0, 1, 1), (1, 0, 1, 17, 11, 13, 1, 0, 1, 3),
    (5, 2, 3, 7, 19, 23, 3, 1, 2, 2), (2, 0, 2, 3, 33, 35, 5, 2, 1, 2), (3, 1, 1, 6, 28, 28, 4, 3, 3, 2)))
IM2COL_TIMING = {"N": 32, "n0": 0, "count": 32, "C": 64, "H": 56, "W": 56, "K": 3, "pad": 1, "stride": 1,
                 "dilation": 1}

IM2COL = Exercise(
    name="im2col",
    title="Unrolling the input of a dilated convolution layer",
    signature=("im2col(const float* X, float* U, int n0, int count, int C, int H, int W, int K, int pad, "
               "int stride, int dilation, int H_out, int W_out)"),
    make_inputs=_im2col_inputs,
    reference=_im2col_reference,
    error_scale=_im2col_scale,
    rtol=1e-7,
    atol=0.0,
    visible_shapes=IM2COL_VISIBLE,
    hidden_shapes=IM2COL_HIDDEN,
    secret_shapes=_im2col_secret,
    launch_keys=(BLOCK_256, grid_key(_im2col_columns, "count * C * H_out * W_out",
                                     ", one thread per (sample, channel, pixel)")),
    launch_config=one_dimensional_launch,
    correctness_points=6.0,
    speed_points=2.0,
    reference_kernel=ReferenceKernel(IM2COL_REFERENCE, solves={"dilation": 1},
                                     arg_order=("X", "U", "n0", "count", "C", "H", "W", "K", "pad", "stride", "H_out",
                                                "W_out")),
    timing_shape=IM2COL_TIMING,
    max_elements=1 << 27,
    label=_im2col_label,
    description=("U[s][c*K*K + i*K + j][h*W_out + w] = X[n0 + s][c][h*stride - pad + i*dilation][w*stride - pad + "
                 "j*dilation] (0 where that falls outside the input map) for every sample s < count, channel c < C, "
                 "filter tap (i, j) and output pixel (h, w): the unroll of a dilated convolution, whose taps are "
                 "dilation pixels apart. U holds count matrices of (C*K*K) x (H_out*W_out), one after another. "
                 "Launched on a 1-D grid (block, grid). Speed is compared with the chapter's im2col_unroll at "
                 "dilation 1."),
)

# ------------------------------------------------------------------------------ 2. tiled SGEMM

TILE = sgemm.TILE  # the chapter's sgemm_shared_tiled


def _mnk(shape):
    return int(shape["M"]), int(shape["N"]), int(shape["K"])


def _gemm_inputs(shape, rng):
    M, N, K = _mnk(shape)
    return {"M": M, "N": N, "K": K, "A": varied(rng, (M, K), 0.3), "B": varied(rng, (K, N), -0.2), "C": None}


def _tile_keys():
    return (
        LaunchKey("tile_m", 1, 1024, default=TILE, help="rows of C per block; default 32"),
        LaunchKey("tile_n", 1, 1024, default=TILE, help="columns of C per block; default 32"),
        LaunchKey("block_x", 1, 1024, default=lambda shape, launch: launch["tile_n"],
                  help="threads per block along x; default tile_n"),
        LaunchKey("block_y", 1, 1024, default=lambda shape, launch: launch["tile_m"],
                  help="threads per block along y; default tile_m"),
        SHARED,
    )


def _gemm_launch(shape, launch) -> LaunchConfig:
    M, N, K = _mnk(shape)
    return LaunchConfig(grid=(ceil_div(N, launch["tile_n"]), ceil_div(M, launch["tile_m"]), 1),
                        block=(launch["block_x"], launch["block_y"], 1), shared=launch["shared"])


def _gemm_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    """One size per student that is a multiple of neither the student's tiles nor 32."""
    tm, tn = int(launch.get("tile_m", TILE)), int(launch.get("tile_n", TILE))
    return [{"M": tm * int(rng.integers(1, 4)) + int(rng.integers(1, tm)) if tm > 1 else int(rng.integers(2, 90)),
             "N": tn * int(rng.integers(1, 4)) + int(rng.integers(1, tn)) if tn > 1 else int(rng.integers(2, 90)),
             "K": int(rng.integers(2, 100)) | 1}]


def _gemm_shapes(rows):
    return shapes("M N K", rows)


# Visible: tile multiples and not.  Hidden: 1x1x1, a row vector, a column vector, an inner dimension of 1,
# skinny (2 x 1000, 500 x 3) and sizes one past a tile in every dimension.
GEMM_VISIBLE = _gemm_shapes(((32, 32, 32), (64, 48, 40), (100, 70, 33), (1, 64, 17), (96, 128, 64)))
GEMM_HIDDEN = _gemm_shapes(((1, 1, 1), (1, 300, 45), (257, 1, 80), (64, 64, 1), (2, 1000, 64), (500, 3, 300),
                            (129, 65, 33), (33, 97, 131)))
GEMM_TIMING = {"M": 2048, "N": 2048, "K": 2048}

SGEMM_TILED = Exercise(
    name="sgemm_tiled",
    title="SGEMM with shared-memory tiles",
    signature="sgemm_tiled(int M, int N, int K, const float* A, const float* B, float* C)",
    make_inputs=_gemm_inputs,
    **from_record(SGEMM_REFERENCE, "C", ("A", "B")),
    visible_shapes=GEMM_VISIBLE,
    hidden_shapes=GEMM_HIDDEN,
    secret_shapes=_gemm_secret,
    launch_keys=_tile_keys(),
    launch_config=_gemm_launch,
    correctness_points=6.0,
    speed_points=4.0,
    reductions=reducing("A", 1),
    reference_kernel=ReferenceKernel(SGEMM_REFERENCE),
    timing_shape=GEMM_TIMING,
    description=("C[i][j] = sum over k < K of A[i][k] * B[k][j] for i < M, j < N (A is M x K, B is K x N, C is M x N, "
                 "row-major). Block (bx, by) computes the tile_m x tile_n tile of C at rows by*tile_m.., columns "
                 "bx*tile_n..: grid (ceil(N / tile_n), ceil(M / tile_m)), blocks of block_x x block_y threads."),
)

# ------------------------------------------------------------------------------ 3. convolution: the GEMM step


_conv_dims = conv2d_gemm.gemm_step_dims


def _conv_label(shape):
    N, n0, count, C, H, W, M, K, pad = _conv_dims(shape)
    return f"samples {n0}..{n0 + count - 1} of {N}, C={C}, {H}x{W}, M={M}, K={K}, pad={pad}"


def _conv_pc(shape):
    N, n0, count, C, H, W, M, K, pad = _conv_dims(shape)
    H_out, W_out = _out_size(H, W, K, pad, 1)
    return H_out * W_out, C * K * K


def _conv_inputs(shape, rng):
    from kernels.conv.im2col import reference as unroll

    N, n0, count, C, H, W, M, K, pad = _conv_dims(shape)
    P, CKK = _conv_pc(shape)
    X = varied(rng, (count, C, H, W), 0.4)
    return {"Wmat": varied(rng, (M, CKK), 0.1), "U": unroll(X, K, pad, 1).astype(np.float32),
            "Y": varied(rng, (N, M, P), 2.0), "n0": n0, "M": M, "CKK": CKK, "P": P}


def _conv_reference(inputs):
    n0 = inputs["n0"]
    U = inputs["U"].astype(np.float64)
    Y = inputs["Y"].astype(np.float64).copy()
    Y[n0:n0 + U.shape[0]] = np.einsum("mk,nkp->nmp", inputs["Wmat"].astype(np.float64), U)
    return {"Y": Y}


def _conv_scale(inputs):
    n0 = inputs["n0"]
    U = np.abs(inputs["U"].astype(np.float64))
    scale = np.abs(inputs["Y"].astype(np.float64))
    scale[n0:n0 + U.shape[0]] = np.einsum("mk,nkp->nmp", np.abs(inputs["Wmat"].astype(np.float64)), U)
    return {"Y": scale}


def _conv_launch(shape, launch) -> LaunchConfig:
    N, n0, count, C, H, W, M, K, pad = _conv_dims(shape)
    P, _ = _conv_pc(shape)
    return LaunchConfig(grid=(ceil_div(P, launch["tile_n"]), ceil_div(M, launch["tile_m"]), count),
                        block=(launch["block_x"], launch["block_y"], 1), shared=launch["shared"])


def _conv_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    N = int(rng.integers(2, 4))
    n0 = int(rng.integers(0, N))
    return [{"N": N, "n0": n0, "count": int(rng.integers(1, N - n0 + 1)), "C": int(rng.integers(2, 8)) | 1,
             "H": int(rng.integers(6, 20)) | 1, "W": int(rng.integers(6, 20)), "M": int(rng.integers(3, 40)) | 1,
             "K": int(rng.choice([1, 3, 5])), "pad": int(rng.integers(0, 2))}]


def _conv_shapes(rows):
    return shapes("N n0 count C H W M K pad", rows)


# Visible: the chapter's example (3 maps of 3x3 -> 2 maps of 2x2), padding, a sample range.
# Hidden: one output map, one output pixel, 1x1 filters (CKK = C), 70 output maps (two tiles of 64,
# no multiple of 32), 13 channels, a range in the middle of the batch.
CONV_VISIBLE = _conv_shapes(((1, 0, 1, 3, 3, 3, 2, 2, 0), (2, 0, 2, 4, 9, 8, 6, 3, 1), (3, 1, 2, 3, 12, 12, 16, 3, 1),
                             (1, 0, 1, 8, 16, 16, 32, 5, 2), (2, 1, 1, 5, 10, 7, 9, 3, 0)))
CONV_HIDDEN = _conv_shapes(((1, 0, 1, 1, 5, 5, 1, 5, 0), (1, 0, 1, 13, 8, 9, 70, 3, 1), (3, 1, 1, 16, 7, 7, 33, 1, 0),
                            (4, 1, 2, 7, 21, 19, 11, 3, 1), (2, 0, 2, 3, 30, 30, 64, 5, 2), (1, 0, 1, 2, 3, 3, 3, 3, 0)))
CONV_TIMING = {"N": 16, "n0": 0, "count": 16, "C": 64, "H": 56, "W": 56, "M": 64, "K": 3, "pad": 1}

CONV2D_GEMM_FORWARD = Exercise(
    name="conv2d_gemm_forward",
    title="Convolution forward by unroll + GEMM: the matrix products",
    signature="conv2d_gemm_forward(const float* Wmat, const float* U, float* Y, int n0, int M, int CKK, int P)",
    inout=("Y",),
    make_inputs=_conv_inputs,
    reference=_conv_reference,
    error_scale=_conv_scale,
    visible_shapes=CONV_VISIBLE,
    hidden_shapes=CONV_HIDDEN,
    secret_shapes=_conv_secret,
    launch_keys=_tile_keys(),
    launch_config=_conv_launch,
    correctness_points=6.0,
    speed_points=2.0,
    reductions=reducing("Wmat", 1),
    reference_kernel=ReferenceKernel(GEMM_STEP_REFERENCE),
    timing_shape=CONV_TIMING,
    label=_conv_label,
    description=("Y[n0 + s] = Wmat U[s] for every s < count = gridDim.z: Wmat is the M x CKK filter matrix, U holds "
                 "count unrolled samples of CKK x P one after another, Y holds N samples of M x P (the output maps, "
                 "NCHW) and only samples n0 .. n0 + count - 1 may be written. Block (bx, by, s) computes the "
                 "tile_m x tile_n tile of Y[n0 + s] at rows by*tile_m.., columns bx*tile_n..: grid "
                 "(ceil(P / tile_n), ceil(M / tile_m), count), blocks of block_x x block_y threads."),
)

EXERCISES = [IM2COL, SGEMM_TILED, CONV2D_GEMM_FORWARD]
