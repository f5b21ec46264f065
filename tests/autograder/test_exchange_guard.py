"""``autograder collect`` takes a submission only from the account it claims to come from,
and only the submitter's own plain files (no links to the instructor's solutions), read by descriptor: a file
swapped for a link while it is collected gives the honest file or nothing, never the solutions."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder import exchange_guard
from autograder.exchange_guard import Refused, inspect_submission, read_submission
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


# ------------------------------------------------------------------ the race: checked, then swapped for a link
def _solutions(course: Path) -> bytes:
    return (course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_bytes()


_SWAP_LOOP = """
import os, sys
folder, target, honest = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read()
notebook, link, plain = (os.path.join(folder, name) for name in ("{notebook}.ipynb", ".link", ".plain"))
swaps = 0
while True:
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(target, link)
    os.rename(link, notebook)
    with open(plain, "wb") as f:
        f.write(honest)
    os.rename(plain, notebook)
    swaps += 2
    if swaps % 200 == 0:
        with open(folder + ".swaps", "w") as f:
            f.write(str(swaps))
"""


class Swapper:
    """A student's own process, swapping their notebook for a link to the solutions and back as fast as it can
    (each swap one atomic rename), beside the collector, until stopped."""

    def __init__(self, folder: Path, target: Path, honest: Path, notebook: str = NOTEBOOK):
        self.folder = folder
        self.argv = [sys.executable, "-c", _SWAP_LOOP.format(notebook=notebook), str(folder), str(target), str(honest)]

    @property
    def swaps(self) -> int:
        counted = Path(f"{self.folder}.swaps")
        return int(counted.read_text() or 0) if counted.exists() else 0

    def __enter__(self):
        self.process = subprocess.Popen(self.argv)
        deadline = time.monotonic() + 30
        while not self.swaps and time.monotonic() < deadline:  # swapping before the collector starts
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self.process.kill()
        self.process.wait()
        for name in (".link", ".plain"):
            (self.folder / name).unlink(missing_ok=True)


def test_a_notebook_swapped_for_a_link_while_it_is_read_never_brings_the_solutions(course, tmp_path):
    """The watcher swaps the notebook while the submission is read, 300 times over: each read gives the honest
    notebook or refuses the submission (a link met on opening), never the solutions."""
    honest = (SUBMISSIONS / "correct.ipynb").read_bytes()
    solutions = _solutions(course)
    folder = _submission(tmp_path / "exchange", ME, EARLY, SUBMISSIONS / "correct.ipynb")
    outcomes = {"honest": 0, "refused": 0}
    target = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    with Swapper(folder, target, SUBMISSIONS / "correct.ipynb") as swapper:
        for attempt in range(300):
            dest = tmp_path / f"read-{attempt}"
            try:
                read_submission(folder, ME, dest)
            except Refused as exc:
                assert "symbolic link" in str(exc) or "changed while" in str(exc) or "cannot be read" in str(exc), exc
                assert not dest.exists()
                outcomes["refused"] += 1
                continue
            got = (dest / f"{NOTEBOOK}.ipynb").read_bytes()
            assert got != solutions and solutions[:4000] not in got
            assert got == honest
            outcomes["honest"] += 1
    assert swapper.swaps and outcomes["honest"] and outcomes["refused"], \
        f"the race was not run both ways ({outcomes}): this test would prove nothing"


def test_a_check_by_path_then_a_copy_by_path_is_what_the_swap_defeats(course, tmp_path):
    """The twin of the test above, and why reading by descriptor matters: the same swap, made between a check by
    path and a copy by path (the collector's old way), hands the solutions over."""
    folder = _submission(tmp_path / "exchange", ME, EARLY, SUBMISSIONS / "correct.ipynb")
    notebook = folder / f"{NOTEBOOK}.ipynb"
    assert not notebook.is_symlink()  # the check by path passes ...
    notebook.unlink()
    notebook.symlink_to(course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")  # ... the swap ...
    shutil.copytree(folder, tmp_path / "by-path")  # ... and the copy by path follows the link
    assert (tmp_path / "by-path" / f"{NOTEBOOK}.ipynb").read_bytes() == _solutions(course)
    with pytest.raises(Refused, match="symbolic link"):
        read_submission(folder, ME, tmp_path / "by-descriptor")


def test_a_file_swapped_between_its_check_and_its_copy_is_refused(course, tmp_path, monkeypatch):
    """The swap made exactly between the check of the opened file and the copy of its bytes: the copy reads the
    file that was checked (the descriptor's), never what the name now points to, and sees it was unlinked."""

    folder = _submission(tmp_path / "exchange", ME, EARLY, SUBMISSIONS / "correct.ipynb")
    notebook = folder / f"{NOTEBOOK}.ipynb"
    checked = exchange_guard._check

    def check_then_swap(info, rel, owner, student_id):
        checked(info, rel, owner, student_id)
        if rel.endswith(".ipynb") and not notebook.is_symlink():
            notebook.unlink()
            notebook.symlink_to(course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")

    monkeypatch.setattr(exchange_guard, "_check", check_then_swap)
    with pytest.raises(Refused, match="changed while it was being collected"):  # unlinked while open: its ctime moved
        read_submission(folder, ME, tmp_path / "copied")
    assert not (tmp_path / "copied").exists()
    assert notebook.is_symlink()  # the swap was made; the copy never read through it


def test_a_file_that_changes_while_it_is_copied_is_refused(tmp_path, monkeypatch):

    folder = tmp_path / f"{ME}+{ASSIGNMENT}+{EARLY}"
    folder.mkdir()
    (folder / "a.ipynb").write_text("{}" * 1000)
    real_read = os.read

    def growing_read(fd, n):
        block = real_read(fd, n)
        with open(folder / "a.ipynb", "a") as f:  # the student's process appends while the collector reads
            f.write(" ")
        return block

    monkeypatch.setattr(exchange_guard.os, "read", growing_read)
    with pytest.raises(Refused, match="changed while it was being collected"):
        read_submission(folder, ME, tmp_path / "copied")
    assert not (tmp_path / "copied").exists()


def test_collect_with_the_watcher_running_collects_the_honest_notebook_or_an_earlier_one(course, tmp_path):
    """``autograder collect`` itself, while the watcher swaps the later submission's notebook: submitted/ holds
    the honest notebook every time, never the solutions (and never a link)."""
    exchange = tmp_path / "exchange"
    _submission(exchange, ME, EARLY, SUBMISSIONS / "correct.ipynb")
    later = _submission(exchange, ME, LATE, SUBMISSIONS / "correct.ipynb")
    honest = (SUBMISSIONS / "correct.ipynb").read_bytes()
    with Swapper(later, course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", SUBMISSIONS / "correct.ipynb"):
        for _ in range(2):
            run_cli(course, "collect", ASSIGNMENT, "--exchange", str(exchange))
            collected = course / "submitted" / ME / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
            assert collected.read_bytes() == honest
            assert not any(p.is_symlink() for p in (course / "submitted").rglob("*"))
