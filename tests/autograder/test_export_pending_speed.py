"""Speed that was not measured (graded without a GPU) is pending in the exports, never a fail or a zero."""

import csv
import json

from autograder import export
from autograder.outcome import GRADED, Outcome

NOTE = "not measured: this ran on the CPU emulator"


def _row(gpu: bool) -> dict:
    """One student's row as export.collect gives it: a correct kernel for both exercises."""
    speed = {"saxpy": (1.0, 2.0), "reduce_sum": (3.0, 4.0)}
    cells, exercises = [], {}
    for name, corr in (("saxpy", 6.0), ("reduce_sum", 8.0)):
        cells.append({"notebook": "nb", "grade_id": f"{name}_correctness", "exercise": name, "part": "correctness",
                      "score": corr, "max_score": corr, "output": f"{name}: all cases correct"})
        got, most = speed[name]
        cells.append({"notebook": "nb", "grade_id": f"{name}_speed", "exercise": name, "part": "speed",
                      "score": got if gpu else 0.0, "max_score": most,
                      "output": f"{name}: " + ("1.20x the reference" if gpu else NOTE)})
        exercises[name] = {"status": "passed", "backend": "gpu" if gpu else "cpu",
                           "device": "H100" if gpu else "CPU emulator", "speed_measured": gpu,
                           "speed_pending": not gpu, "timing": {"speedup": 1.2} if gpu else None}
    score = 14.0 + (4.0 if gpu else 0.0)
    return {"student": "ada", "assignment": "a1", "timestamp": "", "score": score, "max_score": 20.0,
            "late_penalty": 0.0, "cells": cells, "exercises": exercises, "grading_seconds": 1.0,
            "outcome": Outcome(GRADED)}


def test_gradescope_marks_unmeasured_speed_pending_and_scores_out_of_the_measured_points():
    data = export.gradescope_results(_row(gpu=False))
    tests = {t["name"]: t for t in data["tests"]}
    pending = [t for t in data["tests"] if "speed" in t["name"]]
    assert len(pending) == 2
    for t in pending:
        assert t.get("status") != "failed"
        assert "pending" in t["name"] and "not measured" in t["output"] and "GPU" in t["output"]
        assert "score" not in t and "max_score" not in t  # neither a zero nor counted in the total
    assert tests["saxpy (correctness)"]["status"] == "passed"
    assert data["score"] == 14.0
    measured = sum(t.get("max_score", 0) for t in data["tests"])
    assert measured == 14.0
    assert "14 of 14 measured points, 6 pending" in data["output"] and "6 speed points pending" in data["output"]
    assert data["extra_data"]["pending_points"] == 6.0 and data["extra_data"]["measured_max_score"] == 14.0


def test_gradescope_after_a_gpu_grading_has_the_speed_scores():
    data = export.gradescope_results(_row(gpu=True))
    tests = {t["name"]: t for t in data["tests"]}
    assert tests["saxpy (speed)"]["score"] == 1.0 and tests["saxpy (speed)"]["max_score"] == 2.0
    assert data["score"] == 18.0 and "pending" not in data["output"]
    assert data["extra_data"]["pending_points"] == 0.0


def test_csv_says_not_measured_for_pending_speed(tmp_path):
    path = tmp_path / "grades.csv"
    export.write_csv([_row(gpu=False)], str(path))
    row = next(csv.DictReader(open(path)))
    assert row["saxpy_speed"] == "not measured" and row["reduce_sum_speed"] == "not measured"
    assert row["saxpy_speedup"] == "not measured"
    assert row["saxpy_correctness"] == "6" and row["score"] == "14"
    assert row["measured_max_score"] == "14" and row["pending_points"] == "6"
    export.write_csv([_row(gpu=True)], str(path))
    row = next(csv.DictReader(open(path)))
    assert row["saxpy_speed"] == "1" and row["saxpy_speedup"] == "1.200" and row["pending_points"] == "0"
