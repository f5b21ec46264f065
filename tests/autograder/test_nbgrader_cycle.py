"""The whole nbgrader cycle with the real grading engine, on the CPU emulator.

release -> submit (samples and the hostile suite) -> ``autograder grade`` ->
``autograder feedback`` -> ``autograder export`` (CSV, Gradescope results.json),
in a temporary course made from solutions/ and nbgrader_config.py. Every step
runs the command-line tool in a subprocess, as an instructor would.

Grading runs each exercise in the engine's child process on the CPU emulator
(``DLK_BACKEND=cpu``): correctness on the hidden shapes; speed is not measured
without a GPU, so speed points are whatever the engine gives an untimed kernel.
"""

from __future__ import annotations

import csv
import html
import json
import re

import pytest

from autograder.grade_cells import part_points
from autograder.result import ExerciseResult
from nbgrader_course import (
    ASSIGNMENT,
    NOTEBOOK,
    POINTS,
    gradebook_grades,
    manifest,
    released_course,
    results_file,
    run_cli,
)

# The module's grading run (about 4-5 minutes on two busy cores) happens in the
# set-up of its first test, under that test's time limit.
pytestmark = pytest.mark.timeout(1800)

#: Time limit of one exercise's grading process in this test (seconds). It is
#: what the infinite loop costs; honest kernels on the emulator need far less.
TIMEOUT_S = 60
#: Hostile notebooks whose tricks are Python only, with the released stub kernels.
#: Their Python is never run, so the engine would grade the same stub as "blank"
#: (about 20 s each on the emulator); they go through the same nbgrader pipeline
#: with a stand-in engine in test_nbgrader_bridge.py. The input transformer and
#: the gradebook writer, which the issue names, are graded here as well.
PYTHON_ONLY = {"monkeypatch", "print_score", "read_hidden", "forged_metadata"}
HOSTILE = sorted(n for n, m in manifest().items() if m["kind"] == "hostile" and n not in PYTHON_ONLY)
CELLS = {"saxpy": ("saxpy_correctness", "saxpy_speed"), "reduce_sum": ("reduce_sum_correctness", "reduce_sum_speed")}


