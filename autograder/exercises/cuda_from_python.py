"""Exercises of the chapter "CUDA from Python": SAXPY with a grid-stride loop, and a sum.

SAXPY's inputs have a non-zero mean and values spread over two decades, so a
kernel that writes zeros or the mean cannot pass; the sum's are terms no
approximation survives (a background of mean zero and, at random places, large
terms of random sign: ``_parts.sum_terms``), judged against a bound of a tree
sum's rounding.  Sizes include 1, primes, sizes that are no multiple of any
block, one drawn per student from the grading secret (never a multiple of the
student's own block) and a large one.
"""

from __future__ import annotations

import numpy as np

from kernels.basics import reduction, saxpy

from ..exercise import Exercise, LaunchKey, ReferenceKernel, reducing, varied as _varied
from ..secret_sizes import size_avoiding
from ._parts import BLOCK_REQUIRED, TREE_SUM_RTOL, grid_key, one_dimensional_launch, sum_terms, tree_sum_scale

SAXPY_REFERENCE = saxpy.KERNELS["saxpy_grid_stride"]
SUM_REFERENCE = reduction.KERNELS["reduce_sum_warp_shuffle"]

def varied(rng: np.random.Generator, n: int, mean: float) -> np.ndarray:
    return _varied(rng, n, mean, decades=2.0)  # a scale over 0.1 .. 10


def _n(shape) -> int:
    return int(shape["n"])


def _secret_sizes(rng: np.random.Generator, launch: dict) -> list[dict]:
    """One size per student that is not a multiple of their block (nor of 32), from a range no block changes."""
    return [{"n": size_avoiding(rng, 2_000, 60_000, int(launch.get("block", 256)), 32)}]


#: Above this, the size past one pass is left to the hidden sizes (1000003, 2**20 + 1): check() stays quick.
PAST_ONE_PASS_MAX = 2**19


def _past_one_pass(launch: dict) -> dict | None:
    """n just past one pass of the student's fixed grid (half a block more, odd): one element per thread is not enough."""
    if "grid" not in launch:
        return None  # the default grid, ceil(n / block), covers every n in one pass
    block = int(launch["block"])
    n = int(launch["grid"]) * block + block // 2 + 1
    return {"n": n} if n <= PAST_ONE_PASS_MAX else None


GRID = grid_key(_n, "n")

# --------------------------------------------------------------------- SAXPY


def _saxpy_inputs(shape, rng):
    n = _n(shape)
    alpha = np.float32(rng.uniform(0.5, 3.0) * rng.choice([-1.0, 1.0]))
    return {"n": n, "alpha": alpha, "x": varied(rng, n, 1.0), "y": varied(rng, n, 2.0)}


def _saxpy_reference(inputs):
    x = inputs["x"].astype(np.float64)
    y = inputs["y"].astype(np.float64)
    return {"y": float(inputs["alpha"]) * x + y}


def _saxpy_scale(inputs):
    # One or two roundings of numbers as large as |alpha x| and |y|.
    return {"y": np.abs(float(inputs["alpha"]) * inputs["x"].astype(np.float64)) + np.abs(inputs["y"].astype(np.float64))}


SAXPY = Exercise(
    name="saxpy",
    title="SAXPY with a grid-stride loop",
    signature="saxpy(int n, float alpha, const float* x, float* y)",
    inout=("y",),
    make_inputs=_saxpy_inputs,
    reference=_saxpy_reference,
    error_scale=_saxpy_scale,
    rtol=1e-5,  # float32 with or without FMA is within ~1.2e-7; rounding through float16 is ~5e-4 off
    atol=1e-30,
    visible_shapes=({"n": 31}, {"n": 1000}, {"n": 4096}, {"n": 4099}, {"n": 16384}),
    hidden_shapes=({"n": 1}, {"n": 257}, {"n": 65536}, {"n": 1000003}, {"n": 2**20 + 1}),
    secret_shapes=_secret_sizes,
    past_one_pass=_past_one_pass,
    launch_keys=(BLOCK_REQUIRED, GRID),
    launch_config=one_dimensional_launch,
    correctness_points=6.0,
    speed_points=2.0,
    reference_kernel=ReferenceKernel(SAXPY_REFERENCE),
    timing_shape={"n": 2**25 + 3},
    description="y[i] = alpha * x[i] + y[i] for every i < n, with any grid (a grid-stride loop).",
)

# ---------------------------------------------------------------- reduce_sum


def _sum_inputs(shape, rng):
    n = _n(shape)
    return {"x": sum_terms(rng, 1, n)[0], "out": None, "n": n}


def _sum_reference(inputs):
    return {"out": np.array([SUM_REFERENCE.reference(inputs["x"])])}


def _sum_scale(inputs):
    # A bound of a tree sum's rounding: a float32 sum in any order (even one atomicAdd per element) stays well
    # inside it on these terms, a sum that skips or samples any share of them does not (see sum_terms).
    return {"out": np.array([tree_sum_scale(inputs["x"])])}


