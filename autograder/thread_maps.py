"""``check()``'s thread maps: which thread read and which wrote each element, the student's beside the expected.

An exercise that declares a ``thread_map`` shape (the warm-up puzzles) is launched once more by ``check()``
in the grading child, on the CPU emulator, on that small shape, with every block recorded
(:func:`thread_map_data`, drawn from :mod:`kernels.tools.thread_maps`), whether the kernel passed or not:
for a failing kernel it is the most useful picture.  The map comes from the sandboxed child, next to the
student's code, so the grader keeps it only if it reads back as a map, within its limits
(:func:`checked_thread_map`); grading never records one.

The expected map is the instructor's solution's on the same launch (a puzzle fixes its launch), recorded
once into ``autograder/exercises/thread_maps.json`` by ``python -m autograder.thread_map_recording``
(from ``solutions/``, :mod:`autograder.thread_map_recording`) so that students, the book and ``check()`` draw it without the solution;
``tests/test_puzzles.py`` checks that the file is the solutions' maps as they are now.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from kernels.runtime.emulator.profiling import collecting
from kernels.runtime.errors import KernelError
from kernels.tools.thread_maps import ThreadMap, draw_side_by_side, side_by_side

from .exercise import Exercise, LaunchError
from .exercises import get_exercise

#: The expected maps: exercise name -> the solution's map (ThreadMap.as_dict) on the exercise's ``thread_map`` shape.
EXPECTED = Path(__file__).resolve().parent / "exercises" / "thread_maps.json"
#: The seed of the map's inputs (a map depends on them only where a kernel's accesses depend on its data).
MAP_SEED = 2026


def map_arguments(ex: Exercise, shape: dict) -> tuple[list, dict]:
    """(the kernel's arguments for ``shape``, outputs filled as grading fills them; the reference's outputs)."""
    inputs = ex.make_inputs(shape, np.random.default_rng(MAP_SEED))
    expected = ex.reference(inputs)
    args = []
    for arg, param in zip(ex.args, ex.declared_params):
        if arg.role == "scalar":
            args.append(param.dtype.type(inputs[arg.name]))
        elif arg.role == "out":
            fill = np.nan if param.dtype.kind == "f" and arg.init == "nan" else 0
            args.append(np.full(np.shape(expected[arg.name]), fill, param.dtype))
        else:
            args.append(np.array(inputs[arg.name], dtype=param.dtype))
    return args, expected


def thread_map_of(ex: Exercise, kernel, launch: dict) -> ThreadMap | None:
    """``kernel`` (a compiled kernel of the CPU emulator) launched on ``ex``'s map shape with the student's launch
    integers, every block recorded; a launch that fails its checks is mapped as far as it ran.  None where the
    exercise has no map shape, the launch integers do not fit it, or nothing was recorded."""
    if ex.thread_map is None:
        return None
    try:
        _, config = ex.resolve_launch(ex.thread_map, ex.validate_launch(launch))
    except LaunchError:
        return None
    args, _ = map_arguments(ex, ex.thread_map)
    with collecting(0, elements=True) as profiles:
        try:
            kernel(*args, grid=config.grid, block=config.block, shared=config.shared)
        except KernelError:
            pass  # a wrong kernel's map is the one its author most needs; the cases said what went wrong
    profile = next((p for p in profiles if p.elements is not None), None)
    if profile is None:
        return None
    return ThreadMap.from_profile(profile, names=[a.name for a in ex.args if a.role != "scalar"])


def wanted(ex: Exercise, request: dict, backend: str, failure) -> bool:
    """Whether the grading child records a thread map: check() (visible mode, asked for with the profile) on the
    emulator, for an exercise with a map shape, unless the kernel ran out of time (it would again)."""
    return (ex.thread_map is not None and request.get("mode") == "visible" and bool(request.get("profile"))
            and backend == "cpu" and getattr(failure, "status", "") != "timeout")


def thread_map_data(ex: Exercise, module, launch: dict) -> dict | None:
    """The student's map as plain data for the grader, or None; never raises (the map is extra to the check)."""
    try:
        tmap = thread_map_of(ex, module.function(ex.kernel), launch)
    except Exception:  # noqa: BLE001 - a map that cannot be drawn leaves the check as it is
        return None
    return tmap.as_dict() if tmap is not None else None


def checked_thread_map(reported) -> dict | None:
    """The child's map if it reads back as one within the limits of :class:`ThreadMap`, else None."""
    if reported is None:
        return None
    try:
        return ThreadMap.from_dict(reported).as_dict()
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


@functools.lru_cache(maxsize=1)
def _expected_maps() -> dict:
    try:
        return json.loads(EXPECTED.read_text())
    except (OSError, ValueError):
        return {}


def expected_map(exercise: str) -> ThreadMap | None:
    """The solution's map of ``exercise`` (None where none is recorded)."""
    data = _expected_maps().get(exercise)
    return ThreadMap.from_dict(data) if data else None


def show_thread_map(result, notebook: bool) -> None:
    """``check()``'s thread map: the expected map beside the student's, as a picture in a notebook, text otherwise."""
    if not getattr(result, "thread_map", None):
        return
    yours = ThreadMap.from_dict(result.thread_map)
    expected = expected_map(result.exercise)
    ex = get_exercise(result.exercise)
    where = ex.shape_label(ex.thread_map) if ex.thread_map else ""
    print(f"\nWhich thread read and which wrote each element, on {where}: "
          + ("the expected map (the puzzle's solution) and yours." if expected else "yours."))
    if not notebook:
        print(side_by_side(expected, yours))
        return
    fig = draw_side_by_side(expected, yours)
    if fig is None:
        print(side_by_side(expected, yours))
        return
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(fig)
    plt.close(fig)
