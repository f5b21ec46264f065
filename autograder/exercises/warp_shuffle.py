"""Exercises of the chapter "CUDA from Python", its second assignment: a block reduction by warp shuffles.

``sum_of_squares_shuffle``: the sum of squares of a vector (the squared L2 norm, BLAS's ``snrm2`` before its
square root), each block reducing its grid-stride share with ``__shfl_down_sync`` inside each warp and one
shared slot per warp, then one ``atomicAdd`` per block.  The chapter prints the sum by warp shuffles; the
exercise asks for another reduction, over inputs of both signs, and its source must shuffle (a shared-memory
tree earns nothing).

Where every x is 0 or 1, x * x = x and the chapter's ``reduce_sum_warp_shuffle`` computes the same: the grader
times it there (``ReferenceKernel.solves``).  Speed is banded by fractions of the memory-bandwidth bound (every
float read once at the card's peak bandwidth): the reference's fraction of that bound is recorded
(:data:`FRACTION_OF_BANDWIDTH`), so a band of 85 % of the bound is a speed-up of 0.85 / 0.727 over it.  Sizes
and the per-student secret size are chapter 1's (:mod:`autograder.exercises.cuda_from_python`).
"""

from __future__ import annotations

import re

import numpy as np

from kernels.basics import reduction
from kernels.runtime.signature import strip_comments

from ..exercise import Exercise, LaunchKey, ReferenceKernel, reducing
from ._parts import TREE_SUM_RTOL, grid_key, one_dimensional_launch, one_sign_sum_scale, sum_terms
from .cuda_from_python import _past_one_pass, _secret_sizes, _sum_probe

REFERENCE = reduction.KERNELS["reduce_sum_warp_shuffle"]

#: The fraction of the memory-bandwidth bound (bytes read over the peak bandwidth) the reference reaches on one
#: GPU in one run: reduce_sum_warp_shuffle at n = 2**26 on an H100, benchmarks/results/cuda_from_python.json
#: (percent_of_peak_bandwidth).  tests/test_exercises.py checks it against that file.
FRACTION_OF_BANDWIDTH = {"reduce_sum_warp_shuffle": 0.727}

#: (fraction of the bandwidth bound, share of the speed points), best first: the chapter's shuffles as printed
#: reach about 72 %; the last bands ask for what its vectorised version does (float4 loads, several in flight).
BOUND_BANDS = ((0.85, 1.0), (0.70, 0.75), (0.55, 0.5), (0.35, 0.25))


def bands_of_bound(kernel: str, bands) -> tuple[tuple[float, float], ...]:
    """Speed bands given as (fraction of the bandwidth bound, share of the speed points), as the grader takes
    them: (speed-up over ``kernel``, the exercise's reference, share)."""
    return tuple((round(fraction / FRACTION_OF_BANDWIDTH[kernel], 3), share) for fraction, share in bands)


SPEED_BANDS = bands_of_bound(REFERENCE.kernel, BOUND_BANDS)


def _n(shape) -> int:
    return int(shape["n"])


def _inputs(shape, rng):
    """Values of both signs whose squares are terms no approximation survives (``_parts.sum_terms``: a widely
    spread background and a few large terms at random places); zeros and ones where the shape says ``binary`` (the
    timing shape, where a sampled sum of about n / 2 ones misses by far more than the tolerance too)."""
    n = _n(shape)
    if shape.get("binary"):
        return {"x": rng.integers(0, 2, n).astype(np.float32), "out": None, "n": n}
    terms = sum_terms(rng, 1, n)[0].astype(np.float64)
    x = (np.sign(terms) * np.sqrt(np.abs(terms))).astype(np.float32)
    return {"x": x, "out": None, "n": n}


def _reference(inputs):
    x = inputs["x"].astype(np.float64)
    return {"out": np.array([float(np.dot(x, x))])}


