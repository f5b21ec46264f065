"""Large-margin softmax: the margin function, every kernel version against float64, gradient checks,
numerical care, the known failures of published implementations, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernels.lsoftmax import lsoftmax as L
from kernels.lsoftmax import pitfalls as P
from kernels.gemm import sgemm_hopper
from kernels.runtime.versions import versions
from kernels.tools.gradcheck import check_gradients

MARGINS = (1, 2, 3, 4)
LAMBDAS = (0.0, 0.5, 1000.0)
# (N, C, D): a single sample and class, odd sizes, C a multiple of 4 (the fused kernels' float4 path)
# and not, more rows than the emulator's grid (grid-stride), rows longer than a block of the fused kernel.
SHAPES = [(1, 1, 3), (5, 3, 7), (9, 12, 16), (37, 10, 5), (6, 300, 4)]


def layer_data(N, C, D, seed=0, edge_labels=True):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((N, D)) + 0.3).astype(np.float32)
    W = rng.standard_normal((C, D)).astype(np.float32)
    labels = rng.integers(0, C, N).astype(np.int32)
    if edge_labels and N >= 2:
        labels[0], labels[-1] = 0, C - 1  # the first and last class
    return X, W, labels


def logit_scale(X, W):
    """The size float32 rounding works on in F = X W^T and the blend: |x| |W| per row, at least."""
    return np.linalg.norm(X, axis=1)[:, None] * np.linalg.norm(W, axis=1).max()


def distance_to_kinks(X, W, labels, m):
    b, a = L.norms(X, W, labels)
    c = L.cosine((X.astype(np.float64) * W[labels].astype(np.float64)).sum(axis=1), a, b)
    thresholds = np.cos(np.arange(1, m) * np.pi / m)
    return np.abs(c[:, None] - thresholds[None, :]).min() if m > 1 else 1.0


# ---------------------------------------------------------------------------------- the maths (NumPy only)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 8])
def test_psi_polynomial_is_the_definition_and_decreasing(m):
    theta = np.linspace(0, np.pi, 2001)
    psi, dpsi = L.psi_reference(np.cos(theta), m)
    np.testing.assert_allclose(psi, L.psi_of_theta(theta, m), atol=1e-9)
    assert np.all(np.diff(psi) < 1e-12), "psi must decrease with theta (the margin is monotonic)"
    assert psi[0] == pytest.approx(1.0) and psi[-1] == pytest.approx(1 - 2 * m)
    # dpsi/dc by central differences in c, away from the kinks
    c = np.cos(theta[1:-1])
    kinks = np.cos(np.arange(1, m) * np.pi / m)
    far = np.all(np.abs(c[:, None] - kinks[None, :]) > 1e-3, axis=1) if m > 1 else np.ones_like(c, bool)
    h = 1e-7
    numeric = (L.psi_reference(c + h, m)[0] - L.psi_reference(c - h, m)[0]) / (2 * h)
    np.testing.assert_allclose(dpsi[1:-1][far], numeric[far], rtol=1e-5, atol=1e-5 * m * m)


@pytest.mark.parametrize("m", range(1, 9))
def test_binomial_expansion_and_thresholds_agree_with_cos_m_theta(m):
    theta = (np.arange(1000) + 0.5) / 1000 * np.pi  # no point exactly on a threshold j pi / m
    np.testing.assert_allclose(L.cos_mtheta_binomial(np.cos(theta), m), np.cos(m * theta), atol=1e-11)
    np.testing.assert_array_equal(L.margin_k(np.cos(theta), m), np.floor(theta * m / np.pi))


def test_lambda_schedule():
    assert L.lambda_schedule(0, base=1000) == 1000
    assert L.lambda_schedule(100, base=1000, gamma=0.12, power=1) == pytest.approx(1000 / 13)
    assert L.lambda_schedule(10**6, base=1000, lambda_min=5) == 5


# ---------------------------------------------------------------------------------- forward, every version


@pytest.mark.backend
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_caffe_forward_patches_only_the_label_logit(backend, shape):
    X, W, labels = layer_data(*shape)
    F = X @ W.T
    for m in MARGINS:
        for lam in LAMBDAS:
            got, saved = L.forward_caffe(F, X, W, labels, m, lam)
            expected = L.patch_reference(F, labels, *L.norms(X, W, labels), m, lam)
            tol = 2e-6 * m * m * logit_scale(X, W)
            assert np.all(np.abs(got - expected) <= tol), (m, lam, np.abs(got - expected).max())
            others = np.ones(F.shape, bool)
            others[np.arange(len(F)), labels] = False
            np.testing.assert_array_equal(got[others], F[others])  # untouched, bit for bit


@pytest.mark.backend
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fused_forward_loss_and_stats(backend, shape):
    X, W, labels = layer_data(*shape, seed=1)
    F = X @ W.T
    for m in MARGINS:
        for lam in LAMBDAS:
            loss, stats = L.fused_forward(F, X, W, labels, m, lam)
            Fp = L.patch_reference(F, labels, *L.norms(X, W, labels), m, lam)
            expected = L.cross_entropy(Fp, labels)
            tol = 4e-6 * m * m * logit_scale(X, W).max()
            assert np.abs(loss - expected).max() <= tol, (m, lam)
            b, a = L.norms(X, W, labels)
            np.testing.assert_allclose(stats[:, 1], b, rtol=1e-5)
            np.testing.assert_allclose(stats[:, 2], a, rtol=1e-5)


@pytest.mark.backend
@pytest.mark.parametrize("version", list(versions(L.KERNELS)))
def test_whole_layer_every_version(backend, version):
    X, W, labels = layer_data(11, 13, 9, seed=2)
    for m, lam in [(1, 0.0), (2, 1000.0), (3, 0.5), (4, 0.0)]:
        loss, dX, dW = L.layer_gradients(X, W, labels, m, lam, version)
        assert loss == pytest.approx(L.loss_reference(X, W, labels, m, lam).mean(), rel=1e-5, abs=1e-5)
        dX_ref, dW_ref = L.layer_backward_reference(X, W, labels, m, lam)
        assert np.abs(dX - dX_ref).max() <= 1e-5 * np.abs(dX_ref).max() * m * m
        assert np.abs(dW - dW_ref).max() <= 1e-5 * np.abs(dW_ref).max() * m * m


@pytest.mark.backend
def test_epilogue_forward_over_several_tiles(backend):
    """Version 4 with rows and columns spread over several 128 x 128 GEMM tiles (partial last tiles too)."""
    X, W, labels = layer_data(130, 300, 5, seed=12)
    for m, lam in [(1, 0.0), (3, 2.0)]:
        Fp, loss, stats = L.gemm_margin_forward(X, W, labels, m, lam)
        expected = L.logits_reference(X, W, labels, m, lam)
        assert np.abs(Fp - expected).max() <= 1e-5 * m * m * logit_scale(X, W).max()
        np.testing.assert_allclose(loss, L.cross_entropy(expected, labels), rtol=1e-5, atol=1e-5)
        fused_loss, fused_stats = L.fused_forward(X @ W.T, X, W, labels, m, lam)
        np.testing.assert_allclose(stats, fused_stats, rtol=1e-5, atol=1e-6)


@pytest.mark.backend
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(N=st.integers(1, 40), C=st.integers(1, 70), D=st.integers(1, 20), m=st.integers(1, 6),
       lam=st.sampled_from([0.0, 0.3, 50.0]), seed=st.integers(0, 2**16))
def test_generated_shapes_fused_and_caffe(backend, N, C, D, m, lam, seed):
    X, W, labels = layer_data(N, C, D, seed=seed)
    F = X @ W.T
    norms = L.norms(X, W, labels)
    expected = L.patch_reference(F, labels, *norms, m, lam)
    tol = 4e-6 * m * m * logit_scale(X, W).max()
    got, _ = L.forward_caffe(F, X, W, labels, m, lam)
    assert np.abs(got - expected).max() <= tol
    loss, _ = L.fused_forward(F, X, W, labels, m, lam)
    assert np.abs(loss - L.cross_entropy(expected, labels)).max() <= 2 * tol


@pytest.mark.backend
@pytest.mark.parametrize("C", [2048, 2050])
def test_fused_kernels_with_long_rows(backend, C):
    """Rows long enough for the fused kernels' largest block, with (2048) and without (2050) the float4 path."""
    X, W, labels = layer_data(3, C, 4, seed=C)
    loss, dX, dW = L.layer_gradients(X, W, labels, 3, 0.5, "fused")
    assert loss == pytest.approx(L.loss_reference(X, W, labels, 3, 0.5).mean(), rel=1e-5)
    dX_ref, dW_ref = L.layer_backward_reference(X, W, labels, 3, 0.5)
    assert np.abs(dX - dX_ref).max() <= 1e-5 * np.abs(dX_ref).max()
    assert np.abs(dW - dW_ref).max() <= 1e-5 * np.abs(dW_ref).max()
    assert L.fused_threads(C) == L.THREADS


