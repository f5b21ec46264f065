"""The graded exercises of the chapter on capsule networks, end to end through the grader.

For each exercise, tests/planted_bugs/<exercise>/ holds a correct kernel and
kernels with one planted bug each (the first line of a file is its ``%%cuda``
line, the second says what is wrong).  Graded in hidden mode, the correct
kernels must get every correctness point and every planted bug must fail.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autograder.exercises import get_exercise
from autograder.isolation import grade_submission
from autograder.submission import KernelSubmission, parse_magic_line
from planted_corpus import SECRET, check_corpus_complete, check_corpus_file, corpus

# Graded on the CPU emulator (make test), which finds every planted race and
# out-of-bounds access; the GPU grading of the solutions is in
# tests/autograder/test_solutions_on_gpu.py.

EXERCISES = ["capsule_predict", "capsule_grad_input", "capsule_grad_weight"]


@pytest.mark.parametrize("path", corpus(EXERCISES))
def test_planted_bugs_are_rejected_and_correct_kernels_pass(backend, path):
    check_corpus_file(path)


def test_every_exercise_has_a_correct_kernel_and_planted_bugs():
    check_corpus_complete(EXERCISES)


@pytest.mark.parametrize("name", EXERCISES)
def test_references_and_error_scales_agree_with_the_kernels_module(name):
    """The grader's float64 reference is the one the book's kernels are tested against, on every shape."""
    exercise = get_exercise(name)
    rng = np.random.default_rng(0)
    for shape in [*exercise.visible_shapes, *exercise.hidden_shapes]:
        inputs = exercise.make_inputs(shape, rng)
        (out,) = exercise.outputs
        expected = exercise.reference(inputs)[out.name]
        scale = exercise.error_scale(inputs)[out.name]
        assert expected.shape == np.shape(scale)
        assert np.all(np.abs(expected) <= scale * (1 + 1e-12))


def test_secret_shapes_differ_per_student_and_break_alignment():
    exercise = get_exercise("capsule_predict")
    shapes = [exercise.secret_shapes(np.random.default_rng(seed), {"block": 256})[0] for seed in range(20)]
    assert len({tuple(s.values()) for s in shapes}) > 10
    for s in shapes:
        assert (s["out_caps"] * s["out_dim"]) % 4 != 0


def test_solution_notebook_kernels_get_every_correctness_point(backend):
    """The instructor notebook's own %%cuda cells, graded as a student's would be."""
    import nbformat

    path = Path(__file__).resolve().parents[1] / "solutions" / "05_capsules" / "capsules.ipynb"
    cells = [c.source for c in nbformat.read(path, as_version=4).cells
             if c.cell_type == "code" and c.source.startswith("%%cuda")]
    assert len(cells) == len(EXERCISES)
    for text in cells:
        first, rest = text.split("\n", 1)
        magic = parse_magic_line(first)
        assert not magic.error, magic.error
        source = "\n".join(line for line in rest.splitlines() if "SOLUTION" not in line)
        sub = KernelSubmission(exercise=magic.exercise, source=source, launch=magic.launch, cell_line=2)
        result = grade_submission(sub, mode="hidden", secret=SECRET, student_id="solution")
        assert result.passed, result.message
        assert result.correctness_score == get_exercise(magic.exercise).correctness_points
