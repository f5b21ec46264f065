"""nbgrader's Autograde, with the notebook never executed.

nbgrader's own autograder runs the submitted notebook in a Jupyter kernel and
scores each test cell from what it printed. A student cell can change what later
cells do (an IPython input transformer that blanks the hidden tests scores full
marks on nbgrader 0.9.6), so here the Execute preprocessor is replaced by
:class:`TrustedGrade`, which

1. reads the ``%%cuda`` kernels out of the sanitized notebook as text
   (:func:`autograder.submission.submissions_from_notebook`; nothing is run),
2. grades each exercise with :func:`autograder.isolation.grade_submission`, in a
   fresh child process per exercise,
3. writes the result into each autograded test cell as the outputs that
   nbgrader's ``SaveAutoGrades`` turns into the score: a stdout stream with the
   feedback text and an ``execute_result`` whose ``text/plain`` is the points
   (``nbgrader.utils.determine_grade`` reads a number as partial credit),
4. clears the outputs of every other code cell,
5. writes ``<notebook>.results.json`` beside the autograded notebook: every
   exercise's full result (status, scores, device, timing, speed-up) and the
   time grading took, for exports and for the record.

Everything else is nbgrader's: sanitizing (``OverwriteCells`` restores the test
cells, with their hidden parts, from the gradebook; ``CheckCellMetadata``),
``SaveAutoGrades``, late penalties, submission timestamps.

Which exercise and which part a test cell grades is read from the test cell's
restored source, a call ``grade("<exercise>", part="correctness"|"speed")`` in
its hidden-tests region, so the student can neither add nor change one.
"""

from __future__ import annotations

import ast
import json
import os
import platform
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_output
from traitlets import Float, Instance, Unicode, default

from nbgrader import utils as nbgrader_utils
from nbgrader.converters import Autograde
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    IgnorePattern,
    OverwriteCells,
    OverwriteKernelspec,
    LimitOutput,
    NbGraderPreprocessor,
    SaveAutoGrades,
)

from . import course_secret
from .feedback import part_feedback, speedup_of
from .result import ExerciseResult
from .submission import KernelSubmission, submissions_from_notebook

PARTS = ("correctness", "speed")
RESULTS_SUFFIX = ".results.json"
SECRET_ENV = "DLK_GRADER_SECRET"  # the engine reads the same variable
TIMEOUT_ENV = "AUTOGRADER_TIMEOUT_S"


# --------------------------------------------------------------------------
# Which test cell grades what
# --------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class GradeTarget:
    exercise: str
    part: str


def grade_target(source: str) -> GradeTarget | None:
    """The ``grade("<exercise>", part=...)`` call in a test cell's source.

    The source is Python (the instructor's test cell); only its syntax tree is
    read. Returns None when the cell names no exercise. A cell naming two
    exercises is an authoring error.
    """
    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError:
        return None
    found: list[GradeTarget] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _call_name(node.func) == "grade"):
            continue
        if not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        exercise = node.args[0].value
        part = "correctness"
        for kw in node.keywords:
            if kw.arg == "part" and isinstance(kw.value, ast.Constant):
                part = kw.value.value
        if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
            part = node.args[1].value
        if not isinstance(exercise, str) or part not in PARTS:
            raise ValueError(f"test cell has a malformed grade() call: {ast.unparse(node)}")
        found.append(GradeTarget(exercise, part))
    if len(set(found)) > 1:
        raise ValueError(f"test cell grades more than one thing: {sorted(set(found))}")
    return found[0] if found else None


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _strip_magics(source: str) -> str:
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n"))


# --------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------


def part_points(result: ExerciseResult, part: str, points: float) -> float:
    """The points a test cell worth ``points`` gets for ``part`` of ``result``.

    The engine scores each part out of its own maximum; the cell's points scale
    it. When the engine's maximum equals the cell's points (as for the course's
    exercises) this is the engine's score unchanged.
    """
    score = float(result.part_score(part))
    maximum = float(result.part_max(part))
    if maximum <= 0:
        return 0.0
    if maximum == points:
        value = score
    else:
        value = points * score / maximum
    return min(max(value, 0.0), float(points))


def format_points(value: float) -> str:
    """How a score is written into ``text/plain``: ``float(text) == value``."""
    return repr(float(value))


