"""Versions 9, 10 and 11 of C = A B: float32 accuracy from TF32 tensor cores (the "3xTF32" split).

Version 9 (WMMA) runs on the current backend, the CPU emulator included; versions 10 and 11 (Hopper's
wgmma) only on a GPU of compute capability 9.0, and say so clearly elsewhere.  The accuracy bounds are the
point of both: plain TF32 is about 1e-4 off (relative to sum |a||b|), so a version that dropped the
small parts, or summed them wrongly, fails the 1e-5 bound of every other version.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels.gemm import sgemm, sgemm_hopper
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


#: The two Hopper versions, by their launchers' names in kernels/gemm/sgemm_hopper.py.
HOPPER_VERSIONS = {"v10": "sgemm_tf32x3_wgmma", "v11": "sgemm_tf32x3_tma"}


@pytest.mark.backend
@pytest.mark.parametrize("version", HOPPER_VERSIONS)
def test_the_hopper_versions_name_what_they_need_off_a_hopper_gpu(backend, version):
    if sgemm_hopper.is_hopper(backend):
        pytest.skip("this GPU is a Hopper: versions 10 and 11 run here")
    A, B = operands(8, 8, 8, seed=0)
    with pytest.raises(KernelError, match="Hopper"):
        getattr(sgemm_hopper, HOPPER_VERSIONS[version])(A, B)


def _hopper(backend):
    if not sgemm_hopper.is_hopper(backend):
        pytest.skip("versions 10 and 11 need a Hopper GPU (compute capability 9.0)")
    return sgemm_hopper


# Edges of every tile (128 columns, 128 rows, 32 k), K not a multiple of 4, one row, one column, and
# more k-tiles than stages (version 11 refills each stage when every warp is done with it).
HOPPER_SHAPES = [(256, 128, 32), (130, 67, 91), (1, 129, 5), (33, 1, 200), (1000, 777, 516), (129, 300, 33)]


@pytest.mark.gpu
@pytest.mark.parametrize("version", HOPPER_VERSIONS)
@pytest.mark.parametrize("shape", HOPPER_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_hopper_versions_are_as_accurate_as_float32(backend, shape, version):
    multiply = getattr(_hopper(backend), HOPPER_VERSIONS[version])
    A, B = operands(*shape, seed=sum(shape))
    C = multiply(A, B)
    assert_product(C, A, B)
    Bt = np.ascontiguousarray(B.T)
    assert_product(multiply(A, Bt, b_transposed=True), A, B)


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
def test_version_11_packs_a_into_the_layout_its_product_reads(backend):
    """tf32x3_pack_a writes what the NumPy model of its layout (pack_a_reference) says, bit for bit: tiles
    in the product kernel's order, zeros past M and K, each row's 16-byte pieces permuted."""
    from kernels.runtime.loader import launch, load_topic

    H = _hopper(backend)
    M, K = 130, 70  # partial tiles both ways
    A = operands(M, 1, K, seed=6)[0]
    record = H.KERNELS["tf32x3_pack_a"]
    out = np.full(H.packed_a_floats(M, K, 128, 32), np.nan, np.float32)
    config = record.launch({"M": M, "N": 1, "K": K})
    launch(load_topic(H.TOPIC, dict(record.defines)).function("tf32x3_pack_a"), (A, M, K, out),
           grid=config.grid, block=config.block)
    np.testing.assert_array_equal(out, H.pack_a_reference(A))


def test_version_11s_packing_keeps_every_element_once_and_pads_with_zeros():
    """The NumPy model the GPU test above compares with: each tile's offsets are a permutation, A's
    elements are all there, and the padding past M and K is zero."""
    offsets = sgemm_hopper.a_packed_offset(*np.divmod(np.arange(128 * 32), 32))
    assert sorted(offsets) == list(range(128 * 32))
    assert list(offsets[32:40]) == [36, 37, 38, 39, 32, 33, 34, 35]  # row 1: its 16-byte pieces swapped in pairs
    A = operands(130, 1, 70, seed=6)[0]
    packed = sgemm_hopper.pack_a_reference(A)
    assert packed.size == sgemm_hopper.packed_a_floats(130, 70, 128, 32) == 2 * 3 * 128 * 32
    assert sorted(packed[packed != 0]) == sorted(A[A != 0])
    assert np.count_nonzero(packed) == np.count_nonzero(A)


@pytest.mark.gpu
@pytest.mark.parametrize("version", HOPPER_VERSIONS)
def test_the_hopper_versions_on_device_buffers_and_their_checks(backend, version):
    from kernels.runtime import empty, to_device

    multiply = getattr(_hopper(backend), HOPPER_VERSIONS[version])
    A, B = operands(300, 260, 64, seed=4)
    C = empty((300, 260))
    assert multiply(to_device(A), to_device(B), out=C) is C
    assert_product(C.get(), A, B)
    with pytest.raises(ValueError, match="inner dimensions"):
        multiply(A, B[:-1])
    A7, B7 = A[:, :63].copy(), B[:63].copy()  # K = 63: rows of A that are no whole number of 16 bytes
    assert_product(multiply(to_device(A7), to_device(B7)).get(), A7, B7)


@pytest.mark.gpu
@pytest.mark.parametrize("version", HOPPER_VERSIONS)
def test_the_hopper_records_launch_as_their_launchers_do(backend, launches, version):
    """Each launch a version makes (its preparation kernels and its product) has the grid, block and
    shared memory its record in kernels/gemm/sgemm_hopper.py states."""
    H = _hopper(backend)
    shape = {"M": 300, "N": 260, "K": 100}
    A, B = operands(300, 260, 100, seed=8)
    getattr(H, HOPPER_VERSIONS[version])(A, B)
    expected = {"v10": ("tf32x3_split_b", "sgemm_tf32x3_wgmma"),
                "v11": ("tf32x3_split_b", "tf32x3_pack_a", "sgemm_tf32x3_tma")}[version]
    assert [name for name, _ in launches] == list(expected)
    for name, config in launches:
        assert config == H.KERNELS[name].launch(shape), name


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
def test_the_hopper_versions_over_a_long_k_are_no_less_accurate_than_the_fp32_units(backend):
    """Over K = 4096 the tensor cores' truncating sums would drift to ~10x an FP32 product's error;
    adding partial sums to a float sum every H_PROMOTE k-tiles keeps versions 10 and 11 at or below
    version 7's (the FP32 units', as accurate as cuBLAS FP32 here)."""
    H = _hopper(backend)
    rng = np.random.default_rng(7)
    A = rng.standard_normal((256, 4096)).astype(np.float32) + 0.5
    B = rng.standard_normal((4096, 256)).astype(np.float32)
    fp32 = relative_error(sgemm.sgemm_warptile(A, B), A, B)
    for version, name in HOPPER_VERSIONS.items():
        multiply = getattr(H, name)
        ours = relative_error(multiply(A, B), A, B)
        unpromoted = relative_error(multiply(A, B, config={"H_PROMOTE": 0}), A, B)
        assert ours <= fp32, f"{version}: {ours:.2e}, FP32 units: {fp32:.2e}"
        assert unpromoted > 2 * ours, f"{version} without the float partial sums {unpromoted:.2e}, with {ours:.2e}"
