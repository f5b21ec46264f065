"""The preprocessors nbgrader's converter runs in place of its own: grade without executing, take the
cells' grading flags from the gradebook, and put back every test cell a notebook lacks.

:class:`TrustedGrade` stands where nbgrader's ``Execute`` stood in the grading
pass; :class:`RestoreCellMetadata` runs in the sanitizing pass before
:class:`RestoreTestCells`, which stands where nbgrader's ``OverwriteCells``
stood. :mod:`autograder.nbgrader_autograde` fixes the lists they run in.
"""

from __future__ import annotations

import os

from nbformat.notebooknode import NotebookNode
from traitlets import Callable, Dict, Float, Unicode, default

from nbgrader import utils as nbgrader_utils
from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells

from .course_secret import course_secret_of_this_run, student_key
from .grade_cells import graded_exercises, write_outputs
from .nbgrader_bridge import NotebookGrading, grade_notebook, grading_input_digest, not_gradable_grading

TIMEOUT_ENV = "AUTOGRADER_TIMEOUT_S"


class TrustedGrade(NbGraderPreprocessor):
    """Stands where nbgrader's Execute stood: grades without executing.

    Grades the exercises the test cells name (:func:`autograder.nbgrader_bridge.grade_notebook`,
    or takes a grading made elsewhere), writes each test cell's score and feedback
    and clears every other cell's outputs (:func:`autograder.grade_cells.write_outputs`),
    and writes ``<notebook>.results.json`` beside the autograded notebook.
    """

    course_secret = Unicode(
        "",
        help="The course secret each student's key (and so the hidden seeds) derives from. "
             "Default: $DLK_GRADER_SECRET, else a fresh random one per run.",
    ).tag(config=True)

    timeout_s = Float(
        None,
        allow_none=True,
        help="Time limit of one exercise's grading child process (s). None: the engine's default.",
    ).tag(config=True)

    grade_fn = Callable(None, allow_none=True, help="grade_submission replacement (tests only)")
    progress = Callable(None, allow_none=True, help="callable(str) told each exercise's result")
    gradings = Dict(default_value=None, allow_none=True,
                    help="notebook name -> NotebookGrading made elsewhere (a cluster worker): written, not regraded")
    not_gradable = Dict(default_value=None, allow_none=True,
                        help="notebook name -> why the submitted notebook cannot be graded: every test cell scores 0 "
                             "and says why")

    @default("course_secret")
    def _course_secret_default(self) -> str:
        return course_secret_of_this_run()

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
        say = self.progress or self.log.info
        reason = (self.not_gradable or {}).get(notebook)
        if reason is not None:
            grading = not_gradable_grading(student, notebook, exercises, reason)
        elif self.gradings is not None:
            grading = self._grading_made_elsewhere(nb, exercises, student, notebook)
        else:
            grading = grade_notebook(
                nb,
                exercises,
                student=student,
                notebook=notebook,
                student_key=student_key(self.course_secret, info["assignment"], student),
                timeout_s=self.timeout_s,
                grade_fn=self.grade_fn,
                log=say,
            )
        write_outputs(nb, grading.results)
        if reason is None:
            say(f"  {student} {notebook}: graded in {grading.total_seconds:.1f} s")

        # Beside the autograded notebook (the build directory of this pass).
        build_dir = info.get("build_directory") or (resources.get("metadata") or {}).get("path", "")
        if build_dir:
            grading.write_results_file(build_dir)
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


class RestoreTestCells(OverwriteCells):
    """nbgrader's OverwriteCells, putting back a deleted test cell wherever the notebook lacks it.

    nbgrader inserts a missing test cell after the instructor's cell that came
    before it, and fails (a KeyError) when that cell is missing too: a notebook
    rebuilt from scratch, or an empty one, stopped the grading of the whole
    submission.  Here a missing test cell goes after the nearest earlier
    instructor cell the notebook still has, else first; its kernels are still
    found by their ``%%cuda`` lines wherever they are.
    """

    def add_missing_grade_cells(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [cell.name for cell in source_nb.source_cells]
        by_name = {cell.name: cell for cell in source_nb.source_cells}
        solutions = {cell.name for cell in source_nb.solution_cells}
        for grade_cell in sorted(source_nb.grade_cells, key=lambda c: order.index(c.name)):
            present = {cell.metadata["nbgrader"]["grade_id"]: i for i, cell in enumerate(nb.cells)
                       if nbgrader_utils.is_grade(cell) or nbgrader_utils.is_solution(cell)}
            if grade_cell.name in present:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", grade_cell.name)
            earlier = order[:order.index(grade_cell.name)]
            where = next((present[name] + 1 for name in reversed(earlier) if name in present), 0)
            nb.cells.insert(where, self.missing_cell_transform(by_name[grade_cell.name], grade_cell.max_score,
                                                               is_solution=grade_cell.name in solutions))
        return nb, resources
