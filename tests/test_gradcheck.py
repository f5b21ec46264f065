"""The gradient checker (kernels/tools/gradcheck.py) on NumPy functions: it passes right gradients and names wrong ones."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.tools.gradcheck import GradientCheckError, check_gradients


def linear(X, W, b):
    return X @ W.T + b


def linear_vjp(X, W, b, dY):
    return dY @ W, dY.T @ X, dY.sum(axis=0)


@pytest.fixture
def layer():
    rng = np.random.default_rng(1)
    return [rng.standard_normal((4, 5)), rng.standard_normal((3, 5)), rng.standard_normal(3)]


def test_right_gradients_pass(layer):
    report = check_gradients(linear, linear_vjp, layer, names=["X", "W", "b"])
    assert report.ok, str(report)
    assert [c.name for c in report.inputs] == ["X", "W", "b"]
    assert len(report.adjoints) == 3 * 3
    report.raise_if_failed()
    assert "passed" in str(report)


def test_nonlinear_function_passes():
    rng = np.random.default_rng(2)
    z = rng.standard_normal((3, 4))
    report = check_gradients(np.tanh, lambda z, w: w * (1 - np.tanh(z) ** 2), [z], rtol=1e-6)
    assert report.ok, str(report)


@pytest.mark.parametrize(
    "wrong_vjp, hint",
    [
        (lambda X, W, b, dY: (dY @ W, 2 * dY.T @ X, dY.sum(0)), "2 times the right gradient"),
        (lambda X, W, b, dY: (dY @ W, -(dY.T @ X), dY.sum(0)), "wrong sign"),
        (lambda X, W, b, dY: (dY @ W, np.zeros_like(W), dY.sum(0)), "all zeros"),
        (lambda X, W, b, dY: (dY @ W, np.vstack([dY.T[:-1] @ X, np.zeros((1, X.shape[1]))]), dY.sum(0)), "only rows [2]"),
        (lambda X, W, b, dY: (dY @ W, dY.T @ X, np.full_like(b, np.nan)), "NaN"),
    ],
)
def test_wrong_gradients_fail_with_a_hint(layer, wrong_vjp, hint):
    report = check_gradients(linear, wrong_vjp, layer, names=["X", "W", "b"])
    assert not report.ok
    text = "\n".join(report.failures)
    assert hint in text, text
    with pytest.raises(GradientCheckError, match="FAIL"):
        report.raise_if_failed()


def test_transposed_gradient_is_named():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 4))
    f = lambda X: X @ A  # noqa: E731
    report = check_gradients(f, lambda X, w: (w @ A.T).T, [rng.standard_normal((4, 4))])
    assert not report.ok
    assert "transpose" in "\n".join(report.failures)


def test_adjoint_test_with_an_exact_jvp_catches_a_wrong_transpose():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((6, 5))
    f = lambda x: A @ x  # noqa: E731
    good = check_gradients(f, lambda x, w: A.T @ w, [rng.standard_normal(5)], jvp=lambda x, vs: A @ vs[0], rtol=1e-12)
    assert good.ok and all(c.relative_error < 1e-12 for c in good.adjoints)
    bad = check_gradients(f, lambda x, w: 1.01 * (A.T @ w), [rng.standard_normal(5)], jvp=lambda x, vs: A @ vs[0])
    assert not bad.ok
    assert any(not c.passed for c in bad.adjoints)


def test_integer_inputs_are_not_differentiated():
    rng = np.random.default_rng(5)
    z = rng.standard_normal((3, 4))
    labels = np.array([0, 3, 1])
    f = lambda z, t: z[np.arange(3), t]  # noqa: E731

    def vjp(z, t, w):
        g = np.zeros_like(z)
        g[np.arange(3), t] = w
        return g, None

    report = check_gradients(f, vjp, [z, labels], names=["z", "labels"])
    assert report.ok and [c.name for c in report.inputs] == ["z"]


def test_float32_forward_is_refused():
    x = np.ones(3)
    with pytest.raises(GradientCheckError, match="float64"):
        check_gradients(lambda x: (2 * x).astype(np.float32), lambda x, w: 2 * w, [x])


def test_wrong_gradient_shape_is_refused():
    x = np.ones((2, 3))
    with pytest.raises(GradientCheckError, match="shape"):
        check_gradients(lambda x: 2 * x, lambda x, w: np.ones(5), [x])


def test_large_inputs_are_refused_with_advice():
    with pytest.raises(ValueError, match="small shapes"):
        check_gradients(lambda x: x, lambda x, w: w, [np.ones(10_000)])
