"""The perceptron kernels (kernels/dense/perceptron.cu) against their NumPy references, on the current backend."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.dense import perceptron as P
from kernels.tools.gradcheck import check_gradients

pytestmark = pytest.mark.backend

# (samples, features): one sample, sizes below, at and past one block of 256, a prime, several blocks.
SHAPES = [(1, 2), (7, 1), (255, 2), (256, 3), (257, 5), (1031, 2), (3001, 17)]


def data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, d)) + 0.5).astype(np.float32)
    params = rng.standard_normal(d + 1).astype(np.float32)
    t = (rng.random(n) < 0.5).astype(np.float32)
    return x, t, params


def test_classic_line_2x1_plus_3x2_minus_6(backend):
    params = np.array([2, 3, -6], np.float32)
    points = np.array([[3, 0], [0, 2], [1.5, 1], [3, 3], [0, 0], [1, 1], [0.5, 2]], np.float32)
    np.testing.assert_array_equal(P.classify_sign(points, params), [0, 0, 0, 1, -1, -1, 1])


@pytest.mark.parametrize("n, d", SHAPES)
def test_classify_sign(backend, n, d):
    x, _, params = data(n, d)
    got = P.classify_sign(x, params)
    z = P.weighted_sum_reference(x, params)
    clear = np.abs(z) > 1e-4  # float32 rounding may flip points within a hair of the line
    np.testing.assert_array_equal(got[clear], np.sign(z)[clear])
    assert set(np.unique(got)) <= {-1.0, 0.0, 1.0}


@pytest.mark.parametrize("n, d", SHAPES)
def test_forward_sigmoid(backend, n, d):
    x, _, params = data(n, d, seed=1)
    np.testing.assert_allclose(P.forward_sigmoid(x, params), P.forward_sigmoid_reference(x, params), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("n, d", SHAPES)
def test_sample_gradients(backend, n, d):
    x, t, params = data(n, d, seed=2)
    got = P.sample_gradients(x, t, params)
    assert got.shape == (n, d + 1)
    np.testing.assert_allclose(got, P.sample_gradients_reference(x, t, params), rtol=1e-4, atol=1e-6)


def test_sample_gradients_by_central_differences(backend):
    x, t, params = data(9, 3, seed=3)

    def errors(p):  # E_i for every sample, in float64
        return (P.forward_sigmoid_reference(x, p) - t) ** 2 / 2

    def vjp(p, w):  # sum_i w_i dE_i/dparams, from the kernel's per-sample gradients
        return w @ P.sample_gradients(x, t, p.astype(np.float32)).astype(np.float64)

    report = check_gradients(errors, vjp, [params.astype(np.float64)], names=["params"], rtol=1e-4, atol=1e-6)
    assert report.ok, str(report)


@pytest.mark.parametrize("reduction", ["atomic", "tree", "columns"])
@pytest.mark.parametrize("n, k", [(1, 3), (100, 3), (256, 2), (257, 4), (1000, 1), (4099, 3)])
def test_gradient_sums(backend, reduction, n, k):
    rng = np.random.default_rng(n + k)
    grads = (rng.standard_normal((n, k)) + 1.0).astype(np.float32)
    got = P.GRADIENT_SUMS[reduction](grads)
    expected = P.gradient_sum_reference(grads)
    scale = np.abs(grads).astype(np.float64).sum(axis=0)
    assert np.all(np.abs(got - expected) <= 1e-5 * scale + 1e-6), (got, expected)


# gradient_sum_columns folds lanes k apart and leaves the last n*k % 4 elements to one thread:
# widths below, at and past a warp, and every remainder mod 4 (a lost tail or a column folded
# into the wrong one shows up as one wrong total).
@pytest.mark.parametrize("n, k", [(5, 1), (7, 5), (33, 11), (1001, 7), (63, 32), (65, 33), (9, 40), (3, 300)])
def test_gradient_sum_columns_every_width_and_tail(backend, n, k):
    rng = np.random.default_rng(7 * n + k)
    grads = (rng.standard_normal((n, k)) + 1.0).astype(np.float32)
    got = P.gradient_sum_columns(grads)
    scale = np.abs(grads).astype(np.float64).sum(axis=0)
    assert np.all(np.abs(got - P.gradient_sum_reference(grads)) <= 1e-5 * scale + 1e-6), (got, P.gradient_sum_reference(grads))


def test_gradient_sum_tree_fills_a_device_buffer_and_zeroes_it_first(backend):
    from kernels.runtime import to_device

    grads = np.ones((300, 3), np.float32)
    total = to_device(np.full(3, 123.0, np.float32))
    P.gradient_sum_tree(grads, total)
    np.testing.assert_allclose(total.get(), [300, 300, 300])


@pytest.mark.parametrize("k", [1, 3, 255, 257, 300])
def test_update(backend, k):
    rng = np.random.default_rng(k)
    params = rng.standard_normal(k).astype(np.float32)
    total = rng.standard_normal(k).astype(np.float32)
    expected = P.update_reference(params, total, 0.3, 17)
    np.testing.assert_allclose(P.update(params.copy(), total, 0.3, 17), expected, rtol=1e-6, atol=1e-7)


def test_training_follows_the_numpy_reference_and_separates_the_clouds(backend):
    x, t = P.make_two_clouds(120, seed=4)
    start = np.array([0.1, -0.2, 0.0], np.float32)
    kernel_run = P.train(x, t, start, learning_rate=2.0, epochs=4, batch_size=32, seed=5)
    numpy_run = P.train_reference(x, t, start, learning_rate=2.0, epochs=4, batch_size=32, seed=5)
    np.testing.assert_allclose(np.array(kernel_run.params), np.array(numpy_run.params), rtol=1e-4, atol=1e-5)
    assert kernel_run.loss[-1] < 0.5 * kernel_run.loss[0]
    accuracy = np.mean((P.forward_sigmoid(x, kernel_run.params[-1]) > 0.5) == (t > 0.5))
    assert accuracy > 0.85
