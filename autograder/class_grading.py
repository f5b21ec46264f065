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
changed while its grading ran is never scored from the older one.  A class's
grading, in this process or on a cluster, is :mod:`autograder.class_run`'s and
:mod:`autograder.cluster`'s.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from typing import Callable

import nbformat
from nbconvert.writers import FilesWriter

from .course import assignment_notebooks, gradebook_total, submission_folder
from .course_secret import student_key
from .grade_cells import graded_exercises
from .grading_record import StudentEntry
from .nbgrader_autograde import TrustedAutograde
from .nbgrader_bridge import RESULTS_SUFFIX, NotebookGrading, grade_notebook, read_results_file
from .scoring import speed_is_pending


@dataclass
class GradingJob:
    """Everything a worker needs to grade one student's submission (plain data)."""

    assignment: str
    student: str
    notebooks: dict[str, str]  # notebook name -> the sanitized notebook (nbformat JSON)
    student_key: str  # course_secret.student_key(): this student's hidden cases derive from it (never the course secret)
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


def prepare_job(config, cd, assignment: str, student: str, *, course_secret: str, timeout_s: float | None,
                submission: str, grade_fn: Callable | None = None) -> GradingJob:
    """The job for one student: each submitted notebook sanitized in memory by nbgrader's first pass.

    ``course_secret`` stays here: the job carries only this student's key.
    """
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
                      student_key=student_key(course_secret, assignment, student),
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
    conv = TrustedAutograde(coursedir=cd, config=config)
    conv.force = True
    conv.create_student = True
    conv.progress = progress
    conv.gradings = gradings
    try:
        conv.start()
    except Exception as exc:
        if conv.infrastructure_error is not None:  # the grader's failure, not nbgrader's: say which, and why
            raise conv.infrastructure_error from exc
        raise


def graded_entry(cd, assignment: str, student: str, *, submission: str, settings: str, worker: str,
                 attempts: int, seconds: float) -> StudentEntry:
    """The record of a grading just written: the gradebook's total, and each exercise's backend and device."""
    score, maximum = gradebook_total(cd, assignment, student)
    folder = cd.format_path(cd.autograded_directory, student, assignment)
    backends, devices, pending, provisional = [], [], False, False
    for name in assignment_notebooks(cd, assignment):
        results = read_results_file(os.path.join(folder, name + RESULTS_SUFFIX))
        for res in results.get("exercises", {}).values():
            if res.get("backend"):
                backends.append(res["backend"])
                devices.append(res.get("device", ""))
            pending = pending or speed_is_pending(res)
            provisional = provisional or bool(res.get("provisional"))
    return StudentEntry(status="graded", submission=submission, settings=settings, score=score,
                        max_score=maximum, backends=backends, devices=devices, speed_pending=pending,
                        provisional=provisional,
                        worker=worker, attempts=attempts, seconds=round(seconds, 3))
