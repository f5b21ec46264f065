"""Grid-wide cooperative groups: which sources need a cooperative launch, and how large its grid may be.

A kernel that calls ``cooperative_groups::this_grid().sync()`` waits for every thread of the
grid, so every block must be resident on the device at once: it must be launched cooperatively
(``cuLaunchCooperativeKernel``) with no more blocks than fit.  Both backends launch a module that
uses ``this_grid()`` that way, and both refuse a grid that cannot be co-resident with one sentence
that says how large it may be.
"""

from __future__ import annotations

import re

from .errors import LaunchConfigError
from .signature import strip_comments

_GRID = re.compile(r"\bthis_grid\s*\(")


def grid_sync_line(source: str) -> int:
    """The line of the first ``this_grid()`` in ``source`` (0 if none): such a module is launched cooperatively."""
    m = _GRID.search(strip_comments(source))
    return strip_comments(source).count("\n", 0, m.start()) + 1 if m else 0


def check_co_resident(kernel: str, line: int, grid, block, max_blocks: int, device: str) -> None:
    """Refuse a cooperative grid larger than ``max_blocks`` (what ``device`` holds at once at this block size)."""
    blocks = grid[0] * grid[1] * grid[2]
    threads = block[0] * block[1] * block[2]
    if blocks > max_blocks:
        raise LaunchConfigError(
            f"{kernel}: the grid of {blocks} blocks of {threads} threads cannot be resident at once on {device}, "
            f"which grid.sync() (this_grid(), line {line}) needs: launch at most {max_blocks} blocks of this size "
            f"and cover the data with a grid-stride loop")
