"""The perceptron kernels on shapes drawn by hypothesis (block edges included)."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kernels.dense import perceptron as P  # noqa: E402

pytestmark = pytest.mark.backend

rows = st.one_of(st.integers(1, 3000), st.sampled_from([255, 256, 257, 511, 512, 513]))
SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(n=rows, d=st.integers(1, 20), seed=st.integers(0, 2**31 - 1))
def test_gradients_and_their_sums_on_generated_shapes(backend, n, d, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, d)) + 0.5).astype(np.float32)
    t = (rng.random(n) < 0.5).astype(np.float32)
    params = (rng.standard_normal(d + 1) / np.sqrt(d)).astype(np.float32)
    np.testing.assert_allclose(P.forward_sigmoid(x, params), P.forward_sigmoid_reference(x, params), rtol=1e-5, atol=1e-7)
    grads = P.sample_gradients(x, t, params)
    np.testing.assert_allclose(grads, P.sample_gradients_reference(x, t, params), rtol=1e-4, atol=1e-6)
    expected = P.gradient_sum_reference(grads)
    scale = np.abs(grads).astype(np.float64).sum(axis=0)
    for reduce in P.GRADIENT_SUMS.values():
        assert np.all(np.abs(reduce(grads) - expected) <= 1e-5 * scale + 1e-6)
