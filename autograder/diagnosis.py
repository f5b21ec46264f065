"""Naming what went wrong in a kernel's output, in words a student can act on.

Used by the grading child, for its own account of a case, and by the trusted
grader, which judges every case again from the arrays the child hands back
(:mod:`autograder.verdict`): a wrong element's pattern (never written, still
the input, only the last block, from the second grid-stride pass on, ...)
and a picture of where the wrong elements lie.
"""

from __future__ import annotations

import numpy as np

from .exercise import LaunchConfig

GUARD_FLOAT = np.float32(-7.0e33)  # an unlikely finite value a kernel would not write
GUARD_MAGNITUDE = 1.0e32  # outputs this large can only come from reading the guard
MAP_BINS_1D = 256
MAP_BINS_2D = 64
#: Small errors are said to look like rounding only when they reach this fraction of the rows that hold values (of
#: an output of at least ROWS_FOR_SPREAD such rows): rounding puts an error on every value computed.
ROUNDING_ROWS = 0.9
ROWS_FOR_SPREAD = 4
#: ... and when their correlation with the values stays below this (of at least VALUES_FOR_CORRELATION values).
PROPORTIONAL = 0.9
VALUES_FOR_CORRELATION = 32
#: What an Inf where the answer is finite comes from.
INF_HINT = ("Inf in the output where the answer is finite: an overflow (e.g. accumulating in half precision: float16 "
            "tops out at 65504) or a division by 0 (a sum or a count that stayed 0).")
#: float16's unit roundoff: one rounding to half precision moves a value by at most this fraction of it.
FLOAT16_UNIT_ROUNDOFF = 2.0 ** -11
#: Errors all of one sign on at least this many values are not rounding's, which takes either sign (six of one sign
#: by chance: 1 in 32), when each is beyond what one rounding could do.
SAME_SIGN_VALUES = 6


def error_map(bad: np.ndarray) -> dict | None:
    """Fraction of wrong elements per bin: a strip for 1-D outputs, a grid for 2-D ones."""
    if bad.size <= 1:
        return None
    if bad.ndim == 1:
        bins = min(MAP_BINS_1D, bad.size)
        edges = np.linspace(0, bad.size, bins + 1).astype(int)
        sums = np.add.reduceat(bad.astype(np.float64), edges[:-1])
        counts = np.diff(edges)
        return {"rows": [[round(float(v), 4) for v in sums / np.maximum(counts, 1)]], "shape": [int(bad.size)]}
    flat2 = bad.reshape(-1, bad.shape[-1])
    rows, cols = flat2.shape
    rb, cb = min(MAP_BINS_2D, rows), min(MAP_BINS_2D, cols)
    re_, ce = np.linspace(0, rows, rb + 1).astype(int), np.linspace(0, cols, cb + 1).astype(int)
    grid = np.add.reduceat(np.add.reduceat(flat2.astype(np.float64), re_[:-1], axis=0), ce[:-1], axis=1)
    grid /= np.maximum(np.outer(np.diff(re_), np.diff(ce)), 1)
    return {"rows": [[round(float(v), 4) for v in row] for row in grid], "shape": [int(s) for s in bad.shape]}


