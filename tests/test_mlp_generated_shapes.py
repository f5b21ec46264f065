"""Fully connected and softmax kernels on shapes drawn by hypothesis (edges of blocks and tiles included)."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kernels.dense import fully_connected as fc, softmax  # noqa: E402

pytestmark = pytest.mark.backend

# Sizes near the 16-wide blocks and tiles are where indexing mistakes show.
dims = st.one_of(st.integers(1, 40), st.sampled_from([15, 16, 17, 31, 32, 33, 63, 64, 65]))
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def scaled_error(got, expected, a, b, bias=0.0):
    """Worst error relative to |a| @ |b| (+ |bias|): the size float32 rounding is proportional to."""
    scale = np.abs(np.asarray(a, np.float64)) @ np.abs(np.asarray(b, np.float64)) + np.abs(bias)
    return float((np.abs(np.asarray(got, np.float64) - expected) / (scale + 1e-30)).max())


@SETTINGS
@given(n=dims, k=dims, m=dims, seed=st.integers(0, 2**31 - 1))
def test_fc_layer_on_generated_shapes(backend, n, k, m, seed):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, k)) + 0.5).astype(np.float32)
    W = (rng.standard_normal((m, k)) - 0.2).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    dY = (rng.standard_normal((n, m)) + 0.3).astype(np.float32)
    for forward in fc.FORWARDS.values():
        # The bias add rounds relative to |b| too (a GPU's fused multiply-add differs from the CPU there).
        assert scaled_error(forward(X, W, b), fc.forward_reference(X, W, b), X, W.T, b) < 1e-5
    assert scaled_error(fc.backward_input(dY, W), fc.backward_input_reference(dY, W), dY, W) < 1e-5
    assert scaled_error(fc.backward_weight(dY, X), fc.backward_weight_reference(dY, X), dY.T, X) < 1e-5
    np.testing.assert_allclose(fc.backward_bias(dY), fc.backward_bias_reference(dY), rtol=1e-5, atol=1e-5 * n)


@SETTINGS
@given(n=st.integers(1, 300), c=st.integers(1, 40), scale=st.sampled_from([1.0, 30.0, 300.0]), seed=st.integers(0, 2**31 - 1))
def test_cross_entropy_on_generated_shapes(backend, n, c, scale, seed):
    rng = np.random.default_rng(seed)
    Z = (scale * rng.standard_normal((n, c))).astype(np.float32)
    labels = rng.integers(0, c, n).astype(np.int32)
    probs, loss = softmax.cross_entropy_forward(Z, labels)
    assert np.isfinite(probs).all() and np.isfinite(loss).all()
    np.testing.assert_allclose(probs, softmax.softmax_reference(Z), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(loss, softmax.cross_entropy_reference(Z, labels), rtol=1e-5, atol=1e-5 * scale)
    np.testing.assert_allclose(softmax.cross_entropy_backward(probs, labels),
                               softmax.cross_entropy_backward_reference(Z, labels), rtol=1e-4, atol=1e-6 / n)
