"""The grading engine on real kernels: honest solutions, the planted-bug corpus, hangs, crashes, isolation.

Runs on the current backend (the CPU emulator under ``make test``, the GPU
under ``make test-gpu``); each grade is a fresh child process, as in grading.
The kernels are chapter 1's: the solution notebook's ``%%cuda`` cells, and the
corpus ``tests/planted_bugs/saxpy/`` and ``tests/planted_bugs/reduce_sum/``
(see tests/planted_corpus.py): planted bugs as edits of those cells, each with
the reason the grader must reject it for and what its feedback must say
(``// Feedback-GPU:`` where a GPU shows the bug differently: races), and other
correct ways to write the kernels.
"""

from __future__ import annotations

import re
import time

import pytest

from autograder.exercises import get_exercise
from autograder.isolation import grade_submission
from autograder.submission import KernelSubmission, submission_from_cell
from planted_corpus import CORPUS, corpus_files, read_corpus_file, rejection_reason, solution_kernel

pytestmark = pytest.mark.backend

CHAPTER_1 = ["saxpy", "reduce_sum"]
BUGS = [path for name in CHAPTER_1 for path in corpus_files(name) if path.suffix == ".edit"]
#: The solution kernels, and the corpus's other correct ways to write them.
HONEST = [*CHAPTER_1, *(path for name in CHAPTER_1 for path in corpus_files(name) if path.suffix == ".cu")]
SECRET = b"engine tests"


def corpus_id(item) -> str:
    return f"{item}/solution" if isinstance(item, str) else f"{item.parent.name}/{item.stem}"


def load(item) -> KernelSubmission:
    """An exercise's solution kernel (by name), or a corpus file's kernel (by path)."""
    return solution_kernel(item) if isinstance(item, str) else read_corpus_file(item).submission


def bug(name: str) -> KernelSubmission:
    """A planted bug of chapter 1 by ``<exercise>/<bug>``."""
    return load(CORPUS / f"{name}.edit")


def saxpy_cell(*body: str, block: int = 256, before: tuple[str, ...] = ()) -> str:
    """A ``%%cuda saxpy`` cell: the body lines inside saxpy's signature (``before``: lines ahead of it)."""
    signature = "__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {"
    lines = [f"%%cuda saxpy block={block}", *before, signature, *(f"    {line}" for line in body), "}"]
    return "\n".join(lines) + "\n"


def failed_launch(cell: str, backend_name: str):
    """The grade of a cell whose kernel fails at launch: no points; returned for its message."""
    result = grade_submission(submission_from_cell(cell), mode="visible", backend=backend_name)
    assert result.status in ("launch_error", "crashed"), result.feedback_text()
    assert result.score == 0
    return result


def feedback(result) -> str:
    return "\n".join([result.message] + [s.hint + " " + s.error for s in result.shapes])


@pytest.fixture(scope="module")
def backend_name():
    """The backend the children are told to use: $DLK_BACKEND, else the GPU if usable, else the emulator."""
    import os

    from kernels.runtime.selection import gpu_usable

    name = os.environ.get("DLK_BACKEND", "auto").strip().lower() or "auto"
    if name == "auto":
        name = "gpu" if gpu_usable() else "cpu"
    if name == "cpu":
        try:
            from kernels.runtime.emulator import EmulatorBackend  # noqa: F401
        except ImportError as exc:
            pytest.skip(f"the CPU emulator is not available: {exc}")
    return name


@pytest.fixture
def timing_draws(monkeypatch):
    """The timing sets the grading process started drawing (the child's own draws are in its own process)."""
    from autograder.timing_policy import TimingSets

    started = []
    start = TimingSets.start

    def recording(self):
        if not self.started:
            started.append(self.seeds)
        start(self)

    monkeypatch.setattr(TimingSets, "start", recording)
    return started


def timed_at_the_timing_size(result) -> bool:
    return any("timing size" in s.label for s in result.shapes)


@pytest.mark.parametrize("path", HONEST, ids=corpus_id)
def test_honest_solution_gets_every_correctness_point(path, backend_name, timing_draws):
    sub = load(path)
    result = grade_submission(sub, mode="hidden", student_key=SECRET, student_id="honest", backend=backend_name)
    ex = get_exercise(sub.exercise)
    # the grader draws the timing's inputs for the verdict on a timed kernel, and only on the GPU
    assert len(timing_draws) == (1 if backend_name == "gpu" else 0)
    timing_size = re.search(r"^// gpu-timing-size: (.+)$", sub.source, re.M)
    if backend_name == "gpu" and timing_size:
        # Right on every correctness case, wrong at the (much larger) timing size.
        assert [s.label for s in result.shapes if not s.passed] == [s.label for s in result.shapes[-1:]]
        assert "timing size" in result.shapes[-1].label
        assert re.search(timing_size.group(1), result.message, re.I), result.message
        n_shapes = len({s.label for s in result.shapes})
        assert result.correctness_score == round(ex.correctness_points * (n_shapes - 1) / n_shapes, 4)
        assert result.speed_score == 0
        return
    assert result.status == "passed", result.feedback_text()
    assert result.correctness_score == ex.correctness_points
    assert len({s.label for s in result.shapes}) >= 5
    assert min(sum(1 for s in result.shapes if s.label == label and not s.visible)
               for label in {s.label for s in result.shapes if not s.visible}) >= 3
    if backend_name == "cpu":
        assert not result.speed_measured and result.speed_score == 0 and result.speed_pending
        assert "not measured" in result.speed_note


