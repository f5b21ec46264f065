"""Grading one notebook's exercises without executing it: the one function both grading paths call.

nbgrader's own autograder runs the submitted notebook in a Jupyter kernel and
scores each test cell from what it printed. A student cell can change what later
cells do (an IPython input transformer that blanks the hidden tests scores full
marks on nbgrader 0.9.6), so here nothing of the notebook runs:
:func:`grade_notebook`

1. reads the ``%%cuda`` kernels out of the (sanitized) notebook as text
   (:func:`autograder.submission.submissions_from_notebook`; nothing is run),
2. grades each exercise with :func:`autograder.isolation.grade_submission`, in a
   fresh child process per exercise,
3. returns a :class:`NotebookGrading`: every exercise's full result (status,
   scores, device, timing, speed-up) and the time grading took, which
   :meth:`NotebookGrading.write_results_file` writes beside the autograded
   notebook as ``<notebook>.results.json``, for exports and for the record.

Where the results go into nbgrader is :mod:`autograder.nbgrader_autograde`
(the converter whose grading pass calls this) and
:mod:`autograder.grade_cells` (which test cell grades what, and the scores
written into them); ``autograder grade-notebook`` and the cluster's workers call
:func:`grade_notebook` directly.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Protocol

from nbformat.notebooknode import NotebookNode

from .feedback import device_label, exercise_points, speedup_of
from .gpu_turn import grades_on_gpu
from .infrastructure import InfrastructureError
from .isolation import allow_gradings, grade_submission, stop_running_gradings
from .outcome import GRADED, NOT_GRADABLE, GradingFailed, Outcome, exception_reason
from .phase_times import NOTEBOOK_PARSING, PhaseTimes
from .result import ExerciseResult
from .safe_writes import write_text
from .submission import KernelSubmission, submissions_from_notebook

RESULTS_SUFFIX = ".results.json"
#: How many gradings on the CPU emulator one grading process runs at once (default: the cores it may use). A
#: local cluster of emulator workers gives each its share of the host's cores (autograder.cluster).
CPU_GRADINGS_ENV = "DLK_CPU_GRADINGS"


class GradeFn(Protocol):
    """What grades one kernel: :func:`autograder.isolation.grade_submission`, or a stand-in in tests."""

    def __call__(self, sub: KernelSubmission, *, mode: str, student_key: bytes, student_id: str,
                 timeout_s: float | None = None) -> ExerciseResult: ...


@dataclass
class NotebookGrading:
    """Every exercise of one notebook, graded; what the results file holds."""

    student: str
    notebook: str
    results: dict[str, ExerciseResult] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    total_seconds: float = 0.0
    extraction_error: str = ""
    #: graded, or not gradable (the notebook cannot be read as the assignment's; every exercise scores 0)
    outcome: Outcome = field(default_factory=lambda: Outcome(GRADED))
    #: grading_input_digest() of the notebook graded (not written to the results file): lets the
    #: process that writes the gradebook check a grading made elsewhere is of the notebook it holds.
    input_digest: str = ""
    #: wall seconds per phase (autograder.phase_times): the notebook's parsing and its exercises' phases, summed
    phases: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {
            "student": self.student,
            "notebook": self.notebook,
            "grading_seconds": round(self.total_seconds, 3),
            "host": platform.node(),
            "extraction_error": self.extraction_error,
            "outcome": {"kind": self.outcome.kind, "reason": self.outcome.reason},
            "exercises": {},
        }
        for name, result in self.results.items():
            entry = result.to_dict()
            entry["grading_seconds"] = round(self.seconds.get(name, 0.0), 3)
            out["exercises"][name] = entry
        return out

    def write_results_file(self, directory: str) -> str:
        """``<directory>/<notebook>.results.json``, in place of any file of that name; returns its path."""
        path = os.path.join(directory, self.notebook + RESULTS_SUFFIX)
        if os.path.lexists(path):  # e.g. a file of that name submitted beside the notebook
            os.remove(path)
        write_text(path, json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n")
        return path


def results_outcome(results: dict) -> Outcome:
    """The outcome a results file records (graded where it names none)."""
    data = results.get("outcome") or {}
    return Outcome(data.get("kind") or GRADED, data.get("reason") or "")


def not_gradable_grading(student: str, notebook: str, exercises: list[str], reason: str) -> NotebookGrading:
    """A notebook that cannot be graded (``reason``): each exercise scores 0 and says why."""
    return NotebookGrading(student=student, notebook=notebook, outcome=Outcome(NOT_GRADABLE, reason),
                           results={name: ExerciseResult.not_gradable(name, reason) for name in exercises},
                           seconds={name: 0.0 for name in exercises})


def read_results_file(path: str) -> dict:
    """What :meth:`NotebookGrading.write_results_file` wrote at ``path`` (``{}`` where there is no such file)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def missing_result(exercise: str, message: str = "") -> ExerciseResult:
    """An ExerciseResult for an exercise the notebook has no kernel for."""
    result = ExerciseResult.missing(exercise)
    if message:
        result.message = message
    return result


def _overlapping_gradings(grade_fn: GradeFn, exercises: int) -> int:
    """How many of a notebook's exercises are graded at once: two where the engine grades on a GPU (one child
    has the card while the next compiles), on the emulator one per core this process may use (each child's
    emulated launches keep one core busy); a stand-in grader, one at a time and in order."""
    if grade_fn is not grade_submission or exercises < 2:
        return 1
    return 2 if grades_on_gpu() else min(exercises, cpu_gradings())


