"""The graded exercises of the chapter on capsule networks, end to end through the grader.

The solution notebook's kernel must get every correctness point, and every
planted bug of tests/planted_bugs/<exercise>/ must be rejected for its planted
reason (see tests/planted_corpus.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from autograder.exercises import get_exercise
from planted_corpus import check_corpus_complete, check_corpus_file, check_solution_kernel, corpus

# Graded on the CPU emulator (make test), which finds every planted race and
# out-of-bounds access; the GPU grading of the solutions is in
# tests/autograder/test_solutions_on_gpu.py.

EXERCISES = ["capsule_predict", "capsule_grad_input", "capsule_grad_weight"]


@pytest.mark.parametrize("path", corpus(EXERCISES))
def test_planted_bugs_are_rejected_for_their_reason(backend, path):
    check_corpus_file(path)


@pytest.mark.parametrize("name", EXERCISES)
def test_the_solution_kernel_gets_every_correctness_point(backend, name):
    check_solution_kernel(name)


def test_every_exercise_has_a_solution_kernel_and_planted_bugs():
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
