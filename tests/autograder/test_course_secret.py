"""One course secret, created once and reused: regrading draws the same hidden cases."""

import argparse
import os
import stat
import subprocess

from autograder.cli import _grading_secret
from autograder.exercises import all_exercises
from autograder.case_plan import plan_cases

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _grade_args(course, secret_file=None):
    return argparse.Namespace(course_dir=str(course), secret_file=secret_file)


def _hidden_plan(secret: str, student: str) -> list[dict]:
    ex = all_exercises()["saxpy"]
    return plan_cases(ex, {"block": 256, "grid": 64}, "hidden", secret.encode(), student)


def test_two_gradings_of_one_course_draw_the_same_hidden_cases(tmp_path, monkeypatch):
    monkeypatch.delenv("DLK_GRADER_SECRET", raising=False)
    course = tmp_path / "course"
    course.mkdir()
    first = _grading_secret(_grade_args(course))
    path = course / "course_secret"
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600
    second = _grading_secret(_grade_args(course))
    assert first == second
    # the per-student hidden sizes and seeds: identical from one grading to the next
    assert _hidden_plan(first, "alice") == _hidden_plan(second, "alice")
    # another course has its own secret, so other hidden sizes
    other = tmp_path / "other"
    other.mkdir()
    sizes = lambda s: [c["shape"]["n"] for c in _hidden_plan(s, "alice")]
    assert sizes(_grading_secret(_grade_args(other))) != sizes(first)


def test_secret_file_and_environment_take_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("DLK_GRADER_SECRET", "from-env")
    assert _grading_secret(_grade_args(tmp_path)) == "from-env"
    assert not (tmp_path / "course_secret").exists()
    given = tmp_path / "s.txt"
    given.write_text("from-file\n")
    assert _grading_secret(_grade_args(tmp_path, str(given))) == "from-file"


def test_the_course_secret_is_ignored_by_git():
    ignored = subprocess.run(["git", "check-ignore", "-q", "course_secret"], cwd=ROOT)
    assert ignored.returncode == 0


def test_regrading_gives_identical_correctness_scores(tmp_path, monkeypatch):
    """Grade one kernel twice with the course secret: same hidden sizes, same seeds, same score."""
    from autograder.isolation import grade_submission
    from planted_corpus import CORPUS, read_corpus_file

    monkeypatch.delenv("DLK_GRADER_SECRET", raising=False)
    planted = read_corpus_file(CORPUS / "saxpy" / "stride_off_by_one.edit").submission
    runs = []
    for _ in range(2):
        secret = _grading_secret(_grade_args(tmp_path))
        result = grade_submission(planted, mode="hidden", secret=secret.encode(),
                                  student_id="alice", backend="cpu")
        runs.append((result.correctness_score, [(s.label, s.passed) for s in result.shapes]))
    assert runs[0] == runs[1]
    assert 0 < runs[0][0] < 6  # partly right: the score depends on which hidden sizes were drawn