@pytest.mark.parametrize("path", BUGS, ids=corpus_id)
def test_planted_bug_fails_the_hidden_tests_and_is_named(path, backend_name, timing_draws):
    planted = read_corpus_file(path)
    sub = planted.submission
    result = grade_submission(sub, mode="hidden", student_key=SECRET, student_id="planted", backend=backend_name)
    ex = get_exercise(sub.exercise)
    # a kernel that fails a case is never timed, and the grader draws no timing inputs for it
    assert bool(timing_draws) == (backend_name == "gpu" and (result.status == "passed" or timed_at_the_timing_size(result)))
    if backend_name == "gpu" and result.status == "passed" and planted.feedback_gpu:
        pytest.skip("this race did not change any result on the GPU in this run; the CPU emulator, which runs "
                    "every launch in two thread orders, rejects it every time (make test)")
    assert result.status != "passed", result.feedback_text()
    assert result.correctness_score < ex.correctness_points
    assert result.speed_score == 0
    if backend_name == "cpu":  # the reasons are the emulator's findings (a GPU shows a race as a wrong result)
        assert rejection_reason(result) == planted.reason, (
            f"{corpus_id(path)} was rejected as {rejection_reason(result)}, not as {planted.reason}: {result.message}")
    expected = planted.feedback_gpu if backend_name == "gpu" and planted.feedback_gpu else planted.feedback
    assert expected, f"{path.name} has no '// Feedback:' line"
    assert re.search(expected, feedback(result), re.I), feedback(result)


@pytest.mark.parametrize("name", ["saxpy/visible_only", "reduce_sum/visible_only"])
def test_kernels_right_on_the_fixed_visible_sizes_only_fail_check(name, backend_name):
    """Their grid covers every fixed visible size in one pass; check() adds a size just past one pass of it."""
    result = grade_submission(bug(name), mode="visible", backend=backend_name)
    assert result.status == "failed", result.feedback_text()
    assert "grid-stride loop" in result.message, result.message


def test_compile_error_is_reported_at_the_cells_own_line(backend_name):
    cell = saxpy_cell("int i = blockIdx.x * blockDim.x + threadIdx.x;",
                      "if (i < n) y[i * incy] = alpha * x[i * incx] + undefined_name;")
    result = grade_submission(submission_from_cell(cell), mode="visible", backend=backend_name)
    assert result.status == "compile_error"
    assert re.search(r"saxpy\.cu:4\b", result.message), result.message
    assert "undefined_name" in result.message
    assert result.score == 0


def test_wrong_signature_is_named(backend_name):
    cell = "%%cuda saxpy block=256\n__global__ void saxpy(int n, const float* x, float* y) {}\n"
    result = grade_submission(submission_from_cell(cell), mode="visible", backend=backend_name)
    assert result.status == "wrong_kernel" and "float alpha" in result.message


def test_including_files_is_refused(backend_name):
    cell = '%%cuda saxpy block=256\n#include "/etc/passwd"\n__global__ void saxpy(int n, float a, const float* x, int incx, float* y, int incy) {}\n'
    result = grade_submission(submission_from_cell(cell), mode="visible", backend=backend_name)
    assert result.status == "compile_error" and "not allowed" in result.message
    assert "root:" not in result.feedback_text() + result.log


def test_an_infinite_loop_costs_only_that_exercise(backend_name):
    hang = saxpy_cell("for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += 0) y[i * incy] = alpha * x[i * incx] + y[i * incy];")
    start = time.monotonic()
    result = grade_submission(submission_from_cell(hang), mode="hidden", student_key=SECRET, timeout_s=10, backend=backend_name)
    assert time.monotonic() - start < 25
    assert result.status == "timeout", result.feedback_text()
    assert result.score == 0 and "loop" in result.message
    # The next exercise is graded as if nothing happened.
    after = grade_submission(load("reduce_sum"), mode="visible", backend=backend_name)
    assert after.status == "passed"


def test_an_out_of_bounds_write_far_from_the_array_is_caught(backend_name):
    if backend_name != "cpu":
        pytest.skip("on a GPU a write far past a buffer faults or hits another allocation unseen; near ones hit the guard")
    result = failed_launch(saxpy_cell("int i = blockIdx.x * blockDim.x + threadIdx.x;",
                                      "if (i < n) y[i * incy] = alpha * x[i * incx] + y[i * incy];",
                                      "if (i == 0) y[n + 100000] = 1.0f;"), backend_name)
    assert re.search(r"out[- ]of[- ]bounds|outside", result.message, re.I), result.message


def test_a_crashing_kernel_is_a_clear_error(backend_name):
    cell = saxpy_cell("float* nowhere = (float*)0;", "y[0] = nowhere[threadIdx.x];", block=32)
    result = failed_launch(cell, backend_name)
    assert result.message