# --------------------------------------------------------------------------
# Grading an extracted submission
# --------------------------------------------------------------------------


@dataclass
class NotebookGrading:
    """Every exercise of one notebook, graded; what the results file holds."""

    student: str
    notebook: str
    results: dict[str, ExerciseResult] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    total_seconds: float = 0.0
    extraction_error: str = ""
    #: grading_input_digest() of the notebook graded (not written to the results file): lets the
    #: process that writes the gradebook check a grading made elsewhere is of the notebook it holds.
    input_digest: str = ""

    def to_json(self) -> dict:
        out = {
            "student": self.student,
            "notebook": self.notebook,
            "grading_seconds": round(self.total_seconds, 3),
            "host": platform.node(),
            "extraction_error": self.extraction_error,
            "exercises": {},
        }
        for name, result in self.results.items():
            entry = _result_dict(result)
            entry["grading_seconds"] = round(self.seconds.get(name, 0.0), 3)
            out["exercises"][name] = entry
        return out


def _result_dict(result: ExerciseResult) -> dict:
    return result.to_dict()


def missing_result(exercise: str, message: str = "") -> ExerciseResult:
    """An ExerciseResult for an exercise the notebook has no kernel for."""
    result = ExerciseResult.missing(exercise)
    if message:
        result.message = message
    return result


def crashed_result(exercise: str, message: str) -> ExerciseResult:
    res = missing_result(exercise, message)
    res.status = "crashed"
    return res


GradeFn = Callable[..., ExerciseResult]


def _default_grade_fn() -> GradeFn:
    from autograder.isolation import grade_submission  # the sandbox is started only when grading

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
    """
    grade_fn = grade_fn or _default_grade_fn()
    grading = NotebookGrading(student=student, notebook=notebook)
    started = time.perf_counter()
    try:
        submissions = submissions_from_notebook(nb)
    except Exception as exc:  # a notebook the parser rejects grades as missing kernels
        submissions = []
        grading.extraction_error = f"{type(exc).__name__}: {exc}"
    by_exercise: dict[str, KernelSubmission] = {}
    for sub in submissions:
        # The last %%cuda cell for an exercise is the one a reader of the
        # notebook would take as the answer (it is what check() last ran).
        by_exercise[sub.exercise] = sub

    for exercise in exercises:
        t0 = time.perf_counter()
        sub = by_exercise.get(exercise)
        if sub is None:
            why = ""
            if grading.extraction_error:
                why = (f"No `%%cuda {exercise} ...` cell could be read from the notebook: "
                       f"{grading.extraction_error}")
            result = missing_result(exercise, why)
        else:
            kwargs: dict[str, Any] = {"mode": "hidden", "secret": student_key.encode(), "student_id": student}
            if timeout_s is not None:
                kwargs["timeout_s"] = timeout_s
            try:
                result = grade_fn(sub, **kwargs)
            except Exception as exc:  # the grader itself failed: never a score
                result = crashed_result(exercise, f"the grader failed: {type(exc).__name__}: {exc}")
        grading.results[exercise] = result
        grading.seconds[exercise] = time.perf_counter() - t0
        log(
            f"  {student} {exercise}: {result.status}, correctness "
            f"{float(result.correctness_score):g}/{float(result.correctness_max):g}, speed "
            f"{float(result.speed_score):g}/{float(result.speed_max):g}"
            f"{_speedup_note(result)} [{result.backend or '-'}] in {grading.seconds[exercise]:.1f} s"
        )
    grading.total_seconds = time.perf_counter() - started
    grading.input_digest = grading_input_digest(nb, exercises)
    return grading


def grading_input_digest(nb: NotebookNode, exercises: list[str]) -> str:
    """A hash of everything of ``nb`` that grading reads: the exercises asked for and every kernel cell.

    Two notebooks with one digest grade alike, so a grading made on another
    machine can be written into this notebook's test cells.
    """
    import hashlib

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


def graded_exercises(nb: NotebookNode) -> dict[str, list[GradeTarget]]:
    """Exercises named by the notebook's autograded test cells, in cell order."""
    out: dict[str, list[GradeTarget]] = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or not nbgrader_utils.is_grade(cell) or nbgrader_utils.is_solution(cell):
            continue
        target = grade_target(cell.source)
        if target is not None:
            out.setdefault(target.exercise, []).append(target)
    return out