def _scale(inputs):
    # A bound of the rounding of a sum of squares, terms of one sign, in any order a correct kernel uses; one that
    # skips or samples a share of the terms, or rounds through float16, is not within it.
    x = inputs["x"].astype(np.float64)
    return {"out": np.array([one_sign_sum_scale(x * x)])}


def _label(shape) -> str:
    return f"n={_n(shape)}" + (", x in {0, 1}" if shape.get("binary") else "")


_SHUFFLE = re.compile(r"\b__shfl(?:_down|_xor|_up)?_sync\s*\(|\.shfl(?:_down|_xor|_up)?\s*\(")


def shuffles(source: str, kernel: str) -> str:
    """'' if the source (comments aside) exchanges values between lanes with a warp shuffle, else what the
    exercise asks for instead."""
    if _SHUFFLE.search(strip_comments(source)):
        return ""
    return (f"{kernel} must reduce inside each warp with warp shuffles: add the value __shfl_down_sync(0xffffffff, "
            f"v, offset) returns for offset = 16, 8, 4, 2, 1, so that lane 0 holds its warp's sum, then one shared "
            f"slot per warp and a last shuffle in the first warp (a shared-memory tree is the chapter's other kernel).")


def _speed_sentence() -> str:
    rung = FRACTION_OF_BANDWIDTH[REFERENCE.kernel]
    steps = "; ".join(f"{'all' if share == 1 else f'{share:g}'} of the speed points from {fraction:.0%} of the "
                      f"bound ({speedup:g} times the reference's speed)"
                      for (fraction, share), (speedup, _) in zip(BOUND_BANDS, SPEED_BANDS))
    return (f"Speed is compared with the chapter's {REFERENCE.kernel} on x of zeros and ones (where x * x = x); it "
            f"reads at {rung:.1%} of the memory-bandwidth bound there (an H100): {steps}.")


SUM_OF_SQUARES_SHUFFLE = Exercise(
    name="sum_of_squares_shuffle",
    title="Sum of squares, a block reduction by warp shuffles",
    signature="sum_of_squares_shuffle(const float* x, float* out, int n)",
    zeroed=("out",),
    make_inputs=_inputs,
    reference=_reference,
    error_scale=_scale,
    reductions=reducing("x", 0),
    rtol=TREE_SUM_RTOL,
    visible_shapes=({"n": 1}, {"n": 1000}, {"n": 4096}, {"n": 4099}, {"n": 16384}),
    # the largest hidden size stays small enough for the emulator; the timing size (2**26 + 3) is the large one
    hidden_shapes=({"n": 31}, {"n": 257}, {"n": 65536}, {"n": 100003}, {"n": 2**17 + 1}),
    secret_shapes=_secret_sizes,
    past_one_pass=_past_one_pass,
    launch_keys=(
        LaunchKey("block", 32, 1024, required=True, multiple_of=32,
                  help="threads per block, a multiple of 32: whole warps"),
        grid_key(_n, "n"),
    ),
    launch_config=one_dimensional_launch,
    correctness_points=5.0,
    speed_points=3.0,
    speed_bands=SPEED_BANDS,
    reference_kernel=ReferenceKernel(REFERENCE, solves={"binary": 1}),
    timing_shape={"n": 2**26 + 3, "binary": 1},
    label=_label,
    probe=_sum_probe,
    source_check=shuffles,
    description=("out[0] = x[0]^2 + x[1]^2 + ... + x[n-1]^2 over x of both signs (out is zero before the launch): each "
                 "thread sums the squares of a grid-stride share in a register, each warp adds its 32 sums by "
                 "__shfl_down_sync, lane 0 of each warp stores the warp's sum in one shared slot, and after a "
                 "__syncthreads() the first warp adds those slots by shuffles and its lane 0 adds the block's sum "
                 "with one atomicAdd. block a multiple of 32. " + _speed_sentence()),
)

EXERCISES = [SUM_OF_SQUARES_SHUFFLE]
