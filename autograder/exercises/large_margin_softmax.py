"""Exercises of the chapter "Large-margin softmax": cos(m theta) and k, the label-logit patch, and its
gradient with respect to the features, each with a margin the chapter's kernels do not handle.

The chapter's margin is multiplicative: psi(theta) = (-1)^k cos(m theta) - 2k.  The margins of the
face-recognition losses that followed it add to the angle (ArcFace) or to the cosine (CosFace), and
InsightFace's combined margin uses all three, cos(m theta + m2) - m3.  The first two exercises add an
angular margin alpha: cos(m theta + alpha), and psi(theta) = (-1)^k cos(m theta + alpha) - 2k with k in
0..m the number of multiples of pi that m theta + alpha has passed (continuous and decreasing on
[0, pi] as the chapter's is), still without acos: cos(m theta + alpha) = cos(alpha) T_m(c) - sin(alpha)
sin(theta) U_{m-1}(c).  The gradient exercise adds a cosine margin instead, L = (lam f + a b (psi(c) - mc)) /
(1 + lam), whose gradient stays defined at c = +-1 (an angular margin's does not: cos(theta + alpha) has a
cone at theta = 0).  Where the new margin is 0 the exercise is the chapter's problem, and there the
chapter's kernel is the speed reference (``ReferenceKernel.solves``); the hidden shapes have margins.

Layouts as in ``kernels/lsoftmax/lsoftmax.cu``: features X [batch][dim], class weights
W [classes][dim], logits [batch][classes], labels int32 in 0..classes-1, all
row-major.  The margin m and the blend weight lam are part of each shape, so
hidden shapes carry hidden margins (5 and 6, which a kernel written for the
published m <= 4 formulas gets wrong).  Inputs include cos(theta) exactly at
+-1 and one float32 step outside (rounding), samples parallel and
antiparallel to their class weight, the first and last class as labels, and
dim = 1 (where cos(theta) is always +-1).  Tolerances are relative to the
size of the terms each result is made of, with room for the margin's
derivatives (up to m^4 times the rounding of cos(theta), and near c = +-1, where
sin(theta) is computed from 1 - c^2, for the rounding of sin(theta)).
"""

from __future__ import annotations

import math

import numpy as np

from kernels.lsoftmax import lsoftmax
from kernels.lsoftmax.lsoftmax import binomial_term_sizes, chebyshev, cosine, label_coefficients, norms, psi_reference

from ..exercise import Exercise, FormulaMistake, Reduction, ReferenceKernel
from ._parts import BLOCK_256, SHARED, grid_key, one_dimensional_launch


def _one_thread_per(count, what) -> dict:
    """The launch of the three exercises: ``grid`` blocks of ``block`` threads, by default one thread per
    ``count(shape)`` items."""
    return {"launch_keys": (BLOCK_256, grid_key(count, what), SHARED), "launch_config": one_dimensional_launch}


def thresholds(m: int, angle_margin: float) -> np.ndarray:
    """The values of c = cos(theta) at which m theta + angle_margin passes a multiple of pi: cos((j pi - alpha) / m),
    j = 1..m (with alpha = 0 the chapter's cos(j pi / m), and the last, cos(pi) = -1, never passed)."""
    return np.cos((np.arange(1, m + 1) * math.pi - angle_margin) / m)


def _away_from_thresholds(c: np.ndarray, m: int, angle_margin: float, rng) -> np.ndarray:
    """Move values within 1e-5 of a threshold away from it (k is ambiguous there)."""
    for t in thresholds(m, angle_margin):
        near = np.abs(c - t) < 1e-5
        c[near] = t + np.where(rng.random(int(near.sum())) < 0.5, -1e-4, 1e-4)
    return c


