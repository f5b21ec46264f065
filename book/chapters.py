"""The book's chapters, each named once: the manifest every other place follows.

A chapter called ``<name>`` with number ``N`` has

* its pages ``book/<page>.md`` (listed in ``_toc.yml``);
* its assignment ``NN_<name>``: the instructor's notebook
  ``solutions/NN_<name>/<name>.ipynb`` and the released ``exercises/NN_<name>/<name>.ipynb``;
  and, where one sitting is not enough for its exercises, further assignments ``NN_<other>`` named
  alike (``more_assignments``);
* each assignment's exercises, declared in ``autograder/exercises/<name>.py`` (``EXERCISES``);
* its benchmark ``benchmarks/<name>.py`` and results ``benchmarks/results/<name>.json``
  (or none), and any benchmarks it measures apart (``more_benchmarks``);
* the kernel topics it teaches, ``kernels/<part>/<topic>.cu`` and ``kernels/<part>/<topic>.py``.

``tests/test_chapters.py`` checks the repository against this list, and
``tests/test_exercises.py`` grades every chapter's exercises from it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Assignment:
    """One nbgrader assignment of a chapter: ``NN_<name>``, its notebook ``<name>.ipynb`` in ``solutions/`` and
    ``exercises/``, its exercises in ``autograder/exercises/<name>.py``."""

    number: int
    name: str

    @property
    def assignment(self) -> str:
        """The nbgrader assignment: ``solutions/<assignment>/`` and ``exercises/<assignment>/``."""
        return f"{self.number:02d}_{self.name}"

    @property
    def notebook(self) -> str:
        """The assignment's notebook, without ``.ipynb``."""
        return self.name

    @property
    def solution(self) -> Path:
        return ROOT / "solutions" / self.assignment / f"{self.notebook}.ipynb"

    @property
    def exercise_module(self) -> str:
        return f"autograder.exercises.{self.name}"

    def exercises(self) -> list[str]:
        """The names of the assignment's graded exercises, in the module's order."""
        return [exercise.name for exercise in importlib.import_module(self.exercise_module).EXERCISES]


@dataclass(frozen=True)
class Chapter:
    number: int
    name: str
    title: str
    pages: tuple[str, ...]  # book/<page>.md, in reading order
    topics: tuple[str, ...]  # kernels/<part>/<topic>.cu the chapter teaches
    has_benchmark: bool = True
    #: Benchmarks of the chapter measured apart from ``benchmarks/<name>.py`` (``benchmarks/<b>.py``, results
    #: ``benchmarks/results/<b>.json``): kernels for one kind of GPU only, say.
    more_benchmarks: tuple[str, ...] = ()
    #: Has graded exercises (an assignment, an exercise module); False for a chapter that only teaches.
    graded: bool = True
    #: Run the whole nbgrader cycle (release, submit, autograde) on the CPU emulator in ``make test``: slow, so for
    #: one chapter besides the first (whose cycle tests/autograder/test_nbgrader_cycle.py runs with the hostile
    #: suite).  Every assignment's solutions and released stubs go through the cycle on a GPU in ``make test-gpu``
    #: (tests/autograder/solutions_on_gpu.py), and every solution kernel is graded on the emulator by itself.
    graded_end_to_end: bool = False
    #: Assignments of the chapter after its own (``NN_<name>`` each, named as the chapter's is), for exercises
    #: more than one sitting holds.
    more_assignments: tuple[str, ...] = ()
    #: Prints kernels of ``kernels/``: its topics' or, for a chapter without topics, the kernels it generates
    #: (``kernels/<name>/``).  False for a chapter whose pages print none (the warm-up puzzles): no folder of
    #: ``kernels/`` is its, and no printed kernel can be pasted into its exercises.
    prints_kernels: bool = True

    @property
    def assignments(self) -> tuple[Assignment, ...]:
        """The chapter's assignments, its own (``NN_<chapter name>``) first; none for an ungraded chapter."""
        if not self.graded:
            return ()
        return tuple(Assignment(self.number, name) for name in (self.name, *self.more_assignments))

    @property
    def benchmark(self) -> str | None:
        """The module of ``benchmarks`` that measures the chapter's kernels, or None."""
        return f"benchmarks.{self.name}" if self.has_benchmark else None

    def exercises(self) -> list[str]:
        """The names of the chapter's graded exercises, every assignment's, in order (none for an ungraded chapter)."""
        return [name for assignment in self.assignments for name in assignment.exercises()]


CHAPTERS = (
    # Before the first chapter: short graded kernels, each with its thread map; the page prints no kernel.
    Chapter(0, "puzzles", "Warm-up puzzles", ("puzzles",), (), has_benchmark=False, prints_kernels=False),
    Chapter(1, "cuda_from_python", "CUDA from Python", ("cuda_from_python", "sums"),
            ("indexing", "vector_add", "saxpy", "device_copy", "reduction", "peak"),
            # a block reduction by warp shuffles, an assignment of its own
            more_assignments=("warp_shuffle",)),
    Chapter(2, "perceptrons_mlp", "Perceptrons and multilayer perceptrons", ("perceptrons", "mlp_backprop", "mlp_training"),
            ("perceptron", "fully_connected", "activations", "softmax", "layernorm", "sgd")),
    Chapter(3, "cnn", "Convolutional networks", ("cnn", "cnn_forward_speed", "cnn_backward", "lenet",
                                                          "cnn_backward_kernels"),
            ("conv2d", "conv2d_backward", "pooling"),
            graded_end_to_end=True),
    Chapter(4, "conv_as_gemm", "Convolution as matrix multiplication",
            ("conv_as_gemm", "sgemm", "sgemm_splitk", "tensor_cores", "gemm_bf16", "gemm_bf16_hopper",
             "conv_implicit_gemm"),
            ("im2col", "sgemm", "sgemm_hopper", "conv2d_gemm", "sgemm_bf16"),
            # versions 10, 11 and 13 to 16 of the GEMM need a Hopper GPU
            more_benchmarks=("sgemm_tensor_cores", "sgemm_bf16", "sgemm_bf16_small"),
            # the upper rungs of the GEMM ladders, one exercise each
            more_assignments=("gemm_ladder",)),
    Chapter(5, "capsules", "Capsule networks", ("capsules", "capsules_fast"),
            ("capsule_prediction", "capsule_prediction_backward", "capsule_routing")),
    Chapter(6, "large_margin_softmax", "Large-margin softmax", ("large_margin_softmax", "large_margin_softmax_fast"),
            ("lsoftmax",)),
    # kernels/index_notation/: the language, and generated.py, the records of the kernels it writes (no .cu file)
    Chapter(7, "index_notation", "Index notation", ("index_notation",), ()),
    # Read after the GEMM and convolution part (_toc.yml); numbered last so that no assignment is renamed.
    Chapter(8, "attention", "Attention", ("attention", "attention_tensor_cores", "attention_backward"),
            ("attention", "attention_bf16")),
)


def chapter(name: str) -> Chapter:
    for found in CHAPTERS:
        if found.name == name:
            return found
    raise KeyError(f"no chapter called {name!r} (known: {', '.join(c.name for c in CHAPTERS)})")
