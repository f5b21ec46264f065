"""Timed calls get inputs no earlier call saw, and every one is checked.

The timing loop (:func:`autograder.timing_policy.measure_speed`) runs here
against a stand-in for the GPU measuring layer: buffers are NumPy arrays, a
"kernel" is a Python function that says how long it took, and the device's
blend and comparison are their NumPy twins from
:mod:`kernels.runtime.input_blend` (the twins are checked against the CUDA
source itself, run on the emulator).  That is enough to test the policy --
which inputs each timed call gets, what is checked, and that a kernel that
keeps its answer per input gains nothing -- without a GPU
(``test_engine_timing.py`` and the gpu-marked test below time real kernels).
"""

from __future__ import annotations

import dataclasses
import hashlib
from types import SimpleNamespace

import numpy as np
import pytest

from autograder import timing_policy
from autograder.comparison import CaseError, compare, count_wrong
from autograder.exercises import get_exercise
from autograder.timing_policy import TimingSets, blended_inputs, draw_pair, element_scales, measure_speed
from autograder.verdict import _timed_output_problem, timing_case_data
from kernels.runtime.host_chunks import CHUNK
from kernels.runtime.emulator import EmulatorBackend
from kernels.runtime.input_blend import CUDA_SOURCE, TOLERANCE_FACTOR, argument_seed, blend_host, mismatches_host, takes_b
from kernels.runtime.module import compile_source
from planted_corpus import solution_kernel

SLOW_MS, FAST_MS = 10.0, 1.0
ITEM_TYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class FakeGpu:
    """The measuring layer's interface on NumPy arrays; a kernel returns its own duration."""

    error = RuntimeError
    info = {"name": "stand-in"}

    def __init__(self):
        self.student_inputs: list[str] = []
        self.last_student_x: np.ndarray | None = None

    def stream(self):
        return None

    def to_device(self, host):
        return np.array(host, copy=True)

    def allocate(self, nbytes):
        return np.zeros(nbytes, np.uint8)

    def copy_on_device(self, dst, src, nbytes, stream):
        dst.view(np.uint8)[:nbytes] = src.view(np.uint8).ravel()[:nbytes]

    def copy_to_host(self, host, dev):
        host.view(np.uint8).ravel()[:] = dev.view(np.uint8)[: host.nbytes]

    def blend(self, dst, a, b, n, itemsize, seed, stream):
        t = ITEM_TYPES[itemsize]
        dst.view(t)[:n] = blend_host(a.view(t).ravel()[:n], b.view(t).ravel()[:n], seed)

    def count_mismatches(self, got, want, n, rtol, atol, scale, stream):
        return mismatches_host(got.view(np.float32)[:n], want.view(np.float32)[:n], rtol, atol,
                               scale.view(np.float32).ravel()[:n])

    def flush_l2(self, stream):
        pass

    def elapsed_ms(self, launch, stream):
        return launch()

    def synchronize(self):
        pass

    def raw_kernel(self, module, name, shared):
        return module.kernels[name]

    def launch_error(self, exc, kernel):
        return exc

    def peak_bandwidth(self, stream):
        return 3e12, 2.5e12

    def peak_fp32(self):
        return 6e13

    def clocks(self):
        return {}


def _saxpy_body(n, alpha, x, y):
    xs, ys = x.view(np.float32)[:n], y.view(np.float32)[:n]
    ys[:] = alpha * xs + ys


def _module(kernel_name, fn, strided: bool = True):
    """One kernel's compiled module: saxpy with increments (the exercise's) or without (the chapter's, the reference)."""
    types = ("int32", "float32", "float32", "int32", "float32", "int32") if strided else ("int32", "float32", "float32", "float32")
    params = [SimpleNamespace(dtype=np.dtype(t)) for t in types]
    return SimpleNamespace(signatures={kernel_name: SimpleNamespace(params=params)}, kernels={kernel_name: fn})