def angular_margin(c, m: int, angle_margin: float):
    """``(cos(m theta + alpha), k)`` in float64 for c = cos(theta) clamped to [-1, 1]: k counts the thresholds c lies
    below (how many multiples of pi m theta + alpha has passed, 0..m)."""
    c = np.clip(np.asarray(c, np.float64), -1, 1)
    k = sum((c < t).astype(np.int64) for t in thresholds(m, angle_margin))
    return np.cos(m * np.arccos(c) + angle_margin), k


def psi_with_angle(c, m: int, angle_margin: float) -> np.ndarray:
    """psi(c) = (-1)^k cos(m theta + alpha) - 2k (float64); the chapter's psi where alpha is 0."""
    value, k = angular_margin(c, m, angle_margin)
    return np.where(k % 2 == 1, -value, value) - 2 * k


def sine_rounding(c, m: int, angle_margin: float) -> np.ndarray:
    """What the float32 rounding of sin(theta) = sqrt(1 - c^2) and of c do to sin(alpha) sin(theta) U_{m-1}(c), over
    rtol: |sin(alpha)| m min(4 eps / sin(theta), 2 sqrt(eps)) / RTOL (the second bound where sin(theta) is
    itself of the order of the rounding, at c = +-1 and a step inside)."""
    c = np.clip(np.asarray(c, np.float64), -1, 1)
    eps = float(np.finfo(np.float32).eps)
    sine = np.sqrt(np.maximum(1 - c * c, 0.0))
    with np.errstate(divide="ignore"):
        spread = np.minimum(4 * eps / sine, 2 * math.sqrt(eps))
    return abs(math.sin(angle_margin)) * m * (sine + spread / RTOL)


RTOL = 1e-5  # the exercises' default rtol, which sine_rounding's bound is divided by


# ------------------------------------------------------------ 1. cos(m theta + alpha) and k


def _cos_inputs(shape, rng):
    n, m, angle = int(shape["n"]), int(shape["m"]), float(shape["angle_margin"])
    c = rng.uniform(-1, 1, n)
    c = _away_from_thresholds(c, m, angle, rng).astype(np.float32)
    specials = np.array([-1, 1, np.nextafter(np.float32(1), 2), np.nextafter(np.float32(-1), -2),
                         np.nextafter(np.float32(1), 0), np.nextafter(np.float32(-1), 0)], np.float32)
    c[: min(n, len(specials))] = specials[: min(n, len(specials))]
    c[min(n, len(specials)):] = rng.permutation(c[min(n, len(specials)):])
    return {"cos_theta": c, "cos_mtheta": None, "k_out": None, "N": n, "m": m, "angle_margin": np.float32(angle)}


def _cos_reference(inputs):
    value, k = angular_margin(inputs["cos_theta"], inputs["m"], float(inputs["angle_margin"]))
    return {"cos_mtheta": value, "k_out": k.astype(np.float64)}


def _cos_scale(inputs):
    # k is a whole number: its scale is k itself, so rtol * k < 1 leaves no room for a wrong integer.
    m, angle = inputs["m"], float(inputs["angle_margin"])
    terms = np.maximum(binomial_term_sizes(inputs["cos_theta"], m), 1.0) + sine_rounding(inputs["cos_theta"], m, angle)
    return {"cos_mtheta": terms, "k_out": _cos_reference(inputs)["k_out"]}


def _cos_shape(n, m, angle_margin):
    return {"n": n, "m": m, "angle_margin": angle_margin}


def _cos_label(shape):
    return f"n={shape['n']}, m={shape['m']}, angle_margin={shape['angle_margin']:g}"


def _cos_secret(rng, launch):
    return [_cos_shape(int(rng.integers(300, 9000)), int(rng.integers(2, 7)), float(rng.choice([0.15, 0.5, 0.9])))]


def _cos_parts(inputs):
    """(c clamped to [-1, 1], m, alpha, cos(m theta), sin(theta), U_{m-1}(c)) in float64."""
    c = np.clip(inputs["cos_theta"].astype(np.float64), -1, 1)
    m = int(inputs["m"])
    t, u = chebyshev(c, m)
    return c, m, float(inputs["angle_margin"]), t, np.sqrt(1 - c * c), u