# ---------------------------------------------------------------------------------- gradient checks


def _away_from_kinks(N, C, D, m, seed):
    for s in range(seed, seed + 50):
        X, W, labels = layer_data(N, C, D, seed=s)
        if distance_to_kinks(X, W, labels, m) > 1e-2:
            return X, W, labels
    raise AssertionError("no data away from the kinks")


@pytest.mark.backend
@pytest.mark.parametrize("m, lam", [(1, 0.0), (2, 0.0), (3, 2.0), (4, 0.0), (4, 1000.0)])
def test_margin_backward_kernels_gradcheck(backend, m, lam):
    """Both Caffe-style loops and the factored GEMM form, against central differences of the patched logits."""
    X, W, labels = _away_from_kinks(4, 5, 6, m, seed=10 * m)

    def patched(X, W):
        return L.logits_reference(X, W, labels, m, lam)

    for backward in (L.backward_naive, L.backward_factored):
        def vjp(X, W, G, backward=backward):
            F = (X.astype(np.float32) @ W.astype(np.float32).T)
            _, saved = L.forward_caffe(F, X.astype(np.float32), W.astype(np.float32), labels, m, lam)
            return backward(G.astype(np.float32), X.astype(np.float32), W.astype(np.float32), labels, saved, m, lam)

        report = check_gradients(patched, vjp, [X, W], names=["X", "W"], rtol=2e-4, atol=2e-5 * m * m)
        report.raise_if_failed()


