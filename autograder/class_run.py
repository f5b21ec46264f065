"""Grading a class: which submissions to grade, and each grading recorded as soon as it ends.

``autograder grade`` grades a class in this process, one student after
another (:func:`grade_sequentially`), or as Dask tasks
(:func:`autograder.cluster.grade_on_cluster`).  Both go through one
:class:`ClassRun`, which grades first (nothing is written while kernels run)
and then writes each student's grading into nbgrader's gradebook
(:func:`autograder.class_grading.record_gradings`), the graded folder and the
grading record (:class:`autograder.grading_record.GradingRecord`: the hash of
the submission graded, the settings, where and how long it ran, or why it was
not gradable or failed) together, Ctrl-C waiting until the three are written
(:func:`autograder.safe_writes.uninterrupted`).  So a run stopped at any point
loses nothing already graded, the gradebook and ``autograded/`` never
disagree, and the next run grades what is missing, failed or changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from traitlets.config import Config

from .class_grading import GradingJob, graded_entry, prepare_job, record_gradings, run_job
from .course import coursedir, students_in_gradebook, submission_folder
from .grading_record import GradingRecord, StudentEntry, mixed_gpu_warning, settings_hash, submission_hash
from .infrastructure import InfrastructureError
from .nbgrader_bridge import NotebookGrading
from .outcome import FAILED, GRADED, GradingFailed, exception_reason, outcome_summary
from .phase_times import GRADEBOOK, PhaseTimes, phase_line
from .safe_writes import uninterrupted

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
    #: students whose grading this run recorded (any outcome), or found up to date, in that order
    settled: list[str] = field(init=False, default_factory=list)
    #: say where each student's grading time went (``autograder grade --phases``)
    show_phases: bool = False

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

    def record_grading(self, job: GradingJob, gradings: dict[str, NotebookGrading], *, worker: str, attempts: int,
                       seconds: float, progress: Callable[[str], None] | None = None,
                       retried: bool = False) -> StudentEntry:
        """Write ``job``'s student's gradings (those made of ``job``, and 0 for its notebooks that are not gradable)
        to the gradebook, the graded folder and the record, all three or none: Ctrl-C waits until they are written.
        A grading nbgrader could not record is recorded as failed, with the reason; where ``retried``, a failure of
        the grader's own (:class:`~autograder.infrastructure.InfrastructureError`) is raised instead, for the
        caller to grade the student again."""
        student = job.student
        phases = PhaseTimes(job.phases)
        for grading in gradings.values():
            phases.merge(grading.phases)
        with uninterrupted():
            try:
                with phases.phase(GRADEBOOK):
                    record_gradings(self.config, self.coursedir(student), self.assignment, student, gradings,
                                    not_gradable=job.not_gradable, progress=progress)
            except GradingFailed as exc:
                if retried and isinstance(exc, InfrastructureError):
                    raise
                return self.failed(student, job.submission, str(exc), worker=worker, attempts=attempts,
                                   seconds=seconds)
            with phases.phase(GRADEBOOK):
                entry = graded_entry(self.coursedir(student), self.assignment, student, submission=job.submission,
                                     settings=self.settings, worker=worker, attempts=attempts, seconds=seconds)
            entry.phases = phases.to_dict()
            self.record.graded(student, entry)
            self.settled.append(student)
        return entry

    def failed(self, student: str, submission: str, reason: str, **where) -> StudentEntry:
        """The record of a grading that did not finish: the reason, never a score."""
        entry = self.record.failed(student, submission, self.settings, reason, **where)
        self.settled.append(student)
        return entry

    def grade_here(self, student: str, say: Callable[[str], None]) -> StudentEntry:
        """Grade ``student`` in this process (each exercise in its sandboxed child), then record it; a failure of
        the grader's own (:class:`~autograder.infrastructure.InfrastructureError`) is graded again, up to
        :data:`INFRASTRUCTURE_ATTEMPTS` times, before it is recorded as failed."""
        submitted = self.submission(student)
        started = time.perf_counter()
        try:
            job = self.job(student, submitted)
        except Exception as exc:  # nbgrader could not read what the gradebook needs of the notebook
            return self.failed(student, submitted, f"the submission could not be prepared for grading: "
                               f"{exception_reason(exc)}", worker=THIS_PROCESS, seconds=time.perf_counter() - started)
        attempt = 1
        while True:
            last = attempt >= INFRASTRUCTURE_ATTEMPTS
            try:
                gradings = run_job(job, log=say).gradings
                return self.record_grading(job, gradings, worker=THIS_PROCESS, attempts=attempt,
                                           seconds=time.perf_counter() - started, progress=say, retried=not last)
            except GradingFailed as exc:
                if isinstance(exc, InfrastructureError) and not last:  # the grader's own failure: once more
                    say(f"  {student} is graded again: the grader failed ({exc.reason})")
                    attempt += 1
                    continue
                return self.failed(student, submitted, str(exc), worker=THIS_PROCESS, attempts=attempt,
                                   seconds=time.perf_counter() - started)

    def graded_count(self) -> int:
        """How many students of this run have a grade now (graded, or not gradable), up to date ones included."""
        return sum(1 for s in dict.fromkeys(self.settled)
                   if self.record.students.get(s) is not None and self.record.students[s].outcome.scored)

    def mixed_gpu_warning(self) -> str:
        """A warning when the speed-ups of this assignment were measured on more than one GPU model, else ""."""
        return mixed_gpu_warning(self.assignment, self.record.gpu_models())


def entry_line(student: str, entry: StudentEntry) -> str:
    """What the console says of one student's grading, whatever its outcome."""
    took = f"; grading took {entry.seconds:.1f} s" if entry.status == GRADED else ""
    return f"  {student}: {outcome_summary(entry.outcome, entry.score, entry.max_score, entry.pending_points)}{took}"


def phases_line(entry: StudentEntry) -> str:
    """Where the time of a grading went (``autograder grade --phases``), "" when none was recorded."""
    return f"    phases: {phase_line(entry.phases)}" if entry.phases else ""


def grade_sequentially(run: ClassRun, students: list[str], say: Callable[[str], None]) -> list[str]:
    """Every student in this process, one after another; returns those whose grading failed."""
    failures = []
    for i, student in enumerate(students, 1):
        say(f"[{i}/{len(students)}] {student}")
        entry = run.grade_here(student, say)
        say(entry_line(student, entry))
        if run.show_phases and entry.phases:
            say(phases_line(entry))
        if entry.status == FAILED:
            failures.append(student)
    return failures

