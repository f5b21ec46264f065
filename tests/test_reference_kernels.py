"""Every chapter-1 reference kernel agrees with its NumPy reference.

These run on the current backend: the CPU emulator under ``make test``, the
GPU under ``make test-gpu`` (marker ``backend``).  Sizes include ones that
are not multiples of the block size, a single element, and grids that must
stride more than once.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernels.basics import device_copy, reduction, saxpy, vector_add
from kernels.runtime.versions import versions

pytestmark = pytest.mark.backend

SIZES = [1, 31, 256, 1000, 4099]  # with block 256: below, at and across block boundaries


def inputs(n: int, seed: int, count: int = 1):
    """Inputs with a non-zero mean and varied scale, so that zeros or a constant cannot pass."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n) * 3 + 1.5).astype(np.float32) for _ in range(count)]


@pytest.mark.parametrize("version", versions(vector_add.KERNELS))
@pytest.mark.parametrize("n", SIZES)
def test_vector_add(backend, version, n):
    a, b = inputs(n, seed=n, count=2)
    a0, b0 = a.copy(), b.copy()
    c = vector_add.vector_add(a, b, version=version)
    np.testing.assert_allclose(c, vector_add.reference(a, b), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("version", versions(saxpy.KERNELS))
@pytest.mark.parametrize("n", SIZES)
def test_saxpy(backend, version, n):
    x, y = inputs(n, seed=n + 1, count=2)
    y0 = y.copy()
    result = saxpy.saxpy(-1.75, x, y, version=version)
    np.testing.assert_allclose(result, saxpy.reference(-1.75, x, y0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y, y0)  # the launcher leaves the caller's y alone by default


def test_saxpy_in_place(backend):
    x, y = inputs(777, seed=5, count=2)
    expected = saxpy.reference(0.5, x, y)
    saxpy.saxpy_grid_stride(0.5, x, y, in_place=True)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("version", versions(device_copy.KERNELS))
@pytest.mark.parametrize("n", [4, 124, 1024, 4000, 16388])
def test_copy(backend, version, n):
    (src,) = inputs(n, seed=n)
    np.testing.assert_array_equal(device_copy.copy(src, version=version), device_copy.reference(src))


@pytest.mark.parametrize("n", [1, 7, 4099])
def test_unrolled_copy_takes_any_size(backend, n):
    """Version 3 copies the n % 4 floats past its last float4 too."""
    (src,) = inputs(n, seed=n)
    np.testing.assert_array_equal(device_copy.copy(src, version="float4_unrolled"), device_copy.reference(src))


@pytest.mark.parametrize("version", versions(reduction.KERNELS))
@pytest.mark.parametrize("n", SIZES + [65536])
def test_reduce_sum(backend, version, n):
    (x,) = inputs(n, seed=n + 2)
    got = reduction.reduce_sum(x, version=version)
    assert abs(got - reduction.reference(x)) <= reduction.tolerance(x)


@pytest.mark.parametrize("version", ["shared_tree", "warp_shuffle"])
@pytest.mark.parametrize("block, grid", [(32, 1), (64, 3), (1024, 2)])
def test_reduce_sum_block_and_grid_sizes(backend, version, block, grid):
    (x,) = inputs(5000, seed=block + grid)
    got = reduction.reduce_sum(x, version=version, block=block, grid=grid)
    assert abs(got - reduction.reference(x)) <= reduction.tolerance(x)


def test_reduce_sum_repeated_calls_do_not_accumulate(backend):
    from kernels.runtime import zeros

    (x,) = inputs(3000, seed=9)
    out = zeros(1)
    first = reduction.reduce_sum_warp_shuffle(x, out=out)
    second = reduction.reduce_sum_warp_shuffle(x, out=out)
    assert first == pytest.approx(second, rel=1e-6, abs=1e-6)


def test_device_buffers_in_device_buffers_out(backend):
    from kernels.runtime import DeviceBuffer, to_device

    a, b = inputs(3000, seed=3, count=2)
    c = vector_add.vector_add_grid_stride(to_device(a), to_device(b))
    assert isinstance(c, DeviceBuffer)
    np.testing.assert_allclose(c.get(), a + b, rtol=1e-6)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 3000),
    block=st.sampled_from([32, 64, 128, 256, 512]),
    grid=st.one_of(st.none(), st.integers(1, 9)),
    version=st.sampled_from(["vector_add", "shared_tree", "warp_shuffle"]),
)
def test_generated_launch_configurations(backend, n, block, grid, version):
    a, b = inputs(n, seed=n, count=2)
    if version == "vector_add":
        c = vector_add.vector_add_grid_stride(a, b, block=block, grid=grid)
        np.testing.assert_allclose(c, a + b, rtol=1e-6, atol=1e-6)
    else:
        got = reduction.reduce_sum(a, version=version, block=block, grid=grid)
        assert abs(got - reduction.reference(a)) <= reduction.tolerance(a)
