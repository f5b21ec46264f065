"""``autograder collect`` takes a submission only from the account it claims to come from,
and only the submitter's own plain files (no links to the instructor's solutions)."""

from __future__ import annotations

import getpass
import json
import os
import shutil
from pathlib import Path

import pytest

from autograder.exchange_guard import inspect_submission
from nbgrader_course import ASSIGNMENT, NOTEBOOK, SUBMISSIONS, make_course, run_cli

COURSE_ID = "deep-learning-kernels"
ME = getpass.getuser()
EARLY = "2026-11-20 10:00:00.000000 UTC"
LATE = "2026-11-20 11:00:00.000000 UTC"


def _inbound(exchange: Path) -> Path:
    path = exchange / COURSE_ID / "inbound"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _submission(exchange: Path, student: str, timestamp: str, notebook: Path | None = None) -> Path:
    folder = _inbound(exchange) / f"{student}+{ASSIGNMENT}+{timestamp}"
    folder.mkdir()
    (folder / "timestamp.txt").write_text(timestamp)
    if notebook is not None:
        shutil.copy(notebook, folder / f"{NOTEBOOK}.ipynb")
    return folder


@pytest.fixture
def course(tmp_path):
    return make_course(tmp_path)


def _collected(course: Path, student: str) -> dict | None:
    path = course / "submitted" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    return json.loads(path.read_text()) if path.exists() else None


def test_a_link_to_the_instructors_solutions_is_refused(course, tmp_path):
    exchange = tmp_path / "exchange"
    _submission(exchange, ME, EARLY, SUBMISSIONS / "correct.ipynb")  # the honest twin
    attack = _submission(exchange, ME, LATE)
    solution = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    (attack / f"{NOTEBOOK}.ipynb").symlink_to(solution)
    out = run_cli(course, "collect", ASSIGNMENT, "--exchange", str(exchange)).stdout
    assert f"refused the submission {attack.name}" in out and "symbolic link" in out, out
    assert _collected(course, ME) == json.loads((SUBMISSIONS / "correct.ipynb").read_text())
    assert not any(p.is_symlink() for p in (course / "submitted").rglob("*"))


def test_a_folder_named_after_another_student_is_refused(course, tmp_path):
    exchange = tmp_path / "exchange"
    _submission(exchange, ME, EARLY, SUBMISSIONS / "correct.ipynb")
    fake = _submission(exchange, "someone_else", LATE, SUBMISSIONS / "wrong.ipynb")
    out = run_cli(course, "collect", ASSIGNMENT, "--exchange", str(exchange)).stdout
    assert f"refused the submission {fake.name}" in out and f"submitted by the account '{ME}'" in out, out
    assert _collected(course, "someone_else") is None
    assert _collected(course, ME) == json.loads((SUBMISSIONS / "correct.ipynb").read_text())


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a folder to another account needs root")
def test_a_later_folder_from_another_account_cannot_replace_a_students_submission(course, tmp_path):
    exchange = tmp_path / "exchange"
    _submission(exchange, ME, EARLY, SUBMISSIONS / "correct.ipynb")
    fake = _submission(exchange, ME, LATE, SUBMISSIONS / "wrong.ipynb")
    for path in [fake, *fake.rglob("*")]:
        os.chown(path, 65534, 65534)  # written by another account, named after this one
    out = run_cli(course, "collect", ASSIGNMENT, "--exchange", str(exchange)).stdout
    assert f"refused the submission {fake.name}" in out, out
    assert _collected(course, ME) == json.loads((SUBMISSIONS / "correct.ipynb").read_text())


def test_hard_links_and_foreign_files_are_refused(tmp_path):
    folder = tmp_path / f"{ME}+{ASSIGNMENT}+{EARLY}"
    folder.mkdir()
    (folder / "a.ipynb").write_text("{}")
    assert inspect_submission(folder, ME) == ""
    os.link(folder / "a.ipynb", tmp_path / "elsewhere")
    assert "hard link" in inspect_submission(folder, ME)
    os.unlink(tmp_path / "elsewhere")
    os.mkfifo(folder / "pipe")
    assert "not a plain file" in inspect_submission(folder, ME)
