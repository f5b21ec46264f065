"""Exercises of the chapter "CUDA from Python": SAXPY and a sum, on strided vectors.

Each asks for one step past the kernel the chapter prints, as the level-1 BLAS routines do:

* ``saxpy`` with increments, cuBLAS's full ``cublasSaxpy(n, alpha, x, incx, y, incy)``: element i of x is
  ``x[i * incx]`` and of y ``y[i * incy]`` (a column of a row-major matrix, one channel of interleaved data); the
  elements of y between them belong to someone else and stay as they are.
* ``reduce_sum`` along another axis: the sum of n elements of x ``incx`` apart, a column of a row-major matrix.

Where the increments are 1, the chapter's kernels compute the same, and there they are the speed references
(``ReferenceKernel.solves``).  SAXPY's inputs have a non-zero mean and values spread over two decades, so a kernel
that writes zeros or the mean cannot pass; the sum's terms are terms no approximation survives (a widely spread
background and, at random places, large terms: ``_parts.sum_terms``), judged against a bound of a tree sum's
rounding, and the elements between them are terms of the other columns, which a kernel that ignores the increment
adds.  Sizes include 1, primes, sizes that are no multiple of any block, one drawn per student from the grading
secret (never a multiple of the student's own block) and a large one.
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

PROBE_CHUNK = 2048  # float16 adds integers exactly up to 2048: a chunk of ones sums exactly in any precision

# --------------------------------------------------------------------- SAXPY


def _strided_length(n: int, inc: int) -> int:
    """Elements of a vector of n elements inc apart (BLAS's 1 + (n - 1) * inc)."""
    return 1 + (n - 1) * inc if n else 0


def _saxpy_inputs(shape, rng):
    n, incx, incy = _n(shape), int(shape["incx"]), int(shape["incy"])
    alpha = np.float32(rng.uniform(0.5, 3.0) * rng.choice([-1.0, 1.0]))
    return {"n": n, "alpha": alpha, "x": varied(rng, _strided_length(n, incx), 1.0), "incx": incx,
            "y": varied(rng, _strided_length(n, incy), 2.0), "incy": incy}


def _saxpy_reference(inputs):
    n, incx, incy = inputs["n"], inputs["incx"], inputs["incy"]
    y = inputs["y"].astype(np.float64)  # the elements between y's strided ones stay as they are
    y[:n * incy:incy] += float(inputs["alpha"]) * inputs["x"][:n * incx:incx].astype(np.float64)
    return {"y": y}


def _saxpy_scale(inputs):
    # One or two roundings of numbers as large as |alpha x| and |y| (|y| alone between the strided elements).
    n, incx, incy = inputs["n"], inputs["incx"], inputs["incy"]
    scale = np.abs(inputs["y"].astype(np.float64))
    scale[:n * incy:incy] += np.abs(float(inputs["alpha"]) * inputs["x"][:n * incx:incx].astype(np.float64))
    return {"y": scale}


def _saxpy_shape(n: int, incx: int, incy: int) -> dict:
    return {"n": n, "incx": incx, "incy": incy}


def _saxpy_secret_sizes(rng: np.random.Generator, launch: dict) -> list[dict]:
    """As :func:`_secret_sizes`, with increments of 1 to 4 drawn for x and y (never both 1)."""
    (shape,) = _secret_sizes(rng, launch)
    incx = int(rng.integers(1, 5))
    return [_saxpy_shape(shape["n"], incx, int(rng.integers(2 if incx == 1 else 1, 5)))]


def _saxpy_past_one_pass(launch: dict) -> dict | None:
    shape = _past_one_pass(launch)
    return None if shape is None else _saxpy_shape(shape["n"], 2, 3)


def _saxpy_probe(shape, run) -> str:
    """Tells a write between y's strided elements, and x or y read without its increment, apart."""
    n, incx, incy = _n(shape), int(shape["incx"]), int(shape["incy"])
    if n < 2 or n > 8 * PROBE_CHUNK or (incx == 1 and incy == 1):
        return ""
    x = np.arange(1, _strided_length(n, incx) + 1, dtype=np.float32)  # every element of x told apart
    y = np.zeros(_strided_length(n, incy), np.float32)
    got = np.asarray(run({"n": n, "alpha": np.float32(1.0), "x": x, "incx": incx, "y": y.copy(), "incy": incy})["y"])
    between = np.ones(y.size, bool)
    between[::incy] = False
    if np.any(got[between] != 0):
        return (f"With incy = {incy} the kernel changed elements of y between y[i * incy] and y[(i + 1) * incy], "
                "which belong to someone else: write y[i * incy] only.")
    if incx > 1 and np.array_equal(got[:n * incy:incy][1:], x[1:n]):
        return f"y[i * incy] got alpha * x[i] + y[i * incy]: read x[i * incx] (incx = {incx}), not x[i]."
    return ""


SAXPY = Exercise(
    name="saxpy",
    title="SAXPY on strided vectors, with a grid-stride loop",
    signature="saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)",
    inout=("y",),
    make_inputs=_saxpy_inputs,
    reference=_saxpy_reference,
    error_scale=_saxpy_scale,
    rtol=1e-5,  # float32 with or without FMA is within ~1.2e-7; rounding through float16 is ~5e-4 off
    atol=1e-30,
    visible_shapes=(_saxpy_shape(31, 1, 1), _saxpy_shape(1000, 2, 1), _saxpy_shape(4096, 1, 3),
                    _saxpy_shape(4099, 3, 2), _saxpy_shape(16384, 1, 1)),
    hidden_shapes=(_saxpy_shape(1, 2, 2), _saxpy_shape(257, 1, 4), _saxpy_shape(65536, 2, 1),
                   _saxpy_shape(1000003, 1, 2), _saxpy_shape(2**20 + 1, 3, 3)),
    secret_shapes=_saxpy_secret_sizes,
    past_one_pass=_saxpy_past_one_pass,
    launch_keys=(BLOCK_REQUIRED, GRID),
    launch_config=one_dimensional_launch,
    correctness_points=6.0,
    speed_points=2.0,
    reference_kernel=ReferenceKernel(SAXPY_REFERENCE, arg_order=("n", "alpha", "x", "y"),
                                     solves={"incx": 1, "incy": 1}),
    timing_shape=_saxpy_shape(2**25 + 3, 1, 1),
    probe=_saxpy_probe,
    description=("y[i * incy] = alpha * x[i * incx] + y[i * incy] for every i < n, with any grid (a grid-stride "
                 "loop); x and y are n elements incx and incy apart (increments of 1 or more, as cuBLAS's "
                 "cublasSaxpy takes them), and the elements of y between y's strided ones stay as they are. Speed "
                 "is compared with the chapter's saxpy_grid_stride at incx = incy = 1."),
)

# ---------------------------------------------------------------- reduce_sum


def _sum_shape(n: int, incx: int) -> dict:
    return {"n": n, "incx": incx}


def _sum_inputs(shape, rng):
    """The n terms of the sum, ``incx`` apart in x (``_parts.sum_terms``: terms no approximation survives); the
    elements between them are terms of other sums (other columns of the matrix), drawn alike."""
    n, incx = _n(shape), int(shape["incx"])
    terms = sum_terms(rng, 1, n)[0]
    if incx == 1:
        return {"x": terms, "incx": incx, "out": None, "n": n}
    x = sum_terms(rng, 1, _strided_length(n, incx))[0]
    x[::incx] = terms
    return {"x": x, "incx": incx, "out": None, "n": n}


def summed_terms(inputs) -> np.ndarray:
    """The terms reduce_sum adds: the n elements of x, incx apart."""
    return np.asarray(inputs["x"])[:inputs["n"] * inputs["incx"]:inputs["incx"]]


def _sum_reference(inputs):
    return {"out": np.array([SUM_REFERENCE.reference(summed_terms(inputs))])}


def _sum_scale(inputs):
    # A bound of a tree sum's rounding: a float32 sum in any order (even one atomicAdd per element) stays well
    # inside it on these terms, a sum that skips or samples any share of them does not (see sum_terms).
    return {"out": np.array([tree_sum_scale(summed_terms(inputs))])}


def _sum_label(shape) -> str:
    return f"n={_n(shape)}, incx={int(shape['incx'])}"


def _sum_secret_sizes(rng: np.random.Generator, launch: dict) -> list[dict]:
    """As :func:`_secret_sizes`, with an increment of 2 to 4."""
    (shape,) = _secret_sizes(rng, launch)
    return [_sum_shape(shape["n"], int(rng.integers(2, 5)))]


def _sum_past_one_pass(launch: dict) -> dict | None:
    shape = _past_one_pass(launch)
    return None if shape is None else _sum_shape(shape["n"], 2)



def sum_probe(lay_out, output: str = "out"):
    """A probe of a sum of n terms: ``lay_out(shape, terms)`` gives the kernel's inputs that make ``terms`` (n
    floats) the terms it must add into ``output[0]``.  Sums ones, 2048 at a time: tells elements missed or added
    twice, and a tree stopped early, apart from lost precision."""

    def probe(shape, run) -> str:
        n = _n(shape)
        if n > 8 * PROBE_CHUNK:
            return ""

        def summed(terms) -> float:
            return float(run(lay_out(shape, terms))[output][0])

        for start in range(0, n, PROBE_CHUNK):
            stop = min(n, start + PROBE_CHUNK)
            x = np.zeros(n, np.float32)
            x[start:stop] = 1.0
            got = summed(x)
            want = stop - start
            if got == want:
                continue
            where = f"With x[{start}:{stop}] set to ones (zeros elsewhere) the kernel returns {got:g}, not {want}"
            if not np.isfinite(got) or abs(got) > 1e30:
                return (f"{where}: it reads values from outside x (past its end, where the grader keeps a guard, or "
                        f"uninitialised memory): check the bounds check (if (i < n)) and that every value added was "
                        f"written.")
            if got.is_integer() and 0 <= got < want:
                short = _tree_levels_missing(start, stop, got, n, summed)
                if short:
                    return f"{where}; {short}"
                missed = f"{want - got:.0f} of those elements {'was' if want - got == 1 else 'were'} not added"
                return (f"{where}: {missed}. Check the loop bound, the grid-stride "
                        f"step (i += blockDim.x * gridDim.x) and that the grid covers every element.")
            if got.is_integer() and got > want:
                return (f"{where}: {got - want:.0f} elements were added more than once (a stride that is too short, "
                        f"or partial sums added twice).")
            return f"{where}."
        return ("Summing ones shows every element added exactly once, so the error on the test values comes from lost "
                "precision: partial sums rounded to float16 (half precision) or a less exact operation.")

    return probe


def _tree_levels_missing(start: int, stop: int, got: float, n: int, summed) -> str:
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
        if summed(x) != 0:
            return ""
        steps = "one step" if levels == 1 else f"{levels} steps"
        last = ("its last step, stride 1, is missing" if levels == 1 else
                f"its last {levels} steps, strides {', '.join(str(2**k) for k in reversed(range(levels)))}, are missing")
        return (f"with ones only where i % {every} != 0 it returns 0. Only the partial sums of the threads whose "
                f"threadIdx.x is a multiple of {every} reach the result: the tree reduction stops {steps} early "
                f"({last}), so each block adds only part of its partial sums. Run the tree down to stride 1 "
                f"(loop while stride > 0, not stride > {2**levels // 2}).")
    return ""


def _strided_sum_inputs(shape, terms, between: float = 0.0) -> dict:
    """reduce_sum's inputs whose terms are ``terms``, ``between`` at the elements of x between them."""
    n, incx = _n(shape), int(shape["incx"])
    x = np.full(_strided_length(n, incx), between, np.float32)
    x[::incx] = terms
    return {"x": x, "incx": incx, "out": None, "n": n}


_strided_sum_probe = sum_probe(_strided_sum_inputs)


def _sum_probe(shape, run) -> str:
    """Ones only between x's strided elements first (a kernel that reads x[i] adds some of them), then the sum's own
    probe (:func:`sum_probe`)."""
    n, incx = _n(shape), int(shape["incx"])
    if 2 <= n <= 8 * PROBE_CHUNK and incx > 1:
        got = float(run(_strided_sum_inputs(shape, np.zeros(n, np.float32), between=1.0))["out"][0])
        if got != 0:
            return (f"With ones only between x's strided elements (x[i * incx] = 0, incx = {incx}) the kernel returns "
                    f"{got:g}, not 0: it adds elements of x that are not in the sum. Element i of the vector is "
                    f"x[i * incx]: read x[i * incx], not x[i].")
    return _strided_sum_probe(shape, run)


REDUCE_SUM = Exercise(
    name="reduce_sum",
    title="Sum of a strided vector (a column of a matrix)",
    signature="reduce_sum(const float* x, int incx, float* out, int n)",
    zeroed=("out",),
    make_inputs=_sum_inputs,
    reference=_sum_reference,
    error_scale=_sum_scale,
    visible_shapes=(_sum_shape(1, 1), _sum_shape(1000, 2), _sum_shape(4096, 1), _sum_shape(4099, 3),
                    _sum_shape(16384, 1)),
    hidden_shapes=(_sum_shape(31, 4), _sum_shape(257, 1), _sum_shape(65536, 2), _sum_shape(1000003, 1),
                   _sum_shape(2**20 + 1, 3)),
    secret_shapes=_sum_secret_sizes,
    past_one_pass=_sum_past_one_pass,
    launch_keys=(
        BLOCK_REQUIRED,
        GRID,
        LaunchKey("shared", 0, 227 * 1024, default=lambda shape, launch: 4 * launch["block"],
                  help="bytes of dynamic shared memory per block; default block * 4"),
    ),
    launch_config=one_dimensional_launch,
    correctness_points=8.0,
    speed_points=4.0,
    reference_kernel=ReferenceKernel(SUM_REFERENCE, arg_order=("x", "out", "n"), solves={"incx": 1}),
    timing_shape=_sum_shape(2**26 + 3, 1),
    label=_sum_label,
    description=("out[0] = x[0] + x[incx] + x[2 * incx] + ... + x[(n - 1) * incx], the sum of n elements incx apart "
                 "(a column of a row-major matrix with incx columns; increments of 1 or more), over terms of both "
                 "signs (out is zero before the launch); atomicAdd of per-block partial sums is allowed. Speed is "
                 "compared with the chapter's reduce_sum_warp_shuffle at incx = 1."),
    probe=_sum_probe,
    rtol=TREE_SUM_RTOL,
    reductions=reducing("x", 0),
)

EXERCISES = [SAXPY, REDUCE_SUM]
