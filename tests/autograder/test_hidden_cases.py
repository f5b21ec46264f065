"""Hidden sizes stay hidden: feedback names a hidden case by number and nature, and a resubmission draws new ones.

The attack: feedback said which hidden sizes failed (n=...), they were the same at every regrade, and a kernel
special-cased to them raised a score from 12.1 to 14.  Its twin here: the same kernel special-cased to sizes it
could not have seen, which is what the first submission's feedback now tells (nothing).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from autograder.case_plan import concealed, plan_cases, submission_digest
from autograder.diagnosis import INF_HINT
from autograder.exercises import get_exercise
from autograder.isolation import grade_submission
from autograder.submission import submission_from_cell

SECRET = b"hidden cases tests"
LAUNCH = {"block": 256}
HONEST = ("__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {\n"
          "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
          "        y[i * incy] = alpha * x[i * incx] + y[i * incy];\n}\n")
STEP = "y[i * incy] = alpha * x[i * incx] + y[i * incy];"


def _special_cased(sizes) -> str:
    """Right only for the sizes it knows (the visible ones, the public hidden ones and ``sizes``), wrong elsewhere."""
    known = " || ".join(f"n == {n}" for n in sorted(sizes))
    return HONEST.replace(STEP, f"y[i * incy] = ({known}) ? alpha * x[i * incx] + y[i * incy] : 0.0f;")


def _plan(source: str, student: str = "ada") -> list[dict]:
    return plan_cases(get_exercise("saxpy"), LAUNCH, "hidden", SECRET, student, submission_digest(source, LAUNCH))


def _secret_sizes(plan: list[dict]) -> set[int]:
    ex = get_exercise("saxpy")
    public = {s["n"] for s in ex.visible_shapes} | {s["n"] for s in ex.hidden_shapes}
    return {c["shape"]["n"] for c in plan} - public


def test_a_regrade_draws_the_same_cases_and_a_resubmission_new_ones():
    first = _plan(HONEST)
    assert _plan(HONEST) == first  # the same submission: the same cases (a regrade gives the same score)
    again = _plan(HONEST + "// resubmitted\n")
    assert _secret_sizes(again) and _secret_sizes(again) != _secret_sizes(first)
    assert [c["seed"] for c in again if not c["visible"]] != [c["seed"] for c in first if not c["visible"]]
    assert _plan(HONEST, "bob") != first  # another student: other cases


def test_hidden_cases_are_named_by_number_and_nature_never_by_size():
    plan = _plan(HONEST)
    hidden = [c for c in plan if not c["visible"]]
    assert all(re.fullmatch(r"hidden case \d+ \(.+\)", c["name"]) for c in hidden)
    for case in hidden:
        n = case["shape"]["n"]
        if "visible shape" in case["name"]:
            continue  # a visible shape again, with inputs of its own: its size is public
        assert n == 1 or not re.search(rf"\b{n}\b", case["name"].split("(", 1)[1]), case["name"]
    assert any("not a multiple of your block" in c["name"] for c in hidden)


def test_numbers_that_could_tell_a_size_are_concealed_and_the_launch_s_are_kept():
    text = "With x[2048:4099] set to ones the kernel returns 2051, not 2051.5; 53 elements; block 256; 1e-05; -1"
    assert concealed(text, {"block": 256, "grid": 16}) == (
        "With x[N:N] set to ones the kernel returns N, not 2051.5; N elements; block 256; 1e-05; -1")
    # float16's largest value is a fact of the format, no size: "tops out at N" would leave the student guessing
    assert concealed(INF_HINT, {"block": 256, "grid": 16}) == INF_HINT and "65504" in INF_HINT


@pytest.mark.backend
def test_a_kernel_special_cased_to_an_earlier_grading_s_sizes_gains_nothing():
    """The worst case for the grader: the student knows every size of their first grading (the fixed hidden ones
    are public in the exercise's source; the secret one, we hand it to them).  Resubmitted, the kernel draws a new
    secret size and fails it; the feedback of that failure names it by number and nature, and tells no size."""
    ex = get_exercise("saxpy")
    public = {s["n"] for s in ex.visible_shapes} | {s["n"] for s in ex.hidden_shapes}
    tuned = _special_cased(public | _secret_sizes(_plan(HONEST)))
    twin = grade_submission(submission_from_cell("%%cuda saxpy block=256\n" + HONEST), mode="hidden",
                            student_key=SECRET, student_id="ada")
    attack = grade_submission(submission_from_cell("%%cuda saxpy block=256\n" + tuned), mode="hidden",
                              student_key=SECRET, student_id="ada")
    assert twin.status == "passed"
    assert attack.score < twin.score, attack.feedback_text()
    new_sizes = _secret_sizes(_plan(tuned))
    seen = attack.feedback_text() + "\n" + attack.message
    failing = [s for s in attack.shapes if not s.passed]
    assert failing and all(s.label.startswith("hidden case") for s in failing), [s.label for s in failing]
    for n in new_sizes:
        assert not re.search(rf"(?<!\d){n}(?!\d)", seen), f"the feedback tells the hidden size {n}:\n{seen}"
        assert not re.search(rf"(?<!\d){n - 1}(?!\d)", seen), f"the feedback tells the last index {n - 1}"
    assert np.isfinite(attack.score)