def write_outputs(nb: NotebookNode, grading: NotebookGrading) -> None:
    """Clear every code cell's outputs; give each test cell its score and feedback."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        if not nbgrader_utils.is_grade(cell) or nbgrader_utils.is_solution(cell):
            continue
        points = float(cell.metadata["nbgrader"]["points"])
        target = grade_target(cell.source)
        if target is None or target.exercise not in grading.results:
            # A test cell that names no exercise: our own authoring error. It
            # must not default to nbgrader's "no output = full marks".
            text = "This test cell names no exercise to grade; it scores 0. Tell the instructor.\n"
            awarded = 0.0
        else:
            result = grading.results[target.exercise]
            awarded = part_points(result, target.part, points)
            text = part_feedback(result, target.part, points, awarded)
        cell.outputs = [
            new_output("stream", name="stdout", text=text),
            new_output(
                "execute_result",
                data={"text/plain": format_points(awarded)},
                execution_count=1,
            ),
        ]
        cell.execution_count = 1


def instructor_test_cells(nb: NotebookNode) -> list[dict]:
    """The autograded test cells of an instructor (or released) notebook."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not nbgrader_utils.is_grade(cell) or nbgrader_utils.is_solution(cell):
            continue
        target = grade_target(cell.source)
        if target is None:
            continue
        cells.append({
            "grade_id": cell.metadata["nbgrader"]["grade_id"],
            "exercise": target.exercise,
            "part": target.part,
            "points": float(cell.metadata["nbgrader"]["points"]),
        })
    return cells


# --------------------------------------------------------------------------
# nbgrader preprocessor and converter
# --------------------------------------------------------------------------


class TrustedGrade(NbGraderPreprocessor):
    """Stands where nbgrader's Execute stood: grades without executing."""

    secret = Unicode(
        "",
        help="Secret the hidden seeds derive from. Default: $DLK_GRADER_SECRET, else a fresh random one per run.",
    ).tag(config=True)

    timeout_s = Float(
        None,
        allow_none=True,
        help="Time limit of one exercise's grading child process (s). None: the engine's default.",
    ).tag(config=True)

    grade_fn = Instance(object, allow_none=True, help="grade_submission replacement (tests only)")
    progress = Instance(object, allow_none=True, help="callable(str) told each exercise's result")
    gradings = Instance(dict, allow_none=True,
                        help="notebook name -> NotebookGrading made elsewhere (a cluster worker): written, not regraded")

    @default("secret")
    def _secret_default(self) -> str:
        return os.environ.get(SECRET_ENV) or secrets.token_hex(16)

    @default("timeout_s")
    def _timeout_default(self) -> float | None:
        value = os.environ.get(TIMEOUT_ENV)
        return float(value) if value else None

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        info = resources["nbgrader"]
        student = info["student"]
        notebook = info["notebook"]
        exercises = list(graded_exercises(nb))
        self.log.info("Grading %s/%s without executing it: %s", student, notebook, ", ".join(exercises))
        say = self.progress if callable(self.progress) else self.log.info
        if self.gradings is not None:
            grading = self._grading_made_elsewhere(nb, exercises, student, notebook)
        else:
            grading = grade_notebook(
                nb,
                exercises,
                student=student,
                notebook=notebook,
                student_key=course_secret.student_key(self.secret, info["assignment"], student),
                timeout_s=self.timeout_s,
                grade_fn=self.grade_fn if callable(self.grade_fn) else None,
                log=say,
            )
        write_outputs(nb, grading)
        say(f"  {student} {notebook}: graded in {grading.total_seconds:.1f} s")

        # Beside the autograded notebook (the build directory of this pass).
        build_dir = info.get("build_directory") or self._build_directory(resources)
        if build_dir:
            os.makedirs(build_dir, exist_ok=True)
            path = os.path.join(build_dir, notebook + RESULTS_SUFFIX)
            if os.path.lexists(path):  # e.g. a file of that name submitted beside the notebook
                os.remove(path)
            with open(path, "w") as f:
                json.dump(grading.to_json(), f, indent=1, sort_keys=True)
                f.write("\n")
        resources.setdefault("autograder", {})[notebook] = grading
        return nb, resources

    def _grading_made_elsewhere(self, nb: NotebookNode, exercises: list[str], student: str,
                                notebook: str) -> NotebookGrading:
        """The grading a worker made of this very notebook (same exercises, same kernels), else an error."""
        grading = self.gradings.get(notebook)
        if grading is None:
            raise RuntimeError(f"no grading of {student}/{notebook} came back from the worker")
        if grading.student != student or grading.input_digest != grading_input_digest(nb, exercises):
            raise RuntimeError(f"the grading of {student}/{notebook} that came back is not of the notebook "
                               f"being recorded (the submission changed while it was graded); grade it again")
        return grading

    @staticmethod
    def _build_directory(resources: dict) -> str:
        meta = resources.get("metadata") or {}
        return meta.get("path", "")


