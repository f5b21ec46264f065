"""Exercises of the chapter "CUDA from Python", its second assignment: a block reduction by warp shuffles.

``dot_shuffle``: the dot product of two vectors (BLAS's ``sdot``), each block reducing its grid-stride share of
the products with ``__shfl_down_sync`` inside each warp and one shared slot per warp, then one ``atomicAdd`` per
block.  The chapter prints the sum by warp shuffles; the exercise asks for a sum of products, and its source must
shuffle (a shared-memory tree earns nothing).

The products are terms no approximation survives (``_parts.sum_terms``: a widely spread background of both signs
and a few large terms at random places, each split into x and y), judged against a bound of a tree sum's rounding,
as the chapter's first sum is.  Where every y is 1, x . y is the sum of x and the chapter's
``reduce_sum_warp_shuffle`` computes it: the grader times that kernel there (``ReferenceKernel.solves``).  Speed
is banded by fractions of the exercise's memory-bandwidth bound (both vectors read once at the card's peak
bandwidth): the reference's fraction of its own bound (x alone) is recorded (:data:`FRACTION_OF_BANDWIDTH`), so a
band of 85 % of the bound is a speed-up of 0.85 / 2 / 0.727 over it.  Sizes and the per-student secret size are
chapter 1's (:mod:`autograder.exercises.cuda_from_python`).
"""

from __future__ import annotations

import re

import numpy as np

from kernels.basics import reduction
from kernels.runtime.signature import strip_comments

from ..exercise import Exercise, LaunchKey, Reduction, ReferenceKernel
from ._parts import TREE_SUM_RTOL, grid_key, one_dimensional_launch, sum_terms, tree_sum_scale
from .cuda_from_python import PROBE_CHUNK, _past_one_pass, _secret_sizes, sum_probe

REFERENCE = reduction.KERNELS["reduce_sum_warp_shuffle"]

#: The fraction of the memory-bandwidth bound (bytes read over the peak bandwidth) the reference reaches on one
#: GPU in one run: reduce_sum_warp_shuffle at n = 2**26 on an H100, 72.7 % of the peak
#: (benchmarks/results/cuda_from_python.json, percent_of_peak_bandwidth).  tests/test_exercises.py checks it
#: against that file.
FRACTION_OF_BANDWIDTH = {"reduce_sum_warp_shuffle": 0.727}

#: Bytes the reference reads per byte the exercise reads at the timing shape: x alone, against x and y.
REFERENCE_BYTES_SHARE = 0.5

#: (fraction of the bandwidth bound, share of the speed points), best first: the chapter's shuffles as printed
#: reach about 72 % of their bound; the first band asks for what its vectorised version does (float4 loads,
#: several in flight).
BOUND_BANDS = ((0.85, 1.0), (0.70, 0.75), (0.55, 0.5), (0.35, 0.25))


def bands_of_bound(kernel: str, bands, bytes_share: float = 1.0) -> tuple[tuple[float, float], ...]:
    """Speed bands given as (fraction of the exercise's bandwidth bound, share of the speed points), as the grader
    takes them: (speed-up over ``kernel``, the exercise's reference, share).  The reference reads ``bytes_share``
    of the exercise's bytes: a kernel at fraction f of its bound takes f / (bytes_share * reference's fraction) of
    the reference's time."""
    return tuple((round(fraction * bytes_share / FRACTION_OF_BANDWIDTH[kernel], 3), share)
                 for fraction, share in bands)


SPEED_BANDS = bands_of_bound(REFERENCE.kernel, BOUND_BANDS, REFERENCE_BYTES_SHARE)


def _n(shape) -> int:
    return int(shape["n"])


