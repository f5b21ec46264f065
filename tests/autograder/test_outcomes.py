"""Three outcomes, never two: graded, not gradable (the submission's doing, 0 with the reason) and failed to
grade (ours: no score, retried), the same in the console, `status`, the CSV, Gradescope, the leaderboard and
the feedback; speed not measured is pending everywhere.

A class graded with the `autograder` command in this process, a stand-in for the grading engine (no kernels
run): ada's kernels pass on the CPU emulator (speed pending), broken's notebook was cut off by an upload,
stray submitted another assignment's notebook, the grader fails on failing's kernels (a full disk), and
nbgrader cannot write locked's grades (a locked database).
"""

from __future__ import annotations

import csv
import json
import re
import shutil

import nbformat
import pytest

import autograder.nbgrader_bridge as bridge
from autograder.exercises import get_exercise
from autograder.feedback import device_label, feedback_text, part_feedback
from autograder.gradable import notebook_problem
from autograder.result import ExerciseResult
from autograder.verdict import judge
from in_process import run_main
from nbgrader_course import ASSIGNMENT, NOTEBOOK, REPO, SUBMISSIONS, gradebook_grades, released_course, submit

pytestmark = pytest.mark.filterwarnings("ignore:.*not in session.*")

CUT_OFF = "cuda_from_python.ipynb is cut off"
STRAY = "cuda_from_python.ipynb is the notebook of 02_perceptrons_mlp (perceptrons_mlp.ipynb), not of 01_cuda_from_python"


def passing_on_the_emulator(exercise: str) -> ExerciseResult:
    """What the engine gives a correct kernel graded without a GPU: full correctness, speed pending."""
    ex = get_exercise(exercise)
    return ExerciseResult(exercise=exercise, status="passed", correctness_score=ex.correctness_points,
                          correctness_max=ex.correctness_points, speed_max=ex.speed_points, speed_pending=True,
                          speed_note="not measured: this ran on the CPU emulator", backend="cpu",
                          device="CPU emulator on AMD EPYC", message="Correct on all cases.")


class StandIn:
    """Passes every kernel on the emulator; fails as the grader itself would for the students in ``broken_for``."""

    def __init__(self, broken_for: set[str]):
        self.broken_for = broken_for

    def __call__(self, sub, **kwargs) -> ExerciseResult:
        if kwargs["student_id"] in self.broken_for:
            raise OSError(28, "No space left on device")
        return passing_on_the_emulator(sub.exercise)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("outcomes")
    course = released_course(tmp, ["correct"])
    shutil.move(course / "submitted" / "correct", course / "submitted" / "ada")
    cut = tmp / "cut.ipynb"
    cut.write_bytes((SUBMISSIONS / "correct.ipynb").read_bytes()[:3000])
    submit(course, "broken", cut)
    submit(course, "stray", course / "solutions" / "02_perceptrons_mlp" / "perceptrons_mlp.ipynb")
    submit(course, "failing", SUBMISSIONS / "correct.ipynb")
    submit(course, "locked", SUBMISSIONS / "correct.ipynb")
    return course


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """The first `autograder grade` of the class, then status, export and feedback, as an instructor runs them."""
    from nbgrader.preprocessors import SaveAutoGrades

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLK_GRADER_SECRET", "outcomes-secret")
        mp.setattr(bridge, "_default_grade_fn", lambda: StandIn({"failing"}))
        save = SaveAutoGrades.preprocess

        def locked_database(self, nb, resources):
            if resources["nbgrader"]["student"] == "locked":
                raise RuntimeError("database is locked")
            return save(self, nb, resources)

        mp.setattr(SaveAutoGrades, "preprocess", locked_database)
        out = {"grade": run_main("grade", ASSIGNMENT, "--course-dir", str(course))}
        mp.setattr(SaveAutoGrades, "preprocess", save)
        tmp = tmp_path_factory.mktemp("exports")
        out["status"] = run_main("status", ASSIGNMENT, "--course-dir", str(course))
        out["export"] = run_main("export", ASSIGNMENT, "--csv", str(tmp / "grades.csv"), "--gradescope",
                                str(tmp / "gradescope"), "--course-dir", str(course))
        out["feedback"] = run_main("feedback", ASSIGNMENT, "--course-dir", str(course))
        out["grades"] = gradebook_grades(course)
        out["csv"] = {r["student"]: r for r in csv.DictReader(open(tmp / "grades.csv"))}
        out["gradescope"] = {p.parent.name: json.loads(p.read_text()) for p in (tmp / "gradescope").glob("*/results.json")}
    return out


