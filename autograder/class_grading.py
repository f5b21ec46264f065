"""One student's grading split where it can run elsewhere: prepare, grade, record.

``autograder grade`` grades a student by running nbgrader's converter
(:class:`~autograder.nbgrader_autograde.TrustedAutograde`), whose grading pass
calls :func:`~autograder.nbgrader_bridge.grade_notebook` on each sanitized
notebook. To grade on other machines the same work is cut in three:

1. :func:`prepare_job` (the instructor's process): each submitted notebook
   sanitized exactly as nbgrader's first pass does it (test cells restored
   from the gradebook), in memory; nothing is written.
2. :func:`run_job` (a worker, anywhere): :func:`grade_notebook` on each
   sanitized notebook, the one grading function both paths call, with
   today's isolation inside (a fresh child process per exercise). It returns
   the gradings and writes nothing.
3. :func:`record_gradings` (the instructor's process again): the converter
   run as in the sequential path, with the worker's gradings handed to its
   grading pass instead of grading again, so nbgrader writes the gradebook,
   the autograded notebook and the results file exactly as it would have.

The grading pass checks each grading against the notebook it is written into
(:func:`~autograder.nbgrader_bridge.grading_input_digest`), so a submission
changed while its grading ran is never scored from the older one.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .grading_record import StudentEntry

if TYPE_CHECKING:
    from .nbgrader_bridge import NotebookGrading


@dataclass
class GradingJob:
    """Everything a worker needs to grade one student's submission (plain data)."""

    assignment: str
    student: str
    notebooks: dict[str, str]  # notebook name -> the sanitized notebook (nbformat JSON)
    student_key: str  # course_secret.student_key(): this student's hidden cases derive from it, never the secret
    timeout_s: float | None = None
    submission: str = ""  # submission_hash() of the folder the notebooks were read from
    grade_fn: Callable | None = None  # grade_submission replacement (tests only)


@dataclass
class JobOutcome:
    """What a worker sends back: one grading per notebook and where they were made."""

    student: str
    gradings: dict[str, NotebookGrading]  # by notebook name
    worker: str
    seconds: float
    lines: list[str] = field(default_factory=list)  # grade_notebook's line per exercise


def submission_folder(cd, assignment: str, student: str) -> str:
    return cd.format_path(cd.submitted_directory, student, assignment)


def assignment_notebooks(cd, assignment: str) -> list[str]:
    """The notebooks of ``assignment`` the gradebook knows (nbgrader grades only those)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(cd.db_url, cd.course_id) as gb:
        try:
            return sorted(nb.name for nb in gb.find_assignment(assignment).notebooks)
        except MissingEntry:
            raise SystemExit(f"autograder: {assignment} is not in the gradebook {cd.db_url}; "
                             f"run `autograder release {assignment}` first") from None


def prepare_job(config, cd, assignment: str, student: str, *, secret: str, timeout_s: float | None,
                submission: str, grade_fn: Callable | None = None) -> GradingJob:
    """The job for one student: each submitted notebook sanitized in memory by nbgrader's first pass.

    ``secret`` (the course secret) stays here: the job carries only this student's key.
    """
    from nbconvert.writers import FilesWriter

    from .course_secret import student_key
    from .nbgrader_autograde import TrustedAutograde

    folder = submission_folder(cd, assignment, student)
    notebooks = {}
    for name in assignment_notebooks(cd, assignment):
        path = os.path.join(folder, f"{name}.ipynb")
        if not os.path.isfile(path):
            continue  # nbgrader scores a missing notebook 0 when the grading is recorded
        conv = TrustedAutograde(coursedir=cd, config=config)
        conv.writer = FilesWriter(parent=conv, config=config)  # what start() would make; nothing is written
        conv.exporter = conv.exporter_class(parent=conv, config=config)
        conv._sanitizing = True
        conv._init_preprocessors()
        resources = conv.init_single_notebook_resources(path)
        text, _ = conv.exporter.from_filename(path, resources=resources)
        notebooks[name] = text
    return GradingJob(assignment=assignment, student=student, notebooks=notebooks,
                      student_key=student_key(secret, assignment, student),
                      timeout_s=timeout_s, submission=submission, grade_fn=grade_fn)


def worker_name() -> str:
    """Where this process grades: host, Dask worker address and the GPU it sees."""
    where = platform.node()
    try:
        from distributed import get_worker

        where += f" {get_worker().address}"
    except (ImportError, ValueError):
        pass
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        where += f" GPU {visible}"
    return where


def run_job(job: GradingJob) -> JobOutcome:
    """Grade every notebook of one submission (runs on a worker; writes nothing)."""
    import nbformat

    from .grade_cells import graded_exercises
    from .nbgrader_bridge import grade_notebook

    started = time.perf_counter()
    lines: list[str] = []
    gradings = {}
    for name, text in job.notebooks.items():
        nb = nbformat.reads(text, as_version=4)
        gradings[name] = grade_notebook(nb, list(graded_exercises(nb)), student=job.student, notebook=name,
                                        student_key=job.student_key, timeout_s=job.timeout_s, grade_fn=job.grade_fn,
                                        log=lines.append)
    return JobOutcome(student=job.student, gradings=gradings, worker=worker_name(),
                      seconds=time.perf_counter() - started, lines=lines)


def record_gradings(config, cd, assignment: str, student: str, gradings: dict[str, NotebookGrading] | None,
                    progress: Callable[[str], None] | None = None) -> None:
    """nbgrader's converter for one student: sanitize, grade (or take ``gradings``), write the gradebook."""
    from .nbgrader_autograde import TrustedAutograde

    conv = TrustedAutograde(coursedir=cd, config=config)
    conv.force = True
    conv.create_student = True
    conv.progress = progress
    conv.gradings = gradings
    conv.start()


def gradebook_total(cd, assignment: str, student: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    with Gradebook(cd.db_url, cd.course_id) as gb:
        sub = gb.find_submission(assignment, student)
        return float(sub.score), float(sub.max_score)


def graded_entry(cd, assignment: str, student: str, *, submission: str, settings: str, worker: str,
                 attempts: int, seconds: float) -> StudentEntry:
    """The record of a grading just written: the gradebook's total, and each exercise's backend and device."""
    from .export import _results_file
    from .nbgrader_bridge import RESULTS_SUFFIX

    score, maximum = gradebook_total(cd, assignment, student)
    folder = cd.format_path(cd.autograded_directory, student, assignment)
    backends, devices, pending = [], [], False
    for name in assignment_notebooks(cd, assignment):
        results = _results_file(os.path.join(folder, name + RESULTS_SUFFIX))
        for res in results.get("exercises", {}).values():
            if res.get("backend"):
                backends.append(res["backend"])
                devices.append(res.get("device", ""))
            pending = pending or (bool(res.get("speed_pending")) and not res.get("speed_measured"))
    return StudentEntry(status="graded", submission=submission, settings=settings, score=score,
                        max_score=maximum, backends=backends, devices=devices, speed_pending=pending,
                        worker=worker, attempts=attempts, seconds=round(seconds, 3))
