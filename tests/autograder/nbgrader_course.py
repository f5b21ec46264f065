"""A throw-away nbgrader course for the tests: copies of solutions/ and the config."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUBMISSIONS = REPO / "tests" / "autograder" / "submissions"
ASSIGNMENT = "01_cuda_from_python"
NOTEBOOK = "cuda_from_python"
#: Points of each autograded test cell of the assignment, as the issue sets them.
POINTS = {"saxpy_correctness": 6.0, "saxpy_speed": 2.0, "reduce_sum_correctness": 8.0, "reduce_sum_speed": 4.0}


def manifest() -> dict:
    with open(SUBMISSIONS / "manifest.json") as f:
        return json.load(f)["submissions"]


def make_course(tmp: Path) -> Path:
    course = Path(tmp) / "course"
    course.mkdir(parents=True)
    shutil.copytree(REPO / "solutions", course / "solutions")
    shutil.copy(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    return course


def cli_env(**extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("DLK_BACKEND", "cpu")
    env.update(extra)
    return env


def run_cli(course: Path, *args: str, timeout: float = 900, **env: str) -> subprocess.CompletedProcess:
    """``autograder ARGS --course-dir COURSE`` as the console script would run it."""
    cmd = [sys.executable, "-m", "autograder.cli", *args, "--course-dir", str(course)]
    proc = subprocess.run(cmd, cwd=course, env=cli_env(**env), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def submit(course: Path, student: str, notebook: Path, timestamp: str = "2026-11-20 10:00:00.000000 UTC") -> Path:
    """Place a notebook where nbgrader's collect would: submitted/<student>/<assignment>/."""
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(notebook, folder / f"{NOTEBOOK}.ipynb")
    (folder / "timestamp.txt").write_text(timestamp + "\n")
    return folder


def released_course(tmp: Path, samples, **env: str) -> Path:
    """A course with the assignment released and each named sample notebook submitted by a student of that name."""
    course = make_course(tmp)
    run_cli(course, "release", ASSIGNMENT, **env)
    for name in samples:
        submit(course, name, SUBMISSIONS / f"{name}.ipynb")
    return course


def gradebook_grades(course: Path) -> dict[str, dict[str, dict]]:
    """student -> grade_id -> the gradebook's row for that grade (read with sqlite, not nbgrader)."""
    db = sqlite3.connect(course / "gradebook.db")
    rows = db.execute(
        """
        SELECT sa.student_id, bc.name, g.auto_score, g.manual_score, g.extra_credit, gc.max_score
        FROM grade g
        JOIN grade_cells gc ON g.cell_id = gc.id
        JOIN base_cell bc ON bc.id = gc.id
        JOIN submitted_notebook sn ON g.notebook_id = sn.id
        JOIN submitted_assignment sa ON sn.assignment_id = sa.id
        """
    ).fetchall()
    db.close()
    out: dict[str, dict[str, dict]] = {}
    for student, name, auto, manual, extra, max_score in rows:
        out.setdefault(student, {})[name] = {"auto": auto, "manual": manual, "extra": extra, "max": max_score}
    return out


def results_file(course: Path, student: str) -> dict:
    path = course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.results.json"
    with open(path) as f:
        return json.load(f)
