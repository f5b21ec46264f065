"""``autograder grade --cluster``: a class graded as Dask tasks on the CPU emulator.

A class of 13 (right, wrong, slow and blank notebooks and the hostile suite)
is graded once in this process's way (sequentially) and once on a local Dask
cluster of two worker processes; the gradebooks must agree score for score.
Then a worker is killed in the middle of a cluster run: every student ends
graded or recorded as a failure with the reason (no score), and a second run
grades only what is missing.

The engine runs for real (a child process per exercise, emulator builds
cached per student, so the second path reuses the first one's builds);
``DLK_EMULATOR_CHECKS=0`` leaves out the emulator's second, race-finding run
to keep this quick: both paths grade under the same settings.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from autograder.phase_times import (CHILD_IMPORTS, COMPILE, GRADEBOOK, INPUTS, LAUNCHES, NOTEBOOK_PARSING,
                                    SANDBOX_START, SOURCE_CHECK, TRANSFERS, VERDICT)
from nbgrader_course import (
    ASSIGNMENT,
    NOTEBOOK,
    REPO,
    SUBMISSIONS,
    cli_env,
    gradebook_grades,
    make_course,
    results_file,
    run_cli,
    submit,
)

pytestmark = [pytest.mark.timeout(1500), pytest.mark.filterwarnings("ignore:.*not in session.*")]

#: student -> the corpus notebook they submit: 5 samples and 8 hostile notebooks, the quick ones to grade on the
#: emulator, "correct" twice (the build cache is per student, so each grades in full).  The hostile notebooks whose
#: tricks are Python only (forged metadata, a monkeypatch, a printed score, a read of the hidden tests) are graded
#: as their stub kernel, about 20 s each on the emulator: test_nbgrader_bridge.py grades them through the same
#: pipeline with a stand-in engine, and the nbgrader cycle grades the input transformer and the gradebook writer.
CLASS = {
    "correct": "correct", "correct_2": "correct", "wrong": "wrong", "slow": "slow", "blank": "blank",
    "visible_only": "visible_only", "out_of_bounds": "out_of_bounds", "compile_time_read": "compile_time_read",
    "macro_include": "macro_include", "checks_switched_off": "checks_switched_off", "forged_result": "forged_result",
    "input_transformer": "input_transformer", "write_gradebook": "write_gradebook",
}
#: The class of the run in which a worker is killed (a part of the one above, the long gradings first).
KILL_CLASS = ["correct", "correct_2", "slow", "blank", "out_of_bounds"]
ENV = {"DLK_GRADER_SECRET": "cluster-test-secret", "DLK_EMULATOR_CHECKS": "0"}
TIMEOUT_S = "60"


def course_with(tmp, students) -> "os.PathLike":
    course = make_course(tmp)
    run_cli(course, "release", ASSIGNMENT)
    for student in students:
        submit(course, student, SUBMISSIONS / f"{CLASS[student]}.ipynb")
    return course


def record(course) -> dict:
    with open(course / "grading_record" / f"{ASSIGNMENT}.json") as f:
        return json.load(f)["students"]


def graded_lines(out: str) -> set[str]:
    """The students a run says it graded (its per-student lines)."""
    return set(re.findall(r"^  (\S+): (?:[\d.]+ / 20 points|[\d.]+ of [\d.]+ measured points, [\d.]+ pending); "
                          r"grading took", out, re.M))


@pytest.fixture(scope="module")
def sequential(tmp_path_factory):
    course = course_with(tmp_path_factory.mktemp("sequential"), CLASS)
    out = run_cli(course, "grade", ASSIGNMENT, "--timeout", TIMEOUT_S, "--phases", **ENV).stdout
    print(out)
    return {"course": course, "grades": gradebook_grades(course), "out": out}


def test_the_class_is_large_and_mixed():
    kinds = {json.load(open(SUBMISSIONS / "manifest.json"))["submissions"][n]["kind"] for n in CLASS.values()}
    assert len(CLASS) >= 12 and kinds == {"sample", "hostile"}
    assert {"correct", "wrong", "slow"} <= set(CLASS.values())


def test_each_grading_says_where_its_time_went(sequential):
    """``--phases``: a line per student, the phases kept in the record, and each exercise's own phases, which
    never add up to more than the wall time of its grading (rounded to the millisecond, each)."""
    course, out = sequential["course"], sequential["out"]
    entries = record(course)
    for student, entry in entries.items():
        assert {NOTEBOOK_PARSING, GRADEBOOK} <= set(entry["phases"]), student
        assert re.search(rf"^  {student}: .*\n    phases: notebook parsing [\d.]+ s, ", out, re.M), student
    graded_kernel = {SANDBOX_START, CHILD_IMPORTS, SOURCE_CHECK, COMPILE, INPUTS, TRANSFERS, LAUNCHES, VERDICT}
    assert graded_kernel <= set(entries["correct"]["phases"])
    assert LAUNCHES not in entries["blank"]["phases"]  # the stub compiles, and nothing of it runs
    for student in CLASS:
        for exercise, res in results_file(course, student)["exercises"].items():
            assert sum(res["phases"].values()) <= res["grading_seconds"] + 0.001 * (len(res["phases"]) + 1), \
                (student, exercise, res["phases"], res["grading_seconds"])


def test_cluster_gradebook_equals_the_sequential_one(sequential, tmp_path):
    course = course_with(tmp_path, CLASS)
    proc = run_cli(course, "grade", ASSIGNMENT, "--cluster", "--workers", "2", "--timeout", TIMEOUT_S,
                   "--no-progress", **ENV)
    print(proc.stdout)
    assert "local cluster: 2 worker(s), none with a GPU" in proc.stdout
    assert graded_lines(proc.stdout) == set(CLASS)
    grades = gradebook_grades(course)
    assert set(grades) == set(CLASS)
    assert grades == sequential["grades"]  # score for score, cell for cell
    assert any(g["auto"] > 0 for cells in grades.values() for g in cells.values())
    for student in CLASS:
        ours, theirs = results_file(course, student), results_file(sequential["course"], student)
        for exercise, res in ours["exercises"].items():
            other = theirs["exercises"][exercise]
            for key in ("status", "correctness_score", "speed_score", "speed_pending", "backend", "device", "message"):
                assert res[key] == other[key], (student, exercise, key)
    # The final table and the record: everyone graded on the emulator, speed not measured.
    entries = record(course)
    assert set(entries) == set(CLASS) and all(e["status"] == "graded" for e in entries.values())
    assert all(e["score"] == sum(g["auto"] for g in grades[s].values()) for s, e in entries.items())
    assert re.search(r"^correct\s+graded\s+14 of 14 measured points, 6 pending\s+CPU emulator \(no GPU\)",
                     proc.stdout, re.M)

    # The leaderboard (course aliases): correct kernels, none ranked without a GPU, no names.
    board = run_cli(course, "leaderboard", ASSIGNMENT, **ENV).stdout
    assert "leaderboard (course aliases): feedback/leaderboard_01_cuda_from_python.html" in board
    page = (course / "feedback" / f"leaderboard_{ASSIGNMENT}.html").read_text()
    assert "none timed on a GPU yet" in page and "correct_2" not in page

    # A second run finds nothing missing or changed; a changed submission is graded again.
    again = run_cli(course, "grade", ASSIGNMENT, "--cluster", "--workers", "1", "--timeout", TIMEOUT_S,
                    "--no-progress", **ENV).stdout
    assert graded_lines(again) == set() and "add --regrade" in again
    assert f"{len(CLASS)} of {len(CLASS)} submission(s) were graded before" in again
    submit(course, "blank", SUBMISSIONS / "correct.ipynb", timestamp="2026-11-20 11:00:00.000000 UTC")
    changed = run_cli(course, "grade", ASSIGNMENT, "--cluster", "--workers", "1", "--timeout", TIMEOUT_S,
                      "--no-progress", **ENV).stdout
    assert graded_lines(changed) == {"blank"}
    assert sum(g["auto"] for g in gradebook_grades(course)["blank"].values()) == 14


def _kill_a_busy_worker(client, students: list[str], deadline_s: float = 600) -> str:
    """Wait until one of ``students``' gradings has run for a second, then SIGKILL its worker; the student."""
    seen: dict[str, float] = {}
    pids = client.run(os.getpid)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for worker, keys in client.processing().items():
            for key in map(str, keys):
                student = next((s for s in students if key.startswith(f"grade-{ASSIGNMENT}-{s}-")), None)
                if student is None:
                    continue
                first = seen.setdefault(key, time.monotonic())
                if time.monotonic() - first >= 1.0:
                    os.kill(pids[worker], signal.SIGKILL)
                    return student
        time.sleep(0.2)
    raise AssertionError("no grading was seen running")


