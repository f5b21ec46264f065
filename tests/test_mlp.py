"""Fully connected layers, activations, softmax/cross-entropy, LayerNorm and the MLP built from them, on the current
backend."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.dense import activations, fully_connected as fc, layernorm, sgd, softmax
from kernels.models import mlp
from kernels.tools.gradcheck import check_gradients

pytestmark = pytest.mark.backend

# (samples, in_features, out_features): 1x1x1, odd sizes, one tile, one past a tile, the digits layers.
FC_SHAPES = [(1, 1, 1), (3, 5, 7), (16, 16, 16), (17, 33, 10), (37, 64, 32), (5, 100, 3)]


def randn(rng, *shape, mean=0.3):
    return (rng.standard_normal(shape) + mean).astype(np.float32)


def fc_data(n, k, m, seed=0):
    rng = np.random.default_rng(seed)
    return randn(rng, n, k), randn(rng, m, k), randn(rng, m), randn(rng, n, m)


def assert_close_products(got, expected, a, b, rtol=1e-5):
    """Products summed in float32: compare against the sum of |terms| (|a| @ |b|), which bounds the rounding."""
    scale = np.abs(np.asarray(a, np.float64)) @ np.abs(np.asarray(b, np.float64))
    err = np.abs(np.asarray(got, np.float64) - expected)
    assert got.shape == expected.shape
    assert np.all(err <= rtol * scale + 1e-6), f"max error {err.max()} (scale {scale.max()})"


@pytest.mark.parametrize("n, k, m", FC_SHAPES)
@pytest.mark.parametrize("version", ["naive", "tiled", "gemm"])
def test_fc_forward(backend, version, n, k, m):
    X, W, b, _ = fc_data(n, k, m)
    got = fc.FORWARDS[version](X, W, b)
    assert_close_products(got - b, fc.forward_reference(X, W, b) - b, X, W.T)


@pytest.mark.parametrize("k, m", [(1, 1), (5, 7), (64, 32), (100, 3), (130, 129)])
def test_fc_forward_matvec(backend, k, m):
    rng = np.random.default_rng(k * m)
    W, b, x = randn(rng, m, k), randn(rng, m), randn(rng, k)
    got = fc.forward_matvec(W, b, x)
    expected = fc.forward_reference(x[None], W, b)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n, k, m", FC_SHAPES)
def test_fc_backward(backend, n, k, m):
    X, W, _, dY = fc_data(n, k, m, seed=1)
    assert_close_products(fc.backward_input(dY, W), fc.backward_input_reference(dY, W), dY, W)
    assert_close_products(fc.backward_weight(dY, X), fc.backward_weight_reference(dY, X), dY.T, X)
    db = fc.backward_bias(dY)
    np.testing.assert_allclose(db, fc.backward_bias_reference(dY), rtol=1e-5, atol=1e-5 * n)


@pytest.mark.parametrize("n, k, m", [(3, 4, 5), (17, 6, 2)])
def test_fc_backward_by_central_differences_and_adjoints(backend, n, k, m):
    X, W, b, _ = fc_data(n, k, m, seed=2)
    report = check_gradients(
        fc.forward_reference,
        lambda X, W, b, dY: (fc.backward_input(dY, W), fc.backward_weight(dY, X), fc.backward_bias(dY)),
        [X, W, b], names=["X", "W", "b"], rtol=1e-4, atol=1e-5,
    )
    assert report.ok, str(report)


@pytest.mark.parametrize("name", activations.NAMES)
@pytest.mark.parametrize("count", [1, 255, 256, 257, 1000])
def test_activations(backend, name, count):
    rng = np.random.default_rng(count)
    z = (3 * rng.standard_normal(count)).astype(np.float32)
    dY = randn(rng, count)
    y = activations.forward(name, z)
    np.testing.assert_allclose(y, activations.forward_reference(name, z), rtol=1e-5, atol=1e-6)
    saved = z if activations.SAVES[name] == "input" else y
    np.testing.assert_allclose(activations.backward(name, saved, dY),
                               activations.backward_reference(name, saved, dY), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", activations.NAMES)
def test_activation_gradients(backend, name):
    rng = np.random.default_rng(7)
    z = rng.standard_normal((4, 5))
    z[np.abs(z) < 0.05] += 0.1  # keep away from ReLU's kink, where the derivative does not exist

    def vjp(z, w):
        saved = z if activations.SAVES[name] == "input" else activations.forward(name, z)
        return activations.backward(name, saved, w)

    report = check_gradients(lambda z: activations.forward_reference(name, z), vjp, [z], rtol=1e-4, atol=1e-6)
    assert report.ok, str(report)


@pytest.mark.parametrize("n, c", [(1, 2), (7, 10), (128, 10), (129, 3), (300, 17)])
def test_softmax_and_cross_entropy(backend, n, c):
    rng = np.random.default_rng(n)
    Z = (4 * rng.standard_normal((n, c))).astype(np.float32)
    labels = rng.integers(0, c, n).astype(np.int32)
    expected = softmax.softmax_reference(Z)
    np.testing.assert_allclose(softmax.softmax_naive(Z), expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(softmax.softmax_stable(Z), expected, rtol=1e-5, atol=1e-7)
    probs, loss = softmax.cross_entropy_forward(Z, labels)
    np.testing.assert_allclose(probs, expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(loss, softmax.cross_entropy_reference(Z, labels), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(softmax.cross_entropy_backward(probs, labels),
                               softmax.cross_entropy_backward_reference(Z, labels), rtol=1e-5, atol=1e-7 / n)


def test_large_scores_break_the_naive_softmax_only(backend):
    Z = np.array([[100.0, 90.0, 0.0], [1000.0, 0.0, -1000.0]], np.float32)
    labels = np.array([1, 2], np.int32)
    assert np.isnan(softmax.softmax_naive(Z)).any()
    np.testing.assert_allclose(softmax.softmax_stable(Z), softmax.softmax_reference(Z), atol=1e-7)
    _, loss = softmax.cross_entropy_forward(Z, labels)
    np.testing.assert_allclose(loss, [10.0000454, 2000.0], rtol=1e-6)
    assert np.isfinite(loss).all()


@pytest.mark.parametrize("n, c", [(1, 1), (7, 10), (129, 33), (40, 300)])
def test_layernorm_matches_float64_also_for_a_mean_far_above_the_spread(backend, n, c):
    """Rows of spread 1 around means up to 1000 (where mean(x^2) - mean^2 would be rounding), and a constant row
    (variance 0: eps alone keeps the result finite): float32 against float64 on the scale of |x| / sigma."""
    rng = np.random.default_rng(c)
    X = (rng.standard_normal((n, c)) + rng.choice([0.0, 30.0, 1000.0], (n, 1))).astype(np.float32)
    X[0] = X[0, 0]
    gamma, beta = randn(rng, c, mean=1.0), randn(rng, c)
    expected = layernorm.layernorm_reference(X, gamma, beta)
    got = layernorm.layernorm_forward(X, gamma, beta)
    X64 = X.astype(np.float64)
    inv_std = 1 / np.sqrt(X64.var(axis=1, keepdims=True) + layernorm.EPS)
    spread = np.abs(X64 - X64.mean(axis=1, keepdims=True)) + np.abs(X64).mean(axis=1, keepdims=True)
    scale = np.abs(gamma) * inv_std * spread
    assert np.all(np.abs(got - expected) <= 1e-5 * scale + 1e-5 * np.abs(beta) + 1e-7)


def test_cross_entropy_gradient_by_central_differences(backend):
    rng = np.random.default_rng(8)
    Z = rng.standard_normal((6, 4))
    labels = rng.integers(0, 4, 6).astype(np.int32)

    def mean_loss(Z, labels):
        return np.asarray(softmax.cross_entropy_reference(Z, labels).mean())

    def vjp(Z, labels, w):
        probs, _ = softmax.cross_entropy_forward(Z, labels)
        return float(w) * softmax.cross_entropy_backward(probs, labels), None

    report = check_gradients(mean_loss, vjp, [Z, labels], names=["Z", "labels"], rtol=1e-4, atol=1e-6)
    assert report.ok, str(report)


@pytest.mark.parametrize("n, k, m", [(1, 1, 1), (17, 33, 10), (37, 64, 32)])
def test_fc_backward_on_the_gemm(backend, n, k, m):
    """The dense layer's two backward products on the GEMM chapter's kernels (NumPy in, NumPy out)."""
    X, W, _, dY = fc_data(n, k, m, seed=2)
    assert_close_products(fc.backward_input_gemm(dY, W), fc.backward_input_reference(dY, W), dY, W)
    assert_close_products(fc.backward_weight_gemm(dY, X), fc.backward_weight_reference(dY, X), dY.T, X)
    with pytest.raises(ValueError, match="b must hold"):
        fc.forward_gemm(X, W, np.zeros(m + 1, np.float32))


@pytest.mark.parametrize("count", [1, 255, 256, 257, 2080])
def test_sgd_update(backend, count):
    rng = np.random.default_rng(count)
    param, grad = randn(rng, count), randn(rng, count)
    expected = sgd.sgd_update_reference(param, grad, 0.25)
    np.testing.assert_allclose(sgd.sgd_update(param.copy(), grad, 0.25), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("activation, forward", [("relu", "naive"), ("tanh", "naive"), ("relu", "gemm"),
                                                 ("relu", mlp.FASTEST["forward"])])
def test_mlp_steps_agree_with_numpy(backend, activation, forward):
    X_train, X_test, y_train, y_test = mlp.load_digits_split()
    start = mlp.init_params([64, 16, 10], seed=3)
    kernel_net = mlp.KernelMLP(start, activation=activation, forward=forward)
    numpy_net = mlp.NumpyMLP(start, activation=activation)
    runs = [mlp.train(net, X_train, y_train, X_test[:50], y_test[:50], epochs=1, batch_size=100,
                      learning_rate=0.5, seed=9, steps_per_epoch=4) for net in (kernel_net, numpy_net)]
    for (Wk, bk), (Wn, bn) in zip(kernel_net.parameters(), numpy_net.parameters()):
        np.testing.assert_allclose(Wk, Wn, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(bk, bn, rtol=1e-4, atol=1e-5)
    assert abs(runs[0].train_loss[0] - runs[1].train_loss[0]) < 1e-4
    assert runs[0].test_accuracy == runs[1].test_accuracy
    # The parameters moved: four steps changed them by more than rounding.
    assert max(np.abs(W - W0).max() for (W, _), (W0, _) in zip(kernel_net.parameters(), start)) > 1e-3


@pytest.mark.backend
@pytest.mark.parametrize("kernels", [{}, mlp.FASTEST], ids=["teaching", "fastest"])
def test_a_step_queues_the_launches_the_chapter_counts(backend, monkeypatch, kernels):
    """The chapter's 15 launches of a 64-64-10 step (3 forward, 2 for the loss, 6 backward, 4 updates), every
    one of them queued: none waits for its kernel before the step's one wait."""
    from kernels.runtime.module import Kernel
    from kernels.runtime.queueing import queueing

    made = []
    launch_prepared = Kernel.launch_prepared
    monkeypatch.setattr(Kernel, "launch_prepared", lambda self, *a, **k: (made.append((self.name, queueing())),
                                                                          launch_prepared(self, *a, **k))[1])
    X_train, _, y_train, _ = mlp.load_digits_split()
    model = mlp.KernelMLP(mlp.init_params([64, 64, 10], seed=0), **kernels)
    loss, predictions = model.train_step(X_train[:8], y_train[:8], 0.2)
    assert len(made) == 15 and all(queued for _, queued in made), made
    assert np.isfinite(loss) and predictions.shape == (8,)
    forward = {name for name, _ in made[:1]}
    assert forward == {"fc_forward_tiled" if kernels else "fc_forward_naive"}