def _cos_with_sine_term(inputs, sine_term) -> dict:
    """cos(alpha) T_m(c) - sin(alpha) ``sine_term(c, sin theta, U_{m-1}(c))``, k as it should be."""
    c, m, alpha, t, sine, u = _cos_parts(inputs)
    return {"cos_mtheta": math.cos(alpha) * t - math.sin(alpha) * sine_term(c, sine, u)}


def _k_counting(inputs, thresholds_of) -> dict:
    """k as the number of ``thresholds_of(m, alpha)`` c lies below, cos(m theta + alpha) as it should be."""
    c = np.clip(inputs["cos_theta"].astype(np.float64), -1, 1)
    k = sum((c < t).astype(np.int64) for t in thresholds_of(int(inputs["m"]), float(inputs["angle_margin"])))
    return {"k_out": np.asarray(k, np.float64)}


COS_MISTAKES = (
    FormulaMistake("sine term added",
                   "cos(m theta - alpha): the sine term added, cos(alpha) T_m(c) + sin(alpha) sin(theta) U_{m-1}(c), "
                   "where cos(m theta + alpha) subtracts it",
                   lambda inputs: _cos_with_sine_term(inputs, lambda c, sine, u: -sine * u)),
    FormulaMistake("margin inside the multiple",
                   "cos(m (theta + alpha)): the margin added to theta before the angle is multiplied by m, where it "
                   "is added after, cos(m theta + alpha) = cos(alpha) T_m(c) - sin(alpha) sin(theta) U_{m-1}(c)",
                   lambda inputs: {"cos_mtheta": np.cos(int(inputs["m"]) * (np.arccos(np.clip(
                       inputs["cos_theta"].astype(np.float64), -1, 1)) + float(inputs["angle_margin"])))}),
    FormulaMistake("sine not rooted",
                   "with sin(theta) taken as 1 - c^2, its square: sin(theta) = sqrt(1 - c^2)",
                   lambda inputs: _cos_with_sine_term(inputs, lambda c, sine, u: sine * sine * u)),
    FormulaMistake("sine of m theta without U",
                   "with sin(m theta) taken as sin(theta), without the factor U_{m-1}(c): sin(m theta) = sin(theta) "
                   "U_{m-1}(c) (the two agree only for m = 1)",
                   lambda inputs: _cos_with_sine_term(inputs, lambda c, sine, u: sine)),
    FormulaMistake("thresholds not shifted",
                   "with k counting the thresholds cos(j pi / m) of the margin-free k: with the margin they are "
                   "cos((j pi - alpha) / m), where m theta + alpha passes j pi",
                   lambda inputs: _k_counting(inputs, lambda m, alpha: thresholds(m, 0.0)[:-1])),
    FormulaMistake("last threshold missing",
                   "with k counting only the first m - 1 thresholds, as the margin-free k does: with the margin, "
                   "m theta + alpha can pass m pi too (c below cos((m pi - alpha) / m)), and k reaches m",
                   lambda inputs: _k_counting(inputs, lambda m, alpha: thresholds(m, alpha)[:-1])),
)


#: The chapter's kernels, with their own arguments (no margin beyond m).
COS_ORDER = ("cos_theta", "cos_mtheta", "k_out", "N", "m")