# ------------------------------------------------------------------ hints
def diagnose(
    cmp: dict,
    got: np.ndarray,
    expected: np.ndarray,
    before: np.ndarray | None,
    prefill: str | None,
    config: LaunchConfig,
    scale,
) -> str:
    """Name the pattern of the errors in words a student can act on."""
    bad = cmp["bad"]
    if not cmp["n_bad"]:
        return ""
    n = got.size
    exp = np.asarray(expected, dtype=np.float64).reshape(got.shape)
    got64 = got.astype(np.float64)
    block = config.block[0] * config.block[1] * config.block[2]
    threads = block * config.grid[0] * config.grid[1] * config.grid[2]
    if np.all(got64 == 0) and np.any(exp != 0):
        if prefill == "zeros":
            return ("The output is still 0, as the grader left it before the launch: the kernel never stored or added "
                    "its result (is the final write or atomicAdd reached, and by which thread?).")
        return "Every output value is 0: the kernel writes zeros, or nothing at all (check the store of the result)."
    bad_got = got64[bad]
    nan_bad = np.isnan(bad_got)
    if np.any(np.abs(bad_got[np.isfinite(bad_got)]) >= GUARD_MAGNITUDE):  # inf is an overflow, never the guard
        return (f"A value as large as the guard the grader places after every input ({float(GUARD_FLOAT):.0e}) reached "
                f"the output: the kernel read past the end of an input -- a missing or wrong bounds check (if (i < n)).")
    if before is not None and np.all(bad_got == before.astype(np.float64)[bad]):
        where = _where(bad, block, threads, n)
        return _sentence(f"{_elements(cmp['n_bad'])} never updated (still holding the input value){where}")
    if prefill == "nan" and np.all(nan_bad):
        where = _where(bad, block, threads, n) or _grid_axes_swapped(bad, config)
        return _sentence(f"{_elements(cmp['n_bad'])} never written (still holding the NaN the grader filled the output with){where}")
    if np.any(nan_bad):
        return ("NaN in the output where the answer is a number: a value was read before it was written -- an accumulator "
                "that is not initialised (float sum = 0.0f;), shared memory read before every thread stored to it, or an "
                "element read from past the end of an input.")
    if np.any(np.isinf(bad_got)):
        return INF_HINT
    where = _where(bad, block, threads, n)
    if where:
        return _sentence(f"Wrong values{where}")
    # Small errors everywhere: precision, not logic.
    err, tol = cmp["err"][bad], cmp["tol"][bad]
    s = np.broadcast_to(np.asarray(scale, dtype=np.float64), got.shape)[bad]
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_to_scale = np.nanmax(err / np.maximum(s, 1e-300)) if err.size else 0.0
    if rel_to_scale < 5e-3 and np.all(err <= 500 * tol):
        structured = _not_rounding(got64, exp, bad, rel_to_scale, np.broadcast_to(np.asarray(scale, dtype=np.float64), got.shape))
        if structured:
            return structured
        if got.size == 1:  # one value cannot show the spread of rounding, nor a formula's structure
            return (f"The error is small ({rel_to_scale:.1e} of the value's size), the size of float16 rounding (about "
                    f"5e-4) or of a formula slightly off -- one value cannot tell which: is some arithmetic or "
                    f"accumulation done in half precision, or a term of the formula off (left out, or rescaled "
                    f"wrongly)?")
        return (f"The errors are small (up to {rel_to_scale:.1e} of the values' size), the size of float16 rounding "
                "(about 5e-4): is some arithmetic or accumulation done in half precision, or with a fast, less exact intrinsic?")
    if got.size == 1:
        ratio = float(got64.ravel()[0] / exp.ravel()[0]) if exp.ravel()[0] else float("nan")
        if 0 < ratio < 1:
            return (f"The result is {ratio:.1%} of the right value: some elements, or some threads' partial sums, were "
                    f"not added (does every element of x reach a thread -- the loop bound, the grid-stride step, the "
                    f"grid size? does the tree reduction run down to stride 1?).")
        if ratio > 1:
            return (f"The result is {ratio:.2f} times the right value: some elements were added more than once (a "
                    f"stride that is too short, or partial sums added twice).")
    return ""


def _not_rounding(got: np.ndarray, expected: np.ndarray, bad: np.ndarray, rel_to_scale: float,
                  scale: np.ndarray) -> str:
    """The hint for small errors with a structure that rounding does not have, or '' when they may be rounding.

    Rounding to fewer bits (half precision, a fast intrinsic) puts an error of either sign on every value computed,
    whatever the value: it reaches every row, and it is not proportional to the values.  A slightly wrong formula
    (a divisor off by one, a term left out, an epsilon in the wrong place) is off in the rows where that term
    matters, or by the same fraction of every value, or all one way by more than a rounding."""
    small = f"The errors are small (up to {rel_to_scale:.1e} of the values' size) but not spread like rounding"
    if got.ndim >= 2:
        rows_bad = np.any(bad.reshape(-1, got.shape[-1]), axis=1)
        rows_valued = np.any(expected.reshape(-1, got.shape[-1]) != 0, axis=1)
        valued, wrong = int(rows_valued.sum()), int(rows_bad.sum())
        if valued >= ROWS_FOR_SPREAD and wrong < ROUNDING_ROWS * valued:
            return (f"{small}: they lie in {wrong} of the {valued} rows, where rounding would reach every row. A "
                    f"term of the formula goes wrong, or matters, in those rows, not the precision -- what sets them "
                    f"apart from the others (their values, their mean or spread)?")
    finite = np.isfinite(got) & np.isfinite(expected)
    if np.count_nonzero(finite) >= VALUES_FOR_CORRELATION:
        error, value = (got - expected)[finite], expected[finite]
        if error.std() > 0 and value.std() > 0:
            correlation = float(np.corrcoef(value, error)[0, 1])
            if abs(correlation) >= PROPORTIONAL:
                way = "too large" if correlation > 0 else "too small"
                return (f"{small}: they are proportional to the values (correlation {correlation:+.2f}), which rounding "
                        f"errors never are -- the values come out {way} by about the same fraction: a factor, a "
                        f"divisor or a normalisation in the formula is slightly off, not the precision.")
    errors = (got - expected)[bad]
    if (errors.size >= SAME_SIGN_VALUES and (np.all(errors > 0) or np.all(errors < 0))
            and np.all(np.abs(errors) > FLOAT16_UNIT_ROUNDOFF * scale[bad])):
        way = "too large" if errors[0] > 0 else "too small"
        return (f"{small}: all {errors.size} wrong values are {way}, each by more than one float16 rounding could "
                f"move it, where rounding errors take either sign -- a term of the formula is off (a sum divided by "
                f"a part of itself, a part left out or not rescaled), not the precision.")
    return ""