PROBE_CHUNK = 2048  # float16 adds integers exactly up to 2048: a chunk of ones sums exactly in any precision


def _sum_probe(shape, run) -> str:
    """Sum ones, 2048 at a time: tells elements missed or added twice apart from lost precision."""
    n = _n(shape)
    if n > 8 * PROBE_CHUNK:
        return ""
    for start in range(0, n, PROBE_CHUNK):
        stop = min(n, start + PROBE_CHUNK)
        x = np.zeros(n, np.float32)
        x[start:stop] = 1.0
        got = float(run({"x": x, "out": None, "n": n})["out"][0])
        want = stop - start
        if got == want:
            continue
        where = f"With x[{start}:{stop}] set to ones (zeros elsewhere) the kernel returns {got:g}, not {want}"
        if not np.isfinite(got) or abs(got) > 1e30:
            return (f"{where}: it reads values from outside x (past its end, where the grader keeps a guard, or "
                    f"uninitialised memory): check the bounds check (if (i < n)) and that every value added was written.")
        if got.is_integer() and 0 <= got < want:
            short = _tree_levels_missing(start, stop, got, n, run)
            if short:
                return f"{where}; {short}"
            missed = f"{want - got:.0f} of those elements {'was' if want - got == 1 else 'were'} not added"
            return (f"{where}: {missed}. Check the loop bound, the grid-stride "
                    f"step (i += blockDim.x * gridDim.x) and that the grid covers every element.")
        if got.is_integer() and got > want:
            return (f"{where}: {got - want:.0f} elements were added more than once (a stride that is too short, or "
                    f"partial sums added twice).")
        return f"{where}."
    return ("Summing ones shows every element added exactly once, so the error on the test values comes from lost "
            "precision: partial sums rounded to float16 (half precision) or a less exact operation.")


def _tree_levels_missing(start: int, stop: int, got: float, n: int, run) -> str:
    """What a tree reduction that stops ``levels`` steps early shows, if that is what summing ones showed.

    Element i reaches thread i % blockDim.x of some block (in every pass of a grid-stride loop over a power-of-two
    block), and a tree whose last ``levels`` steps are missing adds only the partial sums of the threads whose index
    is a multiple of 2**levels.  If ``got`` counts exactly the elements at those indices of x[start:stop], one more
    launch, with ones at every other index, tells that cause from a loop bound that happens to lose as many: it
    must add nothing.
    """
    index = np.arange(start, stop)
    for levels in range(1, PROBE_CHUNK.bit_length()):
        every = 2**levels
        if np.count_nonzero(index % every == 0) != got:
            continue
        x = np.zeros(n, np.float32)
        x[start:stop][index % every != 0] = 1.0
        if float(run({"x": x, "out": None, "n": n})["out"][0]) != 0:
            return ""
        steps = "one step" if levels == 1 else f"{levels} steps"
        last = ("its last step, stride 1, is missing" if levels == 1 else
                f"its last {levels} steps, strides {', '.join(str(2**k) for k in reversed(range(levels)))}, are missing")
        return (f"with ones only where i % {every} != 0 it returns 0. Only the partial sums of the threads whose "
                f"threadIdx.x is a multiple of {every} reach the result: the tree reduction stops {steps} early "
                f"({last}), so each block adds only part of its partial sums. Run the tree down to stride 1 "
                f"(loop while stride > 0, not stride > {2**levels // 2}).")
    return ""


REDUCE_SUM = Exercise(
    name="reduce_sum",
    title="Sum of a vector",
    signature="reduce_sum(const float* x, float* out, int n)",
    zeroed=("out",),
    make_inputs=_sum_inputs,
    reference=_sum_reference,
    error_scale=_sum_scale,
    visible_shapes=({"n": 1}, {"n": 1000}, {"n": 4096}, {"n": 4099}, {"n": 16384}),
    hidden_shapes=({"n": 31}, {"n": 257}, {"n": 65536}, {"n": 1000003}, {"n": 2**20 + 1}),
    secret_shapes=_secret_sizes,
    past_one_pass=_past_one_pass,
    launch_keys=(
        BLOCK_REQUIRED,
        GRID,
        LaunchKey("shared", 0, 227 * 1024, default=lambda shape, launch: 4 * launch["block"],
                  help="bytes of dynamic shared memory per block; default block * 4"),
    ),
    launch_config=one_dimensional_launch,
    correctness_points=8.0,
    speed_points=4.0,
    reference_kernel=ReferenceKernel(SUM_REFERENCE),
    timing_shape={"n": 2**26 + 3},
    description="out[0] = sum of x[0..n) (out is zero before the launch); atomicAdd of per-block partial sums is allowed.",
    probe=_sum_probe,
    rtol=TREE_SUM_RTOL,
    reductions=reducing("x", 0),
)

EXERCISES = [SAXPY, REDUCE_SUM]
