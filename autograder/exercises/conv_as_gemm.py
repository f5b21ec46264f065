"""Exercises of the chapter "Convolution as matrix multiplication", each a step past the kernel the chapter
prints: the unroll (im2col) kernel of a dilated convolution, a shared-memory tiled SGEMM with BLAS's epilogue
(C = alpha A B + beta C), and a dilated convolution forward by implicit GEMM (the unrolled tiles gathered from X
into shared memory, never written out).

Layouts as in ``kernels/conv/im2col.cu``, ``kernels/gemm/sgemm.cu`` and ``kernels/conv/conv2d_gemm.cu``: row-major
float32; X is N x C x H x W; the unrolled matrix of one sample is (C*K*K) x (H_out*W_out) with row
c*K*K + i*K + j and column h*W_out + w; A is M x K, B is K x N, C is M x N.  Where the extras take the
chapter's values (dilation 1; alpha 1 and beta 0) the exercise is the chapter's problem, and there the
chapter's kernel is the speed reference (``ReferenceKernel.solves``); the hidden shapes take other values.

Shapes include sizes that are no multiple of any tile (1, primes, one more than a power of two),
skinny matrices (one row or column, an inner dimension of 1 or 7), padding, strides 2 and 3, dilations 2
and 3, a sample range that does not start at 0, one shape drawn per student from the grading secret, and a
large one for timing on the GPU.  The unrolled values are copies, so the unroll must be exact; the
products are compared relative to sums of |terms|, the size float32 rounding works on.
"""

from __future__ import annotations

import numpy as np

from kernels.conv import conv2d_gemm, im2col
from kernels.gemm import sgemm

from ..exercise import Exercise, FormulaMistake, LaunchConfig, ReferenceKernel, reducing
from ._gemm import (alpha_beta_probe, epilogue_left_out, mnk as _mnk, secret_mn, tile_keys as _tile_keys,
                    tiled_launch as _tiled_launch, varied)
from ._parts import BLOCK_256, grid_key, one_dimensional_launch, shapes

IM2COL_REFERENCE = im2col.KERNELS["im2col_unroll"]
SGEMM_REFERENCE = sgemm.KERNELS["sgemm_shared_tiled"]
IMPLICIT_REFERENCE = conv2d_gemm.KERNELS["conv2d_implicit_gemm"]


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


def gathered(X, K: int, pad: int, stride: int, dilation: int, rows, cols) -> np.ndarray:
    """float64 unrolled matrices of the samples of X at the output pixels (rows[p], cols[p]), whatever their number:
    [s][c K^2 + i K + j][p] = X[s][c][rows[p] stride - pad + i dilation][cols[p] stride - pad + j dilation], 0
    outside the map.  A kernel that finds a pixel, or a tap's place, wrongly still reads inside this pattern."""
    X = np.asarray(X, np.float64)
    S, C, H, W = X.shape
    taps = np.arange(K) * dilation
    ys = np.asarray(rows)[None, :] * stride - pad + taps[:, None]  # [i][p]
    xs = np.asarray(cols)[None, :] * stride - pad + taps[:, None]  # [j][p]
    inside = ((ys >= 0) & (ys < H))[:, None, :] & ((xs >= 0) & (xs < W))[None, :, :]  # [i][j][p]
    U = X[:, :, np.clip(ys, 0, H - 1)[:, None, :], np.clip(xs, 0, W - 1)[None, :, :]] * inside
    return U.reshape(S, C * K * K, len(rows))


#: The ways the unroll goes wrong, each a change of what is gathered: (key, words, the unrolled matrices of
#: the case's samples under it).  The im2col kernel stores them; the implicit GEMM multiplies them by Wmat.
def _pixels(inputs, width: int | None = None):
    """The output pixels (h, w) of the columns p < H_out W_out, found with ``width`` (default W_out) as the row's length."""
    p = np.arange(inputs["H_out"] * inputs["W_out"])
    width = inputs["W_out"] if width is None else width
    return p // width, p % width


