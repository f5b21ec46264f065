"""Every version of kernels/gemm/sgemm.cu computes C = A B, for sizes that are no multiple of any tile.

Runs on the current backend (marker ``backend``): the CPU emulator under ``make test``, the GPU
under ``make test-gpu``.  Sizes stay between 1 and 131 so the emulator takes seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels.gemm import sgemm
from kernels.runtime.versions import versions

pytestmark = pytest.mark.backend

# (M, N, K): square tile multiples, odd sizes across every tile (32, 64, 128), a single row or
# column, K smaller than one k-tile, K not a multiple of 4 (no float4 loads), skinny shapes.
SHAPES = [(64, 64, 64), (130, 67, 91), (1, 129, 5), (33, 1, 200), (131, 130, 9), (128, 128, 3), (7, 100, 129)]
VERSIONS = list(versions(sgemm.KERNELS))


def operands(M, N, K, seed):
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((M, K)) + 0.5).astype(np.float32)
    B = (rng.standard_normal((K, N)) - 0.25).astype(np.float32)
    return A, B


def assert_product(C, A, B):
    ref = sgemm.reference(A, B)
    scale = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))  # what rounding errors scale with
    assert np.isfinite(C).all(), "some elements of C were never written (still NaN)"
    err = np.abs(C - ref) / (scale + 1e-30)
    assert err.max() < 1e-5, f"worst relative error {err.max():.2e} at {np.unravel_index(err.argmax(), err.shape)}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("version", VERSIONS)
def test_sgemm_version(backend, version, shape):
    A, B = operands(*shape, seed=sum(shape))
    A0, B0 = A.copy(), B.copy()
    C = versions(sgemm.KERNELS)[version].launcher(A, B)
    assert C.shape == (shape[0], shape[1])
    assert_product(C, A, B)
    np.testing.assert_array_equal(A, A0)  # inputs are left alone
    np.testing.assert_array_equal(B, B0)


@pytest.mark.parametrize(
    "config",
    [{"WT_BK": 8}, {"WT_BK": 16, "WT_MIN_BLOCKS": 1}, {"WT_BM": 64}, {"WT_GROUP": 8}, {"WT_GROUP": 3, "WT_BK": 8},
     {"WT_NQ": 4, "WT_BK": 8}, {"WT_NQ": 4, "WT_BN": 256, "WT_BK": 8, "WT_MIN_BLOCKS": 1}],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()),
)
def test_warptile_configurations(backend, config):
    """The tile sizes the benchmark tries are correct too (edges of the bigger tiles included)."""
    for M, N, K in ((131, 259, 37), (520, 260, 48)):  # edges; interior blocks with full k-tiles
        A, B = operands(M, N, K, seed=3)
        assert_product(sgemm.sgemm_warptile(A, B, config=config), A, B)


def test_out_buffer_and_shape_checks(backend):
    from kernels.runtime import empty, to_device

    A, B = operands(70, 90, 33, seed=1)
    C = empty((70, 90))
    assert sgemm.sgemm_warptile(to_device(A), to_device(B), out=C) is C
    assert_product(C.get(), A, B)
    with pytest.raises(ValueError, match="inner dimensions"):
        sgemm.sgemm_naive(A, B[:-1])
    with pytest.raises(ValueError, match="out has shape"):
        sgemm.sgemm_naive(A, B, out=np.empty((90, 70), np.float32))


def test_reference_and_counts():
    A, B = operands(5, 4, 3, seed=0)
    np.testing.assert_allclose(sgemm.reference(A, B), A.astype(np.float64) @ B.astype(np.float64))
    assert sgemm.flops(2, 3, 4) == 48
    assert sgemm.min_bytes(2, 3, 4) == 4 * (8 + 12 + 6)
    assert [v.launcher for v in versions(sgemm.KERNELS).values()] == [getattr(sgemm, f"sgemm_{n}") for n in VERSIONS]


# --------------------------------------------------------------------------- version 8: tiles for the shape, split-K


@pytest.mark.parametrize("config", list(sgemm.SPLITK_CONFIGS))
@pytest.mark.parametrize("splits", [1, 3])
def test_splitk_every_tile_and_slicing(backend, config, splits):
    """Each tile of version 8, whole K and K in slices (a last slice shorter than the others), with a bias."""
    M, N, K = 131, 10 if config == "128x16" else 70, 83  # K: 6 k-tiles of 16, the last partial
    A, B = operands(M, N, K, seed=splits)
    bias = np.linspace(-1, 1, N).astype(np.float32)
    C = sgemm.sgemm_splitk(A, B, plan={"config": config, "splits": splits})
    assert_product(C, A, B)
    C = sgemm.sgemm_splitk(A, B, bias=bias, plan={"config": config, "splits": splits})
    assert_product(C - bias, A, B)


def test_splitk_is_deterministic_on_device_buffers(backend):
    """The slices are added in a fixed order: two runs give the same bits."""
    from kernels.runtime import empty, to_device

    A, B = operands(40, 12, 300, seed=5)
    Ad, Bd = to_device(A), to_device(B)
    plan = sgemm.sgemm_plan(40, 12, 300, sms=4)
    assert plan["config"] == "128x16" and plan["splits"] > 1
    first, second = empty((40, 12)), empty((40, 12))
    sgemm.sgemm_splitk(Ad, Bd, out=first, plan=plan)
    sgemm.sgemm_splitk(Ad, Bd, out=second, plan=plan)
    assert_product(first.get(), A, B)
    np.testing.assert_array_equal(first.get(), second.get())


def test_plans_at_the_books_shapes():
    """On 132 multiprocessors (an H100): the L-Softmax layer's skinny products split K, the MLP's
    forward keeps version 7's tiles, its weight gradient (long K, few tiles) is split."""
    logits = sgemm.sgemm_plan(4096, 10, 512, sms=132)
    assert logits["config"] == "128x16" and logits["tiles"] == 32 and logits["splits"] == 8
    weight_grad = sgemm.sgemm_plan(512, 10, 4096, sms=132)
    assert weight_grad["config"] == "128x16" and weight_grad["splits"] * weight_grad["tiles"] >= 132
    input_grad = sgemm.sgemm_plan(4096, 512, 10, sms=132)
    assert input_grad == {"config": "64x64", "tiles": 512, "splits": 1, "tiles_per_split": 1}
    assert sgemm.sgemm_plan(4096, 1024, 1024, sms=132)["splits"] == 1
    mlp_dw = sgemm.sgemm_plan(1024, 1024, 4096, sms=132)
    assert mlp_dw["config"] == "128x128" and mlp_dw["splits"] == 4
    assert sgemm.sgemm_plan(1024, 1024, 1024, sms=132)["config"] == "64x64"  # K short: smaller tiles, no slices


