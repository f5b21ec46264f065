"""The class leaderboard: who is ranked, in which order, under which name; and Gradescope's field."""

from __future__ import annotations

from autograder import export
from autograder.grading_record import mixed_gpu_warning
from autograder.leaderboard import course_alias, gradescope_leaderboard, leaderboard, leaderboard_html

H100 = "NVIDIA H100 80GB HBM3"


def _res(status="passed", speedup=None, device=H100, measured=True):
    timing = {"speedup": speedup, "student_ms": 0.01 / speedup, "device": device} if speedup else None
    return {"status": status, "speed_measured": measured and bool(speedup), "speed_pending": not measured,
            "timing": timing, "device": device, "backend": "gpu" if measured else "cpu"}


def _row(student, **exercises):
    return {"student": student, "score": 0.0, "max_score": 20.0, "late_penalty": 0.0, "cells": [],
            "exercises": exercises, "grading_seconds": 1.0}


ROWS = [
    _row("ada", saxpy=_res(speedup=1.5), reduce_sum=_res(speedup=0.9)),
    _row("bob", saxpy=_res(speedup=3.0), reduce_sum=_res(status="failed", speedup=9.0)),  # fast but wrong
    _row("cyd", saxpy=_res(speedup=2.0, device="NVIDIA H200"), reduce_sum=_res(speedup=1.1)),
    _row("dee", saxpy=_res(measured=False, device="CPU emulator"), reduce_sum=_res(status="missing")),
]


def test_only_correct_measured_kernels_are_ranked_fastest_first():
    boards = leaderboard(ROWS, lambda s: s)
    assert [(e.who, e.speedup) for e in boards["saxpy"]["entries"]] == [("bob", 3.0), ("cyd", 2.0), ("ada", 1.5)]
    assert boards["saxpy"]["entries"][1].device == "NVIDIA H200"
    assert boards["saxpy"]["correct"] == 4 and boards["saxpy"]["unmeasured"] == 1
    # bob's reduce_sum is fast but wrong: not on the board.
    assert [e.who for e in boards["reduce_sum"]["entries"]] == ["cyd", "ada"]
    assert [e.who for e in leaderboard(ROWS, lambda s: s, top=1)["saxpy"]["entries"]] == ["bob"]


def test_aliases_are_per_course_stable_and_hide_names():
    assert course_alias("course-a", "ada") == course_alias("course-a", "ada")
    assert course_alias("course-a", "ada") != course_alias("course-b", "ada")
    assert course_alias("course-a", "ada") != course_alias("course-a", "bob")
    boards = leaderboard(ROWS, lambda s: course_alias("course-a", s))
    page = leaderboard_html("01_cuda_from_python", boards, named=False)
    for name in ("ada", "bob", "cyd"):
        assert f">{name}<" not in page
        assert course_alias("course-a", name) in page
    assert "more than one GPU model" in page and "3.00×" in page
    named = leaderboard_html("01_cuda_from_python", leaderboard(ROWS, lambda s: s), named=True)
    assert ">bob<" in named


def test_a_class_graded_without_a_gpu_has_no_ranking_and_says_why():
    page = leaderboard_html("a", leaderboard([ROWS[3]], lambda s: s), named=True)
    assert "none timed on a GPU yet" in page and "no correct kernel yet" in page


def test_gradescope_results_carry_the_leaderboard_field():
    data = export.gradescope_results(ROWS[0])
    assert data["leaderboard"] == gradescope_leaderboard(ROWS[0])
    assert {"name": "saxpy speed-up", "value": 1.5, "order": "desc"} in data["leaderboard"]
    assert {"name": "GPU", "value": H100} in data["leaderboard"]
    wrong = {e["name"]: e["value"] for e in gradescope_leaderboard(ROWS[1])}
    assert wrong["reduce_sum speed-up"] == 0.0 and wrong["saxpy speed-up"] == 3.0
    assert {e["name"]: e["value"] for e in gradescope_leaderboard(ROWS[3])}["GPU"] == "not measured"


def test_mixed_gpu_models_are_warned_about():
    assert mixed_gpu_warning("a", {H100: ["ada"]}) == ""
    text = mixed_gpu_warning("a", {H100: ["ada", "bob"], "NVIDIA H200": ["cyd"]})
    assert "mixed GPU models" in text and "NVIDIA H100 80GB HBM3 (2 students)" in text and "(1 student)" in text
