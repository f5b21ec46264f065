"""What ``check()`` shows of a correct kernel's speed without a GPU: the emulator's profile of one launch.

On the CPU emulator, ``check()`` profiles the student's kernel on its largest visible case (the first
:data:`PROFILE_BLOCKS` blocks of the launch; :mod:`kernels.runtime.emulator.profiling` counts, and
:func:`kernels.tools.profiler.with_occupancy` adds what nvcc says of its registers): per source line, the
sectors each request to global memory touches, the bank conflicts of shared memory, the branches that
diverge within a warp, and the occupancy, with the hints they imply.  Grading never profiles.

The profile comes from the sandboxed child, where the student's code runs, so the grader takes it as
words, not figures it scores: it is kept only in visible mode, only if it reads back as a profile,
and cut to a size (:func:`checked_profile`).
"""

from __future__ import annotations

import contextlib
import math

from kernels.runtime.emulator import profiling
from kernels.tools.profiler import draw_profile, with_occupancy

#: blocks of the profiled launch that are counted (the first ones of the grid)
PROFILE_BLOCKS = 4
#: rows of a profile kept from the child (a kernel has a few dozen lines that touch memory)
MAX_ROWS = 200


def case_to_profile(cases: list[dict], wanted: bool) -> int | None:
    """The index of the visible case to profile (the largest), or None."""
    visible = [i for i, c in enumerate(cases) if c.get("visible")]
    if not wanted or not visible:
        return None

    def size(case: dict) -> int:
        return math.prod(int(v) for v in case["shape"].values() if isinstance(v, int) and not isinstance(v, bool))

    return max(visible, key=lambda i: size(cases[i]))


@contextlib.contextmanager
def profiling_case(on: bool):
    """Inside, the launches on the emulator are profiled when ``on``; yields their profiles' list."""
    if not on:
        yield []
        return
    with profiling.collecting(PROFILE_BLOCKS) as profiles:
        yield profiles


def profile_of(profiles: list, kernel: str) -> dict | None:
    """The first profile of ``kernel`` among a case's launches, with its occupancy, as plain data."""
    for p in profiles:
        if p.kernel == kernel:
            return with_occupancy(p).as_dict()
    return None


def checked_profile(reported) -> dict | None:
    """The child's profile if it reads back as one (rows cut to :data:`MAX_ROWS`), else None."""
    if not isinstance(reported, dict):
        return None
    try:
        profile = profiling.LaunchProfile.from_dict(reported)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    profile.memory = profile.memory[:MAX_ROWS]
    profile.branches = profile.branches[:MAX_ROWS]
    return profile.as_dict()


def show_profile(result, notebook: bool) -> None:
    """``check()``'s profile: an HTML table and the picture of sectors per request in a notebook, text otherwise."""
    if not getattr(result, "profile", None):
        return
    profile = profiling.LaunchProfile.from_dict(result.profile)
    if not notebook:
        print("\n" + profile.table())
        return
    from IPython.display import HTML, display

    display(HTML(profile._repr_html_()))
    fig = draw_profile(profile)
    if fig is not None:
        import matplotlib.pyplot as plt

        display(fig)
        plt.close(fig)
