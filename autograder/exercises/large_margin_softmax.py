"""Exercises of the chapter "Large-margin softmax": cos(m theta) and k, the label-logit patch, and its
gradient with respect to the features.

Layouts as in ``kernels/lsoftmax/lsoftmax.cu``: features X [batch][dim], class weights
W [classes][dim], logits [batch][classes], labels int32 in 0..classes-1, all
row-major.  The margin m and the blend weight lam are part of each shape, so
hidden shapes carry hidden margins (5 and 6, which a kernel written for the
published m <= 4 formulas gets wrong).  Inputs include cos(theta) exactly at
+-1 and one float32 step outside (rounding), samples parallel and
antiparallel to their class weight, the first and last class as labels, and
dim = 1 (where cos(theta) is always +-1).  Tolerances are relative to the
size of the terms each result is made of, with room for the margin's
derivatives (up to m^4 times the rounding of cos(theta)).
"""

from __future__ import annotations

import math

import numpy as np

from kernels.lsoftmax import lsoftmax

from ..exercise import Exercise, Reduction, ReferenceKernel
from ._parts import BLOCK_256, SHARED, grid_key, one_dimensional_launch


def _one_thread_per(count, what) -> dict:
    """The launch of the three exercises: ``grid`` blocks of ``block`` threads, by default one thread per
    ``count(shape)`` items."""
    return {"launch_keys": (BLOCK_256, grid_key(count, what), SHARED), "launch_config": one_dimensional_launch}


def _away_from_thresholds(c: np.ndarray, m: int, rng) -> np.ndarray:
    """Move values within 1e-5 of a threshold cos(j pi / m) away from it (k is ambiguous there)."""
    for j in range(1, m):
        t = math.cos(j * math.pi / m)
        near = np.abs(c - t) < 1e-5
        c[near] = t + np.where(rng.random(int(near.sum())) < 0.5, -1e-4, 1e-4)
    return c


# ------------------------------------------------------------ 1. cos(m theta) and k


def _cos_inputs(shape, rng):
    n, m = int(shape["n"]), int(shape["m"])
    c = rng.uniform(-1, 1, n)
    c = _away_from_thresholds(c, m, rng).astype(np.float32)
    specials = np.array([-1, 1, np.nextafter(np.float32(1), 2), np.nextafter(np.float32(-1), -2),
                         np.nextafter(np.float32(1), 0), np.nextafter(np.float32(-1), 0)], np.float32)
    c[: min(n, len(specials))] = specials[: min(n, len(specials))]
    c[min(n, len(specials)):] = rng.permutation(c[min(n, len(specials)):])
    return {"cos_theta": c, "cos_mtheta": None, "k": None, "n": n, "m": m}


def _cos_reference(inputs):
    from kernels.lsoftmax.lsoftmax import margin_k

    c = np.clip(inputs["cos_theta"].astype(np.float64), -1, 1)
    return {"cos_mtheta": np.cos(inputs["m"] * np.arccos(c)), "k": margin_k(c, inputs["m"]).astype(np.float64)}


def _cos_scale(inputs):
    from kernels.lsoftmax.lsoftmax import binomial_term_sizes, margin_k

    # k is a whole number: its scale is k itself, so rtol * k < 1 leaves no room for a wrong integer.
    c = np.clip(inputs["cos_theta"].astype(np.float64), -1, 1)
    return {"cos_mtheta": np.maximum(binomial_term_sizes(inputs["cos_theta"], inputs["m"]), 1.0),
            "k": margin_k(c, inputs["m"]).astype(np.float64)}


def _cos_shape(n, m):
    return {"n": n, "m": m}


def _cos_secret(rng, launch):
    return [_cos_shape(int(rng.integers(300, 9000)), int(rng.integers(2, 7)))]


LSOFTMAX_COS_MTHETA = Exercise(
    name="lsoftmax_cos_mtheta",
    title="L-Softmax: cos(m theta) and k from cos(theta)",
    signature="lsoftmax_cos_mtheta(const float* cos_theta, float* cos_mtheta, int* k, int n, int m)",
    make_inputs=_cos_inputs,
    reference=_cos_reference,
    error_scale=_cos_scale,
    visible_shapes=(_cos_shape(1000, 2), _cos_shape(4096, 3), _cos_shape(777, 4), _cos_shape(10, 2)),
    hidden_shapes=(_cos_shape(1, 2), _cos_shape(20011, 4), _cos_shape(5003, 5), _cos_shape(3001, 6),
                   _cos_shape(257, 2), _cos_shape(4099, 3)),
    secret_shapes=_cos_secret,
    **_one_thread_per(lambda s: s["n"], "n"),
    correctness_points=4.0,
    speed_points=1.0,
    reference_kernel=ReferenceKernel(lsoftmax.KERNELS["lsoftmax_cos_mtheta"]),
    timing_shape=_cos_shape(1 << 24, 4),
    description=("For each of the n values c = cos_theta[i] (clamp it to [-1, 1] first: rounding can put it just "
                 "outside), write cos_mtheta[i] = cos(m theta) and k[i], the integer with theta in "
                 "[k pi/m, (k+1) pi/m]. Use no acos: cos(m theta) is a polynomial in c, and k counts the thresholds "
                 "cos(j pi/m), j = 1..m-1, that c lies below."),
)

