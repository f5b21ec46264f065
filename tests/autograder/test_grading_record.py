"""The grading record a run resumes from, and the cluster options' messages."""

from __future__ import annotations

import json

import pytest

from autograder.cli import main
from autograder.grading_record import GradingRecord, StudentEntry, settings_hash, submission_hash


def test_submission_hash_changes_with_any_file(tmp_path):
    (tmp_path / "nb.ipynb").write_text("{}")
    (tmp_path / "timestamp.txt").write_text("2026-11-20 10:00:00 UTC\n")
    first = submission_hash(str(tmp_path))
    assert submission_hash(str(tmp_path)) == first
    (tmp_path / "timestamp.txt").write_text("2026-11-20 11:00:00 UTC\n")
    assert submission_hash(str(tmp_path)) != first
    assert settings_hash("a", 60.0) != settings_hash("b", 60.0) != settings_hash("b", None)


def test_needs_grading_says_why_and_survives_a_reload(tmp_path):
    record = GradingRecord(str(tmp_path), "01_x")
    settings = settings_hash("s", None)
    assert record.needs_grading("ada", "h1", settings, gpu_run=False) == "not graded yet"
    record.graded("ada", StudentEntry(status="", submission="h1", settings=settings, score=14.0, max_score=20.0,
                                      backends=["cpu", "cpu"], devices=["emu", "emu"], speed_pending=True))
    record.failed("bob", "h2", settings, "the worker grading it died")
    again = GradingRecord(str(tmp_path), "01_x")  # what a later run reads
    assert again.needs_grading("ada", "h1", settings, gpu_run=False) == ""
    assert again.needs_grading("ada", "h1b", settings, gpu_run=False) == "the submission changed"
    assert again.needs_grading("ada", "h1", settings_hash("t", None), gpu_run=False) == \
        "the secret or the time limit changed"
    assert "pending" in again.needs_grading("ada", "h1", settings, gpu_run=True)
    assert again.needs_grading("bob", "h2", settings, gpu_run=False) == "the last grading failed"
    saved = json.loads((tmp_path / "grading_record" / "01_x.json").read_text())["students"]
    assert saved["bob"]["score"] is None and saved["bob"]["reason"] == "the worker grading it died"


def test_correctness_graded_without_a_gpu_is_provisional_until_a_gpu_grades_it(tmp_path):
    """A kernel can fail on the emulator and pass on the card, or the other way round (a compiler's identity,
    a numeric difference): what the emulator decided is graded again on the first run with a GPU, pending speed
    or not (a wrong kernel has no speed pending)."""
    record = GradingRecord(str(tmp_path), "01_x")
    settings = settings_hash("s", None)
    record.graded("ada", StudentEntry(status="", submission="h", settings=settings, score=3.0, max_score=20.0,
                                      backends=["cpu"], devices=["emu"], provisional=True))
    assert record.needs_grading("ada", "h", settings, gpu_run=False) == ""
    assert record.needs_grading("ada", "h", settings, gpu_run=True) == "correctness provisional (graded without a GPU)"
    record.graded("ada", StudentEntry(status="", submission="h", settings=settings, score=3.0, max_score=20.0,
                                      backends=["gpu"], devices=["H100"]))
    assert record.needs_grading("ada", "h", settings, gpu_run=True) == ""


def test_gpu_models_come_from_graded_entries_only(tmp_path):
    record = GradingRecord(str(tmp_path), "a")
    for student, device in (("ada", "H100"), ("bob", "H200"), ("cyd", "H100")):
        record.graded(student, StudentEntry(status="", submission="h", settings="s", backends=["gpu", "cpu"],
                                            devices=[device, "emu"]))
    record.failed("dee", "h", "s", "timed out")
    assert record.gpu_models() == {"H100": ["ada", "cyd"], "H200": ["bob"]}


@pytest.mark.parametrize("argv, message", [
    (["--workers", "2"], "--workers is an option of --cluster"),
    (["--cluster", "--workers", "0"], "--workers 0: a local cluster needs at least 1 worker"),
    (["--cluster", "--retries", "-1"], "--retries -1: the number of retries cannot be negative"),
    (["--cluster", "--task-timeout", "0"], "--task-timeout 0: the time limit must be more than 0"),
    (["--cluster", "tcp://head:8786", "--workers", "2"], "--workers sizes the local cluster"),
    (["--per-gpu", "4"], "--per-gpu is an option of --cluster"),
    (["--cluster", "--per-gpu", "0"], "--per-gpu 0: each GPU needs at least 1 grading at a time"),
    (["--cluster", "tcp://head:8786", "--per-gpu", "4"], "start that many workers per card"),
])
def test_cluster_options_are_checked_with_a_message(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.setenv("DLK_GRADER_SECRET", "s")
    assert main(["grade", "01_cuda_from_python", *argv, "--course-dir", str(tmp_path)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert message in line
