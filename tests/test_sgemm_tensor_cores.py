"""Versions 9 and 10 of C = A B: float32 accuracy from TF32 tensor cores (the "3xTF32" split).

Version 9 (WMMA) runs on the current backend, the CPU emulator included; version 10 (Hopper's wgmma)
only on a GPU of compute capability 9.0, and says so clearly elsewhere.  The accuracy bounds are the
point of both: plain TF32 is about 1e-4 off (relative to sum |a||b|), so a version that dropped the
small parts, or summed them wrongly, fails the 1e-5 bound of every other version.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import sgemm, sgemm_hopper
from kernels.runtime.errors import KernelError
from tests.test_sgemm import assert_product, operands


def relative_error(C, A, B) -> float:
    ref = sgemm.reference(A, B)
    scale = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))
    return float(np.max(np.abs(C - ref) / (scale + 1e-30)))


tf32 = sgemm.tf32


@pytest.mark.backend
@pytest.mark.parametrize("shape", [(64, 64, 64), (130, 67, 91), (1, 129, 5), (33, 1, 40)], ids=lambda s: "x".join(map(str, s)))
def test_version_9_is_as_accurate_as_float32(backend, shape):
    A, B = operands(*shape, seed=sum(shape))
    C = sgemm.sgemm_tf32x3_wmma(A, B)
    assert C.shape == shape[:2]
    assert_product(C, A, B)


def test_plain_tf32_misses_the_bound_the_split_meets():
    """The 1e-5 bound above is one that plain TF32 inputs cannot meet (else the tests above prove nothing)."""
    A, B = operands(130, 67, 91, seed=288)
    assert relative_error(tf32(A).astype(np.float64) @ tf32(B).astype(np.float64), A, B) > 1e-4
    assert relative_error(sgemm.tf32x3_reference(A, B), A, B) < 1e-6
    assert tf32(np.float32(1 + 2**-11)) == np.float32(1 + 2**-10)  # a tie rounds away from zero
    assert tf32(np.float32(1 + 2**-11 - 2**-23)) == np.float32(1.0)


@pytest.mark.backend
def test_version_10_names_what_it_needs_off_a_hopper_gpu(backend):
    if sgemm_hopper.is_hopper(backend):
        pytest.skip("this GPU is a Hopper: version 10 runs here")
    A, B = operands(8, 8, 8, seed=0)
    with pytest.raises(KernelError, match="Hopper"):
        sgemm_hopper.sgemm_tf32x3_wgmma(A, B)


def _hopper(backend):
    if not sgemm_hopper.is_hopper(backend):
        pytest.skip("version 10 needs a Hopper GPU (compute capability 9.0)")
    return sgemm_hopper


# Edges of every tile (128 columns, 128 rows, 32 k), K not a multiple of 4, one row, one column.
HOPPER_SHAPES = [(256, 128, 32), (130, 67, 91), (1, 129, 5), (33, 1, 200), (1000, 777, 516), (129, 300, 33)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", HOPPER_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_version_10_is_as_accurate_as_float32(backend, shape):
    H = _hopper(backend)
    A, B = operands(*shape, seed=sum(shape))
    C = H.sgemm_tf32x3_wgmma(A, B)
    assert_product(C, A, B)
    Bt = np.ascontiguousarray(B.T)
    assert_product(H.sgemm_tf32x3_wgmma(A, Bt, b_transposed=True), A, B)


@pytest.mark.gpu
@pytest.mark.parametrize("b_transposed", [False, True])
def test_version_10_splits_b_into_the_layout_the_chapter_describes(backend, b_transposed):
    """tf32x3_split_b writes what the NumPy model of its layout (split_b_reference) says, bit for bit."""
    from kernels.runtime.loader import launch, load_topic

    H = _hopper(backend)
    K, N = 70, 130  # partial tiles both ways
    B = operands(1, N, K, seed=5)[1]
    given = np.ascontiguousarray(B.T) if b_transposed else B
    out = np.full(H.split_floats(K, N, H.DEFAULT_CONFIG["H_BK"]), np.nan, np.float32)
    record = H.KERNELS["tf32x3_split_b"]
    config = record.launch({"M": 1, "N": N, "K": K})
    launch(load_topic(H.TOPIC, dict(record.defines)).function("tf32x3_split_b"), (given, K, N, int(b_transposed), out),
           grid=config.grid, block=config.block)
    np.testing.assert_array_equal(out, H.split_b_reference(B))


@pytest.mark.gpu
def test_version_10_on_device_buffers_and_its_checks(backend):
    from kernels.runtime import empty, to_device

    H = _hopper(backend)
    A, B = operands(300, 260, 64, seed=4)
    C = empty((300, 260))
    assert H.sgemm_tf32x3_wgmma(to_device(A), to_device(B), out=C) is C
    assert_product(C.get(), A, B)
    with pytest.raises(ValueError, match="inner dimensions"):
        H.sgemm_tf32x3_wgmma(A, B[:-1])
    A7, B7 = A[:, :63].copy(), B[:63].copy()  # K = 63: A's rows copied float by float
    assert_product(H.sgemm_tf32x3_wgmma(to_device(A7), to_device(B7)).get(), A7, B7)


@pytest.mark.gpu
def test_version_9_over_a_long_k_is_no_less_accurate_than_the_fp32_units(backend):
    """Summed on the tensor cores over all of K, the error drifts (their float sums truncate; the CPU
    emulator's do not, so this is a GPU test); version 9 adds each k-tile's sum to a float total, and
    stays within the FP32 units' error (version 7's)."""
    rng = np.random.default_rng(7)
    K = 4096
    A = rng.standard_normal((32, K)).astype(np.float32) + 0.5
    B = rng.standard_normal((K, 32)).astype(np.float32)
    fp32 = relative_error(sgemm.sgemm_warptile(A, B), A, B)
    assert relative_error(sgemm.sgemm_tf32x3_wmma(A, B), A, B) <= 1.5 * fp32


@pytest.mark.gpu
def test_version_10_over_a_long_k_is_no_less_accurate_than_the_fp32_units(backend):
    """Over K = 4096 the tensor cores' truncating sums would drift to ~10x an FP32 product's error;
    adding partial sums to a float sum every H_PROMOTE k-tiles keeps version 10 at or below version 7's
    (the FP32 units', as accurate as cuBLAS FP32 here)."""
    H = _hopper(backend)
    rng = np.random.default_rng(7)
    A = rng.standard_normal((256, 4096)).astype(np.float32) + 0.5
    B = rng.standard_normal((4096, 256)).astype(np.float32)
    fp32 = relative_error(sgemm.sgemm_warptile(A, B), A, B)
    ours = relative_error(H.sgemm_tf32x3_wgmma(A, B), A, B)
    unpromoted = relative_error(H.sgemm_tf32x3_wgmma(A, B, config={"H_PROMOTE": 0}), A, B)
    assert ours <= fp32, f"version 10: {ours:.2e}, FP32 units: {fp32:.2e}"
    assert unpromoted > 2 * ours, f"without the float partial sums {unpromoted:.2e}, with {ours:.2e}"
