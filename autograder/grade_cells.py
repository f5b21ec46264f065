"""The autograded test cells of a notebook: what each one grades, and the score written into it.

Which exercise and which part a test cell grades is read from the test cell's
source, a call ``grade("<exercise>", part="correctness"|"speed")`` in its
hidden-tests region (:mod:`autograder.nbgrader_cells` is what that call runs in
a notebook). At grading time the source is the instructor's, restored by
nbgrader's ``OverwriteCells``, so the student can neither add nor change one.

The score goes back into the cell as the outputs nbgrader's ``SaveAutoGrades``
reads: a stdout stream with the feedback text and an ``execute_result`` whose
``text/plain`` is the points (``nbgrader.utils.determine_grade`` reads a number
as partial credit).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator, Mapping

from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_output

from nbgrader import utils as nbgrader_utils

from .feedback import part_feedback
from .nbgrader_cells import PARTS
from .result import ExerciseResult


@dataclass(frozen=True, order=True)
class GradeTarget:
    """What one test cell grades: an exercise and one of its :data:`PARTS`."""

    exercise: str
    part: str


@dataclass(frozen=True)
class GradedCell:
    """An autograded test cell of an instructor (or released) notebook."""

    grade_id: str
    exercise: str
    part: str
    points: float


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


def _test_cells(nb: NotebookNode) -> Iterator[NotebookNode]:
    """The autograded test cells (grade cells that are not solution cells), in cell order."""
    for cell in nb.cells:
        if cell.cell_type == "code" and nbgrader_utils.is_grade(cell) and not nbgrader_utils.is_solution(cell):
            yield cell


def graded_exercises(nb: NotebookNode) -> dict[str, list[GradeTarget]]:
    """Exercises named by the notebook's autograded test cells, in cell order."""
    out: dict[str, list[GradeTarget]] = {}
    for cell in _test_cells(nb):
        target = grade_target(cell.source)
        if target is not None:
            out.setdefault(target.exercise, []).append(target)
    return out


def instructor_test_cells(nb: NotebookNode) -> list[GradedCell]:
    """The autograded test cells of an instructor (or released) notebook that name what they grade."""
    cells = []
    for cell in _test_cells(nb):
        target = grade_target(cell.source)
        if target is None:
            continue
        meta = cell.metadata["nbgrader"]
        cells.append(GradedCell(grade_id=meta["grade_id"], exercise=target.exercise, part=target.part,
                                points=float(meta["points"])))
    return cells


# --------------------------------------------------------------------------
# Scores written into the cells
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


def write_outputs(nb: NotebookNode, results: Mapping[str, ExerciseResult]) -> None:
    """Clear every code cell's outputs; give each test cell its score and feedback from ``results`` (by exercise)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        if not nbgrader_utils.is_grade(cell) or nbgrader_utils.is_solution(cell):
            continue
        points = float(cell.metadata["nbgrader"]["points"])
        target = grade_target(cell.source)
        if target is None or target.exercise not in results:
            # A test cell that names no exercise: our own authoring error. It
            # must not default to nbgrader's "no output = full marks".
            text = "This test cell names no exercise to grade; it scores 0. Tell the instructor.\n"
            awarded = 0.0
        else:
            result = results[target.exercise]
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