def test_a_killed_worker_loses_nothing_and_a_rerun_grades_only_what_is_missing(sequential, tmp_path, monkeypatch):
    import dask
    from distributed import Client, LocalCluster

    from autograder.cluster import CLUSTER_CONFIG

    course = course_with(tmp_path, KILL_CLASS)
    monkeypatch.setenv("DLK_BACKEND", "cpu")
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    with dask.config.set(CLUSTER_CONFIG), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=0,
                         dashboard_address=":0") as cluster, Client(cluster) as client:
        cmd = [sys.executable, "-m", "autograder.cli", "grade", ASSIGNMENT, "--cluster", cluster.scheduler_address,
               "--retries", "0", "--timeout", TIMEOUT_S, "--no-progress", "--course-dir", str(course)]
        driver = subprocess.Popen(cmd, cwd=course, env=cli_env(**ENV), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        killed = _kill_a_busy_worker(client, ["correct", "correct_2", "slow"])
        out, err = driver.communicate(timeout=900)
        print(out, err)
        assert driver.returncode == 1, "a run with a failure must say so in its exit status"

        entries = record(course)
        assert set(entries) == set(KILL_CLASS)  # nothing lost: every student graded or failed
        failed = {s for s, e in entries.items() if e["status"] == "failed"}
        assert killed in failed
        grades = gradebook_grades(course)
        for student, entry in entries.items():
            if entry["status"] == "graded":
                assert entry["score"] == sum(g["auto"] for g in grades[student].values())
                assert grades[student] == sequential["grades"][student]
            else:
                assert "the worker grading it died" in entry["reason"] and entry["score"] is None
                assert student not in grades  # a failure is never a score
                assert re.search(rf"^{student}\s+failed to grade\s+-.*the worker grading it died", out, re.M)
        assert graded_lines(out) == set(KILL_CLASS) - failed

        client.wait_for_workers(2, timeout=120)  # the nanny started the killed worker again
        rerun = subprocess.run(cmd, cwd=course, env=cli_env(**ENV), capture_output=True, text=True, timeout=900)
        print(rerun.stdout, rerun.stderr)
        assert rerun.returncode == 0
        assert graded_lines(rerun.stdout) == failed  # only what was missing
        assert f"{len(KILL_CLASS) - len(failed)} of {len(KILL_CLASS)} submission(s) were graded before" in rerun.stdout
    assert all(e["status"] == "graded" for e in record(course).values())
    final = gradebook_grades(course)
    assert final == {s: sequential["grades"][s] for s in KILL_CLASS}