def _samples(inputs):
    n0, count = int(inputs.get("n0", 0)), int(inputs.get("count", inputs["X"].shape[0]))
    return inputs["X"][n0:n0 + count]


def _unrolled_as(inputs, X=None, stride=None, dilation=None, width=None, taps_swapped=False) -> np.ndarray:
    U = gathered(_samples(inputs) if X is None else X, inputs["K"], inputs["pad"],
                 inputs["stride"] if stride is None else stride, inputs["dilation"] if dilation is None else dilation,
                 *_pixels(inputs, width))
    if taps_swapped:
        K = inputs["K"]
        U = U.reshape(U.shape[0], -1, K, K, U.shape[-1]).swapaxes(2, 3).reshape(U.shape)
    return U


UNROLL_MISTAKES = (
    ("stride 1", "with stride 1 for the receptive field: the input's row and column are h - pad + i*dilation and "
                 "w - pad + j*dilation, where h*stride - pad + i*dilation and w*stride - pad + j*dilation belong -- "
                 "is stride used where the window's corner is found?",
     lambda inputs: _unrolled_as(inputs, stride=1)),
    ("dilation 1", "with the filter's taps next to each other (dilation 1): the input's row and column are "
                   "h*stride - pad + i and w*stride - pad + j, where i*dilation and j*dilation belong -- is dilation "
                   "used where a tap's place is found?",
     lambda inputs: _unrolled_as(inputs, dilation=1)),
    ("pixel from H_out", "with the output pixel of column p found with H_out where W_out belongs (h = p / H_out, "
                         "w = p % H_out): the rows of the output are W_out pixels long, so h = p / W_out, "
                         "w = p % W_out.",
     lambda inputs: _unrolled_as(inputs, width=inputs["H_out"])),
    ("taps transposed", "with the filter's taps transposed: tap (i, j) taken as (j, i), so row c*K*K + i*K + j holds "
                        "the tap at row j and column i of the window -- is i the tap's row (k / K % K) and j its "
                        "column (k % K)?",
     lambda inputs: _unrolled_as(inputs, taps_swapped=True)),
)


def _im2col_scale(inputs):
    # A copy is exact: the tolerance only forgives nothing but the last bit, and padding must be 0.
    return {"U": np.abs(_im2col_reference(inputs)["U"])}


IM2COL_MISTAKES = (
    FormulaMistake("samples from 0",
                   "with the samples counted from 0, not from n0: sample s is read at X[s], where X[n0 + s] belongs "
                   "-- is n0 added to the sample's index where X is read?",
                   lambda inputs: {"U": _unrolled_as(inputs, X=inputs["X"][:inputs["count"]])}),
    *(FormulaMistake(key, words, lambda inputs, unrolled=unrolled: {"U": unrolled(inputs)})
      for key, words, unrolled in UNROLL_MISTAKES),
)


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
    formula_mistakes=IM2COL_MISTAKES,
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

def _gemm_inputs(shape, rng):
    """A, B and C; C holds NaN where beta is 0: BLAS does not read C then, so it need not hold numbers."""
    M, N, K = _mnk(shape)
    alpha, beta = np.float32(shape["alpha"]), np.float32(shape["beta"])
    C = varied(rng, (M, N), 1.0) if beta else np.full((M, N), np.nan, np.float32)
    return {"M": M, "N": N, "K": K, "alpha": alpha, "A": varied(rng, (M, K), 0.3), "B": varied(rng, (K, N), -0.2),
            "beta": beta, "C": C}


def _gemm_epilogue(inputs, product, C):
    """alpha product + beta C, C left out where beta is 0 (float64)."""
    alpha, beta = float(inputs["alpha"]), float(inputs["beta"])
    return alpha * product + (beta * np.asarray(C, np.float64) if beta else 0.0)


