"""Each student's feedback page: nbgrader's GenerateFeedback, saying what the grading's outcome was.

nbgrader writes ``feedback/<student>/<assignment>/<notebook>.html`` from the
graded notebook and the gradebook.  Its page gives every test cell a
"Score: x / y"; here :class:`FeedbackFacts` (a preprocessor after nbgrader's
``GetGrades``) and the template ``templates/feedback/dlk_feedback.html.j2``
(which extends nbgrader's ``feedback`` template) make the header and the test
cells say what the exports say:

* the outcome: graded, or not gradable with the reason (score 0);
* where it was graded ("NVIDIA H100 80GB HBM3", "CPU emulator (no GPU)");
* speed points not measured (graded without a GPU) as pending, the total as
  "14 of 14 measured points, 6 pending", never as zeros.

A student whose last grading failed gets a short page saying so, with the
reason, in place of any older one: the graded notebook still there is of an
earlier submission.  Each student's pages are written with Ctrl-C held back
(:func:`autograder.safe_writes.uninterrupted`), so an interrupted command
leaves whole pages and can be run again.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor
from nbgrader.preprocessors import GetGrades
from traitlets import Bool

from .course import assignment_notebooks, coursedir
from .feedback import device_label
from .grade_cells import grade_target
from .grading_record import GradingRecord
from .nbgrader_bridge import RESULTS_SUFFIX, read_results_file, results_outcome
from .outcome import FAILED, NOT_GRADABLE, Outcome, outcome_text, total_text
from .result import speed_is_pending
from .safe_writes import uninterrupted, write_text

#: Beside nbgrader's template folders: ``feedback/`` here holds our page, which extends nbgrader's ``feedback/index``.
TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATE_FILE = "dlk_feedback.html.j2"


class FeedbackFacts(Preprocessor):
    """What the page says beyond nbgrader's scores: the outcome, the device, the pending speed points."""

    enabled = Bool(True)  # nbconvert's preprocessors are off unless told

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        folder = (resources.get("metadata") or {}).get("path", "")
        results = read_results_file(os.path.join(folder, info["notebook"] + RESULTS_SUFFIX))
        exercises = results.get("exercises", {})
        pending = 0.0
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader") or {}
            if not meta.get("grade"):
                continue
            target = None
            if cell.cell_type == "code":
                # The points nbgrader read from the cell ("0.0" for a pending speed) are in its heading instead.
                cell.outputs = [o for o in cell.outputs if o.get("output_type") != "execute_result"]
                target = grade_target(cell.source)
            meta["dlk_label"] = f"Test cell: {target.exercise} ({target.part})" if target else "Test cell"
            points = float(meta.get("points") or 0.0)
            if target is not None and target.part == "speed" and speed_is_pending(exercises.get(target.exercise, {})):
                pending += points
                meta["dlk_score"] = f"Score: pending, {points:g} points measured when graded on a GPU"
            else:
                meta["dlk_score"] = f"Score: {float(meta.get('score') or 0.0):g} / {points:g}"
        outcome = results_outcome(results)
        devices = sorted({device_label(r.get("backend", ""), r.get("device", "")) for r in exercises.values()
                          if r.get("backend")})
        resources["dlk"] = {
            "total": "Score: " + total_text(float(info["score"]), float(info["max_score"]), pending),
            "outcome": outcome_text(outcome) if outcome.kind == NOT_GRADABLE else "",
            "devices": ", ".join(devices) or "no device (no kernel ran)",
            "pending": pending,
            "pending_note": (f"Speed was not measured without a GPU: its {pending:g} points are pending, neither "
                             f"failed nor zero, until the course is graded on a GPU."),
        }
        return nb, resources


def configure(config) -> None:
    """Make nbgrader's GenerateFeedback in ``config`` write pages with this module's facts and template."""
    import nbgrader

    nbgrader_templates = Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"
    config.HTMLExporter.template_name = "feedback"
    config.HTMLExporter.template_file = TEMPLATE_FILE
    config.HTMLExporter.extra_template_basedirs = [str(TEMPLATES), str(nbgrader_templates)]
    config.GenerateFeedback.preprocessors = [GetGrades, FeedbackFacts, CSSHTMLHeaderPreprocessor]


def failed_page(assignment: str, notebook: str, reason: str) -> str:
    """The page of a student whose last grading failed: the reason, and no score."""
    e = html.escape
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{e(notebook)}</title></head><body>\n"
            f"<h4>{e(notebook)} ({e(assignment)}): not graded yet</h4>\n"
            f"<p><strong>{e(outcome_text(Outcome(FAILED, reason)))}</strong></p>\n"
            "<p>This is not a score: the grader could not grade your submission, and your instructor grades it "
            "again. Nothing needs doing on your side.</p>\n</body></html>\n")


def write_feedback(config, assignment: str, students: list[str], convert) -> list[str]:
    """Each student's pages (``convert(coursedir)`` runs nbgrader's converter for one student); returns them."""
    record = GradingRecord(config.CourseDirectory.root, assignment)
    written = []
    for student in students:
        cd = coursedir(config, assignment, student)
        entry = record.students.get(student)
        with uninterrupted():
            if entry is not None and entry.status == FAILED:
                written += _write_failed_pages(cd, assignment, student, entry.reason)
            else:
                convert(cd)
                folder = cd.format_path(cd.feedback_directory, student, assignment)
                written += sorted(str(p) for p in Path(folder).glob("*.html"))
    return written


def _write_failed_pages(cd, assignment: str, student: str, reason: str) -> list[str]:
    folder = cd.format_path(cd.feedback_directory, student, assignment)
    paths = []
    for notebook in assignment_notebooks(cd, assignment):
        path = os.path.join(folder, f"{notebook}.html")
        write_text(path, failed_page(assignment, notebook, reason))
        paths.append(path)
    return paths