@pytest.mark.parametrize("config", list(sgemm.SPLITK_CONFIGS))
def test_splitk_with_a_given_transposed(backend, config):
    """WT_A_KM: A passed as A^T (K x M), every tile, K in slices, M not a multiple of 4 (checked loads) and
    a multiple (interior float4 loads)."""
    for M, N, K in ((131, 10 if config == "128x16" else 70, 83), (128, 16 if config == "128x16" else 128, 64)):
        A, B = operands(M, N, K, seed=M)
        C = sgemm.sgemm_splitk(np.ascontiguousarray(A.T), B, a_transposed=True, plan={"config": config, "splits": 2})
        assert_product(C, A, B)


def test_splitk_bad_input():
    A, B = operands(8, 8, 8, seed=0)
    with pytest.raises(ValueError, match="plan\\['config'\\]"):
        sgemm.sgemm_splitk(A, B, plan={"config": "7x7", "splits": 1})
    with pytest.raises(ValueError, match="plan\\['splits'\\]"):
        sgemm.sgemm_splitk(A, B, plan={"config": "64x64", "splits": 2})  # K = 8 is one k-tile
    with pytest.raises(ValueError, match="bias"):
        sgemm.sgemm_splitk(A, B, bias=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="inner dimensions"):
        sgemm.sgemm_splitk(np.zeros((5, 8), np.float32), B, a_transposed=True)  # A^T is 5 x 8: K = 5, not 8


def test_transpose_and_fully_connected_products(backend):
    """The one transpose kernel, and the dense layer's three products built on it and the GEMMs."""
    rng = np.random.default_rng(2)
    A = rng.standard_normal((37, 70)).astype(np.float32)
    np.testing.assert_array_equal(sgemm.transpose(A), A.T)
    X = rng.standard_normal((45, 33)).astype(np.float32)
    W = rng.standard_normal((20, 33)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    dY = rng.standard_normal((45, 20)).astype(np.float32)
    Y = sgemm.fc_forward(X, W, b).get()
    assert_product(Y - b, X, W.T)
    assert_product(sgemm.fc_forward(X, W).get(), X, W.T)
    assert_product(sgemm.fc_backward_input(dY, W).get(), dY, W)
    assert_product(sgemm.fc_backward_weight(dY, X).get(), dY.T, X)
    with pytest.raises(ValueError, match="A must be a matrix"):
        sgemm.transpose(np.zeros(3, np.float32))