LSOFTMAX_COS_MTHETA = Exercise(
    name="lsoftmax_cos_mtheta",
    title="L-Softmax with an angular margin: cos(m theta + alpha) and k from cos(theta)",
    signature=("lsoftmax_cos_mtheta(const float* cos_theta, float* cos_mtheta, int* k_out, int N, int m, "
               "float angle_margin)"),
    make_inputs=_cos_inputs,
    reference=_cos_reference,
    error_scale=_cos_scale,
    formula_mistakes=COS_MISTAKES,
    visible_shapes=(_cos_shape(1000, 2, 0.0), _cos_shape(4096, 3, 0.5), _cos_shape(777, 4, 0.3), _cos_shape(10, 2, 1.0)),
    hidden_shapes=(_cos_shape(1, 2, 0.7), _cos_shape(20011, 4, 0.2), _cos_shape(5003, 5, 0.5), _cos_shape(3001, 6, 1.3),
                   _cos_shape(257, 2, 0.0), _cos_shape(4099, 3, 0.35)),
    secret_shapes=_cos_secret,
    **_one_thread_per(lambda s: s["n"], "N"),
    correctness_points=4.0,
    speed_points=1.0,
    reference_kernel=ReferenceKernel(lsoftmax.KERNELS["lsoftmax_cos_mtheta"], arg_order=COS_ORDER,
                                     solves={"angle_margin": 0.0}),
    timing_shape=_cos_shape(1 << 24, 4, 0.0),
    label=_cos_label,
    description=("For each of the N values c = cos_theta[i] (clamp it to [-1, 1] first: rounding can put it just "
                 "outside), write cos_mtheta[i] = cos(m theta + alpha), theta = acos(c) and alpha = angle_margin, and "
                 "k_out[i], the integer with m theta + alpha in [k pi, (k+1) pi] (0..m): the number of thresholds "
                 "cos((j pi - alpha)/m), j = 1..m, that c lies below. No acos is needed: cos(m theta + alpha) = "
                 "cos(alpha) T_m(c) - sin(alpha) sin(theta) U_{m-1}(c), with sin(theta) = sqrt(1 - c^2). Speed is "
                 "compared with the chapter's lsoftmax_cos_mtheta at angle_margin 0."),
)

# ------------------------------------------------------------ 2. the label-logit patch


def _layer_shape(batch, classes, m, lam, dim=None, **margin):
    """A layer's shape; ``margin`` is the exercise's margin beyond m (angle_margin, or cos_margin)."""
    sizes = {"batch": batch} if dim is None else {"batch": batch, "dim": dim}
    return {**sizes, "classes": classes, "m": m, "lam": lam, **margin}


def _layer_label(shape):
    return ", ".join(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}" for key, value in shape.items())


def _features(rng, batch, dim, classes):
    """X, W and labels with the first and last class used, and (when there is room) one sample parallel and
    one antiparallel to its class weight; |x| and |W| of different sizes (a swapped norm shows)."""
    W = (0.5 * rng.standard_normal((classes, dim)) + 0.1).astype(np.float32)
    X = (2.0 * rng.standard_normal((batch, dim)) + 0.3).astype(np.float32)
    labels = rng.integers(0, classes, batch).astype(np.int32)
    if batch >= 2:
        labels[0], labels[-1] = 0, classes - 1
    if batch >= 4:
        X[1] = 3.0 * W[labels[1]]
        X[2] = -2.5 * W[labels[2]]
    return X, W, labels


def _patch_inputs(shape, rng):
    batch, classes, m, lam = int(shape["batch"]), int(shape["classes"]), int(shape["m"]), float(shape["lam"])
    X, W, labels = _features(rng, batch, 8, classes)
    logits = (X.astype(np.float64) @ W.astype(np.float64).T).astype(np.float32)
    return {"logits": logits, "labels": labels,
            "x_norm": np.linalg.norm(X.astype(np.float64), axis=1).astype(np.float32),
            "w_norm": np.linalg.norm(W.astype(np.float64), axis=1).astype(np.float32),
            "out": None, "batch": batch, "classes": classes, "m": m, "lam": np.float32(lam),
            "angle_margin": np.float32(shape["angle_margin"])}


def _label_terms(inputs):
    """(rows, labels, f, a b, c) of the label logits, in float64."""
    rows, labels = np.arange(inputs["batch"]), inputs["labels"]
    f = inputs["logits"][rows, labels].astype(np.float64)
    a = inputs["w_norm"][labels].astype(np.float64)
    b = inputs["x_norm"].astype(np.float64)
    return rows, labels, f, a * b, cosine(f, a, b)


