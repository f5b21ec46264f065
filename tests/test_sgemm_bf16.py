"""Versions 12 to 16 of the GEMM (kernels/gemm/sgemm_bf16.cu): C = A B^T from BF16 inputs, summed in float.

Every version is checked against the float64 product of the same BF16 inputs, on shapes that are no multiple
of its tiles, as far as the version allows: version 12 any M, N, K; versions 13 to 16 any M, N and K a multiple of
8 (their 16-byte copies).  The bounds are relative to sum |a||b| of each element: a BF16 output is within half
a BF16 unit (2^-9) of the exact value plus the float sums' error, so 2^-8; a float output within 1e-5.  Version
12 runs on the current backend (the CPU emulator under ``make test``); versions 13 to 16 on a Hopper GPU, and
elsewhere say so.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels.gemm import sgemm_bf16 as S
from kernels.runtime.errors import KernelError
from kernels.runtime.tensor_maps import check_tiled

BF16_BOUND, FLOAT_BOUND = 2.0 ** -8, 1e-5
PTX_VERSIONS = list(S.HOPPER_ONLY)


def operands(M, N, K, seed, batch=None):
    """BF16 A (M x K) and B (N x K), or batches of them, with a mean so that sums do not cancel to nothing."""
    rng = np.random.default_rng(seed)
    lead = () if batch is None else (batch,)
    return S.bf16(rng.standard_normal(lead + (M, K)) + 0.5), S.bf16(rng.standard_normal(lead + (N, K)) - 0.25)


def worst_error(C, expected, A, B) -> float:
    """The largest |C - expected| / sum |a||b| over the elements (C may be BF16 or float)."""
    C = np.asarray(C).astype(np.float64)
    assert np.isfinite(C).all(), "some elements of C were never written (still NaN)"
    scale = np.abs(np.asarray(A).astype(np.float64)) @ np.swapaxes(np.abs(np.asarray(B).astype(np.float64)), -1, -2)
    return float(np.max(np.abs(C - expected) / (scale + 1e-30)))


def assert_product(C, A, B, bound=BF16_BOUND):
    err = worst_error(C, S.reference(A, B), A, B)
    assert err < bound, f"worst error {err:.2e} over sum |a||b|, bound {bound:.1e}"


def test_the_bounds_separate_right_from_wrong():
    """A kernel that summed in BF16, or read its inputs as anything coarser than they are, misses the bounds above:
    else the tests prove nothing."""
    A, B = operands(64, 48, 256, seed=1)
    exact = S.reference(A, B)
    assert worst_error(S.bf16(exact), exact, A, B) < BF16_BOUND  # the exact product, stored as BF16
    assert worst_error(exact.astype(np.float32), exact, A, B) < FLOAT_BOUND
    summed_in_bf16 = np.zeros_like(exact, dtype=np.float32)
    for k in range(A.shape[1]):  # every partial sum rounded to BF16
        summed_in_bf16 = S.bf16(summed_in_bf16 + np.outer(A[:, k], B[:, k]).astype(np.float32)).astype(np.float32)
    assert worst_error(summed_in_bf16, exact, A, B) > BF16_BOUND
    assert worst_error(exact[:, ::-1], exact, A, B) > BF16_BOUND  # C's columns in the wrong order
    A_off = S.bf16(A.astype(np.float32) * (1 + 2.0 ** -7))  # inputs read a BF16 unit off
    assert worst_error(S.reference(A_off, B), exact, A, B) > FLOAT_BOUND


# ------------------------------------------------------------------------------------------------ version 12

@pytest.mark.backend
@pytest.mark.parametrize("shape", [(64, 64, 64), (130, 67, 91), (1, 129, 5), (33, 1, 40)],
                         ids=lambda s: "x".join(map(str, s)))
def test_version_12_on_any_shape(backend, shape):
    A, B = operands(*shape, seed=sum(shape))
    A0 = A.copy()
    C = S.sgemm_bf16_wmma(A, B)
    assert C.shape == shape[:2] and C.dtype == S.bfloat16
    assert_product(C, A, B)
    np.testing.assert_array_equal(A, A0)  # inputs are left alone


@pytest.mark.backend
def test_version_12_batched_with_float_output(backend):
    A, B = operands(33, 17, 40, seed=2, batch=2)
    C = S.sgemm_bf16_wmma(A, B, out_dtype=np.float32)
    assert C.shape == (2, 33, 17) and C.dtype == np.float32
    assert_product(C, A, B, FLOAT_BOUND)


@pytest.mark.backend
def test_version_12s_record_launches_as_its_launcher_does(backend, launches):
    A, B = operands(130, 300, 24, seed=3, batch=2)
    S.sgemm_bf16_wmma(A, B)
    (name, config), = launches
    assert name == "sgemm_bf16_wmma"
    assert config == S.KERNELS[name].launch({"M": 130, "N": 300, "K": 24, "batch": 2})


@pytest.mark.backend
@pytest.mark.parametrize("kernel", PTX_VERSIONS)
def test_the_ptx_versions_name_what_they_need_off_a_hopper_gpu(backend, kernel):
    if S.is_hopper(backend):
        pytest.skip("this GPU is a Hopper: versions 13 to 16 run here")
    A, B = operands(8, 8, 8, seed=0)
    args = (A, B, S.bf16(np.zeros(8))) if kernel == "sgemm_bf16_fused" else (A, B)
    with pytest.raises(KernelError, match="Hopper"):
        S.KERNELS[kernel].launcher(*args)


def test_the_records_number_the_ladder_on_from_version_11():
    assert [record.number for record in S.KERNELS.values()] == [12, 13, 14, 15, 16]
    shape = {"M": 1000, "N": 512, "K": 4096, "batch": 2}
    for kernel, record in S.KERNELS.items():
        assert record.flops(shape) == 2.0 * 1000 * 512 * 4096 * 2
        assert record.bytes(shape) == 2.0 * (1000 * 4096 + 512 * 4096 + 1000 * 512) * 2
        assert record.launcher.__name__ == kernel


def test_persistent_blocks_fill_the_gpu_in_whole_clusters():
    d = S.DEFAULTS["sgemm_bf16_warp_specialized"]
    assert S.persistent_blocks({"M": 8192, "N": 8192, "K": 64}, d, sms=132) == 132
    assert S.persistent_blocks({"M": 8192, "N": 8192, "K": 64}, {**d, "S_CLUSTER": 2}, sms=133) == 132
    assert S.persistent_blocks({"M": 200, "N": 300, "K": 64}, d, sms=132) == 4  # 1 cluster row x 2 tile columns
    assert S.persistent_blocks({"M": 8192, "N": 8192, "K": 64}, {**d, "S_BLOCKS": 128}, sms=132) == 128


def test_persistent_blocks_count_a_split_of_k_in_the_cluster():
    split = {**S.DEFAULTS["sgemm_bf16_warp_specialized"], "T_BN": 128, "S_STAGES": 5, "S_SPLIT_K": 2}
    square = {"M": 1024, "N": 1024, "K": 1024}
    assert S.persistent_blocks(square, {**split, "S_CLUSTER": 1}, sms=132) == 128  # 64 tiles, two blocks each
    assert S.persistent_blocks(square, split, sms=132) == 128                       # 32 clusters of four
    assert S.persistent_blocks({"M": 8192, "N": 8192, "K": 64}, split, sms=133) == 132


@pytest.mark.parametrize("kernel", ["sgemm_bf16_warp_specialized", "sgemm_bf16_fused"])
def test_planned_config_fills_the_multiprocessors_on_small_products_and_keeps_the_defaults_on_large(kernel):
    """1024^3 in DEFAULTS' 128 x 256 tiles keeps 32 of 132 multiprocessors busy: its plan must put at least three
    quarters of them to work.  From 4096^3 on, and at attention's batched Q K^T, DEFAULTS stay."""
    defaults = S.DEFAULTS[kernel]
    small = {"M": 1024, "N": 1024, "K": 1024}
    assert S.persistent_blocks(small, defaults, sms=132) == 32
    planned = S.planned_config(kernel, small, sms=132)
    assert planned != defaults and S.persistent_blocks(small, planned, sms=132) >= 99
    for shape in ({"M": 4096, "N": 4096, "K": 4096}, {"M": 6144, "N": 6144, "K": 6144},
                  {"M": 8192, "N": 8192, "K": 8192}, {"M": 4096, "N": 4096, "K": 64, "batch": 16},
                  {"M": 1024, "N": 1024, "K": 64, "batch": 4}):
        assert S.planned_config(kernel, shape, sms=132) == defaults, shape
    # K of a single k-tile is never split between two blocks (one of them would have nothing to sum)
    assert int(S.planned_config(kernel, {"M": 1024, "N": 1024, "K": 64}, sms=132).get("S_SPLIT_K", 1)) == 1


