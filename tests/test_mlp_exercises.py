"""The graded exercises of the chapter on multilayer perceptrons, end to end through the grader.

The solution notebook's kernel must get every correctness point, and every
planted bug of tests/planted_bugs/<exercise>/ must be rejected for its planted
reason (see tests/planted_corpus.py).
"""

from __future__ import annotations

import pytest

from planted_corpus import check_corpus_complete, check_corpus_file, check_solution_kernel, corpus

# Graded on the CPU emulator (make test), which finds every planted race and
# out-of-bounds access; the GPU grading of the solutions is in
# tests/autograder/test_solutions_on_gpu.py.

EXERCISES = ["fc_backward_input", "fc_backward_weight"]


@pytest.mark.parametrize("path", corpus(EXERCISES))
def test_planted_bugs_are_rejected_for_their_reason(backend, path):
    check_corpus_file(path)


@pytest.mark.parametrize("name", EXERCISES)
def test_the_solution_kernel_gets_every_correctness_point(backend, name):
    check_solution_kernel(name)


def test_every_exercise_has_a_solution_kernel_and_planted_bugs():
    check_corpus_complete(EXERCISES)
