"""The timing policy: the physical floor, the stopping rule, and the timing loop itself.

The timing loop runs on a GPU through PyCUDA; here it runs against a small
stand-in for ``pycuda.driver`` whose "device" is NumPy arrays and whose
"kernels" are NumPy functions, so that the loop's logic (alternation, fresh
inputs, re-validation of timed calls, the floor) is tested without a GPU.
The real thing is tested by the ``gpu`` tests in test_engine_kernels.py.
"""

from __future__ import annotations

import sys
import types

import ml_dtypes
import numpy as np
import pytest

from autograder import timing_policy
from autograder.exercises import get_exercise
from autograder.scoring import speed_points
from autograder.timing_policy import enough_samples, physical_floor_ms, stderr_fraction
from kernels.runtime.input_blend import blend_host, mismatches_host
from kernels.runtime.measurement import GpuMeasurement


# ------------------------------------------------------------------ pure policy
def test_floor_is_bytes_over_bandwidth_or_flops_over_rate():
    ex = get_exercise("saxpy")
    n = 10**6
    assert physical_floor_ms(ex, {"n": n}, 1e12, 1e15) == pytest.approx(12 * n / 1e12 * 1e3)
    assert physical_floor_ms(ex, {"n": n}, 1e18, 1e9) == pytest.approx(2 * n / 1e9 * 1e3)


def test_the_floor_of_tensor_core_work_allows_the_tensor_cores_rate():
    """A BF16 product on the tensor cores may run many times faster than the FP32 units could do its flops:
    its floor divides by that rate, so a fast WMMA kernel is not taken for one that skipped work."""
    ex = get_exercise("gemm_bf16_wmma")
    shape = dict(ex.timing_shape)
    fp32_units = ex.flops(shape) / 1e14 * 1e3
    assert ex.peak_over_fp32 > 15  # an H100's BF16 dense rate is 15 times its FP32 rate
    assert physical_floor_ms(ex, shape, 1e18, 1e14) == pytest.approx(fp32_units / ex.peak_over_fp32)


def test_sampling_stops_on_low_standard_error_or_the_cap():
    steady = [1.0, 1.001, 0.999] * 5
    noisy = [1.0, 2.0] * 5
    assert stderr_fraction(steady) < 0.01 and stderr_fraction(noisy) > 0.01
    assert enough_samples(steady[:10], steady[:10], 10, 100)
    assert not enough_samples(steady[:9], steady[:9], 10, 100)
    assert not enough_samples(noisy, steady[:10], 10, 100)
    assert enough_samples(noisy * 10, noisy * 10, 10, 100)


# ------------------------------------------------------------------ the loop, on a stand-in for PyCUDA
class FakeAllocation:
    def __init__(self, nbytes):
        self.data = np.zeros(max(1, nbytes), np.uint8)

    def free(self):
        pass


class FakeEvent:
    clock = [0.0]

    def record(self, stream=None):
        self.t = FakeEvent.clock[0]

    def synchronize(self):
        pass

    def time_till(self, other):
        return other.t - self.t


def fake_driver(launch_log):
    cuda = types.ModuleType("pycuda.driver")
    cuda.Error = RuntimeError
    cuda.Stream = lambda: types.SimpleNamespace(synchronize=lambda: None)
    cuda.Event = FakeEvent
    cuda.mem_alloc = FakeAllocation
    cuda.function_attribute = types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES=8)

    def host_bytes(host) -> memoryview:
        # as PyCUDA reads a host array: through the buffer protocol, which refuses dtypes such as bfloat16
        return memoryview(host).cast("B")

    def to_device(host):
        a = FakeAllocation(host.nbytes)
        a.data[: host.nbytes] = np.frombuffer(host_bytes(host), np.uint8)
        return a

    def memcpy_dtod_async(dst, src, nbytes, stream=None):
        dst.data[:nbytes] = src.data[:nbytes]

    def memset_d32_async(dst, value, count, stream=None):
        launch_log.append("flush")
        dst.data[: 4 * count] = 0

    def memcpy_htod(dst, host):
        dst.data[: host.nbytes] = np.frombuffer(host_bytes(host), np.uint8)

    def memcpy_dtoh(host, src):
        host_bytes(host)[:] = src.data[: host.nbytes].tobytes()

    cuda.to_device = to_device
    cuda.memcpy_dtod_async = memcpy_dtod_async
    cuda.memset_d32_async = memset_d32_async
    cuda.memcpy_dtoh = memcpy_dtoh
    cuda.memcpy_htod = memcpy_htod
    cuda.Context = types.SimpleNamespace(synchronize=lambda: None)
    return cuda


def saxpy_function(name, ms, launch_log, cache=None):
    """A "kernel": NumPy saxpy on fake allocations (timed at increments of 1, the student's takes them and the
    chapter's does not); advances the fake clock by ``ms``."""

    def run(n, alpha, x, *rest, grid, block, shared, stream):
        y = rest[1] if len(rest) == 3 else rest[0]  # (incx, y, incy) or (y,)
        assert len(rest) == 1 or int(rest[0]) == int(rest[2]) == 1, rest
        launch_log.append(name)
        xs = x.data[: 4 * int(n)].view(np.float32)
        ys = y.data[: 4 * int(n)].view(np.float32)
        if cache is not None and "y" in cache:
            ys[:] = cache["y"]  # replays an earlier call's output
        else:
            ys[:] = np.float32(alpha) * xs + ys
            if cache is not None:
                cache["y"] = ys.copy()
        FakeEvent.clock[0] += ms

    return run


