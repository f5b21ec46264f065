"""The chapters' planted-bug corpora, graded through the real grader.

``tests/planted_bugs/<exercise>/`` holds, for each graded exercise, correct
kernels and kernels with one planted bug each.  The first line of a file is
its ``%%cuda`` line (behind ``//`` so the file stays valid CUDA C), the
second says what is wrong.  Graded in hidden mode, a correct kernel must get
every correctness point and every planted bug must fail; a bug with a line
``// expect: <regex>`` must fail for that reason on the CPU emulator (the
feedback matches it).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

from autograder.exercises import get_exercise
from autograder.isolation import grade_submission
from autograder.submission import KernelSubmission, parse_magic_line

CORPUS = Path(__file__).resolve().parent / "planted_bugs"
SECRET = b"planted-bug corpus"
CORRECT = frozenset({"correct"})


def submission(path: Path) -> KernelSubmission:
    first, rest = path.read_text().split("\n", 1)
    magic = parse_magic_line(first.lstrip("/ "))
    assert not magic.error, magic.error
    return KernelSubmission(exercise=magic.exercise, source=rest, launch=magic.launch, cell_line=2)


def corpus(exercises) -> list:
    """pytest parameters: every file of the exercises' corpora."""
    return [pytest.param(path, id=f"{path.parent.name}/{path.stem}")
            for name in exercises for path in sorted((CORPUS / name).glob("*.cu"))]


def check_corpus_file(path: Path, correct=CORRECT) -> None:
    """Grade one corpus file in hidden mode: full points if its name is in ``correct``, rejected otherwise."""
    sub = submission(path)
    exercise = get_exercise(sub.exercise)
    result = grade_submission(sub, mode="hidden", secret=SECRET, student_id="corpus")
    if path.stem in correct:
        assert result.passed, result.message
        assert result.correctness_score == exercise.correctness_points
    else:
        assert not result.passed, f"{path.name} ({path.read_text().splitlines()[1]}) was not rejected"
        assert result.correctness_score < exercise.correctness_points
        assert result.message
        expect = re.search(r"^// expect: (.+)$", path.read_text(), re.M)
        if expect and result.backend == "cpu":
            feedback = "\n".join([result.message] + [s.hint + " " + s.error for s in result.shapes])
            assert re.search(expect.group(1).strip(), feedback, re.I | re.S), feedback


def check_corpus_complete(exercises, correct=CORRECT, minimum: int = 5) -> None:
    """Every exercise has a correct kernel and at least ``minimum`` planted bugs."""
    for name in exercises:
        files = {p.stem for p in (CORPUS / name).glob("*.cu")}
        assert "correct" in files
        assert len(files - set(correct)) >= minimum, f"{name}: only {len(files - set(correct))} planted bugs"


def check_solution_graded_end_to_end(tmp_path: Path, assignment: str, notebook: str, exercises) -> None:
    """release -> submit (the instructor's solutions, and the released stubs) -> ``autograder grade``.

    The solutions get every correctness point; the stubs, which compile but compute nothing, get none.
    """
    spec = importlib.util.spec_from_file_location(
        "nbgrader_course", Path(__file__).resolve().parent / "autograder" / "nbgrader_course.py")
    course_tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(course_tools)

    course = course_tools.make_course(tmp_path)
    course_tools.run_cli(course, "release", assignment)
    released = course / "exercises" / assignment / f"{notebook}.ipynb"
    assert released.exists()
    assert "BEGIN SOLUTION" not in released.read_text()
    for student, source in (("solution", course / "solutions" / assignment / f"{notebook}.ipynb"), ("blank", released)):
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        shutil.copy(source, folder / f"{notebook}.ipynb")
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC\n")
    course_tools.run_cli(course, "grade", assignment, "--timeout", "120", DLK_GRADER_SECRET="test-secret")

    results = course / "autograded" / "solution" / assignment / f"{notebook}.results.json"
    text = json.dumps(json.loads(results.read_text()))
    for name in exercises:
        assert name in text
    grades = course_tools.gradebook_grades(course)
    for name in exercises:
        cell = grades["solution"][f"{name}_correctness"]
        assert cell["auto"] == cell["max"] == get_exercise(name).correctness_points, (name, cell)
        assert grades["blank"][f"{name}_correctness"]["auto"] == 0, name