def _patch_reference(inputs):
    rows, labels, f, ab, c = _label_terms(inputs)
    lam = float(inputs["lam"])
    out = inputs["logits"].astype(np.float64)
    out[rows, labels] = (lam * f + ab * psi_with_angle(c, inputs["m"], float(inputs["angle_margin"]))) / (1 + lam)
    return {"out": out}


def _patch_scale(inputs):
    rows, labels, f, ab, c = _label_terms(inputs)
    m, lam, angle = inputs["m"], float(inputs["lam"]), float(inputs["angle_margin"])
    scale = np.abs(inputs["logits"].astype(np.float64))
    psi = psi_with_angle(c, m, angle)
    scale[rows, labels] = (lam * np.abs(f) + ab * (np.abs(psi) + m * m + sine_rounding(c, m, angle))) / (1 + lam)
    return {"out": scale}


def _patch_secret(rng, launch):
    return [_layer_shape(int(rng.integers(2, 300)), int(rng.integers(2, 200)), int(rng.integers(1, 7)),
                         float(rng.choice([0.0, 0.1, 10.0])), angle_margin=float(rng.choice([0.2, 0.5, 1.1])))]


def _every_logit_blended(inputs):
    out = _patch_reference(inputs)["out"]
    lam = float(inputs["lam"])
    others = np.ones(out.shape, bool)
    others[np.arange(inputs["batch"]), inputs["labels"]] = False
    out[others] = lam * inputs["logits"].astype(np.float64)[others] / (1 + lam)
    return {"out": out}


def _patch_with_psi(inputs, psi_of) -> dict:
    """The patch with psi as ``psi_of(cos(m theta + alpha), k)`` gives it."""
    rows, labels, f, ab, c = _label_terms(inputs)
    lam = float(inputs["lam"])
    value, k = angular_margin(c, inputs["m"], float(inputs["angle_margin"]))
    out = inputs["logits"].astype(np.float64)
    out[rows, labels] = (lam * f + ab * psi_of(value, k)) / (1 + lam)
    return {"out": out}


PATCH_MISTAKES = (
    FormulaMistake("every logit blended",
                   "with every logit of the row blended, lam f / (1 + lam), where only the label's logit changes: "
                   "out[i][j] is logits[i][j], unchanged, for every j other than labels[i].",
                   _every_logit_blended),
    FormulaMistake("psi without -2k",
                   "with psi = (-1)^k cos(m theta + alpha), without its - 2k: psi must fall by 2 at each multiple of "
                   "pi that m theta + alpha passes to stay continuous and decreasing.",
                   lambda inputs: _patch_with_psi(inputs, lambda value, k: np.where(k % 2 == 1, -value, value))),
    FormulaMistake("psi without the sign of k",
                   "with psi = cos(m theta + alpha) - 2k, without the (-1)^k: where k is odd the cosine's sign must "
                   "flip, psi = (-1)^k cos(m theta + alpha) - 2k.",
                   lambda inputs: _patch_with_psi(inputs, lambda value, k: value - 2 * k)),
)

#: The chapter's kernel, with its own arguments (no angular margin).
PATCH_ORDER = ("logits", "labels", "x_norm", "w_norm", "out", "batch", "classes", "m", "lam")