def fake_blend(dst, a, b, n, itemsize, seed, grid, block, stream):
    """The device blend of :mod:`kernels.runtime.input_blend`, on fake allocations (its NumPy twin)."""
    dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[int(itemsize)]
    k = int(n) * int(itemsize)
    dst.data[:k] = blend_host(a.data[:k].view(dtype), b.data[:k].view(dtype), int(seed)).view(np.uint8)


def fake_compare(got, want, n, rtol, atol, scale, counts, grid, block, stream):
    k = 4 * int(n)
    bad, first = mismatches_host(got.data[:k].view(np.float32), want.data[:k].view(np.float32), float(rtol), float(atol),
                                 scale.data[:k].view(np.float32))
    counts.data[:8] = np.array([bad, first if bad else 0xFFFFFFFF], np.uint32).view(np.uint8)


class FakeModule:
    """A compiled module of one kernel ``name``: saxpy with increments (the exercise's), or without (the chapter's,
    the reference: ``strided=False``)."""

    def __init__(self, name, fn, strided: bool = True):
        from kernels.runtime.signature import parse_kernels

        params = "int n, float alpha, const float* x, int incx, float* y, int incy" if strided else \
            "int n, float alpha, const float* x, float* y"
        self.signatures = parse_kernels(f"__global__ void {name}({params}) {{}}", "f.cu", {})
        self.compiled = types.SimpleNamespace(kernel_function=lambda kernel: fn)


class FakeBackend:
    name = "gpu"

    def limits(self):
        from kernels.runtime.backend import DeviceLimits

        return DeviceLimits()

    def describe(self):
        return {"name": "Stand-in GPU", "driver_version": "0.0", "l2_bytes": 1024, "memory_clock_mhz": 1000,
                "memory_bus_bits": 64, "multiprocessors": 2, "clock_mhz": 1000}


@pytest.fixture
def timed_saxpy(monkeypatch):
    import dataclasses

    launch_log: list[str] = []
    cuda = fake_driver(launch_log)
    pycuda = types.ModuleType("pycuda")
    pycuda.driver = cuda
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    monkeypatch.setitem(sys.modules, "pycuda.driver", cuda)
    monkeypatch.setattr(GpuMeasurement, "clocks", lambda self: "sm 1000 MHz")
    ex = dataclasses.replace(get_exercise("saxpy"), timing_shape={"n": 100003, "incx": 1, "incy": 1})
    monkeypatch.setattr(GpuMeasurement, "_blend_functions", lambda self: (fake_blend, fake_compare, FakeAllocation(8)))

    def run(student_ms, cache=None, reference_ms=1.0):
        ref = FakeModule("saxpy_grid_stride", saxpy_function("reference", reference_ms, launch_log), strided=False)
        stu = FakeModule("saxpy", saxpy_function("student", student_ms, launch_log, cache))
        import kernels.runtime.loader as loader

        monkeypatch.setattr(loader, "load_topic", lambda topic, defines=None, backend=None: ref)
        monkeypatch.setattr(GpuMeasurement, "peak_bandwidth", lambda self, stream=None: (1e12, 1e12))
        return timing_policy.measure_speed(ex, stu, {"block": 256}, FakeBackend())

    return run, launch_log, ex


def test_reference_and_student_alternate_with_a_flush_before_each_call(timed_saxpy):
    run, log, ex = timed_saxpy
    timing = run(student_ms=0.5)
    calls = [c for c in log if c != "flush"]
    assert calls[:6] == ["student", "reference"] * 3
    assert all(a != b for a, b in zip(calls, calls[1:]))
    # every launch is preceded by a flush
    for i, c in enumerate(log):
        if c in ("reference", "student"):
            assert log[i - 1] == "flush"
    assert timing["speedup"] == pytest.approx(2.0)
    assert timing["pairs"] >= timing_policy.MIN_PAIRS
    assert timing["device"] == "Stand-in GPU" and timing["clocks"] and timing["driver"]
    assert speed_points(ex, timing)[0] == ex.speed_points


def test_a_kernel_replaying_an_earlier_output_fails_revalidation(timed_saxpy):
    from autograder.comparison import CaseError

    run, _, _ = timed_saxpy
    with pytest.raises(CaseError, match="timed call"):
        run(student_ms=0.5, cache={})


def test_bfloat16_arrays_go_to_the_device_and_back_as_their_bytes(monkeypatch):
    """NumPy gives no buffer of a bfloat16 array (dtype 'E'); the measuring layer copies its bytes, so that a BF16
    exercise's inputs reach the device and its timed output comes back (the timing of the BF16 WMMA exercise
    failed on a GPU with "cannot include dtype 'E' in a buffer" before)."""
    cuda = fake_driver([])
    monkeypatch.setitem(sys.modules, "pycuda.driver", cuda)
    with pytest.raises(ValueError, match="dtype 'E'"):
        cuda.to_device(np.ones(3, ml_dtypes.bfloat16))
    gpu = GpuMeasurement.__new__(GpuMeasurement)
    gpu.cuda = cuda
    host = np.arange(12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16)
    back = np.zeros_like(host)
    gpu.copy_to_host(back, gpu.to_device(host))
    assert back.dtype == host.dtype and np.array_equal(back, host)


def test_an_impossibly_fast_time_is_below_the_floor(timed_saxpy):
    run, _, ex = timed_saxpy
    timing = run(student_ms=1e-9)  # 1.2 MB in a femtosecond at 1 TB/s peak
    assert timing["below_floor"]
    assert speed_points(ex, timing)[0] == 0