# ------------------------------------------------------------ 2. the label-logit patch


def _layer_shape(batch, classes, m, lam, dim=None):
    shape = {"batch": batch, "classes": classes, "m": m, "lam": lam}
    if dim is not None:
        shape = {"batch": batch, "dim": dim, "classes": classes, "m": m, "lam": lam}
    return shape


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
            "out": None, "batch": batch, "classes": classes, "m": m, "lam": np.float32(lam)}


def _patch_reference(inputs):
    from kernels.lsoftmax.lsoftmax import patch_reference

    return {"out": patch_reference(inputs["logits"], inputs["labels"], inputs["x_norm"],
                                   inputs["w_norm"][inputs["labels"]], inputs["m"], float(inputs["lam"]))}


def _patch_scale(inputs):
    from kernels.lsoftmax.lsoftmax import psi_reference

    F = np.abs(inputs["logits"].astype(np.float64))
    scale = F.copy()
    rows = np.arange(inputs["batch"])
    labels = inputs["labels"]
    m, lam = inputs["m"], float(inputs["lam"])
    ab = inputs["x_norm"].astype(np.float64) * inputs["w_norm"][labels].astype(np.float64)
    psi, _ = psi_reference(inputs["logits"][rows, labels] / ab, m)
    scale[rows, labels] = (lam * F[rows, labels] + ab * (np.abs(psi) + m * m)) / (1 + lam)
    return {"out": scale}


def _patch_secret(rng, launch):
    return [_layer_shape(int(rng.integers(2, 300)), int(rng.integers(2, 200)), int(rng.integers(1, 7)),
                         float(rng.choice([0.0, 0.1, 10.0])))]


LSOFTMAX_PATCH_LOGITS = Exercise(
    name="lsoftmax_patch_logits",
    title="L-Softmax: the label's logit, blended with the margin",
    signature=("lsoftmax_patch_logits(const float* logits, const int* labels, const float* x_norm, "
               "const float* w_norm, float* out, int batch, int classes, int m, float lam)"),
    make_inputs=_patch_inputs,
    reference=_patch_reference,
    error_scale=_patch_scale,
    visible_shapes=(_layer_shape(4, 3, 1, 0.0), _layer_shape(16, 10, 2, 0.0), _layer_shape(33, 7, 3, 1.5),
                    _layer_shape(8, 100, 4, 1000.0)),
    hidden_shapes=(_layer_shape(1, 1, 4, 0.0), _layer_shape(257, 10, 4, 0.0), _layer_shape(3, 1000, 2, 0.25),
                   _layer_shape(130, 33, 3, 0.0), _layer_shape(50, 5, 5, 2.0), _layer_shape(600, 12, 6, 0.0)),
    secret_shapes=_patch_secret,
    **_one_thread_per(lambda s: s["batch"] * s["classes"], "batch * classes"),
    correctness_points=6.0,
    speed_points=2.0,
    reference_kernel=ReferenceKernel(lsoftmax.KERNELS["lsoftmax_patch_logits"]),
    timing_shape=_layer_shape(4096, 10000, 4, 0.0),
    description=("out is logits with one element per row changed: for sample i with label y = labels[i], "
                 "a = w_norm[y], b = x_norm[i], f = logits[i][y] and c = f / (a b) (clamped to [-1, 1]), "
                 "out[i][y] = (lam f + a b psi(c)) / (1 + lam) with psi = (-1)^k cos(m theta) - 2k. Every other "
                 "element is copied unchanged; out is filled with NaN before the launch."),
)

# ------------------------------------------------------------ 3. the margin's gradient with respect to x


RTOL_GRAD = 2e-5


def _grad_inputs(shape, rng):
    batch, dim, classes = int(shape["batch"]), int(shape["dim"]), int(shape["classes"])
    X, W, labels = _features(rng, batch, dim, classes)
    g = (rng.standard_normal(batch) + 0.5).astype(np.float32)
    return {"grad_target": g, "X": X, "W": W, "labels": labels, "grad_x": None, "batch": batch, "dim": dim,
            "classes": classes, "m": int(shape["m"]), "lam": np.float32(shape["lam"])}


def _grad_parts(inputs):
    from kernels.lsoftmax.lsoftmax import cosine, label_coefficients, norms, psi_reference

    X = inputs["X"].astype(np.float64)
    W = inputs["W"].astype(np.float64)
    labels = inputs["labels"]
    b, a = norms(X, W, labels)
    c = cosine((X * W[labels]).sum(axis=1), a, b)
    m, lam = inputs["m"], float(inputs["lam"])
    coef_w, coef_x, _ = label_coefficients(c, a, b, m, lam)
    psi, _ = psi_reference(c, m)
    return X, W[labels], a, b, psi, coef_w, coef_x, m, lam