@pytest.mark.backend
@pytest.mark.parametrize("m, lam", [(1, 0.0), (2, 0.0), (3, 0.5), (4, 0.0), (4, 1000.0)])
def test_fused_layer_gradcheck(backend, m, lam):
    """Margin + softmax + cross-entropy, per-sample losses weighted by a random upstream gradient."""
    X, W, labels = _away_from_kinks(5, 6, 4, m, seed=100 + 10 * m)
    report = check_gradients(lambda X, W: L.loss_reference(X, W, labels, m, lam),
                             lambda X, W, w: L.layer_vjp(X, W, labels, m, lam, w.astype(np.float32)),
                             [X, W], names=["X", "W"], rtol=2e-4, atol=2e-5 * m * m)
    report.raise_if_failed()


def test_gradcheck_catches_a_backward_without_the_lambda_blend():
    """The check can fail: a backward that forgets to divide the margin's derivative by 1 + lambda."""
    X, W, labels = _away_from_kinks(4, 5, 6, 2, seed=7)
    lam = 1.0

    def wrong(X, W, G):
        dX, dW = L.margin_backward_reference(G, X, W, labels, 2, 0.0)  # lambda forgotten
        return dX, dW

    report = check_gradients(lambda X, W: L.logits_reference(X, W, labels, 2, lam), wrong, [X, W],
                             names=["X", "W"], rtol=1e-5, atol=1e-7)
    assert not report.ok


# ---------------------------------------------------------------------------------- numerical care


@pytest.mark.backend
@pytest.mark.parametrize("m", [1, 2, 3, 4, 7])
def test_device_psi_exact_at_and_near_the_ends(backend, m):
    """c = +-1 exactly, one float32 step inside, and just outside (rounding): psi and psi' finite and right."""
    one = np.float32(1)
    c = np.array([1, np.nextafter(one, 0), 1 - 2**-12, -1, np.nextafter(-one, 0), -1 + 2**-12,
                  np.nextafter(one, 2), np.nextafter(-one, -2), 0.3, -0.7], np.float32)
    psi, dpsi = L.psi_values(c, m)
    psi_ref, dpsi_ref = L.psi_reference(c.astype(np.float64), m)
    assert np.isfinite(psi).all() and np.isfinite(dpsi).all()
    np.testing.assert_allclose(psi, psi_ref, atol=1e-5 * m * m)
    np.testing.assert_allclose(dpsi, dpsi_ref, atol=2e-4 * m ** 4)
    assert dpsi[0] == pytest.approx(m * m) and dpsi[3] == pytest.approx(m * m)


