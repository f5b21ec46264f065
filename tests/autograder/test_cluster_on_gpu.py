"""``autograder grade --cluster`` on GPUs: every assignment's sample class through a one-GPU worker, and a
class shared by two GPU workers when two GPUs are visible (``make test-gpu``).

A sample class: two students who submit the released notebook with the
instructor's kernels filled in (the cells a student writes, solution markers
removed) and one who submits the released notebook unchanged.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nbgrader_course import REPO, cli_env, gradebook_grades

ASSIGNMENTS = sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir() and not p.name.startswith("."))

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(3000), pytest.mark.filterwarnings("ignore:.*not in session.*")]


def _visible_gpus() -> list[str]:
    from autograder.cluster import visible_gpus

    old = os.environ.get("DLK_BACKEND")
    os.environ["DLK_BACKEND"] = "gpu"
    try:
        return visible_gpus()
    finally:
        os.environ.pop("DLK_BACKEND") if old is None else os.environ.__setitem__("DLK_BACKEND", old)


def solved_notebook(assignment: str) -> nbformat.NotebookNode:
    """The released notebook with each solution cell holding the instructor's kernel (markers removed)."""
    (released_path,) = sorted((REPO / "exercises" / assignment).glob("*.ipynb"))
    solution = nbformat.read(REPO / "solutions" / assignment / released_path.name, as_version=4)
    kernels = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    nb = nbformat.read(released_path, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in kernels:
            cell.source = "\n".join(line for line in kernels[grade_id].split("\n")
                                    if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line)
    return nb


def sample_class(tmp: Path, assignment: str, solved: int, stubs: int) -> tuple[Path, dict[str, str]]:
    course = tmp / "course"
    course.mkdir(parents=True)
    shutil.copytree(REPO / "solutions", course / "solutions")
    shutil.copy(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    run(course, "release", assignment)
    (released_path,) = sorted((REPO / "exercises" / assignment).glob("*.ipynb"))
    kinds = {f"solved_{i}": "solved" for i in range(solved)} | {f"stub_{i}": "stub" for i in range(stubs)}
    for student, kind in kinds.items():
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        if kind == "solved":
            nbformat.write(solved_notebook(assignment), folder / released_path.name)
        else:
            shutil.copy(released_path, folder / released_path.name)
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC\n")
    return course, kinds


def run(course: Path, *args: str, gpus: str | None = None) -> str:
    env = cli_env(DLK_BACKEND="gpu", DLK_GRADER_SECRET="cluster on the GPU")
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", *args, "--course-dir", str(course)], cwd=course,
                          env=env, capture_output=True, text=True, timeout=2400)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def record(course: Path, assignment: str) -> dict:
    return json.loads((course / "grading_record" / f"{assignment}.json").read_text())["students"]


def results(course: Path, student: str, assignment: str) -> dict:
    (path,) = (course / "autograded" / student / assignment).glob("*.results.json")
    return json.loads(path.read_text())["exercises"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_sample_class_through_the_cluster_on_one_gpu(assignment, tmp_path):
    gpus = _visible_gpus()
    course, kinds = sample_class(tmp_path, assignment, solved=2, stubs=1)
    out = run(course, "grade", assignment, "--cluster", "--timeout", "300", "--no-progress", gpus=gpus[0])
    assert "1 worker(s), 1 with a GPU" in out
    entries = record(course, assignment)
    assert set(entries) == set(kinds) and all(e["status"] == "graded" for e in entries.values())
    for student, kind in kinds.items():
        res = results(course, student, assignment)
        if kind == "stub":
            assert entries[student]["score"] == 0
            continue
        for exercise, r in res.items():
            assert r["status"] == "passed" and r["backend"] == "gpu", (student, exercise, r["message"])
        # Timed against the reference kernel on the worker's GPU (some exercises may carry no speed points).
        assert any(r["speed_measured"] and r["timing"]["speedup"] > 0 for r in res.values()), student
        # The GPU model is stored with the score, and shown in the final table.
        assert entries[student]["devices"] and all("NVIDIA" in d for d in entries[student]["devices"])
        assert re.search(rf"^{student}\s+graded\s+[\d.]+ / [\d.]+\s+NVIDIA", out, re.M)
    assert "mixed GPU models" not in out
    # The leaderboard ranks the two solved kernels of each exercise, under aliases.
    run(course, "leaderboard", assignment)
    page = (course / "feedback" / f"leaderboard_{assignment}.html").read_text()
    assert "anonymous-" in page and "solved_0" not in page and "×" in page


def test_one_class_on_two_gpus_agrees_with_the_sequential_path(tmp_path):
    gpus = _visible_gpus()
    if len(gpus) < 2:
        pytest.skip(f"needs two visible GPUs ({len(gpus)} here)")
    assignment = "01_cuda_from_python"
    seq_course, kinds = sample_class(tmp_path / "seq", assignment, solved=4, stubs=2)
    run(seq_course, "grade", assignment, "--timeout", "300", gpus=gpus[0])
    course, _ = sample_class(tmp_path / "two", assignment, solved=4, stubs=2)
    out = run(course, "grade", assignment, "--cluster", "--timeout", "300", "--no-progress", gpus=",".join(gpus[:2]))
    assert "2 worker(s), 2 with a GPU" in out
    entries = record(course, assignment)
    assert all(e["status"] == "graded" for e in entries.values())
    used = {re.search(r"GPU (\S+)$", e["worker"]).group(1) for e in entries.values()}
    assert used == set(gpus[:2]), used  # both cards graded
    ours, theirs = gradebook_grades(course), gradebook_grades(seq_course)
    for student in kinds:  # correctness is the same everywhere; speed is measured on each card
        for cell, grade in ours[student].items():
            if cell.endswith("_correctness"):
                assert grade == theirs[student][cell], (student, cell)
