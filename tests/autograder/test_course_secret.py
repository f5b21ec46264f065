"""One course secret, created once and reused: regrading draws the same hidden cases."""

import argparse
import os
import stat
import subprocess

import pytest

from autograder.cli import _course_secret_of
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
    first = _course_secret_of(_grade_args(course))
    path = course / "course_secret"
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600
    second = _course_secret_of(_grade_args(course))
    assert first == second
    # the per-student hidden sizes and seeds: identical from one grading to the next
    assert _hidden_plan(first, "alice") == _hidden_plan(second, "alice")
    # another course has its own secret, so other hidden sizes
    other = tmp_path / "other"
    other.mkdir()
    sizes = lambda s: [c["shape"]["n"] for c in _hidden_plan(s, "alice")]
    assert sizes(_course_secret_of(_grade_args(other))) != sizes(first)


def test_secret_file_and_environment_take_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("DLK_GRADER_SECRET", "from-env")
    assert _course_secret_of(_grade_args(tmp_path)) == "from-env"
    assert not (tmp_path / "course_secret").exists()
    given = tmp_path / "s.txt"
    given.write_text("from-file\n")
    assert _course_secret_of(_grade_args(tmp_path, str(given))) == "from-file"


def test_only_the_course_secret_module_reads_the_course_secret():
    """$DLK_GRADER_SECRET and the course's file are read (and the file made) by autograder.course_secret alone;
    every other module asks it.  The cluster names the variable only to blank it in its workers' environment."""
    import ast
    from pathlib import Path

    naming = set()
    for path in sorted((Path(ROOT) / "autograder").rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
        if "DLK_GRADER_SECRET" in literals or names & {"COURSE_SECRET_ENV", "secret_path", "read_secret_file"}:
            naming.add(path.stem)
    assert naming == {"course_secret", "cluster"}


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
        secret = _course_secret_of(_grade_args(tmp_path))
        result = grade_submission(planted, mode="hidden", student_key=secret.encode(),
                                  student_id="alice", backend="cpu")
        runs.append((result.correctness_score, [(s.label, s.passed) for s in result.shapes]))
    assert runs[0] == runs[1]
    assert 0 < runs[0][0] < 6  # partly right: the score depends on which hidden sizes were drawn


@pytest.mark.filterwarnings("ignore:.*not in session.*")
def test_a_cluster_job_carries_each_student_s_key_never_the_course_secret(tmp_path, monkeypatch):
    """What a Dask worker receives (the job, pickled as Dask sends it) holds no trace of the course
    secret; each student has a key of their own; the worker hands the engine the very key the
    sequential grading (nbgrader's pass in this process) hands it."""
    import pickle
    from dataclasses import replace

    import cloudpickle
    from nbgrader_course import ASSIGNMENT, SUBMISSIONS, make_course, run_cli, submit

    from autograder.class_grading import prepare_job, run_job
    from autograder.course import coursedir, load_config
    from autograder.cluster import Task
    from autograder.course_secret import student_key
    from autograder.result import ExerciseResult

    secret = "course secret of the cluster test 7d2e91"
    monkeypatch.delenv("DLK_GRADER_SECRET", raising=False)
    course = make_course(tmp_path)
    run_cli(course, "release", ASSIGNMENT)
    for student in ("ada", "bob"):
        submit(course, student, SUBMISSIONS / "correct.ipynb")
    config = load_config(course)
    jobs = {s: prepare_job(config, coursedir(config, ASSIGNMENT, s), ASSIGNMENT, s, course_secret=secret, timeout_s=None,
                           submission="hash") for s in ("ada", "bob")}
    for student, job in jobs.items():
        assert job.notebooks  # a real job: the sanitized notebook is in it
        payload = cloudpickle.dumps(Task(student=student, job=job)) + pickle.dumps(job)
        for trace in (secret.encode(), secret.encode().hex().encode(), secret.encode("utf-16-le")):
            assert trace not in payload
        assert job.student_key == student_key(secret, ASSIGNMENT, student)
    assert jobs["ada"].student_key != jobs["bob"].student_key
    assert student_key(secret, "another assignment", "ada") != jobs["ada"].student_key

    seen = {"cluster": [], "sequential": []}

    def recorder(path):
        def grade(sub, **kwargs):
            seen[path].append((sub.exercise, kwargs["student_id"], kwargs["student_key"]))
            return ExerciseResult(exercise=sub.exercise, status="failed")
        return grade

    run_job(replace(jobs["ada"], grade_fn=recorder("cluster")))
    config.TrustedGrade.course_secret = secret
    cd = coursedir(config, ASSIGNMENT, "ada")
    from autograder.nbgrader_autograde import TrustedAutograde

    conv = TrustedAutograde(coursedir=cd, config=config)
    conv.force = True
    conv.create_student = True
    conv.grade_fn = recorder("sequential")
    conv.start()
    assert seen["cluster"] and sorted(seen["cluster"]) == sorted(seen["sequential"])
    assert {key for _, _, key in seen["cluster"]} == {jobs["ada"].student_key.encode()}