@pytest.mark.backend
def test_large_margin_uses_the_stable_recurrence(backend):
    """At m = 40 the binomial expansion's terms reach 2^20 and float32 keeps two digits; the recurrence keeps six."""
    m = 40
    c = np.linspace(-1, 1, 401).astype(np.float32)
    truth = np.cos(m * np.arccos(c.astype(np.float64)))
    binomial, _ = L.cos_mtheta_kernel(c, m)
    psi, _ = L.psi_values(c, m)
    k = L.margin_k(c.astype(np.float64), m)
    chebyshev = np.where(k % 2 == 1, -1, 1) * (psi + 2 * k)  # undo the sign and the -2k: T_m(c)
    assert np.abs(binomial - truth).max() > 1e-2
    assert np.abs(chebyshev - truth).max() < 2e-5


def test_sin_squared_cancellation_near_zero_and_pi():
    """sin^2 = 1 - c^2 in float32 near c = +-1 subtracts nearly equal numbers; (1 - c)(1 + c) does not."""
    for sign in (1, -1):
        c = sign * (np.float32(1) - np.arange(1, 2000, dtype=np.float32) * np.float32(2**-24))
        exact = (1 - c.astype(np.float64)) * (1 + c.astype(np.float64))
        naive = np.float32(1) - c * c
        factored = (np.float32(1) - c) * (np.float32(1) + c)
        assert np.max(np.abs(naive - exact) / exact) > 1e-5
        assert np.max(np.abs(factored - exact) / exact) < 1e-6


@pytest.mark.backend
@pytest.mark.parametrize("version", list(versions(L.KERNELS)))
def test_feature_parallel_to_its_weight_rounds_cos_past_one(backend, version):
    """x = 3 W_y makes F / (|x| |W|) round to just above 1 in float32: clamped, the layer stays exact."""
    X, W, labels = layer_data(4, 5, 8, seed=3)
    X[1] = 3 * W[labels[1]]
    X[2] = -2 * W[labels[2]]
    for m in (2, 4):
        loss, dX, dW = L.layer_gradients(X, W, labels, m, 0.0, version)
        assert loss == pytest.approx(L.loss_reference(X, W, labels, m, 0.0).mean(), rel=1e-5)
        dX_ref, dW_ref = L.layer_backward_reference(X, W, labels, m, 0.0)
        assert np.isfinite(dX).all() and np.isfinite(dW).all()
        assert np.abs(dX - dX_ref).max() <= 1e-4 * np.abs(dX_ref).max()


# ---------------------------------------------------------------------------------- known failures of published code


@pytest.mark.backend
@pytest.mark.parametrize("version", list(versions(L.KERNELS)))
def test_all_zero_feature_row_gives_no_nan(backend, version):
    X, W, labels = layer_data(4, 5, 6, seed=4)
    X[2] = 0
    assert np.isnan(P.cosine_without_epsilon(0.0, np.linalg.norm(W[labels[2]]), 0.0))  # the published failure
    loss, dX, dW = L.layer_gradients(X, W, labels, 3, 0.0, version)
    assert np.isfinite(loss) and np.isfinite(dX).all() and np.isfinite(dW).all()
    assert loss == pytest.approx(L.loss_reference(X, W, labels, 3, 0.0).mean(), rel=1e-5)
    dX_ref, dW_ref = L.layer_backward_reference(X, W, labels, 3, 0.0)
    assert np.abs(dW - dW_ref).max() <= 1e-5 * np.abs(dW_ref).max()


@pytest.mark.backend
def test_derivative_at_cos_plus_minus_one_is_finite(backend):
    c = np.array([1.0, -1.0], np.float32)
    for m in (2, 3, 4):
        assert np.isnan(P.psi_derivative_via_acos(c, m)[0])  # the published failure: sin(0) / sin(0)
        _, dpsi = L.psi_values(c, m)
        np.testing.assert_allclose(dpsi, [m * m, m * m], rtol=1e-6)


