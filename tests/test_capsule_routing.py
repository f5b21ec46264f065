"""Squash, routing by agreement and the DigitCaps layer built from the book's kernels, on the current backend."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.capsules import capsule_prediction as cp
from kernels.capsules import capsule_routing as cr
from kernels.tools.gradcheck import check_gradients

pytestmark = pytest.mark.backend

# (batch, in_caps, out_caps, out_dim): batch 1, odd sizes, one output capsule, CapsNet's out_dim.
ROUTING_SHAPES = [(1, 1, 1, 1), (2, 5, 3, 4), (3, 7, 10, 16), (1, 9, 2, 5), (4, 3, 1, 3)]


def u_hat_data(shape, seed=0, scale=0.3):
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


@pytest.mark.parametrize("shape", ROUTING_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_routing_steps(backend, shape):
    rng = np.random.default_rng(1)
    u_hat = u_hat_data(shape)
    logits = (3 * rng.standard_normal(shape[:3])).astype(np.float32)
    c = cr.softmax(logits)
    np.testing.assert_allclose(c, cr.softmax_reference(logits), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(c.sum(axis=-1), 1.0, rtol=1e-5)
    s = cr.weighted_sum(c, u_hat)
    np.testing.assert_allclose(s, cr.weighted_sum_reference(c, u_hat), rtol=1e-5, atol=1e-6)
    v = cr.squash(s)
    np.testing.assert_allclose(v, cr.squash_reference(s), rtol=1e-5, atol=1e-7)
    updated = logits.copy()
    cr.agreement(u_hat, v, updated)
    np.testing.assert_allclose(updated, logits + cr.agreement_reference(u_hat, v), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", ROUTING_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_route_matches_reference(backend, shape):
    u_hat = u_hat_data(shape, seed=2, scale=1.0)
    v, c, _ = cr.route(u_hat)
    v_ref, c_ref = cr.routing_reference(u_hat)
    np.testing.assert_allclose(v, v_ref, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(c, c_ref, rtol=1e-4, atol=1e-6)


def test_squash_keeps_direction_and_bounds_length(backend):
    s = np.array([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0], [1e-3, 0.0, 0.0], [100.0, 0.0, 0.0]], np.float32)
    v = cr.squash(s)
    assert np.all(v[0] == 0.0)  # zero stays zero, without NaN
    assert np.linalg.norm(v[1]) == pytest.approx(25 / 26, rel=1e-6)  # |s|^2 / (1 + |s|^2)
    np.testing.assert_allclose(v[1] / np.linalg.norm(v[1]), [0.6, 0.8, 0.0], rtol=1e-6)
    assert 0.0 < np.linalg.norm(v[2]) < 1e-5 and np.linalg.norm(v[3]) < 1.0


def test_softmax_is_safe_for_large_logits(backend):
    logits = np.array([[1000.0, 0.0, 1000.0]], np.float32)
    np.testing.assert_allclose(cr.softmax(logits), [[0.5, 0.0, 0.5]], atol=1e-7)


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 16), (5, 1)], ids=str)
def test_squash_backward_by_gradcheck(backend, shape):
    s = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    report = check_gradients(cr.squash_reference, lambda s, g: cr.squash_backward(s, g.astype(np.float32)),
                             [s], names=["s"], rtol=1e-4, atol=1e-6)
    report.raise_if_failed()


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 5, 3, 2)], ids=str)
def test_routed_layer_backward_by_gradcheck(backend, shape):
    """DigitCaps' backward with the last coupling coefficients c held constant: v = squash(sum_i c u_hat)."""
    batch, in_caps, out_caps, out_dim = shape
    in_dim = 4
    rng = np.random.default_rng(4)
    layer = cr.DigitCaps(in_caps, in_dim, out_caps, out_dim, seed=5)
    u = rng.standard_normal((batch, in_caps, in_dim)).astype(np.float32)
    layer.forward(u)
    c = layer.c.astype(np.float64)

    def f(u, W):
        return cr.squash_reference(cr.weighted_sum_reference(c, cp.forward_reference(u, W)))

    def vjp(u, W, g):
        layer.forward(u.astype(np.float32))
        layer.W = W.astype(np.float32)
        layer.c = c.astype(np.float32)
        du = layer.backward(g)
        return du, layer.grad_W

    report = check_gradients(f, vjp, [u, layer.W.copy()], names=["u", "W"], rtol=2e-4, atol=1e-6)
    report.raise_if_failed()


def test_margin_loss_gradient():
    rng = np.random.default_rng(6)
    v = 0.4 * rng.standard_normal((4, 10, 16))
    labels = np.array([0, 3, 9, 3])
    report = check_gradients(lambda v: np.array(cr.margin_loss(v, labels)[0]),
                             lambda v, w: w * cr.margin_loss(v, labels)[1], [v], names=["v"], rtol=1e-5, atol=1e-8)
    report.raise_if_failed()


def test_a_few_training_steps_reduce_the_loss(backend):
    x, y, _, _ = cr.load_digits_split()
    x, y = x[:64], y[:64]
    primary = cr.PrimaryCaps(64, 8, 8)
    digitcaps = cr.DigitCaps(8, 8, 10, 8, seed=2)
    losses = []
    for _ in range(6):
        v = digitcaps.forward(primary.forward(x))
        loss, grad_v = cr.margin_loss(v, y)
        primary.backward(digitcaps.backward(grad_v))
        digitcaps.W -= 2.0 * digitcaps.grad_W
        primary.P -= 2.0 * primary.grad_P
        primary.bias -= 2.0 * primary.grad_bias
        losses.append(loss)
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.9 * losses[0], losses
