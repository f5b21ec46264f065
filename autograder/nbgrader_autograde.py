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
cells, with their hidden parts, from the gradebook; ``CheckCellMetadata``),
``SaveAutoGrades``, late penalties, submission timestamps.
"""

from __future__ import annotations

import contextlib
import os

import sqlalchemy.exc
from nbconvert.preprocessors import ClearMetadataPreprocessor
from traitlets import Callable, Dict

from nbgrader.converters import Autograde
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    IgnorePattern,
    LimitOutput,
    OverwriteCells,
    OverwriteKernelspec,
    SaveAutoGrades,
)

from .infrastructure import InfrastructureError, disk_failure, is_disk_failure
from .nbgrader_preprocessors import RestoreCellMetadata, TrustedGrade

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

    progress = Callable(None, allow_none=True, help="callable(str) told each exercise's result")
    grade_fn = Callable(None, allow_none=True, help="grade_submission replacement (tests only)")
    gradings = Dict(default_value=None, allow_none=True,
                    help="notebook name -> NotebookGrading made elsewhere (a cluster worker): written, not regraded")

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

    #: The grader's own failure that ended the last student's grading (nbgrader's converter logs the exception and
    #: raises one of its own at the end; :func:`autograder.class_grading.record_gradings` raises this instead).
    infrastructure_error: InfrastructureError | None = None

    def init_assignment(self, assignment_id: str, student_id: str) -> None:
        with self._failures_named():
            super().init_assignment(assignment_id, student_id)

    def convert_single_notebook(self, notebook_filename: str) -> None:
        with self._failures_named(f"the graded notebook {os.path.basename(notebook_filename)}"):
            super().convert_single_notebook(notebook_filename)

    @contextlib.contextmanager
    def _failures_named(self, what: str = "the student's graded folder"):
        """A disk that is full or broken, or a gradebook that cannot be written, is the grader's failure
        (:class:`InfrastructureError`), kept for the caller to raise in place of nbgrader's own exception."""
        try:
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
        except InfrastructureError as exc:
            self.infrastructure_error = exc
            raise

    def init_single_notebook_resources(self, notebook_filename: str) -> dict:
        resources = super().init_single_notebook_resources(notebook_filename)
        resources["nbgrader"]["build_directory"] = self.writer.build_directory
        return resources