@pytest.mark.backend
def test_backward_uses_the_lambda_of_its_forward(backend):
    """Published: the floor applied in the forward only.  Here lambda is computed once from the step and kept."""
    step = 10_000
    lam_fwd, lam_bwd = P.lambda_forward_backward(step, lambda_min=5.0)
    assert lam_fwd == 5.0 and lam_bwd < 1.0  # the two passes disagree once lambda reaches its floor
    X, W, labels = _away_from_kinks(4, 5, 6, 4, seed=20)
    forward = lambda X, W: L.loss_reference(X, W, labels, 4, lam_fwd)  # noqa: E731
    published = check_gradients(forward, lambda X, W, w: L.layer_backward_reference(X, W, labels, 4, lam_bwd, w),
                                [X, W], names=["X", "W"], rtol=1e-4, atol=1e-6)
    assert not published.ok
    layer = L.LargeMarginSoftmax(4)
    layer.forward(X, W, labels, L.lambda_schedule(step, lambda_min=5.0))
    dX, dW = layer.backward()
    dX_ref, dW_ref = L.layer_backward_reference(X, W, labels, 4, lam_fwd)
    assert np.abs(dX - dX_ref).max() <= 1e-5 * np.abs(dX_ref).max()


@pytest.mark.backend
def test_non_label_logits_are_not_scaled_by_the_blend(backend):
    X, W, labels = layer_data(6, 7, 5, seed=5)
    F = X @ W.T
    norms = L.norms(X, W, labels)
    others = np.ones(F.shape, bool)
    others[np.arange(len(F)), labels] = False
    wrong = P.blend_every_logit(F, labels, *norms, 2, 3.0)
    assert not np.allclose(wrong[others], F[others])  # the published failure
    got, _ = L.forward_caffe(F, X, W, labels, 2, 3.0)
    np.testing.assert_array_equal(got[others], F[others])
    loss, _ = L.fused_forward(F, X, W, labels, 2, 3.0)
    np.testing.assert_allclose(loss, L.cross_entropy(L.patch_reference(F, labels, *norms, 2, 3.0), labels), rtol=1e-5)


@pytest.mark.backend
def test_loss_is_exact_where_the_clamped_loss_sticks_at_87(backend):
    """A sample whose label probability underflows: -log(max(p, FLT_MIN)) says 87.34, the truth is larger."""
    X, W, labels = layer_data(3, 4, 6, seed=6)
    X[0] = -40 * W[labels[0]] / np.linalg.norm(W[labels[0]])  # far on the wrong side: a huge margin loss
    X[0] += 25 * W[(labels[0] + 1) % 4] / np.linalg.norm(W[(labels[0] + 1) % 4])
    m = 4
    Fp = L.logits_reference(X, W, labels, m, 0.0)
    truth = L.cross_entropy(Fp, labels)
    assert truth[0] > 150
    assert P.clamped_softmax_loss(Fp, labels)[0] == pytest.approx(-np.log(L.FLT_MIN), rel=1e-6)  # 87.3365
    loss, _ = L.fused_forward(X @ W.T, X, W, labels, m, 0.0)
    assert loss[0] == pytest.approx(truth[0], rel=1e-5)
    layer = L.LargeMarginSoftmax(m, "caffe")
    assert layer.forward(X, W, labels, 0.0) == pytest.approx(truth.mean(), rel=1e-5)


# ---------------------------------------------------------------------------------- bad input, before any launch


