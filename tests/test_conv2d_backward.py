"""The backward kernels of kernels/conv2d_backward.cu: references, kernels, and the gradient checker."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import conv2d, conv2d_backward as cb
from kernels.tools.gradcheck import check_gradients

pytestmark = pytest.mark.backend

SHAPES = [
    (1, 1, 5, 5, 1, 1),
    (2, 3, 7, 6, 4, 3),
    (1, 5, 19, 21, 7, 5),
    (3, 2, 17, 18, 9, 2),
    (1, 6, 14, 14, 16, 5),
    (2, 16, 5, 5, 20, 5),  # a C5-like layer: 1 x 1 outputs
]


def data(N, C, H, W, M, K, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((N, C, H, W)) + 0.3).astype(np.float32)
    Wf = (rng.standard_normal((M, C, K, K)) + 0.1).astype(np.float32)
    dY = (rng.standard_normal((N, M, H - K + 1, W - K + 1)) + 0.2).astype(np.float32)
    return X, Wf, dY


def assert_within(got, expected, scale, rtol=1e-5):
    assert got.shape == expected.shape
    err = np.abs(np.asarray(got, np.float64) - expected)
    assert np.all(err <= rtol * scale + 1e-6), f"max error {err.max()} at {np.unravel_index(err.argmax(), err.shape)}"


def test_references_match_the_loops():
    X, Wf, dY = data(2, 3, 7, 6, 4, 3)
    loops = np.stack([cb.backward_input_sequential(dY[n], Wf, 7, 6) for n in range(2)])
    np.testing.assert_allclose(cb.backward_input_reference(dY, Wf), loops, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(cb.backward_weight_reference(X, dY), cb.backward_weight_sequential(X, dY, 3),
                               rtol=1e-10, atol=1e-10)


def test_references_pass_the_gradient_checker():
    """The float64 references are the exact gradients of conv2d.forward_reference."""
    X, Wf, _ = data(2, 2, 6, 5, 3, 3)
    b = np.linspace(-1, 1, 3)
    report = check_gradients(
        conv2d.forward_reference,
        lambda X, Wf, b, dY: (cb.backward_input_reference(dY, Wf), cb.backward_weight_reference(X, dY),
                              cb.backward_bias_reference(dY)),
        [X, Wf, b], names=["X", "W", "b"], rtol=1e-6)
    report.raise_if_failed()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_backward_input(backend, shape):
    X, Wf, dY = data(*shape)
    scale = cb.backward_input_reference(np.abs(dY), np.abs(Wf))
    assert_within(cb.backward_input(dY, Wf, X.shape), cb.backward_input_reference(dY, Wf), scale)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("version", list(cb.WEIGHT_VERSIONS))
def test_backward_weight(backend, version, shape):
    X, Wf, dY = data(*shape)
    K = shape[-1]
    scale = cb.backward_weight_reference(np.abs(X), np.abs(dY))
    assert_within(cb.WEIGHT_VERSIONS[version](X, dY, K), cb.backward_weight_reference(X, dY), scale)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_backward_bias(backend, shape):
    _, _, dY = data(*shape)
    scale = np.abs(dY).astype(np.float64).sum(axis=(0, 2, 3))
    assert_within(cb.backward_bias(dY), cb.backward_bias_reference(dY), scale)


@pytest.mark.parametrize("shape", [(1, 1, 4, 4, 1, 2), (2, 3, 6, 5, 2, 3), (1, 2, 7, 7, 3, 5)],
                         ids=lambda s: "x".join(map(str, s)))
def test_kernels_pass_the_gradient_checker(backend, shape):
    """Central differences of the float64 forward pass against the backward kernels, and the adjoint test."""
    X, Wf, _ = data(*shape, seed=3)
    b = np.linspace(-0.5, 0.5, shape[4])
    K = shape[-1]

    def vjp(X, Wf, b, dY):
        dY32 = dY.astype(np.float32)
        return (cb.backward_input(dY32, Wf, X.shape), cb.backward_weight(X, dY32, K), cb.backward_bias(dY32))

    report = check_gradients(conv2d.forward_reference, vjp, [X, Wf, b], names=["X", "W", "b"],
                             rtol=2e-4, atol=2e-5, adjoint_rtol=1e-4)
    report.raise_if_failed()


def test_backward_input_is_a_convolution_with_the_transposed_filters(backend):
    """dX = dY padded by K - 1, convolved (by the forward kernel) with maps swapped and filters rotated."""
    X, Wf, dY = data(2, 3, 8, 7, 4, 3, seed=5)
    padded = np.pad(dY, ((0, 0), (0, 0), (2, 2), (2, 2)))
    via_forward = conv2d.forward_naive(padded, cb.transposed_filters(Wf))
    np.testing.assert_allclose(cb.backward_input(dY, Wf, X.shape), via_forward, rtol=1e-5, atol=1e-5)
