"""The graded exercises of the Perceptrons chapter, end to end through the grader.

For each exercise, tests/planted_bugs/<exercise>/ holds a correct kernel and
kernels with one planted bug each (the first line of a file is its ``%%cuda``
line, the second says what is wrong).  Graded in hidden mode, the correct
kernels must get every correctness point and every planted bug must fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.exercises import get_exercise
from autograder.isolation import grade_submission
from autograder.submission import KernelSubmission, parse_magic_line

# Graded on the CPU emulator (make test), which finds every planted race and
# out-of-bounds access; the GPU grading of the solutions is in
# tests/autograder/test_solutions_on_gpu.py.

CORPUS = Path(__file__).resolve().parent / "planted_bugs"
EXERCISES = ["perceptron_forward", "gradient_sum"]
SECRET = b"planted-bug corpus"
ACCEPTED = {"correct", "atomic_per_row"}  # files that are right (atomic_per_row is slow, not wrong)


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
    if path.stem in ACCEPTED:
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
        assert len(files - ACCEPTED) >= 5, f"{name}: only {len(files - ACCEPTED)} planted bugs"
