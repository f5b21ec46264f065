"""Sample classes graded by ``autograder grade --cluster`` on GPUs, shared by the ``test_cluster_on_gpu*`` files.

A sample class: students who submit the released notebook with the
instructor's kernels filled in (the cells a student writes, solution markers
removed) and students who submit the released notebook unchanged. The
assignments are checked in several files so that ``make test-gpu`` (one
process per file) grades them side by side; ``SHARES`` says which file
grades which, and a test checks that every assignment has exactly one.
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

from autograder.exercises import get_exercise
from nbgrader_course import REPO, cli_env

ASSIGNMENTS = sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir() and not p.name.startswith("."))

#: test file -> the assignments whose sample class it grades through a one-GPU cluster
SHARES = {
    "test_cluster_on_gpu.py": ["00_puzzles", "01_cuda_from_python", "01_warp_shuffle", "02_perceptrons_mlp"],
    "test_cluster_on_gpu_convolution.py": ["03_cnn", "04_conv_as_gemm", "04_gemm_ladder"],
    "test_cluster_on_gpu_custom_layers.py": ["05_capsules", "06_large_margin_softmax"],
    "test_cluster_on_gpu_index_notation.py": ["07_index_notation", "08_attention"],
}


def grades_a_class_on_gpu(test):
    """The marks of a test that grades a class on the GPU: ``gpu`` (skipped without one) and a long time limit."""
    for mark in (pytest.mark.gpu, pytest.mark.timeout(3000), pytest.mark.filterwarnings("ignore:.*not in session.*")):
        test = mark(test)
    return test


def visible_gpus_for_grading() -> list[str]:
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


def check_sample_class_on_one_gpu(assignment: str, tmp_path: Path) -> None:
    """Two solved students and a stub through a one-GPU cluster: graded on the GPU, timed, the model recorded."""
    gpus = visible_gpus_for_grading()
    course, kinds = sample_class(tmp_path, assignment, solved=2, stubs=1)
    out = run(course, "grade", assignment, "--cluster", "--timeout", "300", "--no-progress", gpus=gpus[0])
    assert re.search(r"(\d+) worker\(s\), \1 grading on 1 GPU\(s\)", out), out
    entries = record(course, assignment)
    assert set(entries) == set(kinds) and all(e["status"] == "graded" for e in entries.values())
    for student, kind in kinds.items():
        res = results(course, student, assignment)
        if kind == "stub":
            assert entries[student]["score"] == 0
            continue
        for exercise, r in res.items():
            assert r["status"] == "passed" and r["backend"] == "gpu", (student, exercise, r["message"])
        # Timed against the reference kernel on the worker's GPU (some exercises carry no speed points: the
        # warm-up puzzles, all of them).
        if timed(res):
            assert any(r["speed_measured"] and r["timing"]["speedup"] > 0 for r in res.values()), student
        # The GPU model is stored with the score, and shown in the final table.
        assert entries[student]["devices"] and all("NVIDIA" in d for d in entries[student]["devices"])
        assert re.search(rf"^{student}\s+graded\s+[\d.]+ / [\d.]+ points\s+NVIDIA", out, re.M)
    assert "mixed GPU models" not in out
    # The leaderboard ranks the two solved kernels of each timed exercise, under aliases.
    run(course, "leaderboard", assignment)
    page = (course / "feedback" / f"leaderboard_{assignment}.html").read_text()
    assert "solved_0" not in page
    if timed(results(course, "solved_0", assignment)):
        assert "anonymous-" in page and "×" in page


def timed(exercise_results: dict) -> bool:
    """Whether any of the exercises graded carries speed points."""
    return any(get_exercise(name).speed_points > 0 for name in exercise_results)