class RestoreCellMetadata(NbGraderPreprocessor):
    """Sanitizing, before nbgrader's OverwriteCells: the gradebook says which cells are graded.

    A submitted notebook's cell metadata is the student's to edit. nbgrader
    restores the source, points and lock of the instructor's cells, but not
    whether a cell is a grade or a solution cell, and a made-up grade cell (an
    unknown grade_id) would stop the whole submission from being graded. Here
    every cell whose grade_id the gradebook knows gets the instructor's flags
    and points back, and any other cell loses its nbgrader metadata (it is an
    ordinary student cell).
    """

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        from nbgrader.api import Gradebook

        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            record = gb.find_notebook(info["notebook"], info["assignment"])
            grade_points = {c.name: float(c.max_score) for c in record.grade_cells}
            solutions = {c.name for c in record.solution_cells}
            tasks = {c.name for c in record.task_cells}
            known = {c.name for c in record.source_cells}
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader")
            if meta is None:
                continue
            gid = meta.get("grade_id")
            if gid not in known:
                self.log.warning("Dropping nbgrader metadata of a cell the instructor did not make: %r", gid)
                del cell.metadata["nbgrader"]
                continue
            meta["grade"] = gid in grade_points
            meta["solution"] = gid in solutions
            meta["task"] = gid in tasks
            if gid in grade_points:
                meta["points"] = grade_points[gid]
            elif "points" in meta:
                del meta["points"]
        return nb, resources


#: The autograde pass: nbgrader's list with Execute replaced by TrustedGrade.
TRUSTED_AUTOGRADE_PREPROCESSORS = [
    TrustedGrade,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]


#: The sanitizing pass: nbgrader's, with the cells' nbgrader flags restored from the gradebook first.
TRUSTED_SANITIZE_PREPROCESSORS = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    RestoreCellMetadata,
    OverwriteCells,
    CheckCellMetadata,
]


class TrustedAutograde(Autograde):
    """nbgrader's Autograde whose grading pass can never execute the notebook.

    Both passes' preprocessor lists are fixed here, not taken from
    configuration, so that no nbgrader_config.py can put ``Execute`` back.
    """

    progress = Instance(object, allow_none=True)
    grade_fn = Instance(object, allow_none=True)
    gradings = Instance(dict, allow_none=True)

    def _init_preprocessors(self) -> None:
        if self._sanitizing:
            self.exporter._preprocessors = []
            for pp in TRUSTED_SANITIZE_PREPROCESSORS:
                self.exporter.register_preprocessor(pp)
            for pp in self.exporter._preprocessors:
                if isinstance(pp, OverwriteCells):
                    pp.add_missing_cells = True  # a deleted test cell comes back and is scored
            return
        self.exporter._preprocessors = []
        for pp in TRUSTED_AUTOGRADE_PREPROCESSORS:
            self.exporter.register_preprocessor(pp)
        for pp in self.exporter._preprocessors:
            if isinstance(pp, TrustedGrade):
                pp.progress = self.progress
                pp.grade_fn = self.grade_fn
                pp.gradings = self.gradings
        names = [type(pp).__name__ for pp in self.exporter._preprocessors]
        if "Execute" in names or any("Execute" in n for n in names):
            raise RuntimeError(f"refusing to grade: an executing preprocessor is configured: {names}")

    def init_single_notebook_resources(self, notebook_filename: str) -> dict:
        resources = super().init_single_notebook_resources(notebook_filename)
        resources["nbgrader"]["build_directory"] = self.writer.build_directory
        return resources