def _gemm_reference(inputs):
    product = SGEMM_REFERENCE.reference(inputs["A"], inputs["B"])
    return {"C": _gemm_epilogue(inputs, product, inputs["C"])}


def _gemm_scale(inputs):
    product = SGEMM_REFERENCE.reference(np.abs(inputs["A"]), np.abs(inputs["B"]))
    magnitudes = {**inputs, "alpha": abs(float(inputs["alpha"])), "beta": abs(float(inputs["beta"]))}
    return {"C": _gemm_epilogue(magnitudes, product, np.abs(inputs["C"]) if inputs["beta"] else None)}


def _gemm_launch(shape, launch) -> LaunchConfig:
    M, N, K = _mnk(shape)
    return _tiled_launch(M, N, 1, launch)


def _gemm_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    """One size per student that is a multiple of neither the student's tiles nor 32, with its own alpha and beta."""
    M, N = secret_mn(rng, launch, sgemm.TILE)
    return [{"M": M, "N": N, "K": int(rng.integers(2, 100)) | 1, "alpha": float(rng.choice([0.5, -1.25, 2.0])),
             "beta": float(rng.choice([0.0, 1.0, -0.75]))}]


def _gemm_shapes(rows):
    return shapes("M N K alpha beta", rows)


def _gemm_label(shape):
    M, N, K = _mnk(shape)
    return f"M={M}, N={N}, K={K}, alpha={shape['alpha']:g}, beta={shape['beta']:g}"


# Visible: tile multiples and not; alpha 1 and beta 0 (C = A B, the chapter's problem), beta 0 with another
# alpha (C holds NaN: it must not be read), beta 1 (C += A B) and beta -0.5.  Hidden: 1x1x1, a row vector, a column
# vector, an inner dimension of 1, skinny (2 x 1000, 500 x 3) and sizes one past a tile in every dimension, under
# every kind of alpha and beta.
GEMM_VISIBLE = _gemm_shapes(((32, 32, 32, 1.0, 0.0), (64, 48, 40, 0.5, 2.0), (100, 70, 33, -1.5, 0.0),
                             (1, 64, 17, 1.0, 1.0), (96, 128, 64, 2.0, -0.5)))
GEMM_HIDDEN = _gemm_shapes(((1, 1, 1, 2.0, -1.0), (1, 300, 45, 1.0, 0.0), (257, 1, 80, -0.5, 0.0), (64, 64, 1, 1.0, 1.0),
                            (2, 1000, 64, 0.25, 3.0), (500, 3, 300, -2.0, 0.5), (129, 65, 33, 1.5, -1.0),
                            (33, 97, 131, 0.75, 0.0)))
GEMM_TIMING = {"M": 2048, "N": 2048, "K": 2048, "alpha": 1.0, "beta": 0.0}

SGEMM_TILED = Exercise(
    name="sgemm_tiled",
    title="SGEMM with shared-memory tiles: C = alpha A B + beta C",
    signature="sgemm_tiled(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C)",
    inout=("C",),
    make_inputs=_gemm_inputs,
    reference=_gemm_reference,
    error_scale=_gemm_scale,
    visible_shapes=GEMM_VISIBLE,
    hidden_shapes=GEMM_HIDDEN,
    secret_shapes=_gemm_secret,
    launch_keys=_tile_keys(),
    launch_config=_gemm_launch,
    correctness_points=6.0,
    speed_points=4.0,
    reductions=reducing("A", 1),
    reference_kernel=ReferenceKernel(SGEMM_REFERENCE, arg_order=("M", "N", "K", "A", "B", "C"),
                                     solves={"alpha": 1.0, "beta": 0.0}),
    timing_shape=GEMM_TIMING,
    probe=alpha_beta_probe(_gemm_inputs),
    formula_mistakes=(epilogue_left_out(_gemm_reference),),
    label=_gemm_label,
    description=("C[i][j] = alpha * (sum over k < K of A[i][k] * B[k][j]) + beta * C[i][j] for i < M, j < N (A is M x K, "
                 "B is K x N, C is M x N, row-major): BLAS's SGEMM. Where beta is 0, C is not read (it may hold NaN). "
                 "Block (bx, by) computes the tile_m x tile_n tile of C at rows by*tile_m.., columns bx*tile_n..: grid "
                 "(ceil(N / tile_n), ceil(M / tile_m)), blocks of block_x x block_y threads. Speed is compared with the "
                 "chapter's sgemm_shared_tiled at alpha 1, beta 0."),
)