@pytest.fixture(scope="module")
def cycle(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cycle")
    students = sorted(n for n in manifest() if n not in PYTHON_ONLY)
    course = released_course(tmp, students)
    graded = run_cli(course, "grade", ASSIGNMENT, "--timeout", str(TIMEOUT_S), DLK_GRADER_SECRET="test-secret")
    print(graded.stdout)  # the per-student grading times, in pytest's report
    feedback = run_cli(course, "feedback", ASSIGNMENT)
    exported = run_cli(course, "export", ASSIGNMENT, "--csv", str(tmp / "grades.csv"),
                       "--gradescope", str(tmp / "gradescope"))
    return {
        "course": course,
        "tmp": tmp,
        "students": students,
        "grade_out": graded.stdout,
        "feedback_out": feedback.stdout,
        "export_out": exported.stdout,
        "grades": gradebook_grades(course),
    }


def total(cycle, student) -> float:
    return sum(g["auto"] for g in cycle["grades"][student].values())


def result(cycle, student, exercise) -> dict:
    return results_file(cycle["course"], student)["exercises"][exercise]


# ------------------------------------------------------------------ grading


def test_grading_reports_progress_and_time_per_submission(cycle):
    out = cycle["grade_out"]
    for student in cycle["students"]:
        assert re.search(rf"^  {student}: (?:[\d.]+ / 20 points|[\d.]+ of [\d.]+ measured points, [\d.]+ pending); "
                         rf"grading took [\d.]+ s$", out, re.M), student
        for exercise in CELLS:
            assert re.search(rf"^  {student} {exercise}: \w+, correctness", out, re.M), (student, exercise)
    assert re.search(rf"graded {len(cycle['students'])} of {len(cycle['students'])} in [\d.]+ s", out)


def test_gradebook_holds_exactly_the_engine_results(cycle):
    """Every grade is the engine's number for that cell, written by the grader; nothing else."""
    grades = cycle["grades"]
    assert set(grades) == set(cycle["students"])
    for student, cells in grades.items():
        assert {k: v["max"] for k, v in cells.items()} == POINTS, student
        for exercise, (correctness_id, speed_id) in CELLS.items():
            res = ExerciseResult.from_dict(result(cycle, student, exercise))
            assert cells[correctness_id]["auto"] == part_points(res, "correctness", POINTS[correctness_id])
            assert cells[speed_id]["auto"] == part_points(res, "speed", POINTS[speed_id])
        for g in cells.values():
            assert g["manual"] is None and g["extra"] is None, student


def test_sample_students(cycle):
    grades = cycle["grades"]
    for name in ("correct", "slow"):
        assert grades[name]["saxpy_correctness"]["auto"] == 6.0, result(cycle, name, "saxpy")["message"]
        assert grades[name]["reduce_sum_correctness"]["auto"] == 8.0, result(cycle, name, "reduce_sum")["message"]
        assert result(cycle, name, "saxpy")["status"] == "passed"
    for exercise, (cid, _) in CELLS.items():
        assert grades["wrong"][cid]["auto"] < POINTS[cid]
        assert result(cycle, "wrong", exercise)["status"] != "passed"
        assert grades["blank"][cid]["auto"] == 0.0
    assert total(cycle, "wrong") < total(cycle, "correct")
    # The CPU emulator measures no speed: a correct kernel's speed points wait for a GPU run, and its correctness
    # is provisional until then (nvcc and the card may differ from the emulator).
    assert result(cycle, "correct", "saxpy")["backend"] == "cpu"
    assert result(cycle, "correct", "saxpy")["provisional"] and result(cycle, "wrong", "saxpy")["provisional"]


def test_an_approximate_sum_and_kernels_that_ask_for_the_compiler_earn_nothing_they_should_not(cycle):
    """A quarter of the sum, scaled up, fails the hidden cases (inputs no approximation survives, a tolerance
    from a tree sum's rounding); kernels that compute only where the compiler is not nvcc compute nothing on the
    emulator either, which defines what nvcc defines."""
    grades = cycle["grades"]
    assert grades["approximate_sum"]["reduce_sum_correctness"]["auto"] < POINTS["reduce_sum_correctness"]
    approximate = result(cycle, "approximate_sum", "reduce_sum")
    # failed by its outputs (on busy cores the probes of its many failing cases may then run past the time limit)
    assert approximate["status"] in ("failed", "timeout")
    assert any(not shape["passed"] and shape["n_bad"] for shape in approximate["shapes"]), approximate["message"]
    assert total(cycle, "compiler_tell") == 0.0
    assert all(result(cycle, "compiler_tell", e)["status"] != "passed" for e in CELLS)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_submission_scores_no_more_than_its_honest_twin(cycle, name):
    twin = manifest()[name]["twin"]
    assert total(cycle, name) <= total(cycle, twin), (name, twin)
    for cid in POINTS:
        assert cycle["grades"][name][cid]["auto"] <= cycle["grades"][twin][cid]["auto"], (name, cid)


def test_input_transformer_gets_zero_not_full_marks(cycle):
    assert all(g["auto"] == 0.0 for g in cycle["grades"]["input_transformer"].values())


def test_gradebook_writer_cannot_change_its_grade(cycle):
    # Its Python (which rewrites gradebook.db) never ran: its grades are the blank twin's, 0 of 20.
    assert {k: v["auto"] for k, v in cycle["grades"]["write_gradebook"].items()} == {k: 0.0 for k in POINTS}


def test_kernel_exploits_do_not_pass(cycle):
    assert cycle["grades"]["visible_only"]["saxpy_correctness"]["auto"] < 6.0
    assert cycle["grades"]["visible_only"]["reduce_sum_correctness"]["auto"] < 8.0
    for name in ("cached_output", "huge_allocation", "forged_result", "infinite_loop"):
        assert result(cycle, name, "saxpy")["status"] != "passed", name
    assert result(cycle, "infinite_loop", "saxpy")["status"] == "timeout"
    assert result(cycle, "cached_output", "reduce_sum")["status"] != "passed"
    # Files read at compile time, checks switched off: refused before compiling, at the student's line.
    for name, exercise in (("compile_time_read", "saxpy"), ("compile_time_read", "reduce_sum"),
                           ("macro_include", "saxpy"), ("checks_switched_off", "saxpy"),
                           ("checks_switched_off", "reduce_sum")):
        refused = result(cycle, name, exercise)
        assert refused["status"] == "compile_error" and refused["message"].startswith("line "), (name, refused)


def test_a_hung_kernel_costs_only_its_own_exercise(cycle):
    assert cycle["grades"]["infinite_loop"]["reduce_sum_correctness"]["auto"] == 8.0


# ----------------------------------------------------------------- feedback


def test_feedback_html_says_what_failed_and_why(cycle):
    course = cycle["course"]
    for student in cycle["students"]:
        path = course / "feedback" / student / ASSIGNMENT / f"{NOTEBOOK}.html"
        assert path.exists(), student
    page = (course / "feedback" / "wrong" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    for exercise in CELLS:
        res = result(cycle, "wrong", exercise)
        assert f"Exercise {exercise}: {res['status'].replace('_', ' ')}" in page
        first_line = res["message"].strip().splitlines()[0]
        assert html.escape(first_line, quote=False)[:60] in page or first_line[:60] in page
    assert "FAIL" in page
    correct = (course / "feedback" / "correct" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    assert "speed" in correct and "CPU emulator" in correct


# ------------------------------------------------------------------- export


def test_export_csv_has_the_gradebook_numbers(cycle):
    rows = {r["student"]: r for r in csv.DictReader(open(cycle["tmp"] / "grades.csv"))}
    assert set(rows) == set(cycle["students"])
    for student, row in rows.items():
        assert float(row["score"]) == pytest.approx(total(cycle, student))
        assert float(row["max_score"]) == 20.0
        for cid in POINTS:
            if row[cid] == "not measured":  # speed of a correct kernel, graded without a GPU: pending
                assert cid.endswith("_speed") and result(cycle, student, cid[:-len("_speed")])["speed_pending"]
                assert cycle["grades"][student][cid]["auto"] == 0
            else:
                assert float(row[cid]) == cycle["grades"][student][cid]["auto"]
        assert row["saxpy_status"] == result(cycle, student, "saxpy")["status"]
    assert rows["correct"]["backend"] == "cpu"


def test_export_gradescope_results_json(cycle):
    for student in cycle["students"]:
        data = json.loads((cycle["tmp"] / "gradescope" / student / "results.json").read_text())
        assert data["score"] == pytest.approx(total(cycle, student))
        measured = sum(t.get("max_score", 0) for t in data["tests"])
        assert measured + data["extra_data"]["pending_points"] == 20.0
        by_name = {t["name"]: t for t in data["tests"]}
        assert by_name["saxpy (correctness)"]["score"] == cycle["grades"][student]["saxpy_correctness"]["auto"]
        speed = by_name.get("reduce_sum (speed)") or by_name["reduce_sum (speed): pending, not measured"]
        assert speed.get("max_score", speed.get("extra_data", {}).get("points")) == 4.0
        assert speed.get("status") != "failed" or not result(cycle, student, "reduce_sum")["speed_pending"]
        assert all(t["output"] for t in data["tests"])
    correct = json.loads((cycle["tmp"] / "gradescope" / "correct" / "results.json").read_text())
    assert correct["score"] >= 14.0
    # graded on the CPU emulator: the correct kernels' speed is pending, and the totals say so
    assert correct["extra_data"]["pending_points"] == 6.0 and "6 speed points pending" in correct["output"]


# --------------------------------------------------------------------- GPU

GPU_STUDENTS = ("correct", "slow", "blank", "left_running", "cached_output", "patched_timers", "out_of_bounds",
                "approximate_sum", "compiler_tell")


def _gpu_present() -> bool:
    try:
        import pycuda.driver as cuda

        cuda.init()
        return cuda.Device.count() > 0
    except Exception:
        return False


@pytest.fixture(scope="module")
def gpu_cycle(tmp_path_factory):
    if not _gpu_present():
        pytest.skip("needs a CUDA GPU")
    tmp = tmp_path_factory.mktemp("gpu_cycle")
    course = released_course(tmp, GPU_STUDENTS, DLK_BACKEND="gpu")
    graded = run_cli(course, "grade", ASSIGNMENT, "--timeout", "120", DLK_BACKEND="gpu")
    print(graded.stdout)
    run_cli(course, "export", ASSIGNMENT, "--csv", str(tmp / "grades.csv"), DLK_BACKEND="gpu")
    return {"course": course, "grades": gradebook_grades(course), "grade_out": graded.stdout}


@pytest.mark.gpu
def test_gpu_grading_times_kernels_and_records_the_device(gpu_cycle):
    course = gpu_cycle["course"]
    grades = gpu_cycle["grades"]
    for exercise in CELLS:
        res = results_file(course, "correct")["exercises"][exercise]
        assert res["backend"] == "gpu" and res["device"]
        assert res["speed_measured"] and res["timing"]["speedup"] > 0
        assert res["timing"].get("driver")
        assert not res["provisional"]  # graded on the card: no longer provisional
    assert grades["correct"]["saxpy_correctness"]["auto"] == 6.0
    assert grades["correct"]["reduce_sum_correctness"]["auto"] == 8.0
    assert grades["correct"]["saxpy_speed"]["auto"] > 0.0
    # The naive kernels are correct and slower: no more speed points than the honest fast ones.
    assert grades["slow"]["saxpy_correctness"]["auto"] == 6.0
    assert grades["slow"]["saxpy_speed"]["auto"] <= grades["correct"]["saxpy_speed"]["auto"]
    assert re.search(r"^  correct: [\d.]+ / 20 points; grading took [\d.]+ s$", gpu_cycle["grade_out"], re.M)


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in GPU_STUDENTS if manifest()[n]["kind"] == "hostile"])
def test_gpu_hostile_scores_no_more_than_its_twin(gpu_cycle, name):
    twin = manifest()[name]["twin"]
    grades = gpu_cycle["grades"]
    for cid in POINTS:
        assert grades[name][cid]["auto"] <= grades[twin][cid]["auto"], (name, cid)


@pytest.mark.gpu
def test_gpu_an_approximate_sum_earns_no_speed_points_and_a_compiler_tell_nothing(gpu_cycle):
    """The issue's case on the card: a quarter-sum scored 18 of 20 against its honest twin's 16."""
    grades = gpu_cycle["grades"]
    assert grades["approximate_sum"]["reduce_sum_speed"]["auto"] == 0.0
    assert grades["approximate_sum"]["reduce_sum_correctness"]["auto"] < POINTS["reduce_sum_correctness"]
    assert sum(g["auto"] for g in grades["compiler_tell"].values()) == 0.0
