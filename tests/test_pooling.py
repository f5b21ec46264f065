"""The pooling kernels of kernels/conv/pooling.cu against their NumPy references, on the current backend."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.conv import pooling
from kernels.tools.gradcheck import check_gradients

pytestmark = pytest.mark.backend

# (N, C, H, W, pool): even and odd maps (a dropped last row/column), batch 1, pool 1, 2 and 3.
SHAPES = [(1, 1, 2, 2, 2), (2, 3, 7, 6, 2), (1, 5, 28, 28, 2), (3, 16, 10, 11, 2), (2, 4, 9, 10, 3), (1, 2, 5, 3, 1)]
IDS = ["x".join(map(str, s)) for s in SHAPES]


def data(N, C, H, W, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((N, C, H, W)) + 0.2).astype(np.float32)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_forward(backend, shape):
    *dims, pool = shape
    X = data(*dims)
    np.testing.assert_array_equal(pooling.max_pool(X, pool), pooling.max_pool_reference(X, pool).astype(np.float32))
    np.testing.assert_allclose(pooling.avg_pool(X, pool), pooling.avg_pool_reference(X, pool), rtol=1e-5, atol=1e-6)
    b = np.linspace(-1, 1, dims[1]).astype(np.float32)
    np.testing.assert_allclose(pooling.subsample_bias_sigmoid(X, b, pool),
                               pooling.subsample_bias_sigmoid_reference(X, b, pool), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_backward(backend, shape):
    *dims, pool = shape
    X = data(*dims, seed=1)
    dY = data(*pooling.pooled_shape(X.shape, pool), seed=2)
    np.testing.assert_allclose(pooling.max_pool_backward(X, dY, pool),
                               pooling.max_pool_backward_reference(X, dY, pool), rtol=0, atol=0)
    np.testing.assert_allclose(pooling.avg_pool_backward(dY, X.shape, pool),
                               pooling.avg_pool_backward_reference(dY, X.shape, pool), rtol=1e-6, atol=1e-7)


def test_max_pool_backward_ties_go_to_the_first_maximum(backend):
    X = np.zeros((1, 1, 2, 4), np.float32)
    X[0, 0, 1, 1] = 1.0
    X[0, 0, 0, 1] = 1.0  # the window (0..1, 0..1) has two maxima: the first, row-major, wins
    dY = np.array([[[[5.0, 7.0]]]], np.float32)
    dX = pooling.max_pool_backward(X, dY, 2)
    expected = np.zeros_like(X)
    expected[0, 0, 0, 1] = 5.0
    expected[0, 0, 0, 2] = 7.0  # an all-zero window: its first pixel
    np.testing.assert_array_equal(dX, expected)


def test_max_pool_backward_overwrites_the_whole_output(backend):
    """Pixels in dropped rows/columns and non-maxima get 0 even if dX held garbage."""
    X = data(1, 2, 5, 5, seed=3)
    dY = data(1, 2, 2, 2, seed=4)
    dX = np.full(X.shape, np.nan, np.float32)
    pooling.max_pool_backward(X, dY, 2, out=dX)
    assert np.isfinite(dX).all()
    assert (dX[:, :, 4, :] == 0).all() and (dX[:, :, :, 4] == 0).all()


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_gradient_checker(backend, kind):
    X = data(2, 2, 5, 6, seed=7).astype(np.float64)
    if kind == "max":
        report = check_gradients(lambda X: pooling.max_pool_reference(X, 2),
                                 lambda X, dY: pooling.max_pool_backward(X, dY.astype(np.float32), 2), [X],
                                 names=["X"], rtol=1e-5, atol=1e-6)
    else:
        report = check_gradients(lambda X: pooling.avg_pool_reference(X, 2),
                                 lambda X, dY: pooling.avg_pool_backward(dY.astype(np.float32), X.shape, 2), [X],
                                 names=["X"], rtol=1e-5, atol=1e-6)
    report.raise_if_failed()