LSOFTMAX_PATCH_LOGITS = Exercise(
    name="lsoftmax_patch_logits",
    title="L-Softmax with an angular margin: the label's logit, blended with the margin",
    signature=("lsoftmax_patch_logits(const float* logits, const int* labels, const float* x_norm, "
               "const float* w_norm, float* out, int batch, int classes, int m, float lam, float angle_margin)"),
    make_inputs=_patch_inputs,
    reference=_patch_reference,
    error_scale=_patch_scale,
    visible_shapes=(_layer_shape(4, 3, 1, 0.0, angle_margin=0.5), _layer_shape(16, 10, 2, 0.0, angle_margin=0.0),
                    _layer_shape(33, 7, 3, 1.5, angle_margin=0.3), _layer_shape(8, 100, 4, 1000.0, angle_margin=1.0)),
    hidden_shapes=(_layer_shape(1, 1, 4, 0.0, angle_margin=0.5), _layer_shape(257, 10, 4, 0.0, angle_margin=0.0),
                   _layer_shape(3, 1000, 2, 0.25, angle_margin=1.2), _layer_shape(130, 33, 3, 0.0, angle_margin=0.35),
                   _layer_shape(50, 5, 5, 2.0, angle_margin=0.8), _layer_shape(600, 12, 6, 0.0, angle_margin=0.25)),
    secret_shapes=_patch_secret,
    **_one_thread_per(lambda s: s["batch"] * s["classes"], "batch * classes"),
    correctness_points=6.0,
    speed_points=2.0,
    formula_mistakes=PATCH_MISTAKES,
    reference_kernel=ReferenceKernel(lsoftmax.KERNELS["lsoftmax_patch_logits"], arg_order=PATCH_ORDER,
                                     solves={"angle_margin": 0.0}),
    timing_shape=_layer_shape(4096, 10000, 4, 0.0, angle_margin=0.0),
    label=_layer_label,
    description=("out is logits with one element per row changed: for sample i with label y = labels[i], "
                 "a = w_norm[y], b = x_norm[i], f = logits[i][y] and c = f / (a b) (clamped to [-1, 1]), "
                 "out[i][y] = (lam f + a b psi(c)) / (1 + lam) with psi = (-1)^k cos(m theta + alpha) - 2k, "
                 "alpha = angle_margin and k in 0..m as in exercise 1. Every other element is copied unchanged; out "
                 "is filled with NaN before the launch. Speed is compared with the chapter's lsoftmax_patch_logits "
                 "at angle_margin 0."),
)

# ------------------------------------------------------------ 3. the gradient with respect to x, with a cosine margin


RTOL_GRAD = 2e-5


def _grad_inputs(shape, rng):
    batch, dim, classes = int(shape["batch"]), int(shape["dim"]), int(shape["classes"])
    X, W, labels = _features(rng, batch, dim, classes)
    g = (rng.standard_normal(batch) + 0.5).astype(np.float32)
    return {"grad_target": g, "X": X, "W": W, "labels": labels, "grad_x": None, "batch": batch, "dim": dim,
            "classes": classes, "m": int(shape["m"]), "lam": np.float32(shape["lam"]),
            "cos_margin": np.float32(shape["cos_margin"])}


def _grad_parts(inputs):
    """X, W_y, a, b, psi, coef_w, coef_x (the cosine margin's term included), m, lam and the margin, in float64."""
    X = inputs["X"].astype(np.float64)
    W = inputs["W"].astype(np.float64)
    labels = inputs["labels"]
    b, a = norms(X, W, labels)
    c = cosine((X * W[labels]).sum(axis=1), a, b)
    m, lam, margin = inputs["m"], float(inputs["lam"]), float(inputs["cos_margin"])
    coef_w, coef_x, _ = label_coefficients(c, a, b, m, lam)
    coef_x = coef_x - a / np.maximum(b, 1e-12) * margin / (1 + lam)  # d(-a b margin)/dx = -a margin x / b
    psi, _ = psi_reference(c, m)
    return X, W[labels], a, b, psi, coef_w, coef_x, m, lam, margin


def _grad_reference(inputs):
    X, Wy, _, _, _, coef_w, coef_x, _, _, _ = _grad_parts(inputs)
    g = inputs["grad_target"].astype(np.float64)[:, None]
    return {"grad_x": g * (coef_w[:, None] * Wy + coef_x[:, None] * X)}