@pytest.fixture
def no_launch(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a kernel was launched before the arguments were checked")

    monkeypatch.setattr(L, "module", refuse)
    monkeypatch.setattr(L._sgemm, "sgemm", refuse)
    monkeypatch.setattr(L, "transpose", refuse)


@pytest.mark.parametrize("change, match", [
    (lambda a: a.update(labels=np.array([0, 5, 1], np.int32)), r"labels\[1\] = 5 is out of range"),
    (lambda a: a.update(labels=np.array([0, -1, 1], np.int32)), r"labels\[1\] = -1"),
    (lambda a: a.update(labels=np.array([0.0, 1.0, 1.0])), "labels must be integers"),
    (lambda a: a.update(labels=np.array([0, 1], np.int32)), "labels must be a vector of 3"),
    (lambda a: a.update(m=0), "margin m must be at least 1"),
    (lambda a: a.update(m=2.5), "margin m must be a whole number"),
    (lambda a: a.update(m=True), "margin m must be a whole number"),
    (lambda a: a.update(lam=-0.5), "lam .* must be >= 0"),
    (lambda a: a.update(lam=float("nan")), "lam .* finite"),
    (lambda a: a.update(W=np.zeros((5, 4), np.float32)), "X has 6 features per sample but W has rows of 4"),
    (lambda a: a.update(X=np.zeros((6, 3), np.float32).T), "X is not C-contiguous"),
    (lambda a: a.update(W=np.zeros((6, 5), np.float32).T), "W is not C-contiguous"),
    (lambda a: a.update(labels=np.array([0, 9, 1, 9, 2, 9], np.int32)[::2]), "labels is not C-contiguous"),
    (lambda a: a.update(X=np.zeros(18, np.float32)), "X must be a matrix"),
])
def test_bad_input_is_named_before_any_launch(no_launch, change, match):
    args = {"X": np.ones((3, 6), np.float32), "W": np.ones((5, 6), np.float32),
            "labels": np.array([0, 4, 1], np.int32), "m": 2, "lam": 1.0}
    change(args)
    with pytest.raises(ValueError, match=match):
        L.LargeMarginSoftmax(args["m"]).forward(args["X"], args["W"], args["labels"], args["lam"])
    with pytest.raises(ValueError, match=match):
        L.check_layer_inputs(args["X"], args["W"], args["labels"], args["m"], args["lam"])


def test_layer_refuses_a_bad_margin_or_version():
    with pytest.raises(ValueError, match="margin m"):
        L.LargeMarginSoftmax(0)
    with pytest.raises(ValueError, match="version must be one of"):
        L.LargeMarginSoftmax(2, version="fast")


# ---------------------------------------------------------------------------------- on a GPU, at a larger size


@pytest.mark.gpu
@pytest.mark.parametrize("version", list(versions(L.KERNELS)))
def test_layer_at_a_realistic_size_on_the_gpu(version):
    X, W, labels = layer_data(512, 1000, 128, seed=9)
    X *= 0.2
    W *= 0.2
    loss, dX, dW = L.layer_gradients(X, W, labels, 4, 1.0, version)
    assert loss == pytest.approx(L.loss_reference(X, W, labels, 4, 1.0).mean(), rel=1e-4)
    dX_ref, dW_ref = L.layer_backward_reference(X, W, labels, 4, 1.0)
    assert np.abs(dX - dX_ref).max() <= 1e-4 * np.abs(dX_ref).max()
    assert np.abs(dW - dW_ref).max() <= 1e-4 * np.abs(dW_ref).max()


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(512, 1000, 128), (300, 10, 52)], ids=["1000 classes", "10 classes"])
def test_tensor_core_layer_at_a_realistic_size_on_a_hopper_gpu(shape):
    """The layer with its three GEMMs on the tensor cores (3xTF32): as accurate as the FP32 versions; 10
    classes make the dX product's K = 10, not a multiple of 4 (A's rows copied float by float)."""
    if not sgemm_hopper.is_hopper():
        pytest.skip("the tensor-core version needs a Hopper GPU (compute capability 9.0)")
    X, W, labels = layer_data(*shape, seed=9)
    X *= 0.2
    W *= 0.2
    loss, dX, dW = L.layer_gradients(X, W, labels, 4, 1.0, L.TENSOR_CORES[0])
    assert loss == pytest.approx(L.loss_reference(X, W, labels, 4, 1.0).mean(), rel=1e-4)
    dX_ref, dW_ref = L.layer_backward_reference(X, W, labels, 4, 1.0)
    assert np.abs(dX - dX_ref).max() <= 1e-4 * np.abs(dX_ref).max()
    assert np.abs(dW - dW_ref).max() <= 1e-4 * np.abs(dW_ref).max()


@pytest.mark.backend
def test_tensor_core_layer_names_the_gpu_it_needs_elsewhere(backend):
    from kernels.runtime.errors import KernelError

    if sgemm_hopper.is_hopper():
        pytest.skip("this GPU is a Hopper: the tensor-core version runs here")
    with pytest.raises(KernelError, match="Hopper"):
        L.LargeMarginSoftmax(2, L.TENSOR_CORES[0])


# ---------------------------------------------------------------------------------- the digits experiment


