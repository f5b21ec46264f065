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

    def init_single_notebook_resources(self, notebook_filename: str) -> dict:
        resources = super().init_single_notebook_resources(notebook_filename)
        resources["nbgrader"]["build_directory"] = self.writer.build_directory
        return resources