def cpu_gradings() -> int:
    """Gradings on the emulator this process runs at once: ``$DLK_CPU_GRADINGS``, else the cores it may use."""
    try:
        given = int(os.environ.get(CPU_GRADINGS_ENV, ""))
    except ValueError:
        given = 0
    return given if given > 0 else usable_cores()


def usable_cores() -> int:
    """The cores this process may run on (its affinity, else the machine's), at least one."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _default_grade_fn() -> GradeFn:
    return grade_submission


def grade_notebook(
    nb: NotebookNode,
    exercises: list[str],
    *,
    student: str,
    notebook: str = "",
    student_key: str,
    timeout_s: float | None = None,
    grade_fn: GradeFn | None = None,
    log: Callable[[str], None] = lambda msg: None,
) -> NotebookGrading:
    """Grade ``exercises`` of notebook ``nb`` without executing any of it.

    ``student_key`` is :func:`~autograder.course_secret.student_key` of the course secret for this
    student and assignment: the hidden cases derive from it (the course secret is not needed here).

    Raises :class:`~autograder.infrastructure.InfrastructureError` (a
    :class:`~autograder.outcome.GradingFailed`) when the grader itself fails on an exercise (any exception of
    ``grade_fn``, which never raises for what a submission does: that is a result), so that no score is made of
    it and the grading is tried again; an interrupted grading ends its children before the interrupt goes on.
    """
    grade_fn = grade_fn or _default_grade_fn()
    grading = NotebookGrading(student=student, notebook=notebook)
    started = time.perf_counter()
    phases = PhaseTimes()
    try:
        with phases.phase(NOTEBOOK_PARSING):
            submissions = submissions_from_notebook(nb)
    except Exception as exc:  # a notebook the parser rejects grades as missing kernels
        submissions = []
        grading.extraction_error = f"{type(exc).__name__}: {exc}"
    by_exercise: dict[str, KernelSubmission] = {}
    for sub in submissions:
        # The last %%cuda cell for an exercise is the one a reader of the
        # notebook would take as the answer (it is what check() last ran).
        by_exercise[sub.exercise] = sub

    def grade_one(exercise: str) -> tuple[ExerciseResult, float]:
        t0 = time.perf_counter()
        sub = by_exercise.get(exercise)
        if sub is None:
            why = ""
            if grading.extraction_error:
                why = (f"No `%%cuda {exercise} ...` cell could be read from the notebook: "
                       f"{grading.extraction_error}")
            return missing_result(exercise, why), time.perf_counter() - t0
        try:
            if timeout_s is None:  # the engine's own default
                result = grade_fn(sub, mode="hidden", student_key=student_key.encode(), student_id=student)
            else:
                result = grade_fn(sub, mode="hidden", student_key=student_key.encode(), student_id=student,
                                  timeout_s=timeout_s)
        except GradingFailed:
            raise  # the grader's failure already named (autograder.infrastructure): no score, graded again
        except Exception as exc:  # the grader itself failed (it never raises for what a submission does)
            raise InfrastructureError(f"the grader failed on {exercise}: {exception_reason(exc)}") from exc
        return result, time.perf_counter() - t0

    # On a GPU the exercises overlap: while one child has its turn on the card (autograder.gpu_turn), the
    # next one starts and compiles, and the grader judges the one before on the host.  On the emulator
    # every grading is CPU work, nearly all of it one process's emulated launches: one per core.
    pool = ThreadPoolExecutor(max_workers=_overlapping_gradings(grade_fn, len(exercises)))
    try:
        graded = list(pool.map(grade_one, exercises))
    except BaseException:  # interrupted, or the grader failed: the children still running end now
        stop_running_gradings()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        allow_gradings()
    for exercise, (result, seconds) in zip(exercises, graded):
        grading.results[exercise] = result
        grading.seconds[exercise] = seconds
        phases.merge(result.phases)
        log(f"  {student} {exercise}: {result.status}, {exercise_points(result)}{_speedup_note(result)} "
            f"[{device_label(result.backend, result.device)}] in {seconds:.1f} s")
    with phases.phase(NOTEBOOK_PARSING):
        grading.input_digest = grading_input_digest(nb, exercises)
    grading.total_seconds = time.perf_counter() - started
    grading.phases = phases.to_dict()
    return grading


def grading_input_digest(nb: NotebookNode, exercises: list[str]) -> str:
    """A hash of everything of ``nb`` that grading reads: the exercises asked for and every kernel cell.

    Two notebooks with one digest grade alike, so a grading made on another
    machine can be written into this notebook's test cells.
    """
    try:
        kernels = [[s.exercise, s.source, sorted(s.launch.items()), s.cell_line, s.parse_error]
                   for s in submissions_from_notebook(nb)]
    except Exception as exc:  # the same failure grade_notebook records as an extraction error
        kernels = [f"{type(exc).__name__}: {exc}"]
    text = json.dumps({"exercises": list(exercises), "kernels": kernels}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _speedup_note(result: ExerciseResult) -> str:
    speedup = speedup_of(result.timing)
    return f" ({speedup:.2f}x reference)" if speedup else ""