def test_grading_runs_in_a_separate_process(monkeypatch, backend_name):
    """A monkeypatch in the grading process (or a student's notebook) does not reach the child, whose
    account of a failing case stands: it can only take points away."""
    import autograder.verdict as verdict

    def always_right(ex, result, *args, **kwargs):
        result.passed = True
        return None

    monkeypatch.setattr(verdict, "judge_case", always_right)
    monkeypatch.setenv("DLK_BACKEND", "no-such-backend")  # the child is told its backend explicitly
    result = grade_submission(bug("saxpy/zeros"), mode="visible", backend=backend_name)
    assert result.status == "failed" and result.score == 0


# ------------------------------------------------------------------ the notebook side
HONEST_SAXPY = solution_kernel("saxpy").source


def test_cuda_magic_and_check_in_an_ipython_shell(capsys, monkeypatch, backend_name):
    from IPython.core.interactiveshell import InteractiveShell

    import autograder.student as student

    monkeypatch.setenv("DLK_BACKEND", backend_name)
    monkeypatch.setattr(student, "_SUBMISSIONS", {})
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext autograder.student")
    ip.run_cell("%%cuda saxpy block=256\n__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {\n"
                "    y[0] = oops;\n}\n")
    err = capsys.readouterr().err
    assert re.search(r"saxpy\.cu:3\b", err) and "oops" in err, err
    ip.run_cell("%%cuda saxpy block=256 grid=24\n" + HONEST_SAXPY)
    ip.run_cell('check("saxpy")')
    out = capsys.readouterr().out
    assert "all visible cases pass" in out and "n=4099" in out, out
    assert student.last_result.status == "passed" and student.last_result.mode == "visible"
    assert student.last_result.correctness_score == get_exercise("saxpy").correctness_points


def test_error_map_picture_for_a_failing_check(backend_name):
    import matplotlib

    matplotlib.use("Agg")
    from autograder.feedback import check_text
    from autograder.report import plot_error_maps

    result = grade_submission(bug("saxpy/stride_off_by_one"), mode="visible", backend=backend_name)
    assert result.status == "failed"
    text = check_text(result)
    assert "FAIL" in text and "grid-stride" in text
    fig = plot_error_maps(result)
    assert fig is not None and len(fig.axes) >= 1


@pytest.mark.gpu
def test_speed_is_measured_against_the_reference_on_a_gpu():
    result = grade_submission(load(CORPUS / "saxpy" / "one_thread_per_element.cu"), mode="hidden", student_key=SECRET,
                              student_id="gpu", backend="gpu")
    assert result.status == "passed", result.feedback_text()
    t = result.timing
    assert result.speed_measured and t["student_ms"] > 0 and t["reference_ms"] > 0
    assert t["floor_ms"] <= t["student_ms"] and not t["below_floor"]
    assert t["device"] and t["driver"] and t["clocks"]
    assert 0 <= result.speed_score <= result.speed_max
    # An honest one-thread-per-element SAXPY is about as fast as the grid-stride reference.
    assert t["speedup"] > 0.5


@pytest.mark.gpu
def test_a_write_just_before_a_buffer_hits_the_guard_on_a_gpu():
    """y[-1] on a GPU lands in the guard the grader puts before every buffer (no fault, no other allocation)."""
    cell = saxpy_cell("int i = blockIdx.x * blockDim.x + threadIdx.x;", "if (i < n) y[i * incy] = alpha * x[i * incx] + y[i * incy];",
                      "if (i == 0) y[-1] = 1.0f;")
    result = grade_submission(submission_from_cell(cell), mode="hidden", student_key=SECRET, student_id="gpu", backend="gpu")
    assert result.status == "launch_error" and result.score == 0, result.feedback_text()
    assert "before the start of 'y'" in result.message, result.message


@pytest.mark.gpu
def test_kernels_that_skip_work_when_timed_are_caught_on_a_gpu():
    """Correct on the correctness sizes, but does nothing for large n: the re-validation of timed calls fails it."""
    cell = saxpy_cell("int i = blockIdx.x * blockDim.x + threadIdx.x;", "if (n > 4000000) return;",
                      "if (i < n) y[i * incy] = alpha * x[i * incx] + y[i * incy];")
    result = grade_submission(submission_from_cell(cell), mode="hidden", student_key=SECRET, student_id="gpu", backend="gpu")
    assert result.status != "passed" and result.speed_score == 0, result.feedback_text()


def test_a_kernel_cannot_write_files_while_graded(tmp_path, backend_name):
    """On the emulator kernels run natively, under its sandbox (no files written, no programs started)."""
    if backend_name != "cpu":
        pytest.skip("device code cannot open files on a GPU")
    target = tmp_path / "written_by_kernel"
    cell = saxpy_cell(f'FILE* f = fopen("{target}", "w");', 'if (f) { fputs("gradebook", f); fclose(f); }',
                      "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)"
                      " y[i * incy] = alpha * x[i * incx] + y[i * incy];",
                      block=32, before=("#include <cstdio>",))
    grade_submission(submission_from_cell(cell), mode="visible", backend=backend_name)
    assert not target.exists()
