"""The graded exercises of the chapter "Convolution as matrix multiplication", end to end through the grader.

For each exercise, tests/planted_bugs/<exercise>/ holds correct kernels (``correct``, and variants
such as other tiles or a grid-stride loop) and kernels with one planted bug each (the first line of
a file is its ``%%cuda`` line, the second says what is wrong): a missing barrier, a missing bounds
guard on the inner dimension, an ignored sample offset or stride, a transposed index, and more.
Graded in hidden mode, the correct kernels must get every correctness point and every planted bug
must fail.
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

EXERCISES = ["im2col", "sgemm_tiled", "conv2d_gemm_forward"]


@pytest.mark.parametrize("path", corpus(EXERCISES))
def test_planted_bugs_are_rejected_for_their_reason(backend, path):
    check_corpus_file(path)


@pytest.mark.parametrize("name", EXERCISES)
def test_the_solution_kernel_gets_every_correctness_point(backend, name):
    check_solution_kernel(name)


def test_every_exercise_has_a_solution_kernel_and_planted_bugs():
    check_corpus_complete(EXERCISES)


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
    check_solution_graded_end_to_end(tmp_path, "04_conv_as_gemm", "conv_as_gemm", EXERCISES)