def _grad_reference(inputs):
    X, Wy, _, _, _, coef_w, coef_x, _, _ = _grad_parts(inputs)
    g = inputs["grad_target"].astype(np.float64)[:, None]
    return {"grad_x": g * (coef_w[:, None] * Wy + coef_x[:, None] * X)}


def _grad_scale(inputs):
    """|g| (|coef_w| |W_y| + |coef_x| |x|), the terms of the result, plus what the float32 rounding of
    cos(theta) (taken as 4 eps (sqrt(dim) + 1)) does to both coefficients through psi' and psi''."""
    from kernels.lsoftmax.lsoftmax import psi_reference

    X, Wy, a, b, psi, coef_w, coef_x, m, lam = _grad_parts(inputs)
    c = np.clip((X * Wy).sum(axis=1) / np.maximum(a * b, 1e-300), -1, 1)
    h = 1e-6
    dpsi = psi_reference(c, m)[1]
    second = np.maximum(np.abs(psi_reference(c + h, m)[1] - dpsi), np.abs(dpsi - psi_reference(c - h, m)[1])) / h
    dc = 4 * float(np.finfo(np.float32).eps) * (np.sqrt(inputs["dim"]) + 1)
    g = np.abs(inputs["grad_target"].astype(np.float64))[:, None]
    ratio = (a / np.maximum(b, 1e-12))[:, None]
    direct = np.abs(coef_w)[:, None] * np.abs(Wy) + np.abs(coef_x)[:, None] * np.abs(X)
    through_cos = (dc / RTOL_GRAD) * ((second + 1)[:, None] * np.abs(Wy)
                                      + ratio * (np.abs(dpsi) + second + 1)[:, None] * np.abs(X)) / (1 + lam)
    return {"grad_x": g * (direct + through_cos)}


def _grad_secret(rng, launch):
    return [_layer_shape(int(rng.integers(2, 200)), int(rng.integers(2, 150)), int(rng.integers(1, 7)),
                         float(rng.choice([0.0, 0.3, 5.0])), dim=int(rng.integers(3, 90)))]


LSOFTMAX_MARGIN_GRAD_INPUT = Exercise(
    name="lsoftmax_margin_grad_input",
    title="L-Softmax backward: the gradient of the blended label logit with respect to x",
    signature=("lsoftmax_margin_grad_input(const float* grad_target, const float* X, const float* W, "
               "const int* labels, float* grad_x, int batch, int dim, int classes, int m, float lam)"),
    make_inputs=_grad_inputs,
    reference=_grad_reference,
    error_scale=_grad_scale,
    rtol=RTOL_GRAD,
    # f = x . W_y, |x| and |W_y| are sums over the features: a kernel that reads some of them skips them in all three
    reductions=(Reduction((("X", (1,)), ("W", (1,)))),),
    visible_shapes=(_layer_shape(3, 4, 1, 0.0, dim=5), _layer_shape(16, 10, 2, 0.0, dim=8),
                    _layer_shape(7, 5, 3, 0.5, dim=33), _layer_shape(9, 12, 4, 1000.0, dim=16)),
    hidden_shapes=(_layer_shape(1, 1, 4, 0.0, dim=1), _layer_shape(130, 3, 4, 0.0, dim=7),
                   _layer_shape(5, 200, 3, 0.1, dim=64), _layer_shape(33, 9, 5, 2.0, dim=2),
                   _layer_shape(64, 10, 6, 0.0, dim=129), _layer_shape(6, 4, 2, 0.0, dim=1)),
    secret_shapes=_grad_secret,
    **_one_thread_per(lambda s: s["batch"], "batch"),
    correctness_points=6.0,
    speed_points=2.0,
    reference_kernel=ReferenceKernel(lsoftmax.KERNELS["lsoftmax_margin_grad_input"]),
    timing_shape=_layer_shape(4096, 10000, 4, 0.0, dim=512),
    description=("grad_x[i][:] = grad_target[i] * dL/dx_i for the blended label logit "
                 "L = (lam f + a b psi(c)) / (1 + lam) of sample i, where y = labels[i], f = x_i . W_y, a = |W_y|, "
                 "b = |x_i|, c = f / (a b): dL/dx = (lam + psi'(c)) / (1 + lam) W_y + (a / b) (psi - c psi'(c)) / "
                 "(1 + lam) x_i, with psi'(c) = (-1)^k m U_{m-1}(c). grad_x is [batch][dim], filled with NaN."),
)

EXERCISES = [LSOFTMAX_COS_MTHETA, LSOFTMAX_PATCH_LOGITS, LSOFTMAX_MARGIN_GRAD_INPUT]
