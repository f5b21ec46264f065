"""The graded exercises of the chapter on convolutional layers, end to end through the grader.

The solution notebook's kernel must get every correctness point, and every planted bug of
kernels with one planted bug each (the first line of a file is its ``%%cuda``
line, the second says what is wrong): an off-by-one halo, a missing bounds
guard, a missing barrier, a swapped filter index, and more.  Graded in hidden
mode, the correct kernels must get every correctness point and every planted
bug must fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from autograder.exercises import get_exercise
from planted_corpus import (check_corpus_complete, check_corpus_file, check_solution_graded_end_to_end,
                            check_solution_kernel, corpus)

# Graded on the CPU emulator (make test), which finds every planted race and
# out-of-bounds access; the GPU grading of the solutions is in
# tests/autograder/test_solutions_on_gpu.py.

EXERCISES = ["conv2d_forward", "conv2d_forward_tiled", "max_pool_forward", "conv2d_backward_input"]


@pytest.mark.parametrize("path", corpus(EXERCISES))
def test_planted_bugs_are_rejected_for_their_reason(backend, path):
    check_corpus_file(path)


@pytest.mark.parametrize("name", EXERCISES)
def test_the_solution_kernel_gets_every_correctness_point(backend, name):
    check_solution_kernel(name)


def test_every_exercise_has_a_solution_kernel_and_planted_bugs():
    check_corpus_complete(EXERCISES)


@pytest.mark.parametrize("name", EXERCISES)
def test_hidden_shapes_cover_the_hard_cases(name):
    """Batch 1, odd sizes, and channel / map counts that are no multiple of a tile or of 8."""
    exercise = get_exercise(name)
    shapes = list(exercise.hidden_shapes)
    assert any(s["N"] == 1 for s in shapes)
    assert any(s["H"] % 2 and s["W"] % 2 for s in shapes)
    assert any(s["C"] % 8 and s["C"] > 8 for s in shapes)
    if "M" in shapes[0]:
        assert any(s["M"] % 8 and s["M"] > 8 for s in shapes)
        assert any(s["H"] - s["K"] + 1 > 16 for s in shapes)  # more than one tile


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
    check_solution_graded_end_to_end(tmp_path, "03_cnn", "cnn", EXERCISES)
