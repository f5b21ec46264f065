"""Capsule prediction u_hat = W u and its two gradients, every version, on the current backend."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernels.capsules import capsule_prediction as cp
from kernels.capsules import capsule_prediction_backward as cb
from kernels.runtime.versions import versions
from kernels.tools.gradcheck import check_gradients

pytestmark = pytest.mark.backend

# (batch, in_caps, in_dim, out_caps, out_dim): every shape of {4, 8}^5, as the original op was tested ...
POW2_SHAPES = list(itertools.product((4, 8), repeat=5))
# ... and shapes that break assumptions: batch 1, odd sizes, rows not a multiple of 4, in_dim not a multiple
# of 4, more samples than one batch tile (64) or one gradient tile (128), CapsNet's in_dim and out_dim.
ODD_SHAPES = [(1, 1, 1, 1, 1), (1, 7, 3, 5, 3), (3, 5, 8, 3, 5), (2, 3, 5, 7, 2), (67, 3, 8, 10, 16),
              (130, 2, 4, 3, 4), (5, 6, 12, 2, 6), (2, 9, 16, 3, 8)]


def capsule_data(shape, seed=0):
    batch, in_caps, in_dim, out_caps, out_dim = shape
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((batch, in_caps, in_dim)).astype(np.float32)
    W = rng.standard_normal((in_caps, out_caps, out_dim, in_dim)).astype(np.float32)
    G = rng.standard_normal((batch, in_caps, out_caps, out_dim)).astype(np.float32)
    return u, W, G


def assert_close(got, expected, terms):
    """A float32 sum of ``terms`` products of unit normals: allow rounding that grows with the sum's length."""
    assert got.shape == expected.shape, (got.shape, expected.shape)
    tol = 1e-5 * (terms ** 0.5) * (np.abs(expected).max() + 1.0)
    err = np.abs(np.asarray(got, np.float64) - expected).max()
    assert err <= tol, f"max error {err} > {tol}"


def versions_for(shape):
    _, _, in_dim, out_caps, out_dim = shape
    return [v for v in versions(cp.KERNELS) if cp.runs_version(v, in_dim, out_caps, out_dim)]