def test_planned_config_takes_the_first_plan_that_holds():
    kernel, shape = "sgemm_bf16_warp_specialized", {"M": 1024, "N": 1024, "K": 256}   # 0.24 tiles a multiprocessor
    plans = (S.SizePlan(0.5, 512, {"S_SPLIT_K": 2}), S.SizePlan(0.2, 0, {"T_BN": 64}), S.SizePlan(0.3, 0, {"T_BN": 128}))
    assert S.planned_config(kernel, shape, sms=132, plans=plans)["T_BN"] == 128
    assert S.planned_config(kernel, {**shape, "K": 512}, sms=132, plans=plans)["S_SPLIT_K"] == 2
    assert S.planned_config(kernel, shape, sms=66, plans=plans) == S.DEFAULTS[kernel]   # 0.48 a multiprocessor


def test_every_planned_configuration_fits_in_shared_memory_and_a_larger_one_is_refused():
    for config in (S.DEFAULTS["sgemm_bf16_warp_specialized"], *(plan.config for plan in S.SIZE_PLANS)):
        full = {**S.DEFAULTS["sgemm_bf16_warp_specialized"], **config}
        assert S.persistent_shared_bytes(full) <= S.MAX_SHARED_BYTES, config
    too_big = {**S.DEFAULTS["sgemm_bf16_warp_specialized"], "S_SPLIT_K": 2}   # 128 x 256 sums to exchange, 3 stages
    with pytest.raises(ValueError, match="fewer S_STAGES"):
        S.KERNELS["sgemm_bf16_warp_specialized"].launch({"M": 1024, "N": 1024, "K": 1024}, too_big)


