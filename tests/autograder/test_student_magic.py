"""The notebook side: a ``%%cuda`` cell that fails leaves its exercise with no kernel."""

import io

import pytest

from autograder import student
from kernels.runtime import selection

GOOD = """__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i * incy] = alpha * x[i * incx] + y[i * incy];
}
"""


@pytest.fixture(autouse=True)
def _fresh_session():
    student._SUBMISSIONS.clear(); student._FAILED.clear()
    yield
    student._SUBMISSIONS.clear(); student._FAILED.clear()


def _run(line, cell, capsys):
    student.compile_cell(line, cell, out=io.StringIO())
    return capsys.readouterr().err


@pytest.mark.parametrize("line, cell", [
    # a header that does not parse (an expression where a number belongs)
    ("saxpy block=256 grid=n/256", GOOD),
    # a body that does not compile
    ("saxpy block=256 grid=64", GOOD.replace("y[i * incy] = alpha * x[i * incx] + y[i * incy];", "y[i * incy] = alpha * x[i * incx] + ;")),
])
def test_a_failing_cell_removes_the_earlier_kernel(line, cell, capsys):
    student.compile_cell("saxpy block=256 grid=64", GOOD, out=io.StringIO())
    assert student.submission("saxpy") is not None
    _run("%s" % line, cell, capsys)
    assert student.submission("saxpy") is None
    student.check("saxpy", plot=False)
    said = capsys.readouterr().out
    assert "No kernel for 'saxpy'" in said and "failed" in said, said


def test_a_cell_whose_kernel_has_the_wrong_name_removes_the_earlier_kernel(capsys):
    student.compile_cell("saxpy block=256 grid=64", GOOD, out=io.StringIO())
    err = _run("saxpy block=256 grid=64", GOOD.replace("void saxpy(", "void sxpy("), capsys)
    assert "saxpy" in err and "sxpy" in err, err
    assert student.submission("saxpy") is None


def test_check_of_an_unknown_exercise_lists_the_exercises(capsys):
    student.check("sum", plot=False)
    said = capsys.readouterr().out
    assert "no exercise 'sum'" in said and "reduce_sum" in said and "saxpy" in said, said


# a correct saxpy whose threads each take a chunk of CHUNK neighbouring elements: the lanes of a warp are CHUNK
# floats apart, so each of its loads and stores touches CHUNK times the sectors a coalesced one would
CHUNKED = """__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {
    int threads = blockDim.x * gridDim.x, chunk = (n + threads - 1) / threads;
    int first = (blockIdx.x * blockDim.x + threadIdx.x) * chunk;
    for (int i = first; i < first + chunk && i < n; ++i)
        y[i * incy] = alpha * x[i * incx] + y[i * incy];
}
"""


def test_check_on_the_emulator_shows_a_correct_kernel_s_profile_with_the_hint_it_implies(capsys):

    if selection.current_backend().name != "cpu":
        pytest.skip("check() profiles a kernel on the CPU emulator only")
    student.compile_cell("saxpy block=256 grid=32", CHUNKED, out=io.StringIO())
    student.check("saxpy", plot=False)
    said = capsys.readouterr().out
    assert "all visible cases pass" in said and "profile of saxpy on the CPU emulator" in said, said
    line = 1 + next(n for n, text in enumerate(CHUNKED.splitlines(), 1) if "y[i * incy] = alpha" in text)  # the %%cuda line is 1
    assert f"line {line} reads" in said and "floats apart" in said and "occupancy" in said, said
    student.check("saxpy", plot=False, profile=False)
    assert "profile of" not in capsys.readouterr().out


# the guard puzzle: one block of n threads rounded up to whole warps, so the threads past n must do nothing
GUARDED = """__global__ void guard(const float* a, float* out, int n) {
    int i = threadIdx.x;
    if (i < n) out[i] = a[i] * a[i];
}
"""


def test_check_draws_a_puzzle_s_thread_map_beside_the_expected_one_passing_or_failing(capsys):

    if selection.current_backend().name != "cpu":
        pytest.skip("check() records thread maps on the CPU emulator only")
    student.compile_cell("guard", GUARDED, out=io.StringIO())
    student.check("guard", plot=False)
    said = capsys.readouterr().out
    assert "all visible cases pass" in said and "thread map of guard, grid (1,1,1), block (32,1,1)" in said, said
    assert "out (10 elements), written by: the same as expected" in said, said
    # the most useful picture is a failing kernel's: where the threads without an element wrote
    student.compile_cell("guard", GUARDED.replace("if (i < n) ", ""), out=io.StringIO())
    student.check("guard", plot=False)
    said = capsys.readouterr().out
    assert "out-of-bounds" in said and "out (10 elements), written by: yours writes 22 past its end" in said, said
    out_rows = said.split("out (10 elements), written by:")[1].splitlines()
    expected_row = next(line for line in out_rows if line.startswith("  expected")).split()
    yours_row = next(line for line in out_rows if line.startswith("  yours")).split()
    assert expected_row[1:12] == [str(i) for i in range(10)] + ["."], said  # element 10 is outside: nobody
    assert yours_row[1:12] == [str(i) for i in range(11)], said  # ... but thread 10 writes it
    student.check("guard", plot=False, profile=False)
    assert "thread map" not in capsys.readouterr().out