def _inputs(shape, rng):
    """x and y whose products are terms no approximation survives (``_parts.sum_terms``): y of both signs with
    magnitudes over two decades, x the term over y; where the shape says ``ones`` (the timing shape), y is all ones
    and x the terms themselves."""
    n = _n(shape)
    terms = sum_terms(rng, 1, n)[0]
    if shape.get("ones"):
        return {"x": terms, "y": np.ones(n, np.float32), "out": None, "n": n}
    y = (10.0 ** rng.uniform(-1.0, 1.0, n) * rng.choice([-1.0, 1.0], n)).astype(np.float32)
    x = (terms.astype(np.float64) / y).astype(np.float32)
    return {"x": x, "y": y, "out": None, "n": n}


def products(inputs) -> np.ndarray:
    """The terms of the dot product, x[i] * y[i], in float64 (exact: a product of two float32s)."""
    return inputs["x"].astype(np.float64) * inputs["y"].astype(np.float64)


def _reference(inputs):
    return {"out": np.array([float(products(inputs).sum())])}


def _scale(inputs):
    # A bound of a tree sum's rounding of the products: a float32 sum in any order stays well inside it (each
    # product rounds once more, by eps of itself), a sum that skips or samples a share of them does not.
    return {"out": np.array([tree_sum_scale(products(inputs))])}


def _label(shape) -> str:
    return f"n={_n(shape)}" + (", y all ones" if shape.get("ones") else "")


def _ones_inputs(shape, terms) -> dict:
    n = _n(shape)
    return {"x": np.asarray(terms, np.float32), "y": np.ones(n, np.float32), "out": None, "n": n}


_ones_probe = sum_probe(_ones_inputs)


def _probe(shape, run) -> str:
    """The sum's probe with y all ones (:func:`~autograder.exercises.cuda_from_python.sum_probe`), then x of ones
    against y of twos: a kernel that passes the first and returns the count here never multiplied by y."""
    found = _ones_probe(shape, run)
    if not found.startswith("Summing ones shows every element added exactly once"):
        return found
    n = min(_n(shape), PROBE_CHUNK)
    x = np.zeros(_n(shape), np.float32)
    x[:n] = 1.0
    got = float(run({"x": x, "y": np.full(_n(shape), 2.0, np.float32), "out": None, "n": _n(shape)})["out"][0])
    if got == n:
        return (f"With x[0:{n}] set to ones and every y to 2 the kernel returns {got:g}, not {2 * n}: it adds the "
                f"elements of x and never multiplies them by y's: each term is x[i] * y[i].")
    return found


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
    return (f"Speed is compared with the chapter's {REFERENCE.kernel} where every y is 1 (the sum of x), which reads "
            f"x alone at {rung:.1%} of the memory-bandwidth bound (an H100); the exercise's bound is both vectors read "
            f"once: {steps}.")


DOT_SHUFFLE = Exercise(
    name="dot_shuffle",
    title="Dot product, a block reduction by warp shuffles",
    signature="dot_shuffle(const float* x, const float* y, float* out, int n)",
    zeroed=("out",),
    make_inputs=_inputs,
    reference=_reference,
    error_scale=_scale,
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
    reference_kernel=ReferenceKernel(REFERENCE, arg_order=("x", "out", "n"), solves={"ones": 1}),
    timing_shape={"n": 2**26 + 3, "ones": 1},
    flops=lambda shape: 2.0 * _n(shape),
    bytes_moved=lambda shape: 8.0 * _n(shape) + 4.0,
    label=_label,
    probe=_probe,
    source_check=shuffles,
    rtol=TREE_SUM_RTOL,
    reductions=(Reduction((("x", (0,)), ("y", (0,)))),),
    description=("out[0] = x[0] * y[0] + x[1] * y[1] + ... + x[n-1] * y[n-1], BLAS's sdot (out is zero before the "
                 "launch): each thread sums the products of a grid-stride share in a register, each warp adds its 32 "
                 "sums by __shfl_down_sync, lane 0 of each warp stores the warp's sum in one shared slot, and after a "
                 "__syncthreads() the first warp adds those slots by shuffles and its lane 0 adds the block's sum "
                 "with one atomicAdd. block a multiple of 32. " + _speed_sentence()),
)

EXERCISES = [DOT_SHUFFLE]