def _line(text: str, student: str) -> str:
    (line,) = [l for l in text.splitlines() if l.startswith(f"  {student}: ")]
    return line


# ------------------------------------------------------------------ the console


def test_the_console_names_each_outcome_and_pending_speed(graded):
    code, out, err = graded["grade"]
    assert code == 1, "a failed grading must show in the exit status"
    assert err == "" and "Traceback" not in out
    assert re.match(r"  ada: 14 of 14 measured points, 6 pending; grading took [\d.]+ s$", _line(out, "ada"))
    assert "  ada saxpy: passed, correctness 6/6, speed pending [CPU emulator (no GPU)]" in out
    assert "speed 0/2" not in out and "CPU emulator on" not in out
    assert _line(out, "broken").startswith(f"  broken: not gradable: {CUT_OFF}") and "0 / 20 points" in out
    assert _line(out, "stray") == f"  stray: not gradable: {STRAY}; 0 / 20 points"
    failing = _line(out, "failing")
    assert "failed to grade: the grader failed on saxpy: OSError: [Errno 28] No space left on device" in failing
    assert "no score written" in failing and "grades it again" in failing
    locked = _line(out, "locked")
    assert "failed to grade: nbgrader could not record the grading: RuntimeError: database is locked" in locked
    assert "Please see the" not in out
    assert re.search(r"^graded 1 of 5 in [\d.]+ s; 2 not gradable .*; 2 failed to grade", out, re.M)


def test_status_lists_one_line_per_student(graded):
    code, out, err = graded["status"]
    assert code == 0 and err == ""
    lines = {l.split()[0]: l for l in out.splitlines() if not l.startswith(ASSIGNMENT)}
    assert set(lines) == {"ada", "broken", "stray", "failing", "locked"}
    assert lines["ada"].endswith("14 of 14 measured points, 6 pending")
    assert f"not gradable: {CUT_OFF}" in lines["broken"] and "0 / 20 points" in lines["broken"]
    assert "failed to grade: the grader failed on saxpy" in lines["failing"]
    assert "failed to grade: nbgrader could not record" in lines["locked"]
    assert out.splitlines()[-1] == f"{ASSIGNMENT}: 1 graded, 2 not gradable, 2 failed to grade"


# ------------------------------------------------------------------ what is written


def test_a_failed_grading_writes_no_score_and_the_gradebook_agrees_with_autograded(graded, course):
    grades = graded["grades"]
    assert set(grades) == {"ada", "broken", "stray"}  # a failure is never a score, not even a 0
    assert sum(g["auto"] for g in grades["ada"].values()) == 14
    assert all(g["auto"] == 0 for s in ("broken", "stray") for g in grades[s].values())
    folders = {p.name for p in (course / "autograded").iterdir() if (p / ASSIGNMENT).is_dir()}
    assert folders == set(grades)
    assert not list((course / "autograded").glob("*/*.partial")) and not list((course / "autograded").glob("*/*.old"))
    record = json.loads((course / "grading_record" / f"{ASSIGNMENT}.json").read_text())["students"]
    assert {s: e["status"] for s, e in record.items()} == {
        "ada": "graded", "broken": "not gradable", "stray": "not gradable", "failing": "failed", "locked": "failed"}
    assert record["failing"]["score"] is None and record["stray"]["score"] == 0
    assert record["stray"]["reason"] == STRAY


def test_the_csv_says_each_outcome(graded):
    rows = graded["csv"]
    assert set(rows) == {"ada", "broken", "stray", "failing", "locked"}
    assert rows["ada"]["outcome"] == "graded" and rows["ada"]["score"] == "14"
    assert rows["ada"]["saxpy_speed"] == "not measured" and rows["ada"]["pending_points"] == "6"
    assert rows["ada"]["device"] == "CPU emulator (no GPU)"
    assert rows["broken"]["outcome"].startswith(f"not gradable: {CUT_OFF}") and rows["broken"]["score"] == "0"
    assert rows["broken"]["saxpy_status"] == "not_gradable"
    failing = rows["failing"]
    assert failing["outcome"].startswith("failed to grade: the grader failed on saxpy")
    assert failing["score"] == failing["final_score"] == failing["saxpy_correctness"] == "" and failing["max_score"] == "20"
    assert "export" in graded and "2 student(s) failed to grade (failing, locked)" in graded["export"][1]


