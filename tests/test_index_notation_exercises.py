"""The graded exercises of the chapter "Index notation", end to end through the grader.

tests/planted_bugs/<exercise>/ holds, for the index-notation exercises, comprehensions (``.tc``:
the first line is the ``%%tc`` line behind ``#``, the second says what is wrong) and, for
``mv_faster``, CUDA kernels (``.cu``, as in the other chapters).  Graded in hidden mode, the
correct ones must get every correctness point and every planted bug must fail.  Only the text of
a cell reaches the grading process; a comprehension is turned into a kernel there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autograder.exercises import get_exercise
from autograder.isolation import grade_submission
from autograder.submission import KernelSubmission, parse_magic_line, submission_from_cell
from planted_corpus import check_solution_graded_end_to_end

CORPUS = Path(__file__).resolve().parent / "planted_bugs"
SECRET = b"planted-bug corpus"
TC_EXERCISES = ["tc_batched_matmul", "tc_avgpool2x2", "tc_depthwise_conv", "tc_capsule_predict"]
EXERCISES = TC_EXERCISES + ["mv_faster"]
CORRECT = ("correct", "block_per_row")


def corpus_files():
    return [pytest.param(p, id=f"{p.parent.name}/{p.stem}") for name in EXERCISES
            for p in sorted((CORPUS / name).glob("*.tc")) + sorted((CORPUS / name).glob("*.cu"))]


def submission(path: Path) -> KernelSubmission:
    first, rest = path.read_text().split("\n", 1)
    magic = parse_magic_line(first.lstrip("#/ "))
    assert not magic.error, magic.error
    return KernelSubmission(exercise=magic.exercise, source=rest, launch=magic.launch, cell_line=2)


@pytest.mark.parametrize("path", corpus_files())
def test_planted_bugs_are_rejected_and_correct_solutions_pass(backend, path):
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


def test_every_exercise_has_a_correct_solution_and_planted_bugs():
    for name in EXERCISES:
        files = {p.stem for p in (CORPUS / name).iterdir()}
        assert "correct" in files
        assert len(files - set(CORRECT)) >= 4, f"{name}: only {len(files - set(CORRECT))} planted bugs"


def test_a_tc_error_is_reported_at_the_cells_line():
    sub = submission_from_cell("%%tc tc_batched_matmul\ndef batched_matmul(float(B,M,K) X, float(B,K,N) Y) -> (Z) {\n"
                               "    Z(b,i,j) = X(b,i,k) * Y(b,k,j)\n}")
    result = grade_submission(sub, mode="visible")
    assert result.status == "compile_error"
    assert "line 3, column 22" in result.message and "+=!" in result.message


def test_the_interface_is_checked():
    sub = submission_from_cell("%%tc tc_batched_matmul\ndef bmm(float(B,M,K) P, float(B,K,N) Q) -> (R) {\n"
                               "    R(b,i,j) +=! P(b,i,k) * Q(b,k,j)\n}")
    result = grade_submission(sub, mode="visible")
    assert result.status == "compile_error" and "inputs are P, Q, but the exercise gives X, Y" in result.message


def test_an_empty_cell_says_what_to_write():
    sub = submission_from_cell("%%tc tc_avgpool2x2\n")
    result = grade_submission(sub, mode="visible")
    assert result.status == "compile_error" and "'%%tc tc_avgpool2x2' cell is empty" in result.message


def test_hidden_shapes_cover_the_hard_cases():
    pool = get_exercise("tc_avgpool2x2").hidden_shapes
    assert any(s["H"] % 2 for s in pool) and any(s["W"] == 2 for s in pool)
    bmm = get_exercise("tc_batched_matmul").hidden_shapes
    assert any(min(s.values()) == 1 for s in bmm) and any(s["K"] == 1 for s in bmm)
    mv = get_exercise("mv_faster").hidden_shapes
    assert any(s["M"] % 8 for s in mv) and any(s["K"] == 1 for s in mv) and any(s["K"] > 4096 for s in mv)


@pytest.mark.parametrize("name", EXERCISES)
def test_references_are_float64_and_nonzero(name):
    ex = get_exercise(name)
    inputs = ex.make_inputs(ex.visible_shapes[1], np.random.default_rng(0))
    for arg in ex.outputs:
        out = ex.reference(inputs)[arg.name]
        assert out.dtype == np.float64 and np.isfinite(out).all() and np.abs(out).max() > 1e-3


def test_solution_notebook_graded_end_to_end(tmp_path):
    check_solution_graded_end_to_end(tmp_path, "07_index_notation", "index_notation", EXERCISES)


def test_tc_cell_magic_shows_ranges_or_the_error(capsys):
    from autograder.student import compile_tc_cell, submission

    compile_tc_cell("tc_avgpool2x2", "def avgpool2x2(float(N,C,H,W) X) -> (Y) {\n"
                    "    Y(n,c,i,j) +=! X(n,c,2 * i + u,2 * j + v) / 4 where u in 0:2, v in 0:2\n}")
    out = capsys.readouterr()
    assert "i in [0, floor((H - 2) / 2)]" in out.out and submission("tc_avgpool2x2") is not None
    compile_tc_cell("tc_avgpool2x2", "def avgpool2x2(float(N,C,H,W) X) -> (Y) {\n    Y(n,c,i,j) = X(n,c,i,k)\n}")
    out = capsys.readouterr()
    assert "line 3, column" in out.err and "no reduction operator" in out.err
