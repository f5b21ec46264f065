"""Feedback that names the actual cause: each case is a planted kernel and words its feedback must hold."""

import re

import pytest

from autograder.feedback import check_text
from autograder.isolation import grade_submission
from autograder.submission import submission_from_cell

# These read the emulator's own findings (it is asked for by name below), so they run under `make test`.

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


CORPUS = __import__("pathlib").Path(__file__).parent / "planted_bugs"


@pytest.mark.parametrize("name, words", [
    ("saxpy_bug_block_stride.cu", ["grid-stride step", "blockDim.x * gridDim.x", "not one block"]),
    ("reduce_sum_bug_block_not_power_of_two.cu", ["block size 96 is not a power of two", "tree reduction"]),
    ("reduce_sum_bug_shared_too_small.cu", ["dynamic shared memory", "shared=512", "too small", "shared=1024"]),
    ("reduce_sum_bug_no_barrier_at_all.cu", ["no __syncthreads() at all"]),
    ("saxpy_bug_no_grid_stride.cu", ["grid-stride loop"]),
])
def test_check_names_the_actual_cause(name, words):
    result, text = _check((CORPUS / name).read_text())
    assert result.status != "passed"
    hint = result.message.split("Hint: ", 1)[1]
    for w in words:
        assert w in hint, hint
    assert "if (i < n)" not in hint and "fixed size" not in hint and "loop bound" not in hint, hint


@pytest.mark.parametrize("name", ["saxpy_bug_no_grid_stride.cu", "reduce_sum_bug_no_grid_stride.cu"])
def test_a_kernel_without_a_grid_stride_loop_fails_check(name):
    """check() adds a size just past one pass of the student's own grid (the released reduce_sum stub's grid=1056)."""
    result, text = _check((CORPUS / name).read_text())
    assert result.status == "failed", text
    assert "grid-stride loop" in result.message.split("Hint: ", 1)[1], text


def test_the_size_past_one_pass_follows_the_launch_line():
    from autograder.exercises import get_exercise
    from autograder.case_plan import plan_cases

    ex = get_exercise("reduce_sum")
    sizes = lambda launch: [c["shape"]["n"] for c in plan_cases(ex, launch, "visible", b"", "s")]
    assert sizes({"block": 256, "grid": 1056, "shared": 1024})[-1] == 1056 * 256 + 129
    assert max(sizes({"block": 256})) == 16384  # the default grid covers any n in one pass: nothing to add


def test_on_a_gpu_too_small_dynamic_shared_memory_is_named_from_the_launch_line():
    # A GPU reports only an illegal address; the %%cuda line and the source show the cause.
    from autograder.causes import refine_hint
    from autograder.submission import parse_magic_line

    text = (CORPUS / "reduce_sum_bug_shared_too_small.cu").read_text()
    magic = parse_magic_line(text.splitlines()[0])
    gpu_error = ("kernel reduce_sum failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)\n"
                 "  meaning: a thread read or wrote memory outside every buffer (check the bounds guard and the index arithmetic)")
    hint = refine_hint("An access outside every buffer: a missing or wrong bounds check.", source=text,
                       launch=magic.launch, error=gpu_error)
    assert "shared=512" in hint and "too small" in hint and "1024 bytes" in hint
    honest = text.replace("shared=512", "shared=1024")
    assert "too small" not in refine_hint("x", source=honest, launch=parse_magic_line(honest.splitlines()[0]).launch,
                                          error=gpu_error)