def _student(gpu: FakeGpu, caching: bool = False, replay_wrong: bool = False, lazy_after_first: bool = False):
    cache: dict[str, np.ndarray] = {}
    previous: list[np.ndarray] = []

    def saxpy(n, alpha, x, incx, y, incy, grid, block, shared, stream):
        assert incx == incy == 1  # timed where the chapter's kernel solves the exercise
        key = hashlib.sha256(x.tobytes()).hexdigest()
        gpu.student_inputs.append(key)
        gpu.last_student_x = x.view(np.float32)[:n].copy()
        if replay_wrong and previous:  # the answer of the previous call, whatever the inputs
            y.view(np.float32)[:n] = previous[-1]
            return FAST_MS
        if caching and key in cache:
            y.view(np.float32)[:n] = cache[key]
            return FAST_MS
        if lazy_after_first and previous:  # half the work on every call after the first
            half = n // 2
            _saxpy_body(half, alpha, x, y)
            return FAST_MS
        _saxpy_body(n, alpha, x, y)
        cache[key] = y.view(np.float32)[:n].copy()
        previous.append(cache[key])
        return SLOW_MS

    return _module("saxpy", saxpy)


def _reference_module(name: str):
    def ref(n, alpha, x, y, grid, block, shared, stream):
        _saxpy_body(n, alpha, x, y)
        return SLOW_MS

    return _module(name, ref, strided=False)


@pytest.fixture
def timing(monkeypatch, tmp_path):
    gpu = FakeGpu()
    ex = dataclasses.replace(get_exercise("saxpy"), timing_shape={"n": 4099, "incx": 1, "incy": 1})
    monkeypatch.setattr("kernels.runtime.measurement.measurement", lambda backend: gpu)
    monkeypatch.setattr("kernels.runtime.loader.load_topic", lambda *a, **k: _reference_module(ex.reference_kernel.kernel))

    def run(student, outputs_dir=None):
        return measure_speed(ex, student, {"block": 256}, backend=None, outputs_dir=outputs_dir)

    return gpu, run, ex


def test_every_timed_call_gets_inputs_no_earlier_call_saw(timing):
    gpu, run, _ = timing
    result = run(_student(gpu))
    seen = gpu.student_inputs
    timed = seen[timing_policy.WARMUP_PAIRS:-1]  # the last call is the one handed back, not timed
    assert len(timed) == result["pairs"] >= timing_policy.MIN_PAIRS
    assert len(set(seen)) == len(seen) == result["input_sets"]  # warm-ups, timed calls, the last: all different


def test_a_kernel_that_keeps_answers_per_input_gains_nothing(timing):
    gpu, run, _ = timing
    twin = run(_student(gpu))
    attack = run(_student(gpu, caching=True))
    assert attack["student_ms"] >= twin["student_ms"] == SLOW_MS
    assert attack["speedup"] <= twin["speedup"]


def test_an_answer_replayed_from_another_call_is_caught(timing):
    gpu, run, _ = timing
    with pytest.raises(CaseError, match="timed call #1 was wrong .* differ from the reference kernel"):
        run(_student(gpu, replay_wrong=True))


def test_a_kernel_that_does_half_the_work_after_the_first_call_is_caught(timing):
    gpu, run, _ = timing
    with pytest.raises(CaseError, match="timed call #1 was wrong"):
        run(_student(gpu, lazy_after_first=True))


def test_the_grader_rebuilds_the_handed_back_calls_inputs_from_its_seeds(timing, tmp_path):
    """The three seeds in the timing record give exactly the inputs the last call ran on, and the grader's
    expectation for them is what an honest kernel returned."""
    from autograder import case_outputs

    gpu, run, ex = timing
    result = run(_student(gpu), outputs_dir=str(tmp_path))
    seeds = result["timed_inputs"]
    set_a, set_b = draw_pair(ex, ex.timing_shape, seeds["seed_a"], seeds["seed_b"])
    rebuilt = blended_inputs(ex, set_a, set_b, seeds["call_seed"])
    assert np.array_equal(rebuilt["x"], gpu.last_student_x)
    assert _timed_output_problem(ex, result, str(tmp_path)) == ""
    handed_back = case_outputs.load(str(tmp_path), "timing", "out", "y", ex.timing_shape["n"])
    case_outputs.save(str(tmp_path), "timing", {"y": handed_back[::-1].copy()})  # another call's answer, say
    assert "was wrong" in _timed_output_problem(ex, result, str(tmp_path))
    assert timing_case_data(ex, ex.timing_shape, {**seeds, "call_seed": -1}) is None
    assert timing_case_data(ex, ex.timing_shape, 7) is None