def test_digits_network_learns_with_a_margin():
    from kernels.lsoftmax import digits

    run = digits.train(3, epochs=20)
    assert run.accuracy[-1] > 0.75  # 10 classes: chance is 0.1
    assert run.losses[-1] < run.losses[0]


@pytest.mark.backend
def test_kernel_layer_trains_like_the_reference(backend):
    """The last layer on the kernels and on the float64 reference: the same loss and gradients, the same step."""
    from kernels.lsoftmax import digits

    rng = np.random.default_rng(11)
    features = rng.standard_normal((32, 2)) * 5
    W = rng.standard_normal((10, 2))
    labels = rng.integers(0, 10, 32).astype(np.int32)
    for m, lam in [(1, 0.0), (4, 10.0)]:
        ref = digits.reference_layer(features, W, labels, m, lam)
        ker = digits.kernel_layer(features, W, labels, m, lam)
        assert ker[0] == pytest.approx(ref[0], rel=1e-5)
        for got, expected in zip(ker[1:], ref[1:]):
            assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()


# ------------------------------------------------------------------ the exercises' reference kernels


@pytest.mark.backend
@pytest.mark.parametrize("name", ["lsoftmax_cos_mtheta", "lsoftmax_patch_logits", "lsoftmax_margin_grad_input"])
def test_reference_kernels_solve_their_exercises(backend, name):
    """The kernels of kernels/lsoftmax/lsoftmax.cu that speed is measured against give the graded answers where the
    exercise is the chapter's problem (no margin beyond m: ``ReferenceKernel.solves``)."""
    from autograder.exercises import get_exercise

    exercise = get_exercise(name)
    reference = exercise.reference_kernel
    kernel = L.module().function(reference.kernel)
    rng = np.random.default_rng(3)
    shapes = [s for s in (*exercise.visible_shapes, *exercise.hidden_shapes) if reference.solves_shape(s)]
    assert shapes, f"{name}: no visible or hidden shape is the chapter's problem"
    for shape in shapes:
        inputs = exercise.make_inputs(shape, rng)
        expected = exercise.reference(inputs)
        scales = exercise.error_scale(inputs)
        roles = {arg.name: arg.role for arg in exercise.args}
        args, outputs = [], {}
        for arg in reference.arg_order:  # the chapter's kernel takes no margin beyond m
            if roles[arg] == "out":
                dtype = np.int32 if arg == "k_out" else np.float32
                outputs[arg] = np.full(np.shape(expected[arg]), -7, dtype)
                args.append(outputs[arg])
            else:
                args.append(inputs[arg])
        config = exercise.reference_kernel.launch(shape)
        kernel(*args, grid=config.grid, block=config.block, shared=config.shared)
        for out_name, got in outputs.items():
            tol = exercise.atol + exercise.rtol * np.broadcast_to(scales[out_name], got.shape)
            assert np.all(np.abs(got - expected[out_name]) <= tol), (shape, out_name)


@pytest.mark.backend
def test_exercise_launchers_agree_with_their_records(backend):
    """patch_logits and margin_grad_input (the records' launchers) against the records' float64 references."""
    rng = np.random.default_rng(5)
    X, W = rng.standard_normal((9, 6)).astype(np.float32), rng.standard_normal((4, 6)).astype(np.float32)
    labels = np.array([0, 3, 1, 2, 3, 0, 1, 2, 3], np.int32)
    F = (X @ W.T).astype(np.float32)
    x_norm, w_norm = np.linalg.norm(X, axis=1), np.linalg.norm(W, axis=1)
    patch = L.KERNELS["lsoftmax_patch_logits"]
    np.testing.assert_allclose(patch.launcher(F, labels, x_norm, w_norm, 3, 0.5),
                               patch.reference(F, labels, x_norm, w_norm, 3, 0.5), rtol=1e-4, atol=1e-4)
    grad = L.KERNELS["lsoftmax_margin_grad_input"]
    g = rng.standard_normal(9).astype(np.float32)
    np.testing.assert_allclose(grad.launcher(g, X, W, labels, 2, 1.0), grad.reference(g, X, W, labels, 2, 1.0),
                               rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="w_norm"):
        patch.launcher(F, labels, x_norm, w_norm[:2], 3, 0.5)
    with pytest.raises(ValueError, match="grad_target"):
        grad.launcher(g[:3], X, W, labels, 2, 1.0)
