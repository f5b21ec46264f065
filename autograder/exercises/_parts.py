"""What the exercises of several chapters declare alike.

* the launch keys of a one-dimensional launch (``block``, ``grid`` with a default of one thread per
  element, or one warp per row, ``shared``) and that launch;
* shapes written as rows of sizes under named axes;
* inputs drawn for tensors laid out over named axes;
* the terms of long sums that no approximation survives, and the tolerance of such a sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from kernels.runtime.versions import LaunchConfig

from ..exercise import LaunchKey, ceil_div, varied

#: ``block``, given by the student on the ``%%cuda`` line (the chapter's first exercises ask them to choose it).
BLOCK_REQUIRED = LaunchKey("block", 1, 1024, required=True, help="threads per block, 1..1024")
BLOCK_256 = LaunchKey("block", 1, 1024, default=256, help="threads per block, 1..1024; default 256")
SHARED = LaunchKey("shared", 0, 227 * 1024, default=0, help="bytes of dynamic shared memory per block; default 0")


def grid_key(count: Callable[[dict], int], what: str, per: str = "") -> LaunchKey:
    """``grid`` of a one-dimensional launch; by default enough blocks for one thread per ``count(shape)``
    items (``what`` says which, in the help a student reads; ``per`` adds what one thread does)."""
    return LaunchKey("grid", 1, 2**31 - 1, default=lambda shape, launch: ceil_div(count(shape), launch["block"]),
                     help=f"blocks in the grid; default ceil({what} / block){per}")


def warp_per_row_keys(rows: Callable[[dict], int], what: str) -> tuple[LaunchKey, LaunchKey]:
    """``block`` (whole warps, default 128) and ``grid``, by default enough blocks for one warp per row:
    ceil(rows(shape) / (block / 32)) (``what`` names the rows in the help a student reads)."""
    block = LaunchKey("block", 32, 1024, default=128, multiple_of=32,
                      help="threads per block, a multiple of 32: whole warps; default 128")
    grid = LaunchKey("grid", 1, 2**31 - 1, default=lambda shape, launch: ceil_div(32 * rows(shape), launch["block"]),
                     help=f"blocks in the grid; default ceil({what} / (block / 32)), a warp per row")
    return block, grid


def one_dimensional_launch(shape: dict, launch: dict) -> LaunchConfig:
    """``grid`` blocks of ``block`` threads, with ``shared`` bytes of dynamic shared memory where the exercise
    has that key (else none)."""
    return LaunchConfig(grid=(launch["grid"], 1, 1), block=(launch["block"], 1, 1), shared=launch.get("shared", 0))


def shapes(axes, rows) -> tuple[dict, ...]:
    """``shapes("M N K", [(32, 32, 32), ...])`` -> ``({"M": 32, "N": 32, "K": 32}, ...)``; the axes are
    named by a string of names or a sequence of them."""
    names = axes.split() if isinstance(axes, str) else tuple(axes)
    return tuple(dict(zip(names, row)) for row in rows)


def extent(layouts: dict, shape: dict, tensor: str) -> tuple[int, ...]:
    """The extent of ``tensor`` for ``shape``: ``layouts[tensor][0]`` names its axes, outermost first."""
    return tuple(int(shape[axis]) for axis in layouts[tensor][0])


def tensor_inputs(layouts: dict, operands: tuple[str, ...], output: str, scalars: Callable[[dict], dict]):
    """``make_inputs`` of an exercise that reads ``operands`` and writes ``output``: each operand drawn by
    :func:`~autograder.exercise.varied` around its mean (``layouts[name] = (axes, mean)``), in the order
    given, the output left to the grader, then the scalar arguments ``scalars(shape)``."""

    def make_inputs(shape, rng):
        drawn = {name: varied(rng, extent(layouts, shape, name), layouts[name][1]) for name in operands}
        return {**drawn, output: None, **scalars(shape)}

    return make_inputs


F32_EPS = float(np.finfo(np.float32).eps)
#: Large terms of a long sum, at most (see :func:`sum_terms`).
SUM_SPIKES = 16
#: The tolerance of a float32 sum, in units of a tree sum's rounding bound (see :func:`tree_sum_scale`): room for
#: a float32 sum of up to a million terms into one accumulator (one atomicAdd per element, at the hidden sizes),
#: which rounds further than a tree.
TREE_SUM_MARGIN = 16


def sum_terms(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """``rows`` x ``n`` float32 terms of sums that no approximation survives.

    A background spread widely around a small positive mean (normal, times a scale spread over two decades) and,
    at random places, ``min(16, n // 16)`` (at least one) large positive terms of random size, together as large
    as the background.  A kernel that leaves out a share of the terms misses that share of the background's
    mean (and maybe a large term); one that samples and scales up cannot make up for the large terms it missed
    or counted twice, each far larger than the tolerance (:func:`tree_sum_scale`): with few of them, no share of
    them equals the share it scales by.  A correct float32 sum in any order stays well within the tolerance (one
    accumulator for tens of millions of terms stagnates, as it does on any data).  Measured at a million terms
    and at the timing size: skipping one term in 64 misses by 100 to 700 times the tolerance, skipping and
    scaling up by 180 to 490 times; a float32 sum of a million terms into one accumulator is within 0.1 of it."""
    out = varied(rng, (rows, n), 0.5, decades=2.0, spread=1.0)
    spikes = min(SUM_SPIKES, max(1, n // 16))
    for row in out:
        magnitude = max(float(np.abs(row).sum(dtype=np.float64)) / spikes, 1.0)
        places = rng.choice(n, size=spikes, replace=False)
        row[places] = (magnitude * (0.5 + rng.random(spikes))).astype(np.float32)
    return out


#: The relative tolerance of a long sum, against :func:`tree_sum_scale`.
TREE_SUM_RTOL = TREE_SUM_MARGIN * F32_EPS


def tree_sum_scale(terms: np.ndarray) -> np.ndarray:
    """The error scale of sums of ``terms`` along its last axis: the rounding bound of a tree sum over eps,
    (ceil(log2 n) + 1) sum |x|, so that :data:`TREE_SUM_RTOL` times it is :data:`TREE_SUM_MARGIN` times that bound.
    A bound of the correct algorithm's rounding, not a widening with the size (a sum that reads a quarter of its
    terms and scales it up landed within a tolerance that grew with sqrt(n))."""
    n = max(1, np.shape(terms)[-1])
    return np.abs(np.asarray(terms)).sum(axis=-1, dtype=np.float64) * (math.ceil(math.log2(n)) + 1)
