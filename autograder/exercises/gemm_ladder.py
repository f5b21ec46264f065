"""Exercises of the chapter "Convolution as matrix multiplication", its second assignment: the upper rungs of the
GEMM ladder, each asking for something the chapter's kernel of that rung does not do.

1. ``sgemm_register_tiles``: 2-D register tiles (version 5) with a linear layer's epilogue, a bias per column and
   a ReLU, each switched on by a bit of ``epilogue`` (cuBLASLt's BIAS, RELU and RELU_BIAS epilogues); the bias is
   not read without its bit.
2. ``sgemm_float4``: float4 loads and an A tile transposed in shared memory (version 6), with op(B) = B or B^T by
   ``trans_b`` (BLAS's transb): B given N x K, as a linear layer keeps its weights, arrives k-major as A does.
3. ``sgemm_warp_tiles``: warp tiles, double-buffered (version 7), for a batch of products of one shape in one
   launch (strided batched, as attention's heads).
4. ``gemm_bf16_wmma``: BF16 on the tensor cores through WMMA (version 12), C = alpha A B^T + beta C with C in BF16
   (beta 1 adds a residual in the epilogue; where beta is 0, C is not read).
5. ``sgemm_cp_async``: a double-buffered tile loop fed by cp.async, on operands with leading dimensions (BLAS's
   lda, ldb, ldc: rows longer than the product's, as when it is a block of a larger matrix), C's columns past N
   left as they are.

Where the extras take the chapter's values (no epilogue, B as it is, one product, alpha 1 and beta 0, rows as long
as the product's) the rung's kernel computes the exercise's function and is the speed reference
(``ReferenceKernel.solves``).  Speed is banded by fractions of cuBLAS's speed: the grader times against the rung's
kernel, whose fraction of cuBLAS is recorded (:data:`FRACTION_OF_CUBLAS`), so a band of 70 % of cuBLAS is a
speed-up of 0.70 / 0.885 over version 7.  Each exercise's description says its bands both ways.

Shapes are small (the CPU emulator runs every thread): sizes no multiple of any tile (1, primes, one past a tile),
skinny matrices, inner dimensions of 1 and not a multiple of 4 or 8 (the vector loads' fallback), every value of
the extra, and one shape per student drawn past a whole number of the student's own tiles.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np

from kernels.gemm import sgemm, sgemm_bf16
from kernels.runtime.signature import strip_comments
from kernels.runtime.versions import KernelVersion

from ..exercise import Exercise, FormulaMistake, LaunchConfig, ReferenceKernel, reducing
from ._gemm import alpha_beta_probe, epilogue_left_out, mnk, nan_reaches, not_read, secret_mn, tile_keys, tiled_launch, varied
from ._parts import shapes

#: The fraction of cuBLAS's speed each rung's kernel reaches on one GPU in one run (an H100, M = N = K = 4096):
#: versions 5 to 7 against cuBLAS SGEMM in benchmarks/results/conv_as_gemm.json (version 7 in its default tiles,
#: WARPTILE_DEFAULT, from the tile search), version 12 against cuBLAS BF16 in sgemm_bf16.json.
#: tests/test_exercises.py checks them against those files.
FRACTION_OF_CUBLAS = {"sgemm_blocktile_2d": 0.415, "sgemm_vectorized": 0.624, "sgemm_warptile": 0.885,
                      "sgemm_bf16_wmma": 0.092}
TIMING_SIZE = 4096  # where the fractions were measured


def bands_of_cublas(kernel: str, *bands: tuple[float, float]) -> tuple[tuple[float, float], ...]:
    """Speed bands given as (fraction of cuBLAS's speed, share of the speed points), best first, as the grader
    takes them: (speed-up over ``kernel``, the exercise's reference, share)."""
    return tuple((round(fraction / FRACTION_OF_CUBLAS[kernel], 3), share) for fraction, share in bands)


def _speed_sentence(kernel: str, bands, where: str, library: str = "cuBLAS") -> str:
    """What the description says of speed: the reference, where it is timed, and the bands both ways."""
    rung = FRACTION_OF_CUBLAS[kernel]
    steps = "; ".join(f"{'all' if share == 1 else f'{share:g}'} of the speed points from {speedup * rung:.0%} of "
                      f"{library} ({speedup:g} times its speed)" for speedup, share in bands)
    return (f"Speed is compared with the chapter's {kernel} at M = N = K = {TIMING_SIZE}, {where}; it runs at "
            f"{rung:.1%} of {library}'s speed there (an H100): {steps}.")


def _square(**extra) -> dict:
    return {"M": TIMING_SIZE, "N": TIMING_SIZE, "K": TIMING_SIZE, **extra}


def _label(shape, extra: str) -> str:
    M, N, K = mnk(shape)
    return f"M={M}, N={N}, K={K}, {extra}"


def _product(A, B) -> np.ndarray:
    return np.asarray(A, np.float64) @ np.asarray(B, np.float64)


def _plain_launch(shape, launch) -> LaunchConfig:
    M, N, _ = mnk(shape)
    return tiled_launch(M, N, 1, launch)


def _rung(kernel: KernelVersion, solves: dict, where: str, cublas_bands, tile: int, threads: int, description: str,
          library: str = "cuBLAS", **declared) -> Exercise:
    """An exercise of this assignment: 4 points for correctness and 6 for speed, banded by fractions of
    ``library``'s speed (``cublas_bands``) through the rung's kernel ``kernel``, the reference, timed at TIMING_SIZE³
    where the extras take the chapter's values (``solves``, said as ``where``); tiles of C of ``tile`` x ``tile``,
    ``threads`` a block, by default."""
    bands = bands_of_cublas(kernel.kernel, *cublas_bands)
    return Exercise(launch_keys=tile_keys(tile, tile, threads=threads),
                    launch_config=declared.pop("launch_config", _plain_launch),
                    correctness_points=4.0, speed_points=6.0, speed_bands=bands,
                    reference_kernel=ReferenceKernel(kernel, arg_order=("M", "N", "K", "A", "B", "C"), solves=solves),
                    timing_shape=_square(**solves),
                    description=f"{description} {_speed_sentence(kernel.kernel, bands, where, library)}", **declared)


# ------------------------------------------------------------------------------ 1. register tiles, bias and ReLU

BIAS, RELU = 1, 2  # the bits of epilogue
EPILOGUES = {0: "no epilogue", BIAS: "bias", RELU: "ReLU", BIAS | RELU: "bias then ReLU"}


def _linear_inputs(shape, rng):
    """A, B, and a bias of NaN where the epilogue has none (it must not be read then)."""
    M, N, K = mnk(shape)
    epilogue = int(shape["epilogue"])
    A, B = varied(rng, (M, K), 0.3), varied(rng, (K, N), 0.05)  # products of both signs: ReLU has work
    bias = varied(rng, (N,), -0.1) if epilogue & BIAS else np.full(N, np.nan, np.float32)
    return {"M": M, "N": N, "K": K, "A": A, "B": B, "bias": bias, "C": None, "epilogue": epilogue}


def _linear(inputs, magnitudes: bool) -> np.ndarray:
    A, B, bias = inputs["A"], inputs["B"], inputs["bias"]
    if magnitudes:
        A, B, bias = np.abs(A), np.abs(B), np.abs(bias)
    out = _product(A, B)
    if inputs["epilogue"] & BIAS:
        out = out + np.asarray(bias, np.float64)
    return np.maximum(out, 0.0) if inputs["epilogue"] & RELU and not magnitudes else out


#: Widths of a block's tile of C whose bias read by the column within the tile is named.
TILE_WIDTHS = (16, 32, 64, 128, 256)


def _bias_of_the_tile_column(width: int) -> FormulaMistake:
    """C with column j given the bias of column j % ``width``: the column within a block's tile, not within C."""
    def reference(inputs):
        bias = np.asarray(inputs["bias"])
        return {"C": _linear({**inputs, "bias": bias[np.arange(bias.size) % width]}, magnitudes=False)}
    return FormulaMistake(
        f"bias of the tile column {width}", f"with column j given the bias of column j % {width}: the bias is read "
        f"at the column within the block's tile (tiles {width} wide), not at the column of C -- is its index the "
        f"tile's first column plus the thread's?", reference)


def _linear_probe(shape, run) -> str:
    """Names a bias read without its bit, and a ReLU taken before the bias is added (seen with A all zeros, where the
    answer is max(bias, 0))."""
    inputs = _linear_inputs(shape, np.random.default_rng(0))
    if not inputs["epilogue"] & BIAS:
        return not_read(run, inputs, "bias", "C", "Without epilogue's bit 1")
    if not inputs["epilogue"] & RELU:
        return ""
    got = np.asarray(run({**inputs, "A": np.zeros_like(inputs["A"])})["C"], np.float64)
    bias = np.broadcast_to(np.asarray(inputs["bias"], np.float64), got.shape)
    if np.any(bias < 0) and np.allclose(got, bias):
        return ("With A all zeros the result should be max(bias, 0); the kernel returns the bias itself: the ReLU comes "
                "after the bias, max(x + bias, 0).")
    return ""


def _linear_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    M, N = secret_mn(rng, launch, 128, most=1)
    return [{"M": M, "N": N, "K": int(rng.integers(2, 80)) | 1, "epilogue": int(rng.choice([BIAS, RELU, BIAS | RELU]))}]


# Visible: a whole tile, then sizes no multiple of it under each epilogue, the chapter's case (none) last.  Hidden:
# 1 x 1 x 1, a column and a row (257 x 3; 3 x 257, its bias across three tiles), one past a tile both ways, an inner
# dimension of 1, sizes of primes without an epilogue.
LINEAR_AXES = "M N K epilogue"
REGISTER_TILES = _rung(
    sgemm.KERNELS["sgemm_blocktile_2d"], {"epilogue": 0}, "epilogue 0", ((0.35, 1.0), (0.28, 0.75), (0.20, 0.5), (0.12, 0.25)),
    tile=128, threads=256,
    name="sgemm_register_tiles",
    reductions=reducing("A", 1),
    formula_mistakes=tuple(_bias_of_the_tile_column(width) for width in TILE_WIDTHS),
    title="2-D register tiles: a linear layer's product with its bias and ReLU",
    signature=("sgemm_register_tiles(int M, int N, int K, const float* A, const float* B, const float* bias, "
               "float* C, int epilogue)"),
    make_inputs=_linear_inputs,
    reference=lambda inputs: {"C": _linear(inputs, magnitudes=False)},
    error_scale=lambda inputs: {"C": _linear(inputs, magnitudes=True)},
    visible_shapes=shapes(LINEAR_AXES, ((128, 128, 64, BIAS | RELU), (100, 70, 33, BIAS), (64, 200, 17, RELU),
                                        (50, 40, 24, 0))),
    hidden_shapes=shapes(LINEAR_AXES, ((1, 1, 1, BIAS), (257, 3, 20, BIAS), (3, 257, 9, BIAS | RELU),
                                       (129, 65, 33, BIAS | RELU), (64, 64, 1, BIAS), (33, 97, 131, 0))),
    secret_shapes=_linear_secret,
    probe=_linear_probe,
    label=lambda shape: _label(shape, EPILOGUES[int(shape["epilogue"])]),
    description=("C[i][j] = f(sum over k < K of A[i][k] * B[k][j]) for i < M, j < N (A is M x K, B is K x N, C is M x N, "
                 "row-major), where epilogue's bit 1 adds bias[j] and its bit 2 then takes max(., 0): the product of a "
                 "linear layer with its bias and ReLU. Without bit 1, bias is not read (it may hold NaN). Block (bx, by) "
                 "computes the tile_m x tile_n tile of C at rows by*tile_m.., columns bx*tile_n..; each thread a block "
                 "of it from registers."),
)

# ------------------------------------------------------------------------------ 2. float4, op(B) = B or B^T


def _op_b_inputs(shape, rng):
    M, N, K = mnk(shape)
    trans_b = int(shape["trans_b"])
    return {"M": M, "N": N, "K": K, "A": varied(rng, (M, K), 0.3),
            "B": varied(rng, (N, K) if trans_b else (K, N), -0.2), "C": None, "trans_b": trans_b}


def _op_b(inputs, magnitudes: bool) -> np.ndarray:
    A, B = inputs["A"], inputs["B"].T if inputs["trans_b"] else inputs["B"]
    return _product(np.abs(A), np.abs(B)) if magnitudes else _product(A, B)


def _op_b_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    M, N = secret_mn(rng, launch, 128, most=1)
    return [{"M": M, "N": N, "K": int(rng.integers(2, 80)), "trans_b": int(rng.choice([0, 1, 1]))}]


# Visible: a whole tile given transposed, sizes no multiple of it, K a multiple of 4 and not.  Hidden: 1 x 1 x 1,
# skinny both ways, N = 258 (rows of B whose length is no multiple of 4: no float4 along them), K = 6 (a k-tile
# that ends inside a float4) and K = 131, B as it is on two shapes.
OP_B_AXES = "M N K trans_b"
FLOAT4 = _rung(
    sgemm.KERNELS["sgemm_vectorized"], {"trans_b": 0}, "trans_b 0", ((0.55, 1.0), (0.45, 0.75), (0.35, 0.5), (0.25, 0.25)),
    tile=128, threads=256,
    name="sgemm_float4",
    reductions=reducing("A", 1),
    title="float4 loads and transposed tiles: C = A B or A B^T",
    signature="sgemm_float4(int M, int N, int K, const float* A, const float* B, float* C, int trans_b)",
    make_inputs=_op_b_inputs,
    reference=lambda inputs: {"C": _op_b(inputs, magnitudes=False)},
    error_scale=lambda inputs: {"C": _op_b(inputs, magnitudes=True)},
    visible_shapes=shapes(OP_B_AXES, ((128, 128, 64, 1), (100, 70, 32, 1), (64, 96, 40, 0), (33, 50, 17, 1))),
    hidden_shapes=shapes(OP_B_AXES, ((1, 1, 1, 1), (257, 3, 20, 1), (3, 258, 9, 0), (129, 65, 36, 1), (64, 64, 6, 1),
                                     (35, 130, 131, 0))),
    secret_shapes=_op_b_secret,
    label=lambda shape: _label(shape, "B given N x K (B^T)" if shape["trans_b"] else "B given K x N"),
    description=("C[i][j] = sum over k < K of A[i][k] * op(B)[k][j] for i < M, j < N, where op(B) is B (K x N) when "
                 "trans_b is 0 and B^T when trans_b is 1 (B given N x K, as a linear layer keeps its weights); A is "
                 "M x K, C is M x N, all row-major. Load 16 bytes (a float4) at a time where a row is 16-byte aligned "
                 "(a row length that is a multiple of 4) and the four values lie inside it, one value at a time "
                 "elsewhere; keep the tiles k-major in shared memory, transposing the ones that arrive k-major in "
                 "global memory (A's, and B's given N x K). Block (bx, by) computes the tile_m x tile_n tile of C at "
                 "rows by*tile_m.., columns bx*tile_n..."),
)

# ------------------------------------------------------------------------------ 3. warp tiles, a batch of products


def _batched_inputs(shape, rng):
    M, N, K = mnk(shape)
    batch = int(shape["batch"])
    return {"M": M, "N": N, "K": K, "A": varied(rng, (batch, M, K), 0.3), "B": varied(rng, (batch, K, N), -0.2),
            "C": None, "batch": batch}


def _batched_launch(shape, launch) -> LaunchConfig:
    M, N, _ = mnk(shape)
    return tiled_launch(M, N, int(shape["batch"]), launch)


def _batched_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    M, N = secret_mn(rng, launch, 128, most=1)
    return [{"M": M, "N": N, "K": int(rng.integers(2, 60)) | 1, "batch": int(rng.integers(2, 4))}]


#: k per stage of a double-buffered k-loop, the sizes whose last stage fetched one step short is named.
K_STEPS = (8, 16, 32)


def _last_k_tile_again(step: int) -> FormulaMistake:
    """C with the last k-tile of ``step`` replaced by the one before it, multiplied again: the next tile fetched
    while t + 2 < tiles, so the last one's buffer is filled with what the registers last held."""
    def reference(inputs):
        A, B = np.asarray(inputs["A"], np.float64), np.asarray(inputs["B"], np.float64)
        tiles = -(-A.shape[-1] // step)
        if tiles < 2:
            return {"C": _product(A, B)}
        kept, again = slice(0, (tiles - 1) * step), slice((tiles - 2) * step, (tiles - 1) * step)
        return {"C": _product(A[..., kept], B[..., kept, :]) + _product(A[..., again], B[..., again, :])}
    return FormulaMistake(
        f"last k-tile of {step} again", f"with the last k-tile (k-tiles of {step}) replaced by the one before it, "
        f"multiplied twice: the last tile is never fetched, and its buffer gets what the registers last held -- is "
        f"tile t + 1 fetched while t + 1 < tiles?", reference)


# Visible: one whole tile, a batch of two and of three (one of them a single row), sizes no multiple of a tile.
# Hidden: four 1 x 1 x 1 products, skinny products in batches, an inner dimension of 1, one product of primes.
BATCHED_AXES = "M N K batch"
WARP_TILES = _rung(
    sgemm.KERNELS["sgemm_warptile"], {"batch": 1}, "batch 1, in its default tiles",
    ((0.70, 1.0), (0.60, 0.75), (0.50, 0.5), (0.40, 0.25)), tile=128, threads=128,
    name="sgemm_warp_tiles",
    reductions=reducing("A", 2),
    formula_mistakes=tuple(_last_k_tile_again(step) for step in K_STEPS),
    title="Warp tiles, double-buffered, for a batch of products",
    signature="sgemm_warp_tiles(int M, int N, int K, const float* A, const float* B, float* C, int batch)",
    make_inputs=_batched_inputs,
    reference=lambda inputs: {"C": _product(inputs["A"], inputs["B"])},
    error_scale=lambda inputs: {"C": _product(np.abs(inputs["A"]), np.abs(inputs["B"]))},
    visible_shapes=shapes(BATCHED_AXES, ((128, 128, 32, 1), (100, 70, 33, 2), (1, 64, 40, 3), (64, 130, 17, 1))),
    hidden_shapes=shapes(BATCHED_AXES, ((1, 1, 1, 4), (257, 3, 20, 2), (3, 257, 9, 1), (129, 65, 33, 3), (64, 64, 1, 2),
                                        (33, 97, 131, 1))),
    secret_shapes=_batched_secret,
    launch_config=_batched_launch,
    label=lambda shape: _label(shape, f"batch of {shape['batch']}"),
    description=("C[b] = A[b] B[b] for every b < batch: A holds batch matrices of M x K one after another, B batch of "
                 "K x N, C batch of M x N, all row-major. Block (bx, by, b) computes the tile_m x tile_n tile of C[b] at "
                 "rows by*tile_m.., columns bx*tile_n..: grid (ceil(N / tile_n), ceil(M / tile_m), batch). Each warp "
                 "owns a piece of the tile and each lane small blocks of that piece, laid out so that a warp's reads of "
                 "shared memory do not conflict; the next k-tile is fetched while this one is multiplied."),
)

# ------------------------------------------------------------------------------ 4. WMMA, BF16, alpha and beta

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
#: Tolerance relative to |C| (the BF16 rounding of the result: a unit roundoff of 2^-8, twice over), and the share
#: of the terms' magnitudes that the float sums' rounding is allowed (2^-13 of them, far above K 2^-24).
WMMA_RTOL, TERMS_SHARE = 2.0 ** -7, 2.0 ** -6
#: BF16 on the tensor cores against the FP32 units' peak: 15 times on an H100, about 30 on the newest cards.
TENSOR_CORES_OVER_FP32 = 32.0


def _bf16_inputs(shape, rng):
    """A, B (N x K) and C in BF16; C holds NaN where beta is 0 (not read then)."""
    M, N, K = mnk(shape)
    alpha, beta = np.float32(shape["alpha"]), np.float32(shape["beta"])
    A, B = varied(rng, (M, K), 0.3).astype(BFLOAT16), varied(rng, (N, K), -0.2).astype(BFLOAT16)
    C = varied(rng, (M, N), 1.0).astype(BFLOAT16) if beta else np.full((M, N), np.nan, BFLOAT16)
    return {"M": M, "N": N, "K": K, "alpha": alpha, "A": A, "B": B, "beta": beta, "C": C}


def _axpby(A, B, C, alpha: float, beta: float) -> np.ndarray:
    """alpha A B^T + beta C in float64, C left out where beta is 0."""
    out = alpha * (np.asarray(A, np.float64) @ np.asarray(B, np.float64).T)
    return out + beta * np.asarray(C, np.float64) if beta else out


def _bf16_reference(inputs):
    return {"C": _axpby(inputs["A"], inputs["B"], inputs["C"], float(inputs["alpha"]), float(inputs["beta"]))}


def _bf16_scale(inputs):
    """|C| (what the BF16 rounding of the result scales with) plus a share of the terms' magnitudes."""
    terms = _axpby(np.abs(inputs["A"].astype(np.float64)), np.abs(inputs["B"].astype(np.float64)),
                   np.abs(inputs["C"].astype(np.float64)), abs(float(inputs["alpha"])), abs(float(inputs["beta"])))
    return {"C": np.abs(_bf16_reference(inputs)["C"]) + TERMS_SHARE * terms}


#: The rows and columns of one WMMA fragment of B (m16n16k16).
FRAGMENT = 16


def _b_fragments_transposed(inputs):
    """C with every 16 x 16 block of B (N x K, zero past its edges) read transposed, B's rows where its columns
    belong: a matrix_b fragment loaded in the other layout (row_major where B^T, held as B, needs col_major)."""
    B = np.asarray(inputs["B"], np.float64)
    N, K = B.shape
    n_pad, k_pad = -(-N // FRAGMENT) * FRAGMENT, -(-K // FRAGMENT) * FRAGMENT
    padded = np.zeros((n_pad, k_pad))
    padded[:N, :K] = B
    blocks = padded.reshape(n_pad // FRAGMENT, FRAGMENT, k_pad // FRAGMENT, FRAGMENT)
    misread = blocks.transpose(0, 3, 2, 1).reshape(n_pad, k_pad)[:N, :K]
    return {"C": _axpby(inputs["A"], misread, inputs["C"], float(inputs["alpha"]), float(inputs["beta"]))}


def _bf16_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    M, N = secret_mn(rng, launch, 64, most=1)
    return [{"M": M, "N": N, "K": int(rng.integers(2, 33)), "alpha": float(rng.choice([0.5, -1.25, 2.0])),
             "beta": float(rng.choice([0.0, 1.0, -0.75]))}]


# Visible: a whole tile at alpha 1, beta 0 (the chapter's problem), then beta 1 (a residual) and others, K a
# multiple of 8 and not.  Hidden: 1 x 1 x 1, a row and a column of C, a residual of 65 x 33 over two k-tiles, one
# fragment (K = 8).  Small: the emulator computes every WMMA product once per lane.
BF16_AXES = "M N K alpha beta"
BF16_WMMA = _rung(
    sgemm_bf16.KERNELS["sgemm_bf16_wmma"], {"alpha": 1.0, "beta": 0.0}, "alpha 1 and beta 0",
    ((0.09, 1.0), (0.07, 0.75), (0.05, 0.5), (0.03, 0.25)), tile=64, threads=128, library="cuBLAS BF16",
    name="gemm_bf16_wmma",
    reductions=reducing("A", 1),
    title="BF16 on the tensor cores with WMMA: C = alpha A B^T + beta C",
    signature=("gemm_bf16_wmma(int M, int N, int K, float alpha, const __nv_bfloat16* A, const __nv_bfloat16* B, "
               "float beta, __nv_bfloat16* C)"),
    inout=("C",),
    make_inputs=_bf16_inputs,
    reference=_bf16_reference,
    error_scale=_bf16_scale,
    rtol=WMMA_RTOL,
    visible_shapes=shapes(BF16_AXES, ((64, 64, 32, 1.0, 0.0), (40, 72, 24, 0.5, 1.0), (17, 33, 9, -1.5, 0.5))),
    hidden_shapes=shapes(BF16_AXES, ((1, 1, 1, 2.0, -1.0), (1, 70, 24, 1.0, 0.0), (70, 1, 16, -0.5, 0.0),
                                     (65, 33, 48, 1.0, 1.0), (16, 16, 8, 0.25, 3.0))),
    secret_shapes=_bf16_secret,
    probe=alpha_beta_probe(_bf16_inputs),
    formula_mistakes=(epilogue_left_out(_bf16_reference), FormulaMistake(
        "B fragments transposed", "with every 16 x 16 block of B read transposed (B[n0 + q][k0 + p] where B[n0 + p][k0 + "
        "q] belongs): B's fragments hold its rows where its columns belong -- B is N x K, so B^T's matrix_b fragment "
        "is loaded col_major from it, not row_major", _b_fragments_transposed,
        result_scale=lambda outputs: {"C": np.abs(outputs["C"])})),
    peak_over_fp32=TENSOR_CORES_OVER_FP32,
    label=lambda shape: _label(shape, f"alpha={shape['alpha']:g}, beta={shape['beta']:g}"),
    description=("C[i][j] = alpha * (sum over k < K of A[i][k] * B[j][k]) + beta * C[i][j] for i < M, j < N: A is M x K "
                 "and B is N x K (C = alpha A B^T + beta C, as a linear layer multiplies by its weights), row-major, "
                 "in BF16; the products are summed in float on the tensor cores through WMMA's 16 x 16 x 16 BF16 "
                 "fragments, and C, read and written in place, is BF16. Where beta is 0, C is not read (it may hold "
                 "NaN); beta 1 adds a residual. Block (bx, by) computes the tile_m x tile_n tile of C at rows "
                 "by*tile_m.., columns bx*tile_n... Results are compared within BF16's rounding of C."),
)

# ------------------------------------------------------------------------------ 5. cp.async, leading dimensions


def _strided_inputs(shape, rng):
    """A (M x lda), B (K x ldb) with NaN past the product's columns (never read); C (M x ldc) holding NaN where
    the product goes (not read) and numbers past it, which must be left as they are."""
    M, N, K = mnk(shape)
    lda, ldb, ldc = K + int(shape["pad_a"]), N + int(shape["pad_b"]), N + int(shape["pad_c"])
    A, B, C = varied(rng, (M, lda), 0.3), varied(rng, (K, ldb), -0.2), varied(rng, (M, ldc), 1.0)
    A[:, K:], B[:, N:], C[:, :N] = np.nan, np.nan, np.nan
    return {"M": M, "N": N, "K": K, "A": A, "lda": lda, "B": B, "ldb": ldb, "C": C, "ldc": ldc}


def _strided(inputs, magnitudes: bool) -> np.ndarray:
    M, N, K = mnk(inputs)
    A, B, C = inputs["A"][:, :K], inputs["B"][:, :N], np.array(inputs["C"], np.float64)
    C[:, :N] = _product(np.abs(A), np.abs(B)) if magnitudes else _product(A, B)
    return np.abs(C) if magnitudes else C


_ASYNC_COPY = re.compile(r"\b(?:__pipeline_memcpy_async|memcpy_async)\s*\(")


def copies_asynchronously(source: str, kernel: str) -> str:
    """'' if the source (comments aside) calls cp.async's copy, else what the exercise asks for instead."""
    if _ASYNC_COPY.search(strip_comments(source)):
        return ""
    return (f"{kernel} must copy its tiles into shared memory with cp.async: call __pipeline_memcpy_async "
            f"(#include <cuda_pipeline.h>) to copy the next k-tile while this one is multiplied, and "
            f"__pipeline_commit / __pipeline_wait_prior to wait for it.")


def _strided_probe(shape, run) -> str:
    """Names a change to C past column N, and a read of A or B past the product's columns (the NaN the rows end with)."""
    inputs = _strided_inputs(shape, np.random.default_rng(0))
    N = int(shape["N"])
    after = np.asarray(run(inputs)["C"])
    if not np.array_equal(after[:, N:], inputs["C"][:, N:]):
        return ("The kernel changed elements of C past column N (the ldc - N that end each row), which belong to "
                "someone else: store only the product's N columns, rows ldc apart.")
    for name, length, step in (("A", "K", "lda"), ("B", "N", "ldb")):
        if nan_reaches(run, inputs, name, "C"):
            return (f"The kernel reads elements of {name} past column {length} (the {step} - {length} that end each row, "
                    f"NaN here): step from one row of {name} to the next by {step}.")
    return ""


def _strided_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    M, N = secret_mn(rng, launch, 128, most=1)
    pads = rng.integers(0, 6, size=3)
    return [{"M": M, "N": N, "K": int(rng.integers(2, 80)), "pad_a": int(pads[0]), "pad_b": int(pads[1]),
             "pad_c": int(pads[2])}]


# Visible: a whole tile with rows as long as the product's (the chapter's layout), rows longer by 1 to 4, lda and
# ldb multiples of 4 (16-byte copies) and not.  Hidden: 1 x 1 x 1, skinny products, one past a tile, an inner
# dimension of 1, primes, every leading dimension a multiple of 4 and not.
STRIDED_AXES = "M N K pad_a pad_b pad_c"
CP_ASYNC = _rung(
    sgemm.KERNELS["sgemm_warptile"], {"pad_a": 0, "pad_b": 0, "pad_c": 0}, "rows as long as the product's, in its default tiles",
    ((0.55, 1.0), (0.45, 0.75), (0.35, 0.5), (0.25, 0.25)), tile=128, threads=256,
    name="sgemm_cp_async",
    reductions=reducing("A", 1),
    title="A double-buffered cp.async tile loop, with leading dimensions",
    signature=("sgemm_cp_async(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, "
               "int ldc)"),
    inout=("C",),
    make_inputs=_strided_inputs,
    reference=lambda inputs: {"C": _strided(inputs, magnitudes=False)},
    error_scale=lambda inputs: {"C": _strided(inputs, magnitudes=True)},
    visible_shapes=shapes(STRIDED_AXES, ((128, 128, 64, 0, 0, 0), (100, 70, 33, 3, 2, 1), (64, 96, 40, 4, 4, 4),
                                         (1, 64, 17, 1, 0, 0))),
    hidden_shapes=shapes(STRIDED_AXES, ((1, 1, 1, 0, 1, 2), (257, 3, 20, 4, 1, 0), (3, 257, 9, 0, 3, 5),
                                        (129, 65, 36, 4, 4, 3), (64, 64, 1, 2, 0, 0), (33, 97, 131, 1, 4, 2))),
    secret_shapes=_strided_secret,
    source_check=copies_asynchronously,
    probe=_strided_probe,
    label=lambda shape: _label(shape, f"lda=K+{shape['pad_a']}, ldb=N+{shape['pad_b']}, ldc=N+{shape['pad_c']}"),
    description=("C[i][j] = sum over k < K of A[i][k] * B[k][j] for i < M, j < N, where A[i][k] is A[i*lda + k], B[k][j] "
                 "is B[k*ldb + j] and C[i][j] is C[i*ldc + j] (BLAS's leading dimensions: lda >= K, ldb >= N, ldc >= N; "
                 "the product is a block of larger matrices). C's elements past column N are left as they are, and "
                 "the product's are not read (they may hold NaN). The tiles are copied into shared memory with "
                 "cp.async (__pipeline_memcpy_async) in two stages: the next k-tile's copies are in flight while this "
                 "one is multiplied. A 16-byte copy needs a 16-byte aligned source (a leading dimension that is a "
                 "multiple of 4); 4-byte copies go anywhere. Block (bx, by) computes the tile_m x tile_n tile of C at "
                 "rows by*tile_m.., columns bx*tile_n... "),
)

EXERCISES = [REGISTER_TILES, FLOAT4, WARP_TILES, BF16_WMMA, CP_ASYNC]