def test_the_timing_runs_on_the_sets_the_grader_chose_and_drew_itself(timing, tmp_path):
    """The grading process chooses the two seeds and draws the sets while the child runs; the child times on
    those very sets, and a timing that reports other sets is not checked against them: no speed points."""
    gpu, run, ex = timing
    chosen = TimingSets(ex, ex.timing_shape, 11, 22)  # the grading process's own draw
    child = TimingSets(ex, ex.timing_shape, 11, 22, with_reference=True)  # the child's, of the seeds it was given
    result = measure_speed(ex, _student(gpu), {"block": 256}, backend=None, outputs_dir=str(tmp_path), sets=child)
    assert (result["timed_inputs"]["seed_a"], result["timed_inputs"]["seed_b"]) == (11, 22)
    assert _timed_output_problem(ex, result, str(tmp_path), chosen) == ""
    other = {**result, "timed_inputs": {**result["timed_inputs"], "seed_b": 23}}
    assert _timed_output_problem(ex, other, str(tmp_path), chosen) == "the output of the last timed call was not handed back"


def test_sets_not_started_are_drawn_when_first_needed_and_only_once():
    """The grading process starts its draw when the child says it is timing; if no such word came, the verdict's
    need for the sets starts it, and the sets are those of the seeds it chose."""
    drawn = []
    saxpy = get_exercise("saxpy")

    def counting(shape, rng):
        drawn.append(shape["n"])
        return saxpy.make_inputs(shape, rng)

    ex = dataclasses.replace(saxpy, make_inputs=counting)
    sets = TimingSets(ex, {"n": 1000, "incx": 1, "incy": 1}, 11, 22, start=False)
    assert not sets.started and drawn == []
    a, b = sets.get()
    sets.start()
    assert drawn == [1000, 1000]
    expected = draw_pair(saxpy, {"n": 1000, "incx": 1, "incy": 1}, 11, 22)
    np.testing.assert_array_equal(a["x"], expected[0]["x"])
    np.testing.assert_array_equal(b["y"], expected[1]["y"])


def test_a_failed_draw_is_raised_where_the_sets_are_needed():
    ex = dataclasses.replace(get_exercise("saxpy"), make_inputs=lambda shape, rng: 1 / 0)
    sets = TimingSets.fresh(ex, {"n": 10, "incx": 1, "incy": 1})
    with pytest.raises(ZeroDivisionError):
        sets.get()


@pytest.mark.parametrize("n", [CHUNK - 1, 3 * CHUNK + 5])
def test_a_blend_made_in_chunks_is_the_blend_of_the_whole(n):
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    whole = np.where(takes_b(n, 99), b, a)
    assert np.array_equal(blend_host(a, b, 99), whole)
    assert np.array_equal(blend_host(a.reshape(n, 1), b.reshape(n, 1), 99).ravel(), whole)


