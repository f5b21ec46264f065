"""Feedback that names the actual cause: each case is a planted kernel and words its feedback must hold."""

import re

import pytest

from autograder.feedback import check_text
from autograder.isolation import grade_submission
from autograder.submission import submission_from_cell

pytestmark = pytest.mark.backend

STUB = """%%cuda saxpy block=256
__global__ void saxpy(int n, float alpha, const float* x, float* y)
{
    // Grid-stride loop over i: y[i] = alpha * x[i] + y[i] (about 3 lines).
    // YOUR CODE HERE
}"""

SUM_STUB = """%%cuda reduce_sum block=256 grid=1056 shared=1024
__global__ void reduce_sum(const float* x, float* out, int n)
{
    extern __shared__ float partial[];  // one float per thread: shared = 4 * block bytes
    // YOUR CODE HERE
}"""


def _check(cell):
    result = grade_submission(submission_from_cell(cell), mode="visible", backend="cpu")
    return result, check_text(result)


@pytest.mark.parametrize("cell", [STUB, SUM_STUB, "%%cuda saxpy block=256\n\n"])
def test_a_blank_submission_says_no_code_was_written(cell):
    result, text = _check(cell)
    assert result.status == "not_written" and result.score == 0
    assert "no code was written" in text, text
    assert "compile" not in text.splitlines()[0], text


def test_a_wrong_kernel_name_is_not_a_compile_error():
    result, text = _check(STUB.replace("void saxpy(", "void sxpy(").replace("// YOUR CODE HERE", "y[0] = 0;"))
    assert result.status == "wrong_kernel" and result.score == 0
    assert "does not compile" not in text and "sxpy" in text and "name" in text.splitlines()[0], text


def test_one_hint_per_cause_not_per_shape():
    cell = STUB.replace("// YOUR CODE HERE", "int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                        "    if (i < n) y[i] = alpha * x[i] + y[i];").replace("block=256", "block=256 grid=8")
    result, text = _check(cell)
    assert result.status == "failed"
    assert len(re.findall(r"grid-stride loop", text)) == 1, text
