"""Feedback that names the actual cause: each case is a planted kernel and words its feedback must hold."""

import re

import pytest

from autograder.feedback import check_text
from autograder.isolation import grade_submission
from autograder.submission import KernelSubmission, submission_from_cell
from planted_corpus import CORPUS, read_corpus_file

# These read the emulator's own findings (it is asked for by name below), so they run under `make test`.

STUB = """%%cuda saxpy block=256
__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    // Grid-stride loop over i: y[i * incy] = alpha * x[i * incx] + y[i * incy] (about 3 lines).
    // YOUR CODE HERE
}"""

SUM_STUB = """%%cuda reduce_sum block=256 grid=1056 shared=1024
__global__ void reduce_sum(const float* x, int incx, float* out, int n)
{
    extern __shared__ float partial[];  // one float per thread: shared = 4 * block bytes
    // YOUR CODE HERE
}"""


def _check(cell: str | KernelSubmission):
    sub = submission_from_cell(cell) if isinstance(cell, str) else cell
    result = grade_submission(sub, mode="visible", backend="cpu")
    return result, check_text(result)


def planted(name: str) -> KernelSubmission:
    """A planted bug by ``<exercise>/<bug>`` (an edit of the solution cell, tests/planted_corpus.py)."""
    return read_corpus_file(CORPUS / f"{name}.edit").submission


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
                        "    if (i < n) y[i * incy] = alpha * x[i * incx] + y[i * incy];").replace("block=256", "block=256 grid=8")
    result, text = _check(cell)
    assert result.status == "failed"
    assert len(re.findall(r"grid-stride loop", text)) == 1, text


@pytest.mark.parametrize("name, words", [
    ("saxpy/block_stride", ["grid-stride step", "blockDim.x * gridDim.x", "not one block"]),
    ("reduce_sum/block_not_power_of_two", ["block size 96 is not a power of two", "tree reduction"]),
    ("reduce_sum/shared_too_small", ["dynamic shared memory", "shared=512", "too small", "shared=1024"]),
    ("reduce_sum/no_barrier_at_all", ["no __syncthreads() at all"]),
    ("saxpy/no_grid_stride", ["grid-stride loop"]),
])
def test_check_names_the_actual_cause(name, words):
    result, text = _check(planted(name))
    assert result.status != "passed"
    hint = result.message.split("Hint: ", 1)[1]
    for w in words:
        assert w in hint, hint
    assert "if (i < n)" not in hint and "fixed size" not in hint and "loop bound" not in hint, hint


@pytest.mark.parametrize("name, words, misleading", [
    # the block's shared array is the right size: the threads at or above the stride must not take the step
    ("reduce_sum/tree_without_guard", ["missing its guard if (threadIdx.x < half)", "thread 128",
                                       "the array's size is not the problem"], ["too small", "ask for shared="]),
    # each block's total lacks partial[1]: half the values, as if the grid-stride loop skipped elements
    ("reduce_sum/tree_one_step_short", ["tree reduction stops one step early", "stride 1, is missing",
                                        "stride > 0, not stride > 1"], ["grid-stride", "loop bound"]),
    # out[i] += ... into the NaN the grader fills outputs with: written, but read first
    ("map/adds_into_the_output", ["reads out before writing it (read-before-write)", "out[...] += ...",
                                  "the kernel's result is right", "fills every output with NaN"], ["never written"]),
    # psi' through acos: 0/0 where the cosine is +-1, a NaN the kernel computes and stores (its twin, a kernel that
    # leaves elements unwritten, is not: saxpy/no_grid_stride below)
    ("lsoftmax_margin_grad_input/derivative_through_acos", ["the kernel writes NaN there",
                                                            "does not leave those elements unwritten", "0/0"],
     ["never written", "read-before-write"]),
])
def test_check_names_the_cause_a_misleading_symptom_hides(name, words, misleading):
    result, text = _check(planted(name))
    assert result.status != "passed"
    hint = result.message.split("Hint: ", 1)[1]
    for w in words:
        assert w in hint, hint
    for w in misleading:
        assert w not in hint.lower(), hint


@pytest.mark.parametrize("name", ["saxpy/no_grid_stride", "reduce_sum/no_grid_stride"])
def test_a_kernel_without_a_grid_stride_loop_fails_check(name):
    """check() adds a size just past one pass of the student's own grid (the released reduce_sum stub's grid=1056)."""
    result, text = _check(planted(name))
    assert result.status == "failed", text
    hint = result.message.split("Hint: ", 1)[1]
    assert "grid-stride loop" in hint and "writes NaN there" not in hint, text


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

    bug = planted("reduce_sum/shared_too_small")
    assert bug.launch["shared"] == 512 and bug.launch["block"] == 256
    gpu_error = ("kernel reduce_sum failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)\n"
                 "  meaning: a thread read or wrote memory outside every buffer (check the bounds guard and the index arithmetic)")
    hint = refine_hint("An access outside every buffer: a missing or wrong bounds check.", source=bug.source,
                       launch=bug.launch, error=gpu_error)
    assert "shared=512" in hint and "too small" in hint and "1024 bytes" in hint
    assert "too small" not in refine_hint("x", source=bug.source, launch={**bug.launch, "shared": 1024},
                                          error=gpu_error)