@pytest.mark.parametrize("per_element_scale", [False, True])
def test_counting_wrong_elements_in_chunks_agrees_with_the_whole_comparison(per_element_scale):
    n = 2 * CHUNK + 17
    rng = np.random.default_rng(5)
    expected = rng.standard_normal(n)
    scale = np.abs(expected) + 1 if per_element_scale else np.float64(2.0)
    got = expected.astype(np.float32)
    wrong_at = [CHUNK + 3, CHUNK + 9, 2 * CHUNK + 16]  # none in the first chunk
    got[wrong_at] += 1.0
    got[wrong_at[1]] = np.nan
    whole = compare(got, expected, scale, 1e-5, 1e-6)
    counted = count_wrong(got, expected, scale, 1e-5, 1e-6)
    assert counted["n_bad"] == whole["n_bad"] == 3
    assert counted["first_bad_index"] == whole["first_bad_index"] == [wrong_at[0]]
    assert (counted["expected"], counted["got"]) == (whole["expected"], whole["got"])
    assert counted["max_abs_err"] == whole["max_abs_err"]
    assert count_wrong(expected.astype(np.float32), expected, scale, 1e-5, 1e-6)["n_bad"] == 0


def test_a_blend_takes_about_half_of_each_set_and_changes_with_the_seed():
    mask = takes_b(100_000, 12345)
    assert 0.48 < mask.mean() < 0.52
    assert 0.48 < (mask != takes_b(100_000, 12346)).mean() < 0.52
    a, b = np.zeros(1000, np.float32), np.ones(1000, np.float32)
    assert np.array_equal(blend_host(a, b, 7), takes_b(1000, 7).astype(np.float32))
    assert argument_seed(5, 0) != argument_seed(5, 1)
    with pytest.raises(ValueError, match="differ"):
        blend_host(a, np.ones(999, np.float32), 7)


def test_the_cuda_blend_and_comparison_match_their_numpy_twins_on_the_emulator():
    """:data:`CUDA_SOURCE` is what the GPU runs; here it runs on the emulator beside the NumPy twins."""
    from kernels.runtime.emulator import EmulatorBackend
    from kernels.runtime.module import compile_source

    module = compile_source(CUDA_SOURCE, "input_blend.cu", backend=EmulatorBackend(sandbox=False, checks=True))
    rng = np.random.default_rng(3)
    n = 1000
    for itemsize, dtype in ((4, np.float32), (8, np.float64), (2, np.float16), (1, np.uint8)):
        a = rng.integers(0, 100, n).astype(dtype)
        b = rng.integers(100, 200, n).astype(dtype)
        dst = np.zeros(n * itemsize, np.uint8)
        module.function("dlk_blend")(dst, a.view(np.uint8), b.view(np.uint8), n, itemsize, 0xDEADBEEF, grid=2, block=128)
        assert np.array_equal(dst.view(dtype), blend_host(a, b, 0xDEADBEEF)), dtype
    want = rng.standard_normal(n).astype(np.float32)
    got = want.copy()
    got[[3, 500, 999]] += np.float32(0.5)
    got[10] = np.nan
    want[20] = got[20] = np.nan
    counts = np.array([0, 0xFFFFFFFF], np.uint32)
    scale = np.ones(n, np.float32)
    scale[500] = 1e4  # this element's own scale bounds its error, 0.5, loosely enough
    module.function("dlk_count_mismatches")(got, want, n, 1e-4, 1e-30, scale, counts, grid=2, block=128)
    assert (int(counts[0]), int(counts[1])) == mismatches_host(got, want, 1e-4, 1e-30, scale) == (3, 3)


