"""A failure of the grader's own is an infrastructure error of that grading: no score, retried, no one else's.

The issue's case: a full disk.  Here the disk is really full (a tmpfs of 64 KiB, filled, mounted where one
student's graded notebook is written; root only, which CI's container and the GPU runners are): that
student's grading ends as a failure of the grader with the reason, no score is written for it, the students
graded before and after it get exactly the scores they get without it, and once there is room again the next
run grades it (``the last grading failed``) to its twin's score.  A stand-in grades the kernels
(test_nbgrader_bridge.py's), so that what is tested is the way back from the failure, not the kernels.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from autograder import nbgrader_bridge
from autograder.class_run import INFRASTRUCTURE_ATTEMPTS, ClassRun, grade_sequentially
from autograder.course import load_config
from autograder.grading_record import FAILED, GRADED
from autograder.infrastructure import InfrastructureError
from nbgrader_course import ASSIGNMENT, SUBMISSIONS, gradebook_grades, released_course, submit
from test_nbgrader_bridge import StandIn

STUDENTS = ("ada", "victim", "zoe")  # graded in this order: one before the full disk, one after


def _mount_full_tmpfs(path: Path) -> str:
    """A 64 KiB tmpfs at ``path``, filled to the last block; '' when mounted, else why it cannot be."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], capture_output=True, text=True)
    if done.returncode:
        return f"a tmpfs cannot be mounted here ({done.stderr.strip() or done.returncode})"
    try:
        with open(path / "ballast", "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError:
        pass
    return ""


@pytest.fixture
def course(tmp_path, monkeypatch):
    monkeypatch.setattr(nbgrader_bridge, "_default_grade_fn", lambda: StandIn())
    course = released_course(tmp_path, [])
    for student in STUDENTS:  # three twins: the same correct notebook
        submit(course, student, SUBMISSIONS / "correct.ipynb")
    return course


def _run(course: Path) -> ClassRun:
    config = load_config(course)
    return ClassRun(config, ASSIGNMENT, course_secret="infrastructure test secret")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a full filesystem needs root (CI's container and the GPU "
                                              "runners grade as root)")
def test_a_full_disk_fails_that_grading_without_a_score_and_it_is_graded_again(course):
    full = course / "autograded" / "victim"
    reason = _mount_full_tmpfs(full)
    if reason:
        pytest.skip(reason)
    said: list[str] = []
    try:
        run = _run(course)
        failures = grade_sequentially(run, list(STUDENTS), said.append)
    finally:
        subprocess.run(["umount", "-l", str(full)], check=True)
    assert failures == ["victim"]
    entry = run.record.students["victim"]
    assert entry.status == FAILED and entry.score is None and entry.attempts == INFRASTRUCTURE_ATTEMPTS
    assert "the grader could not write" in entry.reason and "ENOSPC" in entry.reason
    assert any(line.startswith("  victim is graded again: the grader failed") for line in said), said
    grades = gradebook_grades(course)
    assert all(g["auto"] is None for g in grades.get("victim", {}).values()), grades.get("victim")
    # the students graded before and after the full disk: what they get without it
    assert sum(g["auto"] for g in grades["ada"].values()) == sum(g["auto"] for g in grades["zoe"].values()) == 17.0

    again = _run(course)
    todo, _ = again.to_grade(list(STUDENTS), {s: again.submission(s) for s in STUDENTS}, gpu_run=False)
    assert todo == ["victim"]
    assert again.record.needs_grading("victim", again.submission("victim"), again.settings, False) == \
        "the last grading failed"
    assert grade_sequentially(again, todo, said.append) == []
    assert again.record.students["victim"].status == GRADED
    assert sum(g["auto"] for g in gradebook_grades(course)["victim"].values()) == 17.0


def test_a_failure_of_the_grader_is_never_turned_into_a_score(course):
    """Any exception of the grading engine (it never raises for what a submission does) ends that student's
    grading as the grader's failure, retried, and recorded with its reason."""

    def broken(sub, **kwargs):
        raise RuntimeError("the engine's own bug")

    calls = []

    def counting(sub, **kwargs):
        calls.append(sub.exercise)
        return broken(sub, **kwargs)

    nbgrader_bridge_fn = nbgrader_bridge._default_grade_fn
    try:
        nbgrader_bridge._default_grade_fn = lambda: counting
        run = _run(course)
        assert grade_sequentially(run, ["ada"], lambda line: None) == ["ada"]
    finally:
        nbgrader_bridge._default_grade_fn = nbgrader_bridge_fn
    entry = run.record.students["ada"]
    assert entry.status == FAILED and "the grader failed on saxpy" in entry.reason and "the engine's own bug" in entry.reason
    assert entry.attempts == INFRASTRUCTURE_ATTEMPTS
    assert len(calls) >= INFRASTRUCTURE_ATTEMPTS  # tried again
    assert all(g["auto"] is None for g in gradebook_grades(course).get("ada", {}).values())


def test_grade_notebook_lets_the_grader_s_failure_through():
    import nbformat

    nb = nbformat.read(SUBMISSIONS / "correct.ipynb", as_version=4)

    def full_disk(sub, **kwargs):
        raise InfrastructureError("no room for the arrays")

    with pytest.raises(InfrastructureError, match="no room"):
        nbgrader_bridge.grade_notebook(nb, ["saxpy"], student="s", student_key="k", grade_fn=full_disk)
