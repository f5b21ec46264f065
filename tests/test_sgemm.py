"""Every version of kernels/sgemm.cu computes C = A B, for sizes that are no multiple of any tile.

Runs on the current backend (marker ``backend``): the CPU emulator under ``make test``, the GPU
under ``make test-gpu``.  Sizes stay between 1 and 131 so the emulator takes seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import sgemm

pytestmark = pytest.mark.backend

# (M, N, K): square tile multiples, odd sizes across every tile (32, 64, 128), a single row or
# column, K smaller than one k-tile, K not a multiple of 4 (no float4 loads), skinny shapes.
SHAPES = [(64, 64, 64), (130, 67, 91), (1, 129, 5), (33, 1, 200), (131, 130, 9), (128, 128, 3), (7, 100, 129)]
VERSIONS = [name for name, _ in sgemm.VERSIONS]


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
    C = sgemm.LAUNCHERS[version](A, B)
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
    assert [n for n, _ in sgemm.VERSIONS] == list(sgemm.LAUNCHERS)