@pytest.mark.parametrize("shape", POW2_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward_against_loop_pow2(backend, shape):
    u, W, _ = capsule_data(shape)
    expected = cp.forward_loop_reference(u, W)
    for version in versions(cp.KERNELS):  # every {4, 8} shape is vectorisable
        assert_close(versions(cp.KERNELS)[version].launcher(u, W), expected, shape[2])


@pytest.mark.parametrize("shape", ODD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward_odd_shapes(backend, shape):
    u, W, _ = capsule_data(shape, seed=1)
    expected = cp.forward_reference(u, W)
    for version in versions_for(shape):
        assert_close(versions(cp.KERNELS)[version].launcher(u, W), expected, shape[2])
    assert_close(cp.forward(u, W), expected, shape[2])


def test_loop_reference_is_the_definition():
    u, W, _ = capsule_data((2, 3, 4, 5, 6))
    np.testing.assert_allclose(cp.forward_loop_reference(u, W), cp.forward_reference(u, W), rtol=1e-12, atol=1e-12)
    # One element by hand: u_hat[b, i, j, d] = sum_k W[i, j, d, k] u[b, i, k].
    assert cp.forward_reference(u, W)[1, 2, 3, 4] == pytest.approx(float(W[2, 3, 4] @ u[1, 2].astype(np.float64)))


def test_vectorized_refuses_unaligned_rows(backend):
    u, W, _ = capsule_data((2, 3, 3, 5, 3))
    with pytest.raises(ValueError, match="multiples of 4"):
        cp.forward_vectorized(u, W)
    with pytest.raises(ValueError, match="multiples of 4"):
        cp.forward_streaming(u, W)


# Version 5 with explicit launch shapes: (shape, capsules per block, batch tile, blocks).  A last run with
# fewer capsules than the others, a last batch tile with fewer samples, one capsule or one sample per
# piece, a tile larger than the batch, fewer blocks than pieces (each block takes several, reusing its
# shared memory), in_dim 4, 12 and 16.
STREAMING_CASES = [((67, 5, 8, 10, 16), 2, 16, None), ((67, 5, 8, 10, 16), 2, 16, 5), ((9, 7, 4, 3, 4), 3, 4, 1),
                   ((5, 6, 12, 2, 6), 4, 1, 3), ((3, 4, 16, 3, 8), 1, 64, None), ((130, 3, 8, 1, 4), 8, 50, 2),
                   ((1, 1, 4, 1, 4), None, None, None)]


@pytest.mark.parametrize("shape, capsules, tile, blocks", STREAMING_CASES, ids=lambda c: str(c))
def test_streaming_launch_shapes(backend, shape, capsules, tile, blocks):
    u, W, _ = capsule_data(shape, seed=8)
    out = np.full((shape[0], shape[1], shape[3], shape[4]), np.nan, np.float32)
    cp.forward_streaming(u, W, out=out, capsules_per_block=capsules, batch_tile=tile, blocks=blocks)
    assert_close(out, cp.forward_reference(u, W), shape[2])


def test_streaming_launch_shape_choice():
    """Blocks of at most STREAMING_THREADS threads, one piece of work per block unless fewer are asked for."""
    digitcaps = cp.streaming_launch(128, 1152, 8, 10, 16)
    tile = cp.STREAMING_BATCH_TILE
    assert digitcaps == {"block": (40, 8), "grid": 144 * (128 // tile), "batch_tile": tile, "shared": tile * 8 * 8 * 4}
    assert cp.streaming_launch(128, 1152, 8, 10, 16, blocks=264)["grid"] == 264
    tiny = cp.streaming_launch(1, 1, 4, 1, 4)
    assert tiny == {"block": (1, 1), "grid": 1, "batch_tile": 1, "shared": 16}
    big = cp.streaming_launch(4096, 1152, 16, 10, 16, batch_tile=4096)
    assert big["shared"] <= cp.STREAMING_MAX_SHARED and big["block"][0] * big["block"][1] <= cp.STREAMING_THREADS


def test_streaming_refuses_rows_longer_than_a_block(backend):
    """Rows of more than STREAMING_THREADS quads go to version 4, also through ``forward``."""
    shape = (2, 2, 4, 1, 4 * cp.STREAMING_THREADS + 4)
    u, W, _ = capsule_data(shape)
    with pytest.raises(ValueError, match="at most"):
        cp.forward_streaming(u, W)
    assert not cp.runs_version("streaming", 4, 1, shape[4])
    assert_close(cp.forward(u, W), cp.forward_reference(u, W), shape[2])


def test_forward_checks_shapes():
    u, W, _ = capsule_data((2, 3, 4, 5, 6))
    with pytest.raises(ValueError):
        cp.forward_naive(u[:, :2], W)


def test_forward_writes_every_output(backend):
    """A kernel that skips outputs would leave the NaNs of ``out`` in place."""
    shape = (67, 3, 8, 10, 16)
    u, W, _ = capsule_data(shape)
    for version in versions(cp.KERNELS):
        out = np.full((67, 3, 10, 16), np.nan, np.float32)
        versions(cp.KERNELS)[version].launcher(u, W, out=out)
        assert np.isfinite(out).all(), version


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.tuples(st.integers(1, 70), st.integers(1, 6), st.integers(1, 9), st.integers(1, 6), st.integers(1, 9)))
def test_forward_generated_shapes(backend, shape):
    u, W, _ = capsule_data(shape, seed=sum(shape))
    expected = cp.forward_reference(u, W)
    for version in versions_for(shape):
        assert_close(versions(cp.KERNELS)[version].launcher(u, W), expected, shape[2])


# --------------------------------------------------------------------------- gradients


GRAD_SHAPES = [(1, 1, 1, 1, 1), (4, 4, 8, 4, 4), (3, 5, 3, 2, 5), (130, 2, 8, 3, 4), (2, 3, 4, 10, 16), (5, 2, 16, 3, 3)]


@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_grad_input_versions(backend, shape):
    u, W, G = capsule_data(shape, seed=2)
    expected = cb.grad_input_reference(G, W)
    terms = shape[3] * shape[4]
    assert_close(cb.grad_input_naive(G, W), expected, terms)
    assert_close(cb.grad_input_shared_weights(G, W), expected, terms)


@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_grad_weight_versions(backend, shape):
    u, W, G = capsule_data(shape, seed=3)
    expected = cb.grad_weight_reference(G, u)
    assert_close(cb.grad_weight_naive(G, u), expected, shape[0])
    assert_close(cb.grad_weight_register_blocked(G, u), expected, shape[0])


@pytest.mark.parametrize("shape", GRAD_SHAPES + [(33, 2, 3, 5, 3), (65, 3, 4, 7, 1)], ids=lambda s: "x".join(map(str, s)))
def test_fused_gradients(backend, shape):
    """Version 5 computes both gradients from one pass over G, on tiles of 32 samples."""
    u, W, G = capsule_data(shape, seed=6)
    du, dW = cb.grad_fused(G, W, u)
    assert_close(du, cb.grad_input_reference(G, W), shape[3] * shape[4])
    assert_close(dW, cb.grad_weight_reference(G, u), shape[0])


@pytest.mark.parametrize("version", ["naive", "fast"])
@pytest.mark.parametrize("shape", [(3, 2, 4, 3, 4), (2, 3, 3, 2, 5)], ids=lambda s: "x".join(map(str, s)))
def test_gradients_by_finite_differences_and_adjoint(backend, shape, version):
    """Both gradients against central differences of the float64 forward, and <J v, w> = <v, J^T w>."""
    u, W, _ = capsule_data(shape, seed=4)
    grad_input = cb.grad_input_naive if version == "naive" else cb.grad_input_shared_weights
    grad_weight = cb.grad_weight_naive if version == "naive" else cb.grad_weight_register_blocked
    report = check_gradients(
        lambda u, W: cp.forward_reference(u, W),
        lambda u, W, G: (grad_input(G.astype(np.float32), W), grad_weight(G.astype(np.float32), u)),
        [u, W], names=["u", "W"], rtol=1e-4, atol=1e-5)
    report.raise_if_failed()
    if version == "fast":  # version 5, both gradients at once
        fused = check_gradients(
            lambda u, W: cp.forward_reference(u, W),
            lambda u, W, G: cb.grad_fused(G.astype(np.float32), W, u),
            [u, W], names=["u", "W"], rtol=1e-4, atol=1e-5)
        fused.raise_if_failed()


def test_gradcheck_catches_a_wrong_gradient(backend):
    """The check above can fail: a weight gradient that forgets the batch sum is rejected."""
    u, W, _ = capsule_data((3, 2, 4, 3, 4), seed=5)
    report = check_gradients(
        lambda u, W: cp.forward_reference(u, W),
        lambda u, W, G: (cb.grad_input_reference(G, W),
                         cb.grad_weight_reference(G[:1], u[:1])),
        [u, W], names=["u", "W"], rtol=1e-4, atol=1e-5)
    assert not report.ok


def test_forward_of_the_fast_path_matches_forward(backend):
    """``forward`` picks the streaming kernel when it can and the register-blocked one otherwise."""
    for shape in [(3, 4, 8, 10, 16), (3, 4, 3, 5, 3)]:
        u, W, _ = capsule_data(shape)
        assert_close(cp.forward(u, W), cp.forward_reference(u, W), shape[2])


@pytest.mark.gpu
def test_every_version_at_the_digitcaps_shape():
    """CapsNet's DigitCaps layer (batch 128, 1152 x 8 -> 10 x 16): many blocks, a grid-stride loop that
    takes more than one turn (the naive grid is capped at 65535 blocks), and both gradients."""
    shape = (128, 1152, 8, 10, 16)
    u, W, G = capsule_data(shape, seed=7)
    u_hat = cp.forward_reference(u, W)
    for version in versions(cp.KERNELS):
        assert_close(versions(cp.KERNELS)[version].launcher(u, W), u_hat, shape[2])
    du = cb.grad_input_reference(G, W)
    assert_close(cb.grad_input_naive(G, W), du, 160)
    assert_close(cb.grad_input_shared_weights(G, W), du, 160)
    dW = cb.grad_weight_reference(G, u)
    assert_close(cb.grad_weight_naive(G, u), dW, 128)
    assert_close(cb.grad_weight_register_blocked(G, u), dW, 128)
    du_fused, dW_fused = cb.grad_fused(G, W, u)
    assert_close(du_fused, du, 160)
    assert_close(dW_fused, dW, 128)