def test_tensor_maps_refuse_what_the_tma_unit_cannot_copy():
    bf = S.bfloat16
    check_tiled(0x1000, bf, (64, 128, 1), (128, 128 * 128), (64, 128, 1))
    with pytest.raises(KernelError, match="multiple of 8"):
        check_tiled(0x1000, bf, (60, 128, 1), (120, 120 * 128), (64, 128, 1))
    with pytest.raises(KernelError, match="16 bytes"):
        check_tiled(0x1008, bf, (64, 128, 1), (128, 128 * 128), (64, 128, 1))
    with pytest.raises(KernelError, match="128 bytes"):
        check_tiled(0x1000, bf, (128, 128, 1), (256, 256 * 128), (128, 128, 1))


@pytest.mark.parametrize("kernel", PTX_VERSIONS)
def test_the_ptx_versions_refuse_k_that_is_no_multiple_of_8(kernel, monkeypatch):
    monkeypatch.setattr(S, "require_ptx_gpu", lambda kernel: None)  # the shape is checked before anything runs
    A, B = operands(16, 16, 12, seed=0)
    args = (A, B, S.bf16(np.zeros(16))) if kernel == "sgemm_bf16_fused" else (A, B)
    with pytest.raises(ValueError, match="multiple of 8"):
        S.KERNELS[kernel].launcher(*args)