def test_gradescope_says_each_outcome_and_marks_no_test_failed_for_a_failed_grading(graded):
    gs = graded["gradescope"]
    ada = gs["ada"]
    assert ada["score"] == 14 and ada["output"].startswith("Graded on CPU emulator (no GPU).")
    assert "14 of 14 measured points, 6 pending" in ada["output"]
    broken = gs["broken"]
    assert broken["score"] == 0 and broken["output"].startswith(f"Not gradable: {CUT_OFF}")
    assert all(t["score"] == 0 and CUT_OFF in t["output"] for t in broken["tests"])
    failing = gs["failing"]
    assert "score" not in failing  # no score at all: Gradescope records none
    assert failing["output"].startswith("Failed to grade: the grader failed on saxpy") and "not a score" in failing["output"]
    assert len(failing["tests"]) == 4 and all("status" not in t and "score" not in t for t in failing["tests"])
    assert failing["extra_data"]["outcome"].startswith("failed to grade:") and failing["leaderboard"] == []


def test_the_feedback_pages_say_each_outcome_and_pending_speed(graded, course):
    code, out, err = graded["feedback"]
    assert code == 0 and err == ""
    page = (course / "feedback" / "ada" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    assert f"{NOTEBOOK} (Score: 14 of 14 measured points, 6 pending)" in page
    assert "Graded on CPU emulator (no GPU)." in page and "CPU emulator on" not in page
    assert "Test cell: saxpy (speed)</a> (Score: pending, 2 points measured when graded on a GPU)" in page
    assert "Score: 0.0 / 2.0" not in page and "Score: 0 / 2" not in page
    assert "saxpy (speed): pending, 2 points measured when graded on a GPU" in page
    broken = (course / "feedback" / "broken" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    assert f"{NOTEBOOK} (Score: 0 / 20 points)" in broken and f"not gradable: {CUT_OFF}" in broken
    failing = (course / "feedback" / "failing" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    assert "failed to grade: the grader failed on saxpy" in failing and "not a score" in failing
    board = (course / "feedback" / f"leaderboard_{ASSIGNMENT}.html").read_text()
    assert "Not ranked: 2 submission(s) not gradable" in board and "2 submission(s) failed to grade" in board


def test_the_next_grade_grades_a_failed_grading_again(graded, course, monkeypatch):
    monkeypatch.setenv("DLK_GRADER_SECRET", "outcomes-secret")
    monkeypatch.setattr(bridge, "_default_grade_fn", lambda: StandIn(set()))
    code, out, err = run_main("grade", ASSIGNMENT, "--student", "failing", "--student", "locked",
                                    "--course-dir", str(course))
    assert code == 0 and err == ""
    assert _line(out, "failing").startswith("  failing: 14 of 14 measured points, 6 pending")
    grades = gradebook_grades(course)
    assert sum(g["auto"] for g in grades["locked"].values()) == 14
    code, out, _ = run_main("status", ASSIGNMENT, "--course-dir", str(course))
    assert out.splitlines()[-1] == f"{ASSIGNMENT}: 3 graded, 2 not gradable"
    # --cluster after a plain grade: nothing changed, nothing graded again, and it says how to grade it all again
    code, out, err = run_main("grade", ASSIGNMENT, "--cluster", "--workers", "1", "--no-progress",
                              "--course-dir", str(course))
    assert code == 0 and err == ""
    assert "5 of 5 submission(s) were graded before (by `autograder grade`, with or without --cluster)" in out
    assert "add --regrade to grade every submission again" in out


# ------------------------------------------------------------------ one notebook, no gradebook


def test_grade_notebook_writes_its_results_when_a_kernel_passes_on_the_cpu(tmp_path, monkeypatch):
    """A pending speed test has no max_score; the summary counted on one and stopped with a KeyError."""
    monkeypatch.setattr(bridge, "_default_grade_fn", lambda: StandIn(set()))
    monkeypatch.setenv("DLK_GRADER_SECRET", "test-secret")
    out = tmp_path / "results.json"
    code, stdout, err = run_main("grade-notebook", str(SUBMISSIONS / "correct.ipynb"), "--assignment", ASSIGNMENT,
                             "--results-json", str(out), "--course-dir", str(REPO))
    assert code == 0 and err == ""
    assert re.search(r"^student: 14 of 14 measured points, 6 pending; grading took", stdout, re.M)
    data = json.loads(out.read_text())
    assert data["score"] == 14 and data["extra_data"]["pending_points"] == 6
    assert [t["name"] for t in data["tests"] if "max_score" not in t] == [
        "saxpy (speed): pending, not measured", "reduce_sum (speed): pending, not measured"]


def test_grade_notebook_of_a_cut_off_notebook_is_not_gradable_with_its_results(tmp_path):
    cut = tmp_path / "cuda_from_python.ipynb"
    cut.write_bytes((SUBMISSIONS / "correct.ipynb").read_bytes()[:3000])
    out = tmp_path / "results.json"
    code, stdout, err = run_main("grade-notebook", str(cut), "--assignment", ASSIGNMENT, "--results-json",
                             str(out), "--course-dir", str(REPO))
    assert code == 1 and len(err.splitlines()) == 1 and err.startswith(f"autograder: not gradable: {CUT_OFF}")
    data = json.loads(out.read_text())
    assert data["score"] == 0 and data["extra_data"]["outcome"].startswith(f"not gradable: {CUT_OFF}")


# ------------------------------------------------------------------ the parts


@pytest.mark.parametrize("name, text, reason", [
    ("cut", lambda s: s[:3000], "is cut off: the file stops in the middle of the notebook after 3,000 bytes"),
    ("cut at the end", lambda s: s.rstrip()[:-1], "is cut off"),
    ("not json", lambda s: "<html>" + s, "is not a notebook: it is not valid JSON (Expecting value at line 1"),
    ("empty", lambda s: "", "is empty (0 bytes)"),
    ("no cells", lambda s: '{"metadata": {}, "nbformat": 4, "nbformat_minor": 5}', "is not a Jupyter notebook"),
])
def test_a_notebook_that_cannot_be_read_is_not_gradable_with_the_reason(tmp_path, name, text, reason):
    path = tmp_path / "cuda_from_python.ipynb"
    path.write_text(text((SUBMISSIONS / "correct.ipynb").read_text()))
    problem = notebook_problem(str(path), ASSIGNMENT, str(REPO / "solutions"))
    assert problem.startswith("cuda_from_python.ipynb ") and reason in problem, problem


def test_an_honest_notebook_is_gradable_whatever_cells_it_kept(tmp_path):
    """The released notebook, one rebuilt from scratch (no nbgrader cells) and an empty one are graded."""
    nb = nbformat.read(SUBMISSIONS / "correct.ipynb", as_version=4)
    bare = nbformat.v4.new_notebook(cells=[c for c in nb.cells if c.source.startswith("%%cuda")])
    for c in bare.cells:
        c.metadata = {}
    for name, notebook in (("released", nb), ("bare", bare), ("empty", nbformat.v4.new_notebook())):
        path = tmp_path / f"{name}.ipynb"
        nbformat.write(notebook, path)
        assert notebook_problem(str(path), ASSIGNMENT, str(REPO / "solutions")) == "", name
    other = REPO / "solutions" / "02_perceptrons_mlp" / "perceptrons_mlp.ipynb"
    assert notebook_problem(str(other), "02_perceptrons_mlp", str(REPO / "solutions")) == ""
    assert notebook_problem(str(other), ASSIGNMENT, str(REPO / "solutions")).endswith(
        "is the notebook of 02_perceptrons_mlp (perceptrons_mlp.ipynb), not of 01_cuda_from_python")


def test_devices_are_named_as_a_person_says_them():
    assert device_label("cpu", "CPU emulator on AMD EPYC") == "CPU emulator (no GPU)"
    assert device_label("gpu", "NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3"
    assert device_label("", "") == "not run"
    text = feedback_text(passing_on_the_emulator("saxpy"))
    assert "ran on: CPU emulator (no GPU)" in text and "AMD EPYC" not in text
    assert "speed pending (2 points, measured when graded on a GPU)" in text and "speed 0 / 2" not in text
    title = part_feedback(passing_on_the_emulator("saxpy"), "speed", 2.0, 0.0).splitlines()[0]
    assert title == "saxpy (speed): pending, 2 points measured when graded on a GPU"


@pytest.mark.parametrize("claimed, judged", [("not_gradable", "crashed"), ("missing", "crashed"),
                                             ("compile_error", "compile_error")])
def test_only_the_grader_says_a_notebook_is_not_gradable(claimed, judged, tmp_path):
    """A grading child reporting "not gradable" (the grader's word for a notebook it could not read) has
    crashed; its honest twin, a compile error, stays one."""
    reported = ExerciseResult("saxpy", claimed, message="the child says so")
    verdict = judge(get_exercise("saxpy"), {"cases": [], "mode": "hidden", "launch": {}}, reported, str(tmp_path),
                    speed_allowed=False)
    assert verdict.status == judged and verdict.score == 0
