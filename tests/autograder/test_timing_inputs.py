"""Timed calls get inputs no earlier call saw, and every one is re-validated.

The timing loop (:func:`autograder.timing_policy.measure_speed`) runs here
against a stand-in for the GPU measuring layer: buffers are NumPy arrays, a
"kernel" is a Python function that says how long it took.  That is enough to
test the policy -- which inputs each timed call gets, what is validated, and
that a kernel that keeps its answer per input gains nothing -- without a GPU
(``test_engine_timing.py`` and the gpu-marked test below time real kernels).
"""

from __future__ import annotations

import dataclasses
import hashlib
from types import SimpleNamespace

import numpy as np
import pytest

from autograder import timing_policy
from autograder.comparison import CaseError
from autograder.exercises import get_exercise
from autograder.timing_policy import InputPool, measure_speed

SLOW_MS, FAST_MS = 10.0, 1.0


class FakeGpu:
    """The measuring layer's interface on NumPy arrays; a kernel returns its own duration."""

    error = RuntimeError
    info = {"name": "stand-in"}

    def __init__(self):
        self.student_inputs: list[str] = []

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


def _module(kernel_name, fn):
    params = [SimpleNamespace(dtype=np.dtype(t)) for t in ("int32", "float32", "float32", "float32")]
    return SimpleNamespace(signatures={kernel_name: SimpleNamespace(params=params)}, kernels={kernel_name: fn})


def _student(gpu: FakeGpu, caching: bool, replay_wrong: bool = False):
    cache: dict[str, np.ndarray] = {}
    previous: list[np.ndarray] = []

    def saxpy(n, alpha, x, y, grid, block, shared, stream):
        key = hashlib.sha256(x.tobytes()).hexdigest()
        gpu.student_inputs.append(key)
        if replay_wrong and previous:  # the answer of the previous call, whatever the inputs
            y.view(np.float32)[:n] = previous[-1]
            return FAST_MS
        if caching and key in cache:
            y.view(np.float32)[:n] = cache[key]
            return FAST_MS
        _saxpy_body(n, alpha, x, y)
        cache[key] = y.view(np.float32)[:n].copy()
        previous.append(cache[key])
        return SLOW_MS

    return _module("saxpy", saxpy)


def _reference_module(name: str):
    def ref(*args, grid, block, shared, stream):
        return SLOW_MS

    return _module(name, ref)


@pytest.fixture
def timing(monkeypatch):
    gpu = FakeGpu()
    ex = dataclasses.replace(get_exercise("saxpy"), timing_shape={"n": 4099})
    monkeypatch.setattr("kernels.runtime.measurement.measurement", lambda backend: gpu)
    monkeypatch.setattr("kernels.runtime.loader.load_topic", lambda *a, **k: _reference_module(ex.reference_kernel.kernel))

    def run(student):
        return measure_speed(ex, student, {"block": 256}, backend=None)

    return gpu, run


def test_every_timed_call_gets_inputs_no_earlier_call_saw(timing):
    gpu, run = timing
    result = run(_student(gpu, caching=False))
    seen = gpu.student_inputs
    warmup, timed = seen[:timing_policy.WARMUP_PAIRS], seen[timing_policy.WARMUP_PAIRS:]
    assert len(timed) == result["pairs"] >= timing_policy.MIN_PAIRS
    fresh = result["input_sets"]
    assert fresh >= (len(timed) + 1) // 2  # most timed calls (the median's among them) saw new inputs
    assert len(set(timed[:fresh])) == fresh and not set(timed) & set(warmup)


def test_a_kernel_that_keeps_answers_per_input_gains_nothing(timing):
    gpu, run = timing
    twin = run(_student(gpu, caching=False))
    attack = run(_student(gpu, caching=True))
    assert attack["student_ms"] >= twin["student_ms"] == SLOW_MS
    assert attack["speedup"] <= twin["speedup"]


def test_an_answer_replayed_from_another_call_is_caught(timing):
    gpu, run = timing
    with pytest.raises(CaseError, match="timed call"):
        run(_student(gpu, caching=False, replay_wrong=True))


def test_the_pool_draws_until_its_budgets_end_then_caps_the_calls():
    drawn = []

    def draw():
        drawn.append(len(drawn))
        return drawn[-1]

    pool = InputPool(draw, set_bytes=100, minimum=3, max_bytes=500, max_seconds=60, seed=1)
    assert pool.warmup == 0
    calls = [pool.for_call(i) for i in range(12)]
    assert calls[:5] == [1, 2, 3, 4, 5]  # five sets fit in 500 bytes
    assert set(calls[5:]) <= {1, 2, 3, 4, 5} and 0 not in calls
    assert pool.max_calls() == 9
    tight = InputPool(draw, set_bytes=10**12, minimum=3, max_bytes=1, seed=1)
    [tight.for_call(i) for i in range(6)]
    assert len(tight.sets) == 3 and tight.max_calls() == 5  # the minimum is drawn whatever the budget


@pytest.mark.gpu
def test_a_caching_kernel_gains_no_speed_points_on_a_gpu():
    """On the GPU: a SAXPY that keeps its answer per input pointer and first element, beside its honest twin."""
    from autograder.isolation import grade_submission
    from autograder.submission import submission_from_cell

    honest = (
        "%%cuda saxpy block=256\n"
        "__global__ void saxpy(int n, float alpha, const float* x, float* y) {\n"
        "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)\n"
        "        y[i] = alpha * x[i] + y[i];\n"
        "}\n"
    )
    caching = (  # keeps the last 8 answers, keyed by (n, x[0]); computes slowly on a miss
        "%%cuda saxpy block=256\n"
        "__device__ float keep_x0[8]; __device__ int keep_n[8]; __device__ float keep_y[8][1 << 26];\n"
        "__device__ int kept;\n"
        "__global__ void saxpy(int n, float alpha, const float* x, float* y) {\n"
        "    int hit = -1;\n"
        "    for (int s = 0; s < 8; ++s) if (keep_n[s] == n && keep_x0[s] == x[0]) hit = s;\n"
        "    int slot = kept % 8;\n"
        "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {\n"
        "        if (hit >= 0) { y[i] = keep_y[hit][i]; continue; }\n"
        "        float v = alpha * x[i] + y[i];\n"
        "        for (int r = 0; r < 64; ++r) v = __fmaf_rn(v, 1.0f, 0.0f);\n"
        "        y[i] = v; if (n <= (1 << 26)) keep_y[slot][i] = v;\n"
        "    }\n"
        "    if (blockIdx.x == 0 && threadIdx.x == 0 && hit < 0) { keep_x0[slot] = x[0]; keep_n[slot] = n; kept = slot + 1; }\n"
        "}\n"
    )
    twin = grade_submission(submission_from_cell(honest), mode="hidden", secret=b"gpu timing", student_id="twin",
                            backend="gpu")
    attack = grade_submission(submission_from_cell(caching), mode="hidden", secret=b"gpu timing",
                              student_id="cache", backend="gpu")
    assert attack.score <= twin.score, (attack.feedback_text(), twin.feedback_text())
    assert attack.speed_score <= twin.speed_score
