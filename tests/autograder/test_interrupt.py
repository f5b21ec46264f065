"""Ctrl-C in the middle of `autograder grade`: one line, exit status 130, nothing half-written, and a rerun
continues.

A real `autograder grade` (the engine on the CPU emulator) of three students: a_quick and c_quick submit
launch numbers the exercises refuse (graded at once, no kernel runs), b_loop a saxpy that never returns.
SIGINT arrives while b_loop's saxpy runs in its grading child.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.safe_writes import uninterrupted

from nbgrader_course import ASSIGNMENT, SUBMISSIONS, cli_env, gradebook_grades, released_course, run_cli, submit

pytestmark = pytest.mark.timeout(600)

SECRET = {"DLK_GRADER_SECRET": "interrupt-secret"}


def _refused_launches(notebook: Path, out: Path, exercises: tuple[str, ...]) -> Path:
    """``notebook`` with ``block=0`` on the %%cuda lines of ``exercises``: refused before any kernel runs."""
    nb = json.loads(notebook.read_text())
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if any(source.startswith(f"%%cuda {name} ") for name in exercises):
            cell["source"] = source.replace("block=256", "block=0", 1)
    out.write_text(json.dumps(nb))
    return out


def _processes_naming(text: str) -> list[int]:
    """Processes whose command line mentions ``text`` (the grading children of this test's run)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _agree(course: Path) -> set[str]:
    """The students of the gradebook, checked to be exactly those with a graded folder, nothing half-written."""
    in_gradebook = set(gradebook_grades(course))
    autograded = course / "autograded"
    folders = {p.name for p in autograded.iterdir() if (p / ASSIGNMENT).is_dir()} if autograded.is_dir() else set()
    assert folders == in_gradebook
    assert not list(course.glob("autograded/*/*.partial")) and not list(course.glob("autograded/*/*.old"))
    for student in folders:
        assert (autograded / student / ASSIGNMENT / "cuda_from_python.results.json").is_file()
    return in_gradebook


def test_ctrl_c_mid_class_says_one_line_leaves_nothing_half_written_and_a_rerun_continues(tmp_path):
    course = released_course(tmp_path, [])
    quick = _refused_launches(SUBMISSIONS / "correct.ipynb", tmp_path / "quick.ipynb", ("saxpy", "reduce_sum"))
    loop = _refused_launches(SUBMISSIONS / "infinite_loop.ipynb", tmp_path / "loop.ipynb", ("reduce_sum",))
    for student, notebook in (("a_quick", quick), ("b_loop", loop), ("c_quick", quick)):
        submit(course, student, notebook)
    scratch = tmp_path / "scratch"  # the grading children's scratch folders: their names say whose they are
    scratch.mkdir()
    env = cli_env(TMPDIR=str(scratch), **SECRET)
    cmd = [sys.executable, "-m", "autograder.cli", "grade", ASSIGNMENT, "--timeout", "10", "--course-dir", str(course)]
    # SIGINT as a terminal's Ctrl-C delivers it, even where this test runs in the background (a shell's background
    # job starts with SIGINT ignored, and a Python started so would ignore it too)
    proc = subprocess.Popen(cmd, cwd=course, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("[2/3] b_loop"):
            break
    deadline = time.monotonic() + 60
    while not _processes_naming(str(scratch)) and time.monotonic() < deadline:
        time.sleep(0.2)  # until b_loop's saxpy is in its grading child
    assert _processes_naming(str(scratch)), "the grading child of b_loop never started"
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    out = "".join(seen) + rest
    assert proc.returncode == 130, (out, err)
    assert err.splitlines() == ["interrupted: 1 of 3 graded, rerun to continue"], err
    assert "Traceback" not in out + err
    assert _processes_naming(str(scratch)) == []  # the grading child went with the command
    assert not list(scratch.iterdir())

    assert _agree(course) == {"a_quick"}
    record = json.loads((course / "grading_record" / f"{ASSIGNMENT}.json").read_text())["students"]
    assert set(record) == {"a_quick"} and record["a_quick"]["status"] == "graded"

    again = run_cli(course, "grade", ASSIGNMENT, "--timeout", "10", **SECRET)
    assert "graded 3 of 3" in again.stdout
    assert _agree(course) == {"a_quick", "b_loop", "c_quick"}
    assert gradebook_grades(course)["b_loop"]["saxpy_correctness"]["auto"] == 0.0
    assert json.loads((course / "autograded" / "b_loop" / ASSIGNMENT / "cuda_from_python.results.json").read_text())[
        "exercises"]["saxpy"]["status"] == "timeout"


def test_ctrl_c_holds_back_until_a_student_s_writes_are_done():
    """The writes of one student are made whole: SIGINT during them waits, then stops the command."""

    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as an interactive command has it
    done = []
    with pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("gradebook")
            done.append("graded folder")
    assert done == ["gradebook", "graded folder"]
    try:
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler put back as it was
    finally:
        signal.signal(signal.SIGINT, before)