@pytest.mark.gpu
def test_a_caching_kernel_gains_no_speed_points_on_a_gpu():
    """On the GPU: a SAXPY that keeps its answer per input pointer and first element, beside its honest twin."""
    from autograder.isolation import grade_submission
    from autograder.submission import submission_from_cell

    honest = (
        "%%cuda saxpy block=256\n"
        "__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {\n"
        "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)\n"
        "        y[i * incy] = alpha * x[i * incx] + y[i * incy];\n"
        "}\n"
    )
    caching = (  # keeps the last 8 answers, keyed by (n, x[0]); computes slowly on a miss
        "%%cuda saxpy block=256\n"
        "__device__ float keep_x0[8]; __device__ int keep_n[8]; __device__ float keep_y[8][1 << 26];\n"
        "__device__ int kept;\n"
        "__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {\n"
        "    int hit = -1;\n"
        "    for (int s = 0; s < 8; ++s) if (keep_n[s] == n && keep_x0[s] == x[0]) hit = s;\n"
        "    int slot = kept % 8;\n"
        "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {\n"
        "        if (hit >= 0) { y[i * incy] = keep_y[hit][i]; continue; }\n"
        "        float v = alpha * x[i * incx] + y[i * incy];\n"
        "        for (int r = 0; r < 64; ++r) v = __fmaf_rn(v, 1.0f, 0.0f);\n"
        "        y[i * incy] = v; if (n <= (1 << 26)) keep_y[slot][i] = v;\n"
        "    }\n"
        "    if (blockIdx.x == 0 && threadIdx.x == 0 && hit < 0) { keep_x0[slot] = x[0]; keep_n[slot] = n; kept = slot + 1; }\n"
        "}\n"
    )
    twin = grade_submission(submission_from_cell(honest), mode="hidden", student_key=b"gpu timing", student_id="twin",
                            backend="gpu")
    attack = grade_submission(submission_from_cell(caching), mode="hidden", student_key=b"gpu timing",
                              student_id="cache", backend="gpu")
    assert attack.score <= twin.score, (attack.feedback_text(), twin.feedback_text())
    assert attack.speed_score <= twin.speed_score


def test_a_timed_output_is_compared_with_the_reference_kernels_on_each_elements_own_scale():
    """The student's timed output is compared with the chapter's kernel's on the same inputs.  Both are right
    (each within the exercise's tolerance of float64), but where rounding is large they differ by more than an
    average bound allows: LayerNorm of a row with no spread divides its rounding by sqrt(eps), and the chapter's
    one-thread-per-row sum rounds far more than a warp's tree.  On the GPU, the solution lost its speed points
    that way at the timing size.  Each element is bounded by its own error scale (never below the mean), so the
    right answer passes and a wrong row still fails."""
    ex = get_exercise("layernorm_residual")
    backend = EmulatorBackend(sandbox=False, checks=False)
    n, c, eps = 1000, 1024, np.float32(1e-5)  # 200 rows of each kind, as at the timing size (16384 rows)
    shape = {"n": n, "c": c, "residual": 0, "offset": 0.0, "eps": float(eps)}
    inputs = ex.make_inputs(shape, np.random.default_rng(5))
    solution = solution_kernel("layernorm_residual")
    _, config = ex.resolve_launch(shape, solution.launch or {})
    student = np.zeros((n, c), np.float32)
    compile_source(solution.source, "solution.cu", backend=backend).function("layernorm_residual")(
        inputs["X"], inputs["R"], inputs["gamma"], inputs["beta"], student, np.int32(n), np.int32(c), eps,
        grid=config.grid, block=config.block)
    chapters = ex.reference_kernel
    reference = np.zeros((n, c), np.float32)
    ref_config = chapters.launch(shape)
    chapters.compile(backend).function(chapters.kernel)(
        inputs["X"], inputs["gamma"], inputs["beta"], reference, np.int32(n), np.int32(c), eps,
        grid=ref_config.grid, block=ref_config.block, shared=ref_config.shared)
    scale = ex.error_scale(inputs)["Y"]
    exact = ex.reference(inputs)["Y"]
    assert count_wrong(student, exact, scale, ex.rtol, ex.atol)["n_bad"] == 0
    assert count_wrong(reference, exact, scale, ex.rtol, ex.atol)["n_bad"] == 0
    rtol = TOLERANCE_FACTOR * ex.rtol
    assert mismatches_host(student, reference, rtol, ex.atol, float(np.mean(np.abs(scale))))[0] > 0
    bound = element_scales(scale, student.shape)
    assert mismatches_host(student, reference, rtol, ex.atol, bound) == (0, -1)
    ordinary_row = 4  # kind 4: a spread of about 1, its scale (about 4) raised to the mean
    wrong = student.copy()
    wrong[ordinary_row] += np.float32(0.05)  # beta off by 0.05, say
    assert mismatches_host(wrong, reference, rtol, ex.atol, bound) == (c, ordinary_row * c)