def _grad_slope_without_the_sign(inputs):
    """The reference with psi'(c) = m U_{m-1}(c), the (-1)^k of psi' left out (psi keeps it)."""
    X, Wy, a, b, psi, _, _, m, lam, margin = _grad_parts(inputs)
    c = np.clip(cosine((X * Wy).sum(axis=1), a, b), -1.0, 1.0)
    slope = m * chebyshev(c, m)[1]
    coef_w = (lam + slope) / (1 + lam)
    coef_x = a / np.maximum(b, 1e-12) * (psi - c * slope - margin) / (1 + lam)
    g = inputs["grad_target"].astype(np.float64)[:, None]
    return {"grad_x": g * (coef_w[:, None] * Wy + coef_x[:, None] * X)}


def _grad_with(inputs, coefficients) -> dict:
    """The gradient with the coefficients of W_y and x as ``coefficients(coef_w, coef_x, a / b, margin / (1 + lam))``
    gives them from the right ones."""
    X, Wy, a, b, _, coef_w, coef_x, _, lam, margin = _grad_parts(inputs)
    along_w, along_x = coefficients(coef_w, coef_x, a / np.maximum(b, 1e-12), margin / (1 + lam))
    g = inputs["grad_target"].astype(np.float64)[:, None]
    return {"grad_x": g * (along_w[:, None] * Wy + along_x[:, None] * X)}


GRAD_MISTAKES = (
    FormulaMistake("slope without the sign of k",
                   "with psi'(c) = m U_{m-1}(c), without the (-1)^k that psi has: where k is odd the slope's sign "
                   "is wrong -- psi'(c) = (-1)^k m U_{m-1}(c).",
                   _grad_slope_without_the_sign),
    FormulaMistake("term along x missing",
                   "with the term along W_y alone: the term along x, (a / b) (psi - c psi'(c) - cos_margin) / "
                   "(1 + lam) x, from a b through b = |x| (and the margin's), is missing.",
                   lambda inputs: _grad_with(inputs, lambda w, x, ratio, margin: (w, 0 * x))),
    FormulaMistake("norms swapped",
                   "with b / a in the coefficient of x where a / b belongs (a = |W_y|, b = |x|): d(a b)/dx = a x / b.",
                   lambda inputs: _grad_with(inputs, lambda w, x, ratio, margin: (
                       w, x / np.maximum(ratio, 1e-300) ** 2))),
    FormulaMistake("margin along W",
                   "with the cosine margin's term on W_y, (lam + psi'(c) - cos_margin) / (1 + lam), as if a b cos_margin "
                   "depended on x through f: it depends on x through b = |x| only, -(a / b) cos_margin / (1 + lam) "
                   "in the coefficient of x.",
                   lambda inputs: _grad_with(inputs, lambda w, x, ratio, margin: (w - margin, x + ratio * margin))),
)


def _grad_scale(inputs):
    """|g| (|coef_w| |W_y| + (|coef_x| + (a/b) |mc| / (1 + lam)) |x|), the terms of the result, plus what the float32
    rounding of cos(theta) (taken as 4 eps (sqrt(dim) + 1)) does to both coefficients through psi' and psi''."""
    X, Wy, a, b, psi, coef_w, coef_x, m, lam, margin = _grad_parts(inputs)
    c = np.clip((X * Wy).sum(axis=1) / np.maximum(a * b, 1e-300), -1, 1)
    h = 1e-6
    dpsi = psi_reference(c, m)[1]
    second = np.maximum(np.abs(psi_reference(c + h, m)[1] - dpsi), np.abs(dpsi - psi_reference(c - h, m)[1])) / h
    dc = 4 * float(np.finfo(np.float32).eps) * (np.sqrt(inputs["dim"]) + 1)
    g = np.abs(inputs["grad_target"].astype(np.float64))[:, None]
    ratio = (a / np.maximum(b, 1e-12))[:, None]
    shift = ratio[:, 0] * abs(margin) / (1 + lam)
    direct = np.abs(coef_w)[:, None] * np.abs(Wy) + (np.abs(coef_x) + shift)[:, None] * np.abs(X)
    through_cos = (dc / RTOL_GRAD) * ((second + 1)[:, None] * np.abs(Wy)
                                      + ratio * (np.abs(dpsi) + second + 1)[:, None] * np.abs(X)) / (1 + lam)
    return {"grad_x": g * (direct + through_cos)}


