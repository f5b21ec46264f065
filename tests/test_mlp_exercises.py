"""The graded exercises of the chapter on multilayer perceptrons, end to end through the grader.

For each exercise, tests/planted_bugs/<exercise>/ holds a correct kernel and
kernels with one planted bug each (the first line of a file is its ``%%cuda``
line, the second says what is wrong).  Graded in hidden mode, the correct
kernels must get every correctness point and every planted bug must fail.
"""

from __future__ import annotations

import pytest

from planted_corpus import check_corpus_complete, check_corpus_file, corpus

# Graded on the CPU emulator (make test), which finds every planted race and
# out-of-bounds access; the GPU grading of the solutions is in
# tests/autograder/test_solutions_on_gpu.py.

EXERCISES = ["fc_backward_input", "fc_backward_weight"]


@pytest.mark.parametrize("path", corpus(EXERCISES))
def test_planted_bugs_are_rejected_and_correct_kernels_pass(backend, path):
    check_corpus_file(path)


def test_every_exercise_has_a_correct_kernel_and_planted_bugs():
    check_corpus_complete(EXERCISES)
