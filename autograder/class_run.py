"""Grading a class: which submissions to grade, and each grading recorded as soon as it ends.

``autograder grade`` grades a class in this process, one student after
another (:func:`grade_sequentially`), or as Dask tasks
(:func:`autograder.cluster.grade_on_cluster`).  Both go through one
:class:`ClassRun`, which writes each student's grading into nbgrader's
gradebook (:func:`autograder.class_grading.record_gradings`) and into the
grading record (:class:`autograder.grading_record.GradingRecord`: the hash of
the submission graded, the settings, where and how long it ran, or why it
failed), so that a run stopped at any point loses nothing already graded and
the next one grades only what is missing or changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from traitlets.config import Config

from .class_grading import GradingJob, graded_entry, prepare_job, record_gradings
from .course import coursedir, students_in_gradebook, submission_folder
from .grading_record import GradingRecord, StudentEntry, mixed_gpu_warning, settings_hash, submission_hash
from .infrastructure import InfrastructureError
from .nbgrader_bridge import NotebookGrading

#: Where a grading in the instructor's own process ran, in the record.
THIS_PROCESS = "this process"
#: Gradings of one student the grader's own failures (autograder.infrastructure) may cost in one run, before the
#: student is recorded as a failed grading (graded again by the next run).
INFRASTRUCTURE_ATTEMPTS = 2


@dataclass
class ClassRun:
    """One assignment of one course, graded with one course secret and time limit."""

    config: Config
    assignment: str
    course_secret: str
    timeout_s: float | None = None  # per exercise, as given; None: the engine's default
    record: GradingRecord = field(init=False)
    settings: str = field(init=False)  # settings_hash() of this run

    def __post_init__(self):
        if self.timeout_s is not None:
            self.timeout_s = float(self.timeout_s)
            self.config.TrustedGrade.timeout_s = self.timeout_s
        # what nbgrader's grading pass (TrustedGrade) grades with in this process
        self.config.TrustedGrade.course_secret = self.course_secret
        self.record = GradingRecord(self.config.CourseDirectory.root, self.assignment)
        self.settings = settings_hash(self.course_secret, self.timeout_s)

    def coursedir(self, student: str = "*"):
        return coursedir(self.config, self.assignment, student)

    def submission(self, student: str) -> str:
        """The hash of what ``student`` submitted (every file of the submission's folder)."""
        return submission_hash(submission_folder(self.coursedir(student), self.assignment, student))

    def to_grade(self, students: list[str], submitted: dict[str, str], gpu_run: bool,
                 regrade: bool = False) -> tuple[list[str], list[str]]:
        """(to grade, up to date): a student is graded again when missing or changed (or every one, ``regrade``)."""
        in_gradebook = students_in_gradebook(self.coursedir(), self.assignment)
        todo, up_to_date = [], []
        for student in students:
            why = "--regrade" if regrade else self.record.needs_grading(student, submitted[student], self.settings,
                                                                         gpu_run)
            if not why and student not in in_gradebook:
                why = "not in the gradebook"
            (todo if why else up_to_date).append(student)
        return todo, up_to_date

    def job(self, student: str, submission: str) -> GradingJob:
        """What a worker needs to grade ``student`` (their key, never the course secret)."""
        return prepare_job(self.config, self.coursedir(student), self.assignment, student,
                           course_secret=self.course_secret, timeout_s=self.timeout_s, submission=submission)

    def write_gradebook(self, student: str, gradings: dict[str, NotebookGrading] | None,
                        progress: Callable[[str], None] | None = None) -> None:
        """nbgrader writes ``student``'s grades: of ``gradings`` made elsewhere, else graded here now."""
        record_gradings(self.config, self.coursedir(student), self.assignment, student, gradings, progress=progress)

    def graded(self, student: str, *, submission: str, worker: str, attempts: int, seconds: float) -> StudentEntry:
        """The record of a grading just written to the gradebook."""
        entry = graded_entry(self.coursedir(student), self.assignment, student, submission=submission,
                             settings=self.settings, worker=worker, attempts=attempts, seconds=seconds)
        self.record.graded(student, entry)
        return entry

    def failed(self, student: str, submission: str, reason: str, **where) -> None:
        """The record of a grading that did not finish: the reason, never a score."""
        self.record.failed(student, submission, self.settings, reason, **where)

    def mixed_gpu_warning(self) -> str:
        """A warning when the speed-ups of this assignment were measured on more than one GPU model, else ""."""
        return mixed_gpu_warning(self.assignment, self.record.gpu_models())


def grade_sequentially(run: ClassRun, students: list[str], say: Callable[[str], None]) -> list[str]:
    """Every student in this process, one after another; returns those whose grading failed."""
    failures = []
    for i, student in enumerate(students, 1):
        say(f"[{i}/{len(students)}] {student}")
        submitted = run.submission(student)
        t0 = time.perf_counter()
        error, attempts = _write_gradebook_retrying(run, student, say)
        if error is not None:  # one broken submission never stops the others
            failures.append(student)
            run.failed(student, submitted, f"{type(error).__name__}: {error}", worker=THIS_PROCESS,
                       attempts=attempts, seconds=time.perf_counter() - t0)
            say(f"  {student}: grading failed: {error} (run with -v for nbgrader's log)")
            continue
        seconds = time.perf_counter() - t0
        entry = run.graded(student, submission=submitted, worker=THIS_PROCESS, attempts=attempts, seconds=seconds)
        say(f"  {student}: {entry.score:g} / {entry.max_score:g} points; grading took {seconds:.1f} s")
    return failures


def _write_gradebook_retrying(run: ClassRun, student: str, say: Callable[[str], None]) -> tuple[Exception | None, int]:
    """(the error that ended ``student``'s grading, or None; the attempts made): a failure of the grader's own
    (:class:`~autograder.infrastructure.InfrastructureError`) is tried again, any other ends it at once."""
    for attempt in range(1, INFRASTRUCTURE_ATTEMPTS + 1):
        try:
            run.write_gradebook(student, None, progress=say)
            return None, attempt
        except InfrastructureError as exc:
            if attempt == INFRASTRUCTURE_ATTEMPTS:
                return exc, attempt
            say(f"  {student}: the grader failed ({exc.reason}); grading again")
        except Exception as exc:
            return exc, attempt
    return None, INFRASTRUCTURE_ATTEMPTS
