"""The warm-up puzzles' page: each puzzle's NumPy specification and launch, and its expected thread map.

The specification is the exercise's own function (``autograder/exercises/puzzles.py``), printed from its
source; the picture is the expected map that ``check()`` draws beside a reader's kernel
(``autograder/exercises/thread_maps.json``, recorded from the instructor's solutions), drawn here before
the reader writes anything, as GPU-Puzzles does.  :data:`REVERSE_DEMO` is the page's one kernel, a
wrong one, whose map shows what a kernel that runs past its arrays looks like.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
from IPython.display import Code, display

from autograder.exercises import get_exercise, puzzles
from autograder.thread_maps import expected_map
from kernels.runtime.module import compile_source
from kernels.tools.profiler import on_emulator
from kernels.tools.thread_maps import ThreadMap, draw_side_by_side, record, side_by_side

#: A kernel with a bug, for reading a thread map: each thread copies one element of ``a`` to the mirrored place of
#: ``out``, without a bounds check, launched on more threads than elements.
REVERSE_DEMO = """\
__global__ void reverse(const float* a, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[n - 1 - i] = a[i];   // no check that i < n
}
"""
DEMO_N, DEMO_BLOCK = 10, 8


def specification(name: str) -> Code:
    """The puzzle's NumPy specification, as the exercise declares it."""
    return Code(inspect.getsource(getattr(puzzles, f"{name}_spec")), language="python")


def launch_text(name: str) -> str:
    """The puzzle's launch on the shape its map is drawn for, in words."""
    ex = get_exercise(name)
    _, config = ex.resolve_launch(ex.thread_map, {})
    blocks = math.prod(config.grid)
    threads = " x ".join(str(d) for d in config.block if d > 1) if config.block[1] > 1 else str(config.block[0])
    return (f"the map below: {ex.shape_label(ex.thread_map)}, {blocks} block{'s' if blocks != 1 else ''} of "
            f"{threads} threads")


def show_puzzle(name: str) -> None:
    """A puzzle's specification, its launch, and the thread map its solution makes on that launch."""
    import matplotlib.pyplot as plt

    display(specification(name))
    print(launch_text(name))
    fig = draw_side_by_side(expected_map(name), None)
    if fig is not None:
        plt.show()


def reverse_demo_map() -> tuple[ThreadMap, str]:
    """The map of :data:`REVERSE_DEMO` on ``DEMO_N`` elements in blocks of ``DEMO_BLOCK`` threads, and what the
    emulator said of the launch (the first line of its error)."""
    with on_emulator():
        module = compile_source(REVERSE_DEMO, name="reverse_demo.cu")
        a = np.arange(DEMO_N, dtype=np.float32)
        out = np.zeros(DEMO_N, np.float32)
        blocks = -(-DEMO_N // DEMO_BLOCK)
        (tmap,), error = record(module.function("reverse"), a, out, np.int32(DEMO_N), grid=(blocks, 1, 1),
                                block=(DEMO_BLOCK, 1, 1))
    return tmap, str(error).splitlines()[0] if error else "the launch ran without an error"


def show_reverse_demo() -> None:
    """The demonstration kernel's source, what the emulator says of it, and its map as a picture and as text."""
    import matplotlib.pyplot as plt

    display(Code(REVERSE_DEMO, language="cuda"))
    tmap, said = reverse_demo_map()
    print(f"the CPU emulator: {said}\n")
    print(side_by_side(None, tmap))
    if draw_side_by_side(None, tmap) is not None:
        plt.show()