# ------------------------------------------------------------------------------------------------ versions 13-16

def _hopper(backend):
    if not S.is_hopper(backend):
        pytest.skip("versions 13 to 16 need a Hopper GPU (compute capability 9.0)")


# Whole tiles; edges of every tile (128 and 256 columns, 128 rows, 64 k) with K a multiple of 8 only; one row,
# one column; K of one k-tile and of many more k-tiles than stages (every stage refilled); more tiles than
# blocks (version 15 walks several each, its clusters past the last tile row).  N a multiple of 8 (versions 15
# and 16 store C through the TMA unit) and not (they store it directly).
SHAPES = [(256, 256, 128), (130, 67, 96), (1, 129, 8), (33, 1, 200), (1000, 777, 520), (1000, 776, 520),
          (129, 304, 64), (520, 1032, 1032), (2100, 1096, 264), (3000, 520, 136)]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", PTX_VERSIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_ptx_versions_on_edge_shapes(backend, kernel, shape):
    _hopper(backend)
    A, B = operands(*shape, seed=sum(shape))
    if kernel == "sgemm_bf16_fused":
        bias = S.bf16(np.random.default_rng(1).standard_normal(shape[1]))
        C = S.sgemm_bf16_fused(A, B, bias, activation=None)
        err = worst_error(C, S.fused_reference(A, B, bias, None), A, B)
        assert err < BF16_BOUND + 2.0 ** -8, f"{err:.2e}"   # the bias adds its own rounding of C
    else:
        assert_product(S.KERNELS[kernel].launcher(A, B), A, B)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", PTX_VERSIONS)
def test_the_ptx_versions_batched_with_float_output(backend, kernel):
    _hopper(backend)
    A, B = operands(200, 130, 72, seed=9, batch=3)
    if kernel == "sgemm_bf16_fused":
        bias = S.bf16(np.linspace(-1, 1, 130))
        C = S.sgemm_bf16_fused(A, B, bias, activation="relu", out_dtype=np.float32)
        assert worst_error(C, S.fused_reference(A, B, bias, "relu"), A, B) < FLOAT_BOUND
    else:
        C = S.KERNELS[kernel].launcher(A, B, out_dtype=np.float32)
        assert C.shape == (3, 200, 130) and C.dtype == np.float32
        assert_product(C, A, B, FLOAT_BOUND)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, config", [
    ("sgemm_bf16_mma", {"R_STAGES": 3}),
    ("sgemm_bf16_wgmma_tma", {"T_BN": 128}),
    ("sgemm_bf16_wgmma_tma", {"T_STAGES": 3, "T_GROUP": 3}),
    ("sgemm_bf16_warp_specialized", {}),  # the defaults (128 x 256 tiles), which small products do not get
    ("sgemm_bf16_fused", {}),
    ("sgemm_bf16_warp_specialized", {"S_CLUSTER": 1}),
    ("sgemm_bf16_warp_specialized", {"S_TMA_STORE": 0, "S_STAGES": 4}),
    ("sgemm_bf16_fused", {"S_TMA_STORE": 0, "S_STAGES": 4}),
    ("sgemm_bf16_warp_specialized", {"T_BN": 128}),
    ("sgemm_bf16_warp_specialized", {"T_BN": 128, "S_CLUSTER": 1, "S_STAGES": 6}),
    ("sgemm_bf16_warp_specialized", {"S_BLOCKS": 8, "S_GROUP": 2}),
    ("sgemm_bf16_warp_specialized", {"T_BN": 64, "S_STAGES": 8}),
    ("sgemm_bf16_warp_specialized", {"T_BN": 64, "S_STAGES": 8, "S_CLUSTER": 1}),
    # split-K: K of 9, 2 and 1 k-tiles (the second block of a one-k-tile product sums nothing); clusters of two and
    # of four; few blocks walking many tiles, so that every phase of the exchange's barriers is used
    ("sgemm_bf16_warp_specialized", {"T_BN": 128, "S_STAGES": 5, "S_CLUSTER": 1, "S_SPLIT_K": 2}),
    ("sgemm_bf16_warp_specialized", {"T_BN": 128, "S_STAGES": 5, "S_SPLIT_K": 2}),
    ("sgemm_bf16_warp_specialized", {"T_BN": 128, "S_STAGES": 5, "S_CLUSTER": 1, "S_SPLIT_K": 2, "S_BLOCKS": 4}),
    ("sgemm_bf16_warp_specialized", {"T_BN": 128, "S_STAGES": 4, "S_CLUSTER": 1, "S_SPLIT_K": 2, "S_TMA_STORE": 0}),
    ("sgemm_bf16_fused", {"T_BN": 128, "S_STAGES": 5, "S_SPLIT_K": 2, "S_BLOCKS": 8}),
], ids=lambda c: c if isinstance(c, str) else ",".join(f"{k}={v}" for k, v in c.items()) or "defaults")
def test_the_configurations_the_benchmark_tries(backend, kernel, config):
    _hopper(backend)
    for shape in ((1000, 776, 520), (130, 300, 72), (257, 131, 64)):  # (131 columns: C's rows no whole 16 bytes)
        A, B = operands(*shape, seed=4)
        if kernel == "sgemm_bf16_fused":
            bias = S.bf16(np.linspace(-2, 2, shape[1]))
            C = S.sgemm_bf16_fused(A, B, bias, activation="gelu", config=config)
            assert worst_error(C, S.fused_reference(A, B, bias, "gelu"), A, B) < 2 * BF16_BOUND
        else:
            assert_product(S.KERNELS[kernel].launcher(A, B, config=config), A, B)