def _grad_secret(rng, launch):
    return [_layer_shape(int(rng.integers(2, 200)), int(rng.integers(2, 150)), int(rng.integers(1, 7)),
                         float(rng.choice([0.0, 0.3, 5.0])), dim=int(rng.integers(3, 90)),
                         cos_margin=float(rng.choice([0.1, 0.35, 0.6])))]


#: The chapter's kernel, with its own arguments (no cosine margin).
GRAD_ORDER = ("grad_target", "X", "W", "labels", "grad_x", "batch", "dim", "classes", "m", "lam")

LSOFTMAX_MARGIN_GRAD_INPUT = Exercise(
    name="lsoftmax_margin_grad_input",
    title="L-Softmax backward with a cosine margin: the gradient of the blended label logit with respect to x",
    signature=("lsoftmax_margin_grad_input(const float* grad_target, const float* X, const float* W, "
               "const int* labels, float* grad_x, int batch, int dim, int classes, int m, float lam, float cos_margin)"),
    make_inputs=_grad_inputs,
    reference=_grad_reference,
    error_scale=_grad_scale,
    rtol=RTOL_GRAD,
    # f = x . W_y, |x| and |W_y| are sums over the features: a kernel that reads some of them skips them in all three
    reductions=(Reduction((("X", (1,)), ("W", (1,)))),),
    visible_shapes=(_layer_shape(3, 4, 1, 0.0, dim=5, cos_margin=0.35), _layer_shape(16, 10, 2, 0.0, dim=8, cos_margin=0.0),
                    _layer_shape(7, 5, 3, 0.5, dim=33, cos_margin=0.2), _layer_shape(9, 12, 4, 1000.0, dim=16, cos_margin=0.5)),
    hidden_shapes=(_layer_shape(1, 1, 4, 0.0, dim=1, cos_margin=0.35), _layer_shape(130, 3, 4, 0.0, dim=7, cos_margin=0.0),
                   _layer_shape(5, 200, 3, 0.1, dim=64, cos_margin=0.25), _layer_shape(33, 9, 5, 2.0, dim=2, cos_margin=0.4),
                   _layer_shape(64, 10, 6, 0.0, dim=129, cos_margin=0.15), _layer_shape(6, 4, 2, 0.0, dim=1, cos_margin=1.0)),
    secret_shapes=_grad_secret,
    **_one_thread_per(lambda s: s["batch"], "batch"),
    correctness_points=6.0,
    speed_points=2.0,
    formula_mistakes=GRAD_MISTAKES,
    reference_kernel=ReferenceKernel(lsoftmax.KERNELS["lsoftmax_margin_grad_input"], arg_order=GRAD_ORDER,
                                     solves={"cos_margin": 0.0}),
    timing_shape=_layer_shape(4096, 10000, 4, 0.0, dim=512, cos_margin=0.0),
    label=_layer_label,
    description=("grad_x[i][:] = grad_target[i] * dL/dx_i for the blended label logit with a cosine margin "
                 "L = (lam f + a b (psi(c) - cos_margin)) / (1 + lam) of sample i, where y = labels[i], f = x_i . W_y, "
                 "a = |W_y|, b = |x_i|, c = f / (a b): dL/dx = (lam + psi'(c)) / (1 + lam) W_y + (a / b) (psi - c psi'(c) "
                 "- cos_margin) / (1 + lam) x_i, with psi'(c) = (-1)^k m U_{m-1}(c). grad_x is [batch][dim], filled with "
                 "NaN. Speed is compared with the chapter's lsoftmax_margin_grad_input at cos_margin 0."),
)

EXERCISES = [LSOFTMAX_COS_MTHETA, LSOFTMAX_PATCH_LOGITS, LSOFTMAX_MARGIN_GRAD_INPUT]