# ------------------------------------------------------------------------------ 3. implicit GEMM of a dilated convolution

CONV_AXES = "N C H W M K pad stride dilation"


def _conv_dims(shape) -> tuple[int, ...]:
    return tuple(int(shape[axis]) for axis in CONV_AXES.split())


def _conv_out(shape) -> tuple[int, int]:
    """H_out, W_out of the convolution of ``shape`` (its taps ``dilation`` pixels apart)."""
    N, C, H, W, M, K, pad, stride, dilation = _conv_dims(shape)
    span = (K - 1) * dilation + 1
    return (H + 2 * pad - span) // stride + 1, (W + 2 * pad - span) // stride + 1


def _conv_label(shape):
    N, C, H, W, M, K, pad, stride, dilation = _conv_dims(shape)
    return f"N={N}, C={C}, {H}x{W}, M={M}, K={K}, pad={pad}, stride={stride}, dilation={dilation}"


def _conv_inputs(shape, rng):
    N, C, H, W, M, K, pad, stride, dilation = _conv_dims(shape)
    H_out, W_out = _conv_out(shape)
    return {"X": varied(rng, (N, C, H, W), 0.4), "Wmat": varied(rng, (M, C * K * K), 0.1), "Y": None,
            "N": N, "C": C, "H": H, "W": W, "M": M, "K": K, "pad": pad, "stride": stride, "dilation": dilation,
            "H_out": H_out, "W_out": W_out}


def _convolution(X, Wmat, inputs, U=None) -> np.ndarray:
    """Y[n][m][p] = sum over taps k of Wmat[m][k] U[n][k][p] in float64, U the dilated unroll of X (or ``U``)."""
    U = unroll(X, inputs["K"], inputs["pad"], inputs["stride"], inputs["dilation"]) if U is None else U
    Y = np.einsum("mk,nkp->nmp", np.asarray(Wmat, np.float64), U)
    return Y.reshape(Y.shape[0], Y.shape[1], inputs["H_out"], inputs["W_out"])


def _conv_reference(inputs):
    return {"Y": _convolution(inputs["X"], inputs["Wmat"], inputs)}


def _conv_scale(inputs):
    return {"Y": _convolution(np.abs(inputs["X"]), np.abs(inputs["Wmat"]), inputs)}


CONV_MISTAKES = tuple(
    FormulaMistake(key, words, lambda inputs, unrolled=unrolled: {"Y": _convolution(inputs["X"], inputs["Wmat"], inputs,
                                                                                    unrolled(inputs))})
    for key, words, unrolled in UNROLL_MISTAKES)


def _conv_launch(shape, launch) -> LaunchConfig:
    N, C, H, W, M, K, pad, stride, dilation = _conv_dims(shape)
    H_out, W_out = _conv_out(shape)
    return _tiled_launch(M, H_out * W_out, N, launch)


def _conv_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    dilation = int(rng.integers(1, 4))
    K = int(rng.choice([1, 3, 5]))
    span = (K - 1) * dilation + 1
    return [{"N": int(rng.integers(1, 4)), "C": int(rng.integers(2, 8)) | 1, "H": span + int(rng.integers(2, 14)) | 1,
             "W": span + int(rng.integers(1, 14)), "M": int(rng.integers(3, 40)) | 1, "K": K,
             "pad": int(rng.integers(0, 3)), "stride": int(rng.integers(1, 3)), "dilation": dilation}]


