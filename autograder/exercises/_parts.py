"""What the exercises of several chapters declare alike.

* the launch keys of a one-dimensional launch (``block``, ``grid`` with a default of one thread per
  element, or one warp per row, ``shared``) and that launch;
* shapes written as rows of sizes under named axes;
* inputs drawn for tensors laid out over named axes.
"""

from __future__ import annotations

from collections.abc import Callable

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