def _sentence(text: str) -> str:
    return text if text.endswith(("?", ".")) else text + "."


def _elements(count: int) -> str:
    return "1 element was" if count == 1 else f"{count} elements were"


def _grid_axes_swapped(bad: np.ndarray, config: LaunchConfig) -> str:
    """Where a launch lays a thread per element of a 2-D output, x along its columns, and the elements left unwritten
    are exactly those outside the rows its x covers and the columns its y covers (a kernel taking its row from x and
    its column from y), those words; else ''."""
    if bad.ndim != 2 or config.grid[2] != 1 or config.block[2] != 1:
        return ""
    along_x, along_y = config.grid[0] * config.block[0], config.grid[1] * config.block[1]
    if along_x < bad.shape[1] or along_y < bad.shape[0]:
        return ""  # not a thread per element with x along the columns: the words would not hold
    rows, cols = np.indices(bad.shape)
    swapped = ~((rows < along_x) & (cols < along_y))
    if not np.any(swapped) or not np.array_equal(bad, swapped):
        return ""
    return (f", and they are exactly those outside rows < {along_x} (grid x block along x) and columns < {along_y} "
            f"(along y): the kernel takes its row from the x index and its column from y, where the launch lays x "
            f"along the columns -- are x and y swapped in the index computation?")


def _where(bad: np.ndarray, block: int, threads: int, n: int) -> str:
    """Where the wrong elements of a 1-D output lie, in terms of blocks and grid-stride passes."""
    if bad.ndim != 1:
        return _past_one_pass(bad, threads)
    if n < 2:
        return ""
    idx = np.flatnonzero(bad)
    if idx.size == 0:
        return ""
    if n > block and n % block and idx.min() >= (n // block) * block:
        return (f", only in the last, partial block (elements {idx.min()}..{idx.max()} of {n}; n is not a multiple of "
                f"the block size {block}): a missing or wrong bounds check (if (i < n))")
    k = int(idx.min())
    if k > 0 and idx.size >= 0.99 * (n - k):  # (nearly) every element from k on is wrong, every one before it right
        if k == threads:
            return _one_pass_only(f"index {k}", threads)
        if k == block and threads > block:
            return (f", every element from index {k} = blockDim.x on, and none before it: those elements were "
                    f"processed by several blocks -- the grid-stride step must be the whole grid, "
                    f"i += blockDim.x * gridDim.x, not one block (i += blockDim.x)")
        return (f", every element from index {k} on, and none before it: does the kernel stop at a fixed size "
                f"(a constant, a limit) instead of n?")
    if threads < n and k >= threads:
        # Skipped or doubled elements after the first pass only: a wrong grid-stride step.
        return (f", only from the second grid-stride pass on (none among the first {threads} = grid x block "
                f"elements): the grid-stride step (i += blockDim.x * gridDim.x) or the loop condition is off")
    if idx.min() >= n - max(block, 1) and n > block:
        return f", only at the end of the array (elements {idx.min()}..{idx.max()} of {n}): a bounds check at the end"
    if block > 1:
        lanes = idx % block
        if np.all((lanes == 0) | (lanes == block - 1)):
            return (", only at the first or last thread of blocks (block edges): an off-by-one in the index, "
                    "or a bounds check at tile/block edges")
    return ""


def _one_pass_only(first: str, threads: int) -> str:
    return (f", every element from {first} on (grid x block = {threads} threads, so each thread handled one "
            f"element): the kernel covers one pass of the grid only -- use a grid-stride loop "
            f"(i += blockDim.x * gridDim.x) so any grid covers any n")


def _past_one_pass(bad: np.ndarray, threads: int) -> str:
    """For an output of several axes: every element wrong from flat index ``threads`` (the grid's threads) on, in
    the order of its row-major flat index, and none before -- one element per thread, one pass of the grid."""
    idx = np.flatnonzero(bad)
    if idx.size == 0 or threads < 2 or int(idx.min()) != threads or idx.size < 0.99 * (bad.size - threads):
        return ""
    return _one_pass_only(f"flat (row-major) index {threads}", threads)
