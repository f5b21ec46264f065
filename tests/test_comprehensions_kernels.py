"""Every comprehension of the chapter, generated under each schedule, against float64 NumPy.

Runs on the current backend (marker ``backend``): the CPU emulator under ``make test``, the GPU
under ``make test-gpu``.  Shapes stay small (sizes of 1, primes, sizes across a block or tile) so the
emulator takes seconds; the generated sources are also compiled for sm_90 with nvcc, where present.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels.index_notation import NAIVE, Schedule, compile_tc
from kernels.index_notation.examples import EXAMPLES
from kernels.tools.nvcc_report import compile_report, nvcc_path

#: One schedule per step of the chapter; small blocks so that the small shapes span several blocks.
SCHEDULES = {
    "naive": NAIVE,
    "mapped": Schedule(block=(8, 4), fuse=False),
    "fused_regs": Schedule(block=(8, 4), regs=(2, 3)),
    "tiled": Schedule(block=(8, 4), tile_k=8, regs=(2, 2), unroll=4),
    "split": Schedule(split=64, block=(64, 2)),
}


def assert_matches(got, ref, what):
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, expected {ref.shape}"
    assert np.isfinite(got).all(), f"{what}: some elements were never written (NaN)"
    tol = 2e-5 * (np.abs(ref).max() + 1.0)
    err = np.abs(got - ref)
    assert err.max() <= tol, f"{what}: worst error {err.max():.3g} at {np.unravel_index(err.argmax(), err.shape)}"


@pytest.mark.backend
@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_against_numpy(backend, name, schedule):
    ex = EXAMPLES[name]
    tc = compile_tc(ex.text, SCHEDULES[schedule])
    shapes = ex.shapes if schedule == "naive" else ex.shapes[:3]
    for n, shape in enumerate(shapes):
        args = ex.make_inputs(shape, np.random.default_rng(100 + n))
        before = [np.copy(a) for a in args]
        got = tc(*args)
        assert_matches(got, ex.reference(*args)[0], f"{name} {shape} under {schedule}")
        assert all(np.array_equal(a, b) for a, b in zip(args, before)), "an input was modified"


@pytest.mark.backend
def test_device_buffers_in_device_buffers_out(backend):
    from kernels.runtime import to_device
    from kernels.runtime.backend import DeviceBuffer

    ex = EXAMPLES["fcrelu"]
    args = ex.make_inputs({"B": 3, "M": 5, "N": 4}, np.random.default_rng(0))
    out = compile_tc(ex.text, SCHEDULES["fused_regs"])(*[to_device(a) for a in args])
    assert isinstance(out, DeviceBuffer)
    assert_matches(out.get(), ex.reference(*args)[0], "fcrelu on device buffers")


def test_fusion_makes_one_kernel_of_fcrelu():
    naive = compile_tc(EXAMPLES["fcrelu"].text, NAIVE)
    fused = compile_tc(EXAMPLES["fcrelu"].text, Schedule())
    assert len(naive.program.kernels) == 3 and len(fused.program.kernels) == 1
    assert fused.source.count("__global__") == 1 and "fmaxf" in fused.source


def test_schedules_show_in_the_source():
    src = compile_tc(EXAMPLES["sgemm"].text, Schedule(block=(16, 16), tile_k=16, regs=(4, 4))).source
    assert "__shared__ float" in src and "__syncthreads();" in src and "float tc_acc[4][4];" in src
    src = compile_tc(EXAMPLES["mv"].text, Schedule(split=128, block=(128, 2))).source
    assert "__shfl_down_sync" in src and "tc_warp[2][4]" in src


def test_bad_schedules_are_refused():
    with pytest.raises(ValueError, match="split must be a multiple of 32"):
        Schedule(split=48)
    with pytest.raises(ValueError, match="at most 1024"):
        Schedule(block=(64, 32))


@pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not on the PATH: install the CUDA toolkit to check sm_90")
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_generated_kernels_compile_for_sm90_without_spills(name):
    for schedule in (NAIVE, Schedule(block=(16, 16), tile_k=16, regs=(8, 8), unroll=4), Schedule(split=256, block=(256, 1))):
        src = compile_tc(EXAMPLES[name].text, schedule).source
        reports = compile_report(src, f"{name}.cu")
        assert reports and not [r for r in reports if r.spills], f"{name} under {schedule.describe()} spills"
