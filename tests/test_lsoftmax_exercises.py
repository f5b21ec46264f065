"""The graded exercises of the chapter on large-margin softmax, end to end through the grader.

For each exercise, tests/planted_bugs/<exercise>/ holds correct kernels and
kernels with one planted bug each (the first line of a file is its ``%%cuda``
line, the second says what is wrong): thresholds compared the wrong way, a
binomial coefficient or sign missing, the blend applied to every logit, the
-2k or the (-1)^k of psi dropped, a derivative through acos, swapped norms,
missing bounds guards.  Graded in hidden mode, the correct kernels must get
every correctness point and every planted bug must fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from autograder.exercises import get_exercise
from planted_corpus import check_corpus_complete, check_corpus_file, check_solution_graded_end_to_end, corpus

# Graded on the CPU emulator (make test), which finds every planted out-of-bounds access; the GPU grading
# of the solutions (with speed) is in tests/autograder/test_solutions_on_gpu.py.

EXERCISES = ["lsoftmax_cos_mtheta", "lsoftmax_patch_logits", "lsoftmax_margin_grad_input"]
CORRECT = frozenset({"correct", "chebyshev_recurrence"})


@pytest.mark.parametrize("path", corpus(EXERCISES))
def test_planted_bugs_are_rejected_and_correct_kernels_pass(backend, path):
    check_corpus_file(path, correct=CORRECT)


def test_every_exercise_has_a_correct_kernel_and_six_planted_bugs():
    check_corpus_complete(EXERCISES, correct=CORRECT, minimum=6)


@pytest.mark.parametrize("name", EXERCISES)
def test_references_are_within_their_error_scales(name):
    """|expected| <= scale for every inexact output, and exact outputs (k) are whole numbers."""
    exercise = get_exercise(name)
    rng = np.random.default_rng(0)
    for shape in [*exercise.visible_shapes, *exercise.hidden_shapes]:
        inputs = exercise.make_inputs(shape, rng)
        expected = exercise.reference(inputs)
        scales = exercise.error_scale(inputs)
        for out in exercise.outputs:
            value, scale = expected[out.name], np.broadcast_to(scales[out.name], np.shape(expected[out.name]))
            assert np.isfinite(value).all()
            exact = scale == 0
            assert np.all(value[exact] == np.round(value[exact]))
            assert np.all(np.abs(value[~exact]) <= scale[~exact] * (1 + 1e-12))


def test_hidden_shapes_carry_margins_beyond_four_and_the_hard_cases():
    cos = get_exercise("lsoftmax_cos_mtheta")
    assert {5, 6} <= {s["m"] for s in cos.hidden_shapes}
    patch = get_exercise("lsoftmax_patch_logits")
    assert any(s["batch"] == 1 and s["classes"] == 1 for s in patch.hidden_shapes)
    assert any(s["lam"] > 0 for s in patch.hidden_shapes) and any(s["m"] > 4 for s in patch.hidden_shapes)
    grad = get_exercise("lsoftmax_margin_grad_input")
    assert any(s["dim"] == 1 for s in grad.hidden_shapes)  # cos(theta) = +-1 exactly
    a = grad.secret_shapes(np.random.default_rng(1), {})
    b = grad.secret_shapes(np.random.default_rng(2), {})
    assert a != b


@pytest.mark.backend
@pytest.mark.parametrize("name", EXERCISES)
def test_reference_kernels_solve_their_exercises(backend, name):
    """The kernels of kernels/lsoftmax.cu that speed is measured against give the graded answers."""
    from kernels import lsoftmax

    exercise = get_exercise(name)
    kernel = lsoftmax.module().function(exercise.reference_kernel.kernel)
    rng = np.random.default_rng(3)
    for shape in [*exercise.visible_shapes, *exercise.hidden_shapes]:
        inputs = exercise.make_inputs(shape, rng)
        expected = exercise.reference(inputs)
        scales = exercise.error_scale(inputs)
        args, outputs = [], {}
        for arg in exercise.args:
            if arg.role == "out":
                dtype = np.int32 if name == "lsoftmax_cos_mtheta" and arg.name == "k" else np.float32
                outputs[arg.name] = np.full(np.shape(expected[arg.name]), -7, dtype)
                args.append(outputs[arg.name])
            else:
                args.append(inputs[arg.name])
        config = exercise.reference_kernel.launch(shape)
        kernel(*args, grid=config.grid, block=config.block, shared=config.shared)
        for out_name, got in outputs.items():
            tol = exercise.atol + exercise.rtol * np.broadcast_to(scales[out_name], got.shape)
            assert np.all(np.abs(got - expected[out_name]) <= tol), (shape, out_name)


def test_solution_notebook_is_graded_end_to_end(tmp_path):
    check_solution_graded_end_to_end(tmp_path, "06_large_margin_softmax", "large_margin_softmax", EXERCISES)
