"""The graded exercises of the chapter "Convolution as matrix multiplication", end to end through the grader.

For each exercise, tests/planted_bugs/<exercise>/ holds correct kernels (``correct``, and variants
such as other tiles or a grid-stride loop) and kernels with one planted bug each (the first line of
a file is its ``%%cuda`` line, the second says what is wrong): a missing barrier, a missing bounds
guard on the inner dimension, an ignored sample offset or stride, a transposed index, and more.
Graded in hidden mode, the correct kernels must get every correctness point and every planted bug
must fail.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autograder.exercises import get_exercise
from autograder.isolation import grade_submission
from autograder.submission import KernelSubmission, parse_magic_line

# Graded on the CPU emulator (make test), which finds every planted race and
# out-of-bounds access; the GPU grading of the solutions is in
# tests/autograder/test_solutions_on_gpu.py.

CORPUS = Path(__file__).resolve().parent / "planted_bugs"
EXERCISES = ["im2col", "sgemm_tiled", "conv2d_gemm_forward"]
CORRECT = ("correct", "tile16", "grid_stride")
SECRET = b"planted-bug corpus"


def submission(path: Path) -> KernelSubmission:
    first, rest = path.read_text().split("\n", 1)
    magic = parse_magic_line(first.lstrip("/ "))
    assert not magic.error, magic.error
    return KernelSubmission(exercise=magic.exercise, source=rest, launch=magic.launch, cell_line=2)


def corpus(exercises):
    return [pytest.param(path, id=f"{path.parent.name}/{path.stem}")
            for name in exercises for path in sorted((CORPUS / name).glob("*.cu"))]


@pytest.mark.parametrize("path", corpus(EXERCISES))
def test_planted_bugs_are_rejected_and_correct_kernels_pass(backend, path):
    sub = submission(path)
    exercise = get_exercise(sub.exercise)
    result = grade_submission(sub, mode="hidden", secret=SECRET, student_id="corpus")
    if path.stem in CORRECT:
        assert result.passed, result.message
        assert result.correctness_score == exercise.correctness_points
    else:
        assert not result.passed, f"{path.name} ({path.read_text().splitlines()[1]}) was not rejected"
        assert result.correctness_score < exercise.correctness_points
        assert result.message


def test_every_exercise_has_a_correct_kernel_and_planted_bugs():
    for name in EXERCISES:
        files = {p.stem for p in (CORPUS / name).glob("*.cu")}
        assert "correct" in files
        assert len(files - set(CORRECT)) >= 5, f"{name}: only {len(files - set(CORRECT))} planted bugs"


def test_hidden_shapes_cover_the_hard_cases():
    """Sizes that are no multiple of any tile, skinny matrices, padding, stride 2, ranges not starting at 0."""
    gemm = get_exercise("sgemm_tiled").hidden_shapes
    assert any(s["M"] == 1 for s in gemm) and any(s["N"] == 1 for s in gemm) and any(s["K"] == 1 for s in gemm)
    assert any(s["M"] % 32 and s["N"] % 32 and s["K"] % 32 and min(s.values()) > 32 for s in gemm)
    assert any(max(s["M"], s["N"]) >= 100 * min(s["M"], s["N"]) for s in gemm)  # skinny
    unroll = get_exercise("im2col").hidden_shapes
    assert any(s["stride"] > 1 for s in unroll) and any(s["pad"] > 0 for s in unroll) and any(s["n0"] > 0 for s in unroll)
    assert any(s["C"] % 8 and s["C"] > 8 for s in unroll)
    conv = get_exercise("conv2d_gemm_forward").hidden_shapes
    assert any(s["M"] > 64 and s["M"] % 32 for s in conv) and any(s["n0"] > 0 for s in conv)
    assert any(s["N"] == 1 for s in conv)


@pytest.mark.parametrize("name", EXERCISES)
def test_reference_and_launch_agree_with_the_chapter_kernels(name):
    """The exercise's reference is the chapter's NumPy reference; the secret shapes differ per student."""
    exercise = get_exercise(name)
    rng = np.random.default_rng(0)
    shape = exercise.visible_shapes[1]
    inputs = exercise.make_inputs(shape, rng)
    expected = exercise.reference(inputs)
    for arg in exercise.outputs:
        assert np.isfinite(expected[arg.name]).all()
    a = exercise.secret_shapes(np.random.default_rng(1), {})
    b = exercise.secret_shapes(np.random.default_rng(2), {})
    assert a != b


def test_solution_notebook_is_graded_end_to_end(tmp_path):
    """release -> submit (the instructor's solutions, and the released stubs) -> ``autograder grade``.

    The solutions get every correctness point; the stubs, which compile but compute nothing, get none.
    """
    import importlib.util
    import json
    import shutil

    spec = importlib.util.spec_from_file_location(
        "nbgrader_course", Path(__file__).resolve().parent / "autograder" / "nbgrader_course.py")
    course_tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(course_tools)

    assignment, notebook = "04_conv_as_gemm", "conv_as_gemm"
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

    def results(student):
        path = course / "autograded" / student / assignment / f"{notebook}.results.json"
        return json.loads(path.read_text())

    text = json.dumps(results("solution"))
    for name in EXERCISES:
        assert name in text
    grades = course_tools.gradebook_grades(course)
    for name in EXERCISES:
        cell = grades["solution"][f"{name}_correctness"]
        assert cell["auto"] == cell["max"] == get_exercise(name).correctness_points, (name, cell)
        assert grades["blank"][f"{name}_correctness"]["auto"] == 0, name