@pytest.mark.gpu
def test_split_k_batched_with_float_output(backend):
    _hopper(backend)
    A, B = operands(300, 200, 520, seed=10, batch=3)
    config = {**S.DEFAULTS["sgemm_bf16_warp_specialized"], "T_BN": 128, "S_STAGES": 5, "S_SPLIT_K": 2, "S_BLOCKS": 8}
    C = S.sgemm_bf16_warp_specialized(A, B, out_dtype=np.float32, config=config)
    assert C.shape == (3, 300, 200) and C.dtype == np.float32
    assert_product(C, A, B, FLOAT_BOUND)


@pytest.mark.gpu
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_version_16_fuses_bias_and_activation(backend, activation):
    _hopper(backend)
    A, B = operands(300, 520, 264, seed=5)
    bias = S.bf16(np.random.default_rng(6).standard_normal(520) * 4)
    C = S.sgemm_bf16_fused(A, B, bias, activation=activation, out_dtype=np.float32)
    bound = FLOAT_BOUND + (S.GELU_TOLERANCE if activation == "gelu" else 0.0)  # the hardware's tanh
    assert worst_error(C, S.fused_reference(A, B, bias, activation), A, B) < bound
    assert worst_error(C, S.reference(A, B) + bias.astype(np.float64), A, B) > 1e-2  # the activation was applied


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", PTX_VERSIONS)
def test_the_ptx_versions_on_device_buffers_as_their_records_launch(backend, launches, kernel):
    from kernels.runtime import empty, to_device

    _hopper(backend)
    A, B = operands(300, 260, 128, seed=8)
    extra = (to_device(S.bf16(np.ones(260))),) if kernel == "sgemm_bf16_fused" else ()
    C = empty((300, 260), S.bfloat16)
    assert S.KERNELS[kernel].launcher(to_device(A), to_device(B), *extra, out=C) is C
    expected = S.reference(A, B) + (1.0 if extra else 0.0)
    if kernel == "sgemm_bf16_fused":
        expected = S.apply_activation(expected, "gelu")
    assert worst_error(C.get(), expected, A, B) < 2 * BF16_BOUND
    (name, config), = launches
    assert name == kernel
    assert config == S.KERNELS[kernel].launch({"M": 300, "N": 260, "K": 128})
