"""One student's grading split where it can run elsewhere: prepare, grade, record.

``autograder grade`` grades a student by running nbgrader's converter
(:class:`~autograder.nbgrader_autograde.TrustedAutograde`), whose grading pass
calls :func:`~autograder.nbgrader_bridge.grade_notebook` on each sanitized
notebook. To grade on other machines the same work is cut in three:

1. :func:`prepare_job` (the instructor's process): each submitted notebook
   that can be graded (:mod:`autograder.gradable`) sanitized exactly as
   nbgrader's first pass does it (test cells restored from the gradebook), in
   memory; nothing is written.  A notebook that cannot be graded goes no
   further: the job carries the reason.
2. :func:`run_job` (a worker, anywhere): :func:`grade_notebook` on each
   sanitized notebook, the one grading function both paths call, with
   today's isolation inside (a fresh child process per exercise). It returns
   the gradings and writes nothing.
3. :func:`record_gradings` (the instructor's process again): the converter
   run as in the sequential path, with the worker's gradings handed to its
   grading pass instead of grading again, so nbgrader writes the gradebook,
   the autograded notebook and the results file exactly as it would have.
   The graded folder is written under a temporary name and renamed into
   place once nbgrader is done; an error on the way is a
   :class:`~autograder.outcome.GradingFailed` with its reason.

The grading pass checks each grading against the notebook it is written into
(:func:`~autograder.nbgrader_bridge.grading_input_digest`), so a submission
changed while its grading ran is never scored from the older one.  A class's
grading, in this process or on a cluster, is :mod:`autograder.class_run`'s and
:mod:`autograder.cluster`'s.
"""

from __future__ import annotations

import os
import platform
import shutil
import time
from dataclasses import dataclass, field
from typing import Callable

import nbformat
from nbconvert.writers import FilesWriter

from .course import assignment_notebooks, gradebook_snapshot, restore_gradebook, source_root, submission_folder
from .course_secret import student_key
from .export import gradebook_row, pending_points
from .gradable import submission_problems
from .grade_cells import graded_exercises
from .grading_record import StudentEntry
from .infrastructure import InfrastructureError
from .nbgrader_autograde import TrustedAutograde
from .nbgrader_bridge import NotebookGrading, grade_notebook
from .outcome import GradingFailed, exception_reason
from .phase_times import NOTEBOOK_PARSING, PhaseTimes
from .result import speed_is_pending
from .safe_writes import PARTIAL_SUFFIX, replace_folder


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
    #: notebook name -> why it cannot be graded (not in ``notebooks``: there is nothing of it to grade)
    not_gradable: dict[str, str] = field(default_factory=dict)
    #: wall seconds per phase of making this job (autograder.phase_times): nbgrader's sanitizing pass
    phases: dict[str, float] = field(default_factory=dict)


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
    started = time.perf_counter()
    folder = submission_folder(cd, assignment, student)
    names = assignment_notebooks(cd, assignment)
    problems = submission_problems(folder, assignment, names, source_root(cd))
    notebooks = {}
    for name in names:
        path = os.path.join(folder, f"{name}.ipynb")
        if name in problems or not os.path.isfile(path):
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
                      timeout_s=timeout_s, submission=submission, grade_fn=grade_fn, not_gradable=problems,
                      phases={NOTEBOOK_PARSING: time.perf_counter() - started})


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


def run_job(job: GradingJob, log: Callable[[str], None] | None = None) -> JobOutcome:
    """Grade every notebook of one submission (runs on a worker; writes nothing); ``log`` is told each
    exercise's line as it is graded."""
    started = time.perf_counter()
    lines: list[str] = []

    def told(line: str) -> None:
        lines.append(line)
        if log is not None:
            log(line)

    gradings = {}
    for name, text in job.notebooks.items():
        read = PhaseTimes()
        with read.phase(NOTEBOOK_PARSING):
            nb = nbformat.reads(text, as_version=4)
            exercises = list(graded_exercises(nb))
        gradings[name] = grade_notebook(nb, exercises, student=job.student, notebook=name,
                                        student_key=job.student_key, timeout_s=job.timeout_s, grade_fn=job.grade_fn,
                                        log=told)
        read.merge(gradings[name].phases)
        gradings[name].phases = read.to_dict()
    return JobOutcome(student=job.student, gradings=gradings, worker=worker_name(),
                      seconds=time.perf_counter() - started, lines=lines)


def record_gradings(config, cd, assignment: str, student: str, gradings: dict[str, NotebookGrading],
                    not_gradable: dict[str, str] | None = None, progress: Callable[[str], None] | None = None) -> None:
    """nbgrader's converter for one student: sanitize, take ``gradings`` (by notebook), write the gradebook.

    Each notebook of ``not_gradable`` scores 0, its test cells saying why. The graded folder
    (``autograded/<student>/<assignment>/``) is written under a temporary name and renamed into
    place at the end. Raises :class:`~autograder.outcome.GradingFailed`, with the reason, when
    nbgrader could not record it: the gradebook and the graded folder then stay as they were.
    """
    conv = TrustedAutograde(coursedir=cd, config=config)
    conv.force = True
    conv.create_student = True
    conv.progress = progress
    conv.gradings = gradings
    conv.not_gradable = dict(not_gradable or {}) or None
    conv.staged = True
    final = cd.format_path(cd.autograded_directory, student, assignment)
    partial = final + PARTIAL_SUFFIX
    before = gradebook_snapshot(cd, assignment, student)
    try:
        conv.start()
        if not os.path.isdir(partial):
            raise RuntimeError("nbgrader wrote no graded notebook")
    except Exception as exc:
        if os.path.lexists(partial):
            shutil.rmtree(partial)
        cause = conv.failure or exc
        reason = f"nbgrader could not record the grading: {exception_reason(cause)}"
        try:
            restore_gradebook(cd, assignment, student, before)
        except Exception as undo:  # said, so that the instructor knows the gradebook may hold a part of it
            reason += f" (and the gradebook could not be put back as it was: {exception_reason(undo)})"
        # a full disk or an unwritable gradebook is the grader's own failure: tried again in this run
        raise (InfrastructureError if isinstance(cause, InfrastructureError) else GradingFailed)(reason) from cause
    replace_folder(partial, final)


def graded_entry(cd, assignment: str, student: str, *, submission: str, settings: str, worker: str,
                 attempts: int, seconds: float) -> StudentEntry:
    """The record of a grading just written: the gradebook's total and pending points, each exercise's backend
    and device, and whether it was graded or was not gradable (with the reasons of the notebooks that were not)."""
    row = gradebook_row(cd, assignment, student)
    exercises = row["exercises"].values()
    return StudentEntry(status=row["outcome"].kind, submission=submission, settings=settings, score=row["score"],
                        max_score=row["max_score"], reason=row["outcome"].reason,
                        backends=[r["backend"] for r in exercises if r.get("backend")],
                        devices=[r.get("device", "") for r in exercises if r.get("backend")],
                        speed_pending=any(speed_is_pending(r) for r in exercises), pending_points=pending_points(row),
                        provisional=any(bool(r.get("provisional")) for r in exercises),
                        worker=worker, attempts=attempts, seconds=round(seconds, 3))