# Visible: the chapter's example (3 maps of 3x3 -> 2 maps of 2x2), padding, stride 2, dilations 2 and 3.
# Hidden: one output map and one output pixel, 1x1 filters (the dilation changes nothing), 70 output maps (no
# multiple of 32), 13 channels, dilations 2 and 3 with padding and strides 2 and 3, a sample of 1.
CONV_VISIBLE = shapes(CONV_AXES, ((1, 3, 3, 3, 2, 2, 0, 1, 1), (2, 4, 9, 8, 6, 3, 1, 1, 2), (2, 3, 12, 12, 16, 3, 1, 2, 1),
                                  (1, 8, 16, 16, 32, 5, 2, 1, 1), (2, 5, 13, 10, 9, 3, 0, 1, 3)))
CONV_HIDDEN = shapes(CONV_AXES, ((1, 1, 5, 5, 1, 3, 0, 1, 2), (1, 13, 8, 9, 70, 3, 1, 1, 2), (3, 16, 7, 7, 33, 1, 0, 2, 3),
                                 (2, 7, 21, 19, 11, 3, 2, 2, 2), (2, 3, 26, 24, 64, 5, 4, 1, 2), (1, 2, 11, 13, 3, 3, 1, 3, 3)))
CONV_TIMING = {"N": 16, "C": 64, "H": 56, "W": 56, "M": 64, "K": 3, "pad": 1, "stride": 1, "dilation": 1}

CONV2D_GEMM_FORWARD = Exercise(
    name="conv2d_gemm_forward",
    title="Convolution forward by implicit GEMM, dilated: the unrolled tiles gathered from X",
    signature=("conv2d_gemm_forward(const float* X, const float* Wmat, float* Y, int N, int C, int H, int W, int M, "
               "int K, int pad, int stride, int dilation, int H_out, int W_out)"),
    make_inputs=_conv_inputs,
    reference=_conv_reference,
    error_scale=_conv_scale,
    formula_mistakes=CONV_MISTAKES,
    visible_shapes=CONV_VISIBLE,
    hidden_shapes=CONV_HIDDEN,
    secret_shapes=_conv_secret,
    launch_keys=_tile_keys(),
    launch_config=_conv_launch,
    correctness_points=6.0,
    speed_points=2.0,
    reductions=reducing("Wmat", 1),
    reference_kernel=ReferenceKernel(IMPLICIT_REFERENCE, solves={"dilation": 1},
                                     arg_order=("X", "Wmat", "Y", "N", "C", "H", "W", "M", "K", "pad", "stride", "H_out",
                                                "W_out")),
    timing_shape=CONV_TIMING,
    label=_conv_label,
    description=("Y[n][m][p] = sum over k < C*K*K of Wmat[m][k] * U_n[k][p], where U_n is the unrolled matrix of sample n "
                 "of a dilated convolution (exercise 1: row k = c*K*K + i*K + j, column p = h*W_out + w, the value "
                 "X[n][c][h*stride - pad + i*dilation][w*stride - pad + j*dilation], 0 outside the map), which is never "
                 "written to memory: each block gathers the tile of U_n it needs from X into shared memory. Y is "
                 "N x M x H_out x W_out (NCHW). Block (bx, by, n) computes the tile_m x tile_n tile of Y[n] (M x P, "
                 "P = H_out*W_out) at rows by*tile_m.., columns bx*tile_n..: grid (ceil(P / tile_n), ceil(M / tile_m), N), "
                 "blocks of block_x x block_y threads. Speed is compared with the chapter's conv2d_implicit_gemm at "
                 "dilation 1."),
)

EXERCISES = [IM2COL, SGEMM_TILED, CONV2D_GEMM_FORWARD]
