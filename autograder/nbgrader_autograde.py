"""nbgrader's Autograde, with the notebook never executed.

nbgrader's own autograder runs the submitted notebook in a Jupyter kernel and
scores each test cell from what it printed. A student cell can change what later
cells do (an IPython input transformer that blanks the hidden tests scores full
marks on nbgrader 0.9.6), so here the Execute preprocessor is replaced by
:class:`~autograder.nbgrader_preprocessors.TrustedGrade`, which reads the
kernels out of the sanitized notebook as text, grades them in fresh child
processes (:func:`autograder.nbgrader_bridge.grade_notebook`) and writes the
scores into the test cells (:mod:`autograder.grade_cells`).

Everything else is nbgrader's: sanitizing (``OverwriteCells`` restores the test
cells, with their hidden parts, from the gradebook, here as
:class:`~autograder.nbgrader_preprocessors.RestoreTestCells`;
``CheckCellMetadata``), ``SaveAutoGrades``, late penalties, submission timestamps.

Two additions of ours: a notebook that cannot be graded (``not_gradable``:
not JSON, another assignment's, missing) is graded from an empty stand-in, so
that every test cell scores 0 and says why, in the gradebook, the graded
notebook and the feedback alike; and with ``staged`` the graded folder is
written under a temporary name (:data:`autograder.safe_writes.PARTIAL_SUFFIX`),
which the caller renames into place once everything of the student is
recorded.  The first error met while converting is kept in ``failure`` (nbgrader
itself only logs it), so that the caller can say what went wrong.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re

import sqlalchemy.exc
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbformat.v4 import new_notebook
from traitlets import Bool, Callable, Dict

from nbgrader.converters import Autograde
from nbgrader.converters.base import BaseConverter, NbGraderException
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    IgnorePattern,
    LimitOutput,
    OverwriteKernelspec,
    SaveAutoGrades,
)

from .infrastructure import InfrastructureError, disk_failure, is_disk_failure
from .nbgrader_preprocessors import RestoreCellMetadata, RestoreTestCells, TrustedGrade
from .safe_writes import PARTIAL_SUFFIX

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
    RestoreTestCells,
    CheckCellMetadata,
]


class TrustedAutograde(Autograde):
    """nbgrader's Autograde whose grading pass can never execute the notebook.

    Both passes' preprocessor lists are fixed here, not taken from
    configuration, so that no nbgrader_config.py can put ``Execute`` back.
    """

    progress = Callable(None, allow_none=True, help="callable(str) told each exercise's result")
    grade_fn = Callable(None, allow_none=True, help="grade_submission replacement (tests only)")
    gradings = Dict(default_value=None, allow_none=True,
                    help="notebook name -> NotebookGrading made elsewhere (a cluster worker): written, not regraded")
    not_gradable = Dict(default_value=None, allow_none=True,
                        help="notebook name -> why the submitted notebook cannot be graded (it scores 0, saying why)")
    staged = Bool(False, help="write the graded folder under a temporary name, for the caller to rename into place")

    #: The first error met while converting (nbgrader logs it and raises a generic NbGraderException).
    failure: BaseException | None = None

    def _staged(self, path: str, escape: bool) -> str:
        return path + (re.escape(PARTIAL_SUFFIX) if escape else PARTIAL_SUFFIX) if self.staged else path

    def _format_dest(self, assignment_id: str, student_id: str, escape: bool = False) -> str:
        return self._staged(super()._format_dest(assignment_id, student_id, escape=escape), escape)

    def _format_source(self, assignment_id: str, student_id: str, escape: bool = False) -> str:
        source = super()._format_source(assignment_id, student_id, escape=escape)
        return source if self._sanitizing else self._staged(source, escape)  # the grading pass reads what it wrote

    def init_notebooks(self) -> None:
        """nbgrader's list of notebooks, with those not gradable because they were never submitted."""
        missing = self.not_gradable or {}
        try:
            super().init_notebooks()
        except NbGraderException:
            if not missing:
                raise
            self.assignments = {}
        for folder in glob.glob(self._format_source(self.coursedir.assignment_id, self.coursedir.student_id)):
            found = self.assignments.setdefault(folder, [])
            found += [path for path in (os.path.join(folder, f"{name}.ipynb") for name in missing) if path not in found]

    def init_assignment(self, assignment_id: str, student_id: str) -> None:
        try:
            with self._failures_named():
                super().init_assignment(assignment_id, student_id)
        except Exception as exc:
            self.failure = self.failure or exc
            raise

    def convert_single_notebook(self, notebook_filename: str) -> None:
        """nbgrader's two passes; a notebook that cannot be graded is sanitized from an empty stand-in."""
        try:
            reason = (self.not_gradable or {}).get(os.path.splitext(os.path.basename(notebook_filename))[0])
            with self._failures_named(f"the graded notebook {os.path.basename(notebook_filename)}"):
                if reason is None:
                    super().convert_single_notebook(notebook_filename)
                else:
                    self._convert_stand_in(notebook_filename)
        except Exception as exc:
            self.failure = self.failure or exc
            raise

    def _convert_stand_in(self, notebook_filename: str) -> None:
        """Autograde's passes with the submitted file replaced by an empty notebook (the test cells come back)."""
        self._sanitizing = True
        self._init_preprocessors()
        resources = self.init_single_notebook_resources(notebook_filename)
        output, resources = self.exporter.from_notebook_node(new_notebook(), resources=resources)
        self.write_single_notebook(output, resources)
        built = os.path.join(self.writer.build_directory, os.path.basename(notebook_filename))
        self._sanitizing = False
        self._init_preprocessors()
        try:
            BaseConverter.convert_single_notebook(self, built)
        finally:
            self._sanitizing = True

    def _init_preprocessors(self) -> None:
        if self._sanitizing:
            self.exporter._preprocessors = []
            for pp in TRUSTED_SANITIZE_PREPROCESSORS:
                self.exporter.register_preprocessor(pp)
            for pp in self.exporter._preprocessors:
                if isinstance(pp, RestoreTestCells):
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
                pp.not_gradable = self.not_gradable
        names = [type(pp).__name__ for pp in self.exporter._preprocessors]
        if "Execute" in names or any("Execute" in n for n in names):
            raise RuntimeError(f"refusing to grade: an executing preprocessor is configured: {names}")

    @contextlib.contextmanager
    def _failures_named(self, what: str = "the student's graded folder"):
        """A disk that is full or broken, or a gradebook that cannot be written, is the grader's failure
        (:class:`InfrastructureError`), kept as the :attr:`failure` the caller raises in place of nbgrader's own
        exception."""
        try:
            yield
        except OSError as exc:
            if not is_disk_failure(exc):
                raise
            raise disk_failure(exc, what) from exc
        except sqlalchemy.exc.OperationalError as exc:
            if "full" not in str(exc) and "disk I/O" not in str(exc):
                raise
            raise InfrastructureError(f"the gradebook could not be written: {exc.orig}") from exc

    def init_single_notebook_resources(self, notebook_filename: str) -> dict:
        resources = super().init_single_notebook_resources(notebook_filename)
        resources["nbgrader"]["build_directory"] = self.writer.build_directory
        return resources
