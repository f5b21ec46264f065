"""What has been graded, of which submission, on which GPU: the record a grading run resumes from.

nbgrader's gradebook holds scores; it has no place for "this grading failed
and why", for the hash of the submission a score belongs to, or for the GPU
model a speed-up was measured on. This record holds them, one JSON file per
assignment (``<course>/grading_record/<assignment>.json``), written only by the
process that writes the gradebook, after each student, atomically (a run
stopped at any moment leaves the record of every student finished before).

Each entry ends in one of the three outcomes (:mod:`autograder.outcome`):
graded, not gradable (scored 0, with the reason), or failed (no score, with
the reason).  A student is graded again when there is no entry, when the last grading
failed, when the submitted files or the grading settings (course secret, time
limit) changed since, or when their speed points are pending or their
correctness provisional (graded without a GPU) and this run has one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from dataclasses import asdict, dataclass, field

from .outcome import FAILED, GRADED, NOT_GRADABLE, Outcome
from .safe_writes import write_text

RECORD_DIRECTORY = "grading_record"


def submission_hash(folder: str) -> str:
    """SHA-256 over every file of a submission folder (names and bytes; timestamp.txt included)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            digest.update(os.path.relpath(path, folder).encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def settings_hash(course_secret: str, timeout_s: float | None) -> str:
    """What else decides a score: the course secret (the hidden cases) and the time limit. Only a hash is stored."""
    text = json.dumps({"secret": hashlib.sha256(course_secret.encode()).hexdigest(), "timeout_s": timeout_s})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class StudentEntry:
    status: str  # GRADED, NOT_GRADABLE or FAILED
    submission: str  # submission_hash() of what was graded
    settings: str  # settings_hash() of the run
    score: float | None = None  # gradebook total when graded (0 when not gradable); None when the grading failed
    max_score: float | None = None
    reason: str = ""  # why it was not gradable, or why the grading failed ("" when graded)
    backends: list[str] = field(default_factory=list)  # "gpu" / "cpu" of the exercises graded
    devices: list[str] = field(default_factory=list)  # GPU model (or the emulator) of each exercise's grading
    speed_pending: bool = False  # correct kernels whose speed was not measured (no GPU)
    pending_points: float = 0.0  # their speed points, still to be measured
    provisional: bool = False  # correctness graded without a GPU: a grading on a GPU confirms or replaces it
    worker: str = ""  # where it ran: host and GPU index, or "this process"
    attempts: int = 1
    seconds: float = 0.0
    when: str = ""
    #: wall seconds per phase of the grading (autograder.phase_times), its exercises' summed
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def outcome(self) -> Outcome:
        return Outcome(self.status, self.reason)


class GradingRecord:
    """The record of one assignment's gradings in one course."""

    def __init__(self, course_dir: str, assignment: str):
        self.path = os.path.join(os.path.abspath(course_dir), RECORD_DIRECTORY, f"{assignment}.json")
        self.assignment = assignment
        self.students: dict[str, StudentEntry] = {}
        if os.path.exists(self.path):
            with open(self.path) as f:
                data = json.load(f)
            known = set(StudentEntry.__dataclass_fields__)
            for student, entry in data.get("students", {}).items():
                self.students[student] = StudentEntry(**{k: v for k, v in entry.items() if k in known})

    def needs_grading(self, student: str, submission: str, settings: str, gpu_run: bool) -> str:
        """Why ``student`` must be graded in this run ("" when their grade is up to date)."""
        entry = self.students.get(student)
        if entry is None:
            return "not graded yet"
        if entry.status not in (GRADED, NOT_GRADABLE):
            return "the last grading failed"
        if entry.submission != submission:
            return "the submission changed"
        if entry.settings != settings:
            return "the secret or the time limit changed"
        if gpu_run and entry.speed_pending:
            return "speed points pending (graded without a GPU)"
        if gpu_run and entry.provisional:
            return "correctness provisional (graded without a GPU)"
        return ""

    def graded(self, student: str, entry: StudentEntry) -> None:
        """A grading written to the gradebook: graded, or not gradable (scored 0) with its reason."""
        if entry.status != NOT_GRADABLE:
            entry.status = GRADED
            entry.reason = ""
        self._put(student, entry)

    def failed(self, student: str, submission: str, settings: str, reason: str, *, worker: str = "",
               attempts: int = 1, seconds: float = 0.0) -> StudentEntry:
        """A grading that did not finish: the reason, never a score."""
        entry = StudentEntry(status=FAILED, submission=submission, settings=settings, reason=reason, worker=worker,
                             attempts=attempts, seconds=round(seconds, 3))
        self._put(student, entry)
        return entry

    def _put(self, student: str, entry: StudentEntry) -> None:
        entry.when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        self.students[student] = entry
        self.save()

    def save(self) -> None:
        data = {"assignment": self.assignment,
                "students": {s: asdict(e) for s, e in sorted(self.students.items())}}
        write_text(self.path, json.dumps(data, indent=1) + "\n")  # a reader sees the old record or the new one

    def gpu_models(self, students: list[str] | None = None) -> dict[str, list[str]]:
        """GPU model -> the students whose speed was measured on it (graded entries only)."""
        out: dict[str, list[str]] = {}
        for student, entry in sorted(self.students.items()):
            if entry.status != GRADED or (students is not None and student not in students):
                continue
            for backend, device in zip(entry.backends, entry.devices):
                if backend == "gpu" and device and student not in out.setdefault(device, []):
                    out[device].append(student)
        return out


def mixed_gpu_warning(assignment: str, models: dict[str, list[str]]) -> str:
    """A warning when one assignment's speed-ups were measured on more than one GPU model ("" otherwise)."""
    if len(models) < 2:
        return ""
    parts = ", ".join(f"{model} ({len(students)} student{'s' if len(students) != 1 else ''})"
                      for model, students in sorted(models.items()))
    return (f"warning: {assignment} was graded on mixed GPU models: {parts}. Each speed-up is against the "
            f"reference kernel on the same GPU, but speed points and the leaderboard compare students measured "
            f"on different cards; grade the class on one model (--regrade) for a like-for-like ranking.")
