"""Large-margin softmax (``kernels/lsoftmax/lsoftmax.cu``): NumPy references in float64 and one launcher per kernel.

Shapes: features ``X`` ``(N, D)``, class weights ``W`` ``(C, D)`` (one row per
class, as ``torch.nn.Linear``, no bias), ``labels`` ``(N,)`` integers in
``0..C-1``, logits ``F = X W^T`` ``(N, C)``.  The margin ``m`` is a whole
number >= 1 (m = 1 is the plain softmax), ``lam`` >= 0 the blend weight
lambda.  For sample i with ``a = |W_y|``, ``b = |x_i|``, ``c = F[i, y] / (a b)``
the label's logit becomes ``(lam F[i, y] + a b psi(c)) / (1 + lam)``.

Launchers take NumPy arrays (checked: shapes, dtypes, contiguity, label
range, m and lam, each with a message naming the argument, before any launch)
or device buffers (shapes only: their contents stay on the device), and
return NumPy arrays for NumPy inputs, device buffers for device inputs.

* :func:`forward_caffe` / :func:`backward_naive`: version 1, the Caffe layer's
  three kernels after the GEMM and its two naive backward loops;
* :func:`backward_factored`: version 2, the backward as two GEMMs plus rank-1
  corrections;
* :func:`fused_forward` / :func:`fused_backward`: version 3, margin, softmax
  and cross-entropy in one kernel each way;
* :func:`gemm_margin_forward`: version 4, the margin and the softmax's
  partial sums in the epilogue of the forward GEMM;
* :class:`LargeMarginSoftmax`: the whole layer (FC + margin + softmax
  cross-entropy, mean over the batch) forward and backward, any version.
"""

from __future__ import annotations

import math
import numbers
import sys

import numpy as np

from ..gemm import sgemm as _sgemm
from ..gemm import sgemm_hopper as _sgemm_hopper
from ..dense import softmax as _softmax
from .layer_facts import layer_records
from ..runtime import DeviceBuffer, Module, blocks_for
from ..runtime.loader import grid_stride_blocks, launch, load_topic
from ..runtime.module import empty, to_device
from ..runtime.sources import function_lines, source_path
from ..runtime.versions import KernelVersion, LaunchConfig, kernel_table, launch_1d, versions

TOPIC = "lsoftmax"
EPS = 1e-12  # LSM_EPS in lsoftmax.cu: the smallest norm divided by
THREADS = 256  # LSM_THREADS in lsoftmax.cu: threads per block of the fused kernels
BLOCK = 256  # threads per block of the grid-stride kernels
TILE, TILE_ROWS = 32, 8  # LSM_TILE x LSM_TILE_ROWS threads per block of lsoftmax_transpose_add_scaled_rows
FLT_MIN = float(np.finfo(np.float32).tiny)

#: Version 3 with its three products on the tensor cores at float32 accuracy (the GEMM chapter's version 10,
#: 3xTF32 with wgmma): Hopper GPUs only, and no kernel of lsoftmax.cu of its own, so it is not one of the
#: versions of ``KERNELS`` (``versions(KERNELS)``), which run everywhere.
TENSOR_CORES = ("tensor_cores", "version 3 (fused) with its three GEMMs on the tensor cores (3xTF32, Hopper)")


def module() -> Module:
    """``lsoftmax.cu`` compiled once per backend."""
    return load_topic(TOPIC)


# --------------------------------------------------------------------------- checking arguments


def check_margin(m) -> int:
    """``m`` as an int; ValueError naming ``m`` unless it is a whole number >= 1."""
    if isinstance(m, bool) or not isinstance(m, numbers.Real) or not math.isfinite(float(m)) or float(m) != int(m):
        raise ValueError(f"the margin m must be a whole number >= 1 (1 is the plain softmax), got {m!r}")
    if int(m) < 1:
        raise ValueError(f"the margin m must be at least 1 (1 is the plain softmax), got {m!r}")
    return int(m)


def check_lambda(lam) -> float:
    """``lam`` as a float; ValueError naming ``lam`` unless it is a finite number >= 0."""
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real) or not math.isfinite(float(lam)):
        raise ValueError(f"lam (the blend weight lambda) must be a finite number >= 0, got {lam!r}")
    if float(lam) < 0:
        raise ValueError(f"lam (the blend weight lambda) must be >= 0, got {lam!r}: a negative weight can make "
                         f"1 + lam vanish and the blend undefined")
    return float(lam)


def _matrix(a, name: str, rows_name: str, cols_name: str):
    if not isinstance(a, (np.ndarray, DeviceBuffer)):
        raise ValueError(f"{name} must be a NumPy array or a device buffer, got {type(a).__name__}")
    if len(a.shape) != 2:
        raise ValueError(f"{name} must be a matrix ({rows_name}, {cols_name}), got shape {tuple(a.shape)}")
    if isinstance(a, np.ndarray):
        if not np.issubdtype(a.dtype, np.floating):
            raise ValueError(f"{name} must hold floating-point numbers, got dtype {a.dtype}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{name} is not C-contiguous (a transposed or sliced view): pass np.ascontiguousarray({name})")
    elif a.dtype != np.float32:
        raise ValueError(f"the device buffer {name} must hold float32, got {a.dtype}")
    return int(a.shape[0]), int(a.shape[1])


def check_labels(labels, N: int, C: int):
    """``labels`` as an int32 array (or the device buffer); ValueError naming ``labels`` if wrong."""
    if isinstance(labels, DeviceBuffer):
        if tuple(labels.shape) != (N,) or labels.dtype != np.int32:
            raise ValueError(f"labels must be an int32 vector of {N} classes, got a {labels.dtype} buffer of shape "
                             f"{tuple(labels.shape)}")
        return labels
    if not isinstance(labels, np.ndarray):
        labels = np.asarray(labels)
    if labels.shape != (N,):
        raise ValueError(f"labels must be a vector of {N} classes (one per row of X), got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be integers (class indices), got dtype {labels.dtype}")
    if not labels.flags.c_contiguous:
        raise ValueError("labels is not C-contiguous (a sliced view): pass np.ascontiguousarray(labels)")
    if N and (labels.min() < 0 or labels.max() >= C):
        bad = int(np.flatnonzero((labels < 0) | (labels >= C))[0])
        raise ValueError(f"labels[{bad}] = {int(labels[bad])} is out of range: classes are 0..{C - 1}")
    return np.ascontiguousarray(labels, np.int32)


def check_layer_inputs(X, W, labels, m, lam):
    """Every check of the layer's inputs; returns ``(N, C, D, labels, m, lam)``."""
    N, D = _matrix(X, "X", "N", "D")
    C, D2 = _matrix(W, "W", "C", "D")
    if D != D2:
        raise ValueError(f"X has {D} features per sample but W has rows of {D2}: W must be (classes, {D})")
    if N < 1 or C < 1 or D < 1:
        raise ValueError(f"empty layer: X is {N}x{D}, W is {C}x{D2}")
    labels = check_labels(labels, N, C)
    return N, C, D, labels, check_margin(m), check_lambda(lam)


def check_logits(F, N: int, C: int, name: str = "F"):
    rows, cols = _matrix(F, name, "N", "C")
    if (rows, cols) != (N, C):
        raise ValueError(f"{name} must be ({N}, {C}) = (rows of X, rows of W), got {(rows, cols)}")


# --------------------------------------------------------------------------- NumPy references (float64)


def chebyshev(c, m: int):
    """``(T_m(c), U_{m-1}(c))`` by the three-term recurrences, elementwise: cos(m theta) and sin(m theta)/sin(theta)."""
    c = np.asarray(c, np.float64)
    t0, t1 = np.ones_like(c), c.copy()
    u0, u1 = np.zeros_like(c), np.ones_like(c)
    for _ in range(1, m):
        t0, t1 = t1, 2 * c * t1 - t0
        u0, u1 = u1, 2 * c * u1 - u0
    return t1, u1


def margin_k(c, m: int) -> np.ndarray:
    """k with theta in [k pi/m, (k+1) pi/m]: how many thresholds cos(j pi/m), j = 1..m-1, c lies below."""
    c = np.asarray(c, np.float64)
    k = np.zeros(c.shape, np.int64)
    for j in range(1, m):
        k += c < np.cos(j * np.pi / m)
    return k


def psi_of_theta(theta, m: int) -> np.ndarray:
    """The definition: psi(theta) = (-1)^k cos(m theta) - 2k for theta in [k pi/m, (k+1) pi/m]."""
    theta = np.asarray(theta, np.float64)
    k = np.clip(np.floor(theta * m / np.pi), 0, m - 1)
    return (-1.0) ** k * np.cos(m * theta) - 2 * k


def psi_reference(c, m: int):
    """``(psi, dpsi/dc)`` as functions of c = cos(theta) (clamped to [-1, 1]), through the Chebyshev polynomials."""
    c = np.clip(np.asarray(c, np.float64), -1.0, 1.0)
    t, u = chebyshev(c, m)
    k = margin_k(c, m)
    sign = np.where(k % 2 == 1, -1.0, 1.0)
    return sign * t - 2 * k, sign * m * u


def cos_mtheta_binomial(c, m: int, dtype=np.float64) -> np.ndarray:
    """cos(m theta) = sum_n (-1)^n C(m, 2n) c^(m-2n) (1 - c^2)^n, in ``dtype`` (as kernel 1b computes it)."""
    c = np.clip(np.asarray(c, dtype), -1, 1)
    s2 = dtype(1) - c * c
    total = np.zeros_like(c)
    for n in range(m // 2 + 1):
        total = total + dtype((-1) ** n * math.comb(m, 2 * n)) * c ** (m - 2 * n) * s2 ** n
    return total


def binomial_term_sizes(c, m: int) -> np.ndarray:
    """sum_n C(m, 2n) |c|^(m-2n) (1 - c^2)^n: the size of the terms the binomial form adds (its rounding scale)."""
    c = np.clip(np.asarray(c, np.float64), -1, 1)
    return sum(math.comb(m, 2 * n) * np.abs(c) ** (m - 2 * n) * (1 - c * c) ** n for n in range(m // 2 + 1))


def norms(X, W, labels):
    """``(|x_i|, |W_{y_i}|)`` in float64."""
    X = np.asarray(X, np.float64)
    W = np.asarray(W, np.float64)
    return np.linalg.norm(X, axis=1), np.linalg.norm(W[np.asarray(labels)], axis=1)


def cosine(f, a, b):
    """cos(theta) = f / (a b) with both norms kept above EPS: an all-zero row gives 0, not 0/0."""
    return np.asarray(f, np.float64) / (np.maximum(a, EPS) * np.maximum(b, EPS))


def blend(f, a, b, m: int, lam: float):
    """The label's new logit (lam f + a b psi(c)) / (1 + lam)."""
    psi, _ = psi_reference(cosine(f, a, b), m)
    return (lam * np.asarray(f, np.float64) + a * b * psi) / (1 + lam)


def patch_reference(F, labels, x_norm, w_label_norm, m: int, lam: float) -> np.ndarray:
    """F with each label's logit blended; every other logit unchanged (float64)."""
    Fp = np.array(F, np.float64)
    rows = np.arange(len(Fp))
    labels = np.asarray(labels)
    Fp[rows, labels] = blend(Fp[rows, labels], np.asarray(w_label_norm, np.float64),
                             np.asarray(x_norm, np.float64), m, lam)
    return Fp


def logits_reference(X, W, labels, m: int, lam: float) -> np.ndarray:
    """The layer's logits F' = patched X W^T, in float64."""
    X = np.asarray(X, np.float64)
    W = np.asarray(W, np.float64)
    b, a = norms(X, W, labels)
    return patch_reference(X @ W.T, labels, b, a, m, lam)


def cross_entropy(Fp, labels) -> np.ndarray:
    """Per-sample loss logsumexp(F'_i) - F'[i, y_i] (float64)."""
    Fp = np.asarray(Fp, np.float64)
    top = Fp.max(axis=1)
    lse = top + np.log(np.exp(Fp - top[:, None]).sum(axis=1))
    return lse - Fp[np.arange(len(Fp)), np.asarray(labels)]


def loss_reference(X, W, labels, m: int, lam: float) -> np.ndarray:
    """Per-sample loss of the whole layer (the mean is the training loss)."""
    return cross_entropy(logits_reference(X, W, labels, m, lam), labels)


def label_coefficients(c, a, b, m: int, lam: float):
    """``(coef_w, coef_x, coef_ww)``: dL/dx = coef_w W_y + coef_x x and dL/dW_y = coef_w x + coef_ww W_y."""
    psi, dpsi = psi_reference(c, m)
    c = np.clip(np.asarray(c, np.float64), -1, 1)
    r = (psi - c * dpsi) / (1 + lam)
    return (lam + dpsi) / (1 + lam), a / np.maximum(b, EPS) * r, b / np.maximum(a, EPS) * r


def margin_backward_reference(G, X, W, labels, m: int, lam: float):
    """``(dX, dW)`` for ``G = dE/dF'`` (N x C), by the factored form: dX = G~ W + beta X, dW = G~^T X + gamma W."""
    G = np.asarray(G, np.float64)
    X = np.asarray(X, np.float64)
    W = np.asarray(W, np.float64)
    labels = np.asarray(labels)
    rows = np.arange(len(X))
    b, a = norms(X, W, labels)
    c = cosine((X * W[labels]).sum(axis=1), a, b)
    coef_w, coef_x, coef_ww = label_coefficients(c, a, b, m, lam)
    g = G[rows, labels]
    Gt = G.copy()
    Gt[rows, labels] = g * coef_w
    gamma = np.zeros(len(W))
    np.add.at(gamma, labels, g * coef_ww)
    return Gt @ W + (g * coef_x)[:, None] * X, Gt.T @ X + gamma[:, None] * W


def layer_backward_reference(X, W, labels, m: int, lam: float, grad_loss=None):
    """``(dX, dW)`` of sum_i grad_loss[i] loss_i (default: the mean loss)."""
    Fp = logits_reference(X, W, labels, m, lam)
    top = Fp.max(axis=1, keepdims=True)
    P = np.exp(Fp - top)
    P /= P.sum(axis=1, keepdims=True)
    rows = np.arange(len(Fp))
    P[rows, np.asarray(labels)] -= 1
    grad_loss = np.full(len(Fp), 1 / len(Fp)) if grad_loss is None else np.asarray(grad_loss, np.float64)
    return margin_backward_reference(P * grad_loss[:, None], X, W, labels, m, lam)


def lambda_schedule(iteration, base: float = 1000.0, gamma: float = 0.12, power: float = 1.0,
                    lambda_min: float = 0.0) -> float:
    """lambda = max(lambda_min, base (1 + gamma iteration)^(-power)), the published annealing."""
    return max(float(lambda_min), float(base) * (1.0 + float(gamma) * float(iteration)) ** (-float(power)))


# --------------------------------------------------------------------------- device helpers


def _device(a, dtype=np.float32):
    """A device buffer of ``a`` (NumPy arrays are copied; device buffers are used as they are)."""
    return a if isinstance(a, DeviceBuffer) else to_device(np.ascontiguousarray(a, dtype=dtype))


def _grid(n: int) -> int:
    return grid_stride_blocks(max(1, n), BLOCK)


def _row_grid(rows: int, cols: int) -> tuple[int, int]:
    """(x, y) blocks of the row-by-row kernels: x covers a row's columns, y the rows (at most 65535)."""
    return (min(blocks_for(cols, BLOCK), 64), max(1, min(rows, 65535)))


def transpose(A, out=None):
    """``A^T`` on the device: the GEMM chapter's transpose (:func:`kernels.gemm.sgemm.transpose`)."""
    return _sgemm.transpose(_device(A), out)


def fc_forward(X, W, Wt=None, out=None):
    """F = X W^T on the device: the GEMM chapter's fully connected product (:func:`kernels.gemm.sgemm.fc_forward`:
    W transposed, then the fastest GEMM for the shape), no bias."""
    return _sgemm.fc_forward(_device(X), _device(W), Wt=Wt, out=out)


def _host(buffer, like):
    return buffer.get() if isinstance(like, np.ndarray) else buffer


def psi_values(c, m):
    """``(psi, dpsi/dc)`` of a float32 vector ``c`` computed on the device by the kernels' own helper."""
    m = check_margin(m)
    c = np.ascontiguousarray(c, np.float32)
    n = int(c.size)
    psi, dpsi = np.empty(n, np.float32), np.empty(n, np.float32)
    module().function("lsoftmax_psi_values")(c.ravel(), psi, dpsi, n, m, grid=_grid(n), block=BLOCK)
    return psi.reshape(c.shape), dpsi.reshape(c.shape)


def cos_mtheta_kernel(cos_theta, m):
    """``(cos(m theta), k)`` by kernel 1b (the binomial expansion) for a float32 vector of cos(theta)."""
    m = check_margin(m)
    c = np.ascontiguousarray(cos_theta, np.float32).ravel()
    n = int(c.size)
    out, k = np.empty(n, np.float32), np.empty(n, np.int32)
    module().function("lsoftmax_cos_mtheta")(c, out, k, n, m, grid=_grid(n), block=BLOCK)
    return out, k


def patch_logits(F, labels, x_norm, w_norm, m, lam):
    """``F`` with each row's label logit blended (kernel 1d, the exercise's reference): ``x_norm`` (N,) and
    ``w_norm`` (C,) are the norms of the samples and of the class weights."""
    N, C = _matrix(F, "F", "N", "C")
    labels = check_labels(labels, N, C)
    m, lam = check_margin(m), check_lambda(lam)
    for name, vector, size in (("x_norm", x_norm, N), ("w_norm", w_norm, C)):
        if np.shape(vector) != (size,):
            raise ValueError(f"{name} must hold {size} norms, got shape {np.shape(vector)}")
    F = np.ascontiguousarray(F, np.float32)
    out = np.empty_like(F)
    config = _patch_launch({"batch": N, "classes": C})
    module().function("lsoftmax_patch_logits")(F, labels, np.ascontiguousarray(x_norm, np.float32),
                                               np.ascontiguousarray(w_norm, np.float32), out, N, C, m, np.float32(lam),
                                               grid=config.grid, block=config.block)
    return out


MARGIN_GRAD_SAMPLES_PER_BLOCK = 8  # one warp per sample, 256 threads


def margin_grad_input(grad_target, X, W, labels, m, lam):
    """``grad_target[i] * d(blended label logit of sample i)/dx_i`` (kernel 1e, the exercise's reference)."""
    N, C, D, labels, m, lam = check_layer_inputs(X, W, labels, m, lam)
    if np.shape(grad_target) != (N,):
        raise ValueError(f"grad_target must hold one number per sample ({N}), got shape {np.shape(grad_target)}")
    grad_x = np.empty((N, D), np.float32)
    config = _margin_grad_launch({"batch": N})
    module().function("lsoftmax_margin_grad_input")(
        np.ascontiguousarray(grad_target, np.float32), np.ascontiguousarray(X, np.float32),
        np.ascontiguousarray(W, np.float32), labels, grad_x, N, D, C, m, np.float32(lam),
        grid=config.grid, block=config.block)
    return grad_x


# --------------------------------------------------------------------------- version 1: the Caffe layer


def _new(name, shape, dtype=np.float32):
    """The default allocator of the launchers: a new device buffer (a layer passes one that reuses its own)."""
    return empty(shape, dtype)


def forward_caffe(F, X, W, labels, m, lam, in_place: bool = False, alloc=_new):
    """The three grid-stride kernels after the GEMM: returns ``(F', saved)`` with ``saved`` the per-sample
    ``x_norm``, ``w_norm``, ``cos_theta`` (device buffers), which the backward kernels read.

    The blend writes into the logits, as the Caffe layer does: ``F`` itself when it is a device buffer and
    ``in_place`` is set, otherwise a copy (``F`` is then left as it was)."""
    N, C, D, labels, m, lam = check_layer_inputs(X, W, labels, m, lam)
    check_logits(F, N, C)
    kernels = module()
    Fp = _device(F)
    if Fp is F and not in_place:
        Fp = to_device(F.get())
    Xd, Wd, yd = _device(X), _device(W), _device(labels, np.int32)
    score, x_norm, w_norm, cos_theta, cos_m = (alloc(name, (N,)) for name in
                                               ("score", "x_norm", "w_norm", "cos_theta", "cos_mtheta"))
    k = alloc("k", (N,), np.int32)
    grid = _grid(N)
    kernels.function("lsoftmax_copy_label_score")(Fp, yd, Xd, Wd, score, x_norm, w_norm, cos_theta, N, C, D,
                                                  grid=grid, block=BLOCK, sync=False)
    kernels.function("lsoftmax_cos_mtheta")(cos_theta, cos_m, k, N, m, grid=grid, block=BLOCK, sync=False)
    kernels.function("lsoftmax_blend_label_score")(Fp, yd, score, x_norm, w_norm, cos_m, k, N, C, lam,
                                                   grid=grid, block=BLOCK, sync=False)
    saved = {"x_norm": x_norm, "w_norm": w_norm, "cos_theta": cos_theta, "cos_mtheta": cos_m, "k": k}
    return _host(Fp, F), saved


def backward_naive(G, X, W, labels, saved, m, lam, alloc=_new):
    """The Caffe layer's backward: ``(dX, dW)`` for ``G = dE/dF'``, one thread per element and a loop with a branch."""
    N, C, D, labels, m, lam = check_layer_inputs(X, W, labels, m, lam)
    check_logits(G, N, C, "G")
    Gd, Xd, Wd, yd = _device(G), _device(X), _device(W), _device(labels, np.int32)
    dX, dW = alloc("dX", (N, D)), alloc("dW", (C, D))
    kernels = module()
    args = (Gd, Xd, Wd, yd, saved["x_norm"], saved["w_norm"], saved["cos_theta"])
    kernels.function("lsoftmax_backward_input_naive")(*args, dX, N, C, D, m, lam, grid=_grid(N * D), block=BLOCK,
                                                      sync=False)
    kernels.function("lsoftmax_backward_weight_naive")(*args, dW, N, C, D, m, lam, grid=_grid(C * D), block=BLOCK,
                                                       sync=False)
    return _host(dX, G), _host(dW, G)


# --------------------------------------------------------------------------- version 2: the factored backward


def _gemm_backward(Gt, beta, delta, Xd, Wd, yd, N, C, D, dWt=None, gamma=None, dX=None, dW=None, Xt=None):
    """dX = G~ W + diag(beta) X and dW = (X^T G~)^T + diag(gamma) W, gamma[j] = sum of delta over class j.

    With ``Xt`` (a D x N buffer) the two products run on the tensor cores (version 10 of the GEMM chapter,
    3xTF32, Hopper only), which take A row-major only: X^T is written there first."""
    kernels = module()
    if Xt is None:
        dX = _sgemm.sgemm(Gt, Wd, out=dX, sync=False)                     # N x C times C x D
    else:
        dX = _sgemm_hopper.sgemm_tf32x3_wgmma(Gt, Wd, out=dX, sync=False)
    kernels.function("lsoftmax_add_scaled_rows")(dX, Xd, beta, N, D, grid=_row_grid(N, D), block=BLOCK, sync=False)
    if Xt is None:
        # X^T G~ (D x N times N x C) with X read as the transposed operand: no transpose of X.
        dWt = _sgemm.sgemm_splitk(Xd, Gt, out=dWt, a_transposed=True, sync=False)
    else:
        dWt = _sgemm_hopper.sgemm_tf32x3_wgmma(_sgemm.transpose(Xd, out=Xt), Gt, out=dWt, sync=False)
    gamma = empty((C,)) if gamma is None else gamma
    kernels.function("lsoftmax_class_sums")(yd, delta, gamma, N, C, grid=grid_stride_blocks(C * BLOCK, BLOCK),
                                            block=BLOCK, sync=False)  # one block per class
    dW = empty((C, D)) if dW is None else dW
    kernels.function("lsoftmax_transpose_add_scaled_rows")(dWt, Wd, gamma, dW, C, D,
                                                           grid=(blocks_for(C, TILE), blocks_for(D, TILE)),
                                                           block=(TILE, TILE_ROWS), sync=False)
    return dX, dW


def backward_factored(G, X, W, labels, saved, m, lam, alloc=_new):
    """Version 2: ``(dX, dW)`` for ``G = dE/dF'`` by two GEMMs and rank-1 corrections."""
    N, C, D, labels, m, lam = check_layer_inputs(X, W, labels, m, lam)
    check_logits(G, N, C, "G")
    Gd, Xd, Wd, yd = _device(G), _device(X), _device(W), _device(labels, np.int32)
    Gt, beta, delta = alloc("Gt", (N, C)), alloc("beta", (N,)), alloc("delta", (N,))
    module().function("lsoftmax_rescale_label_column")(
        Gd, yd, saved["x_norm"], saved["w_norm"], saved["cos_theta"], Gt, beta, delta, N, C, m, lam,
        grid=_row_grid(N, C), block=BLOCK, sync=False)
    dX, dW = _gemm_backward(Gt, beta, delta, Xd, Wd, yd, N, C, D, dWt=alloc("dWt", (D, C)),
                            gamma=alloc("gamma", (C,)), dX=alloc("dX", (N, D)), dW=alloc("dW", (C, D)))
    return _host(dX, G), _host(dW, G)


# --------------------------------------------------------------------------- version 3: fused


def fused_threads(C: int) -> int:
    """Threads per row of the fused kernels: a short row needs few (block reductions cost a barrier per warp
    count), a long one up to ``THREADS``."""
    return THREADS if C >= 2048 else 128 if C >= 256 else 64


def _fused_grid(N: int, threads: int) -> int:
    """Blocks of the fused kernels: one row per block, as many as fit on the GPU at once (a block loops over
    rows only when N exceeds that).  Counted in rows, not threads: ``grid_stride_blocks(N, threads)`` would
    give N / threads blocks, 64 at N = 4096, each walking 64 rows one after another."""
    return grid_stride_blocks(N * threads, threads, blocks_per_sm=min(32, max(1, 2048 // threads)))


def fused_forward(F, X, W, labels, m, lam, loss=None, stats=None, prepare_only: bool = False):
    """``(loss, stats)``: per-sample loss of the blended logits, and (logsumexp, |x|, |W_y|, cos theta) per row.

    ``prepare_only``: return a function that only enqueues the launch (checked once), for timing the kernel
    rather than the Python around it."""
    N, C, D, labels, m, lam = check_layer_inputs(X, W, labels, m, lam)
    check_logits(F, N, C)
    loss = empty((N,)) if loss is None else loss
    stats = empty((N, 4)) if stats is None else stats
    enqueue = launch(module().function("lsoftmax_fused_forward"),
                     (_device(F), _device(labels, np.int32), _device(X), _device(W), loss, stats, N, C, D, m, lam),
                     grid=_fused_grid(N, fused_threads(C)), block=fused_threads(C), sync=False, prepare_only=prepare_only)
    return enqueue if prepare_only else (_host(loss, F), _host(stats, F))


def fused_backward(F, labels, stats, grad_loss, m, lam, Gt=None, beta=None, delta=None, patched: bool = False,
                   prepare_only: bool = False):
    """``(G~, beta, delta)`` from the logits and the forward's stats, for upstream gradients ``grad_loss`` (N,).

    ``patched``: ``F`` already holds the blended label logits (version 4's GEMM wrote them).  ``prepare_only``:
    as :func:`fused_forward`'s."""
    N, C = (int(s) for s in F.shape)
    labels = check_labels(labels, N, C)
    m, lam = check_margin(m), check_lambda(lam)
    if tuple(stats.shape) != (N, 4):
        raise ValueError(f"stats must be ({N}, 4), as fused_forward returns it, got {tuple(stats.shape)}")
    if tuple(np.shape(grad_loss) if not isinstance(grad_loss, DeviceBuffer) else grad_loss.shape) != (N,):
        raise ValueError(f"grad_loss must hold one number per sample ({N}), got shape {np.shape(grad_loss)}")
    Gt = empty((N, C)) if Gt is None else Gt
    beta = empty((N,)) if beta is None else beta
    delta = empty((N,)) if delta is None else delta
    enqueue = launch(module().function("lsoftmax_fused_backward"),
                     (_device(F), _device(labels, np.int32), _device(stats), _device(grad_loss), Gt, beta, delta, N, C,
                      m, lam, int(patched)),
                     grid=_fused_grid(N, fused_threads(C)), block=fused_threads(C), sync=False, prepare_only=prepare_only)
    return enqueue if prepare_only else (_host(Gt, F), _host(beta, F), _host(delta, F))


# --------------------------------------------------------------------------- version 4: the GEMM's epilogue


def gemm_margin_forward(X, W, labels, m, lam, Wt=None, F=None, target=None, partial=None, loss=None, stats=None):
    """``(F', loss, stats)``: the GEMM writes the blended logits F' and each tile's softmax partials; no pass over F.

    ``stats`` is laid out as :func:`fused_forward`'s, so :func:`fused_backward` (with ``patched=True``) follows."""
    N, C, D, labels, m, lam = check_layer_inputs(X, W, labels, m, lam)
    Xd, Wd, yd = _device(X), _device(W), _device(labels, np.int32)
    kernels = module()
    target = empty((N,)) if target is None else target
    stats = empty((N, 4)) if stats is None else stats
    kernels.function("lsoftmax_label_targets")(Xd, Wd, yd, target, stats, N, D, m, lam,
                                               grid=grid_stride_blocks(32 * N, BLOCK), block=BLOCK, sync=False)
    Wt = transpose(Wd, Wt)
    bm, bn = _sgemm.WARPTILE_DEFAULT["WT_BM"], _sgemm.WARPTILE_DEFAULT["WT_BN"]
    tiles = blocks_for(C, bn)
    F = empty((N, C)) if F is None else F
    partial = empty((N, tiles, 2)) if partial is None else partial
    kernels.function("lsoftmax_gemm_margin_forward")(Xd, Wt, F, yd, target, partial, N, C, D,
                                                     grid=(tiles, blocks_for(N, bm)), block=_sgemm.warptile_threads(),
                                                     sync=False)
    loss = empty((N,)) if loss is None else loss
    kernels.function("lsoftmax_combine_partials")(partial, target, loss, stats, N, tiles, grid=_grid(N), block=BLOCK,
                                                  sync=False)
    return _host(F, X), _host(loss, X), _host(stats, X)


def mean_loss(loss, out=None):
    """The mean of the per-sample losses, added in a fixed order (one block)."""
    N = int(loss.shape[0])
    out = empty((1,)) if out is None else out
    module().function("lsoftmax_mean_loss")(_device(loss), out, N, grid=1, block=1024, sync=False)
    return out


# --------------------------------------------------------------------------- the whole layer


class LargeMarginSoftmax:
    """FC (no bias) + L-Softmax margin + softmax cross-entropy, mean over the batch, on the book's kernels.

    ``forward(X, W, labels, lam)`` returns the mean loss and keeps what the
    backward needs, including the ``lam`` it used: ``backward()`` always
    differentiates the forward that ran, whatever the schedule does between
    the two calls.  ``version`` is a key of ``versions(KERNELS)`` or :data:`TENSOR_CORES`; device buffers are
    kept between calls of the same shape.
    """

    def __init__(self, m, version: str = "fused"):
        self.m = check_margin(m)
        known = [*versions(KERNELS), TENSOR_CORES[0]]
        if version not in known:
            raise ValueError(f"version must be one of {', '.join(known)}, got {version!r}")
        if version == TENSOR_CORES[0]:
            _sgemm_hopper.require_hopper()
        self.version = version
        self._saved = None
        self._buffers: dict = {}

    def _buffer(self, name, shape, dtype=np.float32):
        """The layer's device buffer ``name``, allocated once per shape (no allocation inside a timed step)."""
        buf = self._buffers.get(name)
        if buf is None or tuple(buf.shape) != tuple(shape) or buf.dtype != np.dtype(dtype):
            buf = self._buffers[name] = empty(shape, dtype)
        return buf

    def forward(self, X, W, labels, lam, sync: bool = True):
        """The mean loss (a float, or with ``sync=False`` a one-element device buffer, nothing copied back)."""
        N, C, D, labels, m, lam = check_layer_inputs(X, W, labels, self.m, lam)
        Xd, Wd, yd = _device(X), _device(W), _device(labels, np.int32)
        loss = self._buffer("loss", (N,))
        if self.version == "epilogue":
            F, _, stats = gemm_margin_forward(
                Xd, Wd, yd, m, lam, Wt=self._buffer("Wt", (D, C)), F=self._buffer("F", (N, C)),
                target=self._buffer("target", (N,)), partial=self._buffer("partial", (N, blocks_for(C, _sgemm.WARPTILE_DEFAULT["WT_BN"]), 2)),
                loss=loss, stats=self._buffer("stats", (N, 4)))
            saved = {"stats": stats}
        elif self.version == TENSOR_CORES[0]:
            F = _sgemm_hopper.sgemm_tf32x3_wgmma(Xd, Wd, out=self._buffer("F", (N, C)), b_transposed=True, sync=False)
        else:
            F = fc_forward(Xd, Wd, Wt=self._buffer("Wt", (D, C)), out=self._buffer("F", (N, C)))
        if self.version in ("fused", TENSOR_CORES[0]):
            stats = self._buffer("stats", (N, 4))
            fused_forward(F, Xd, Wd, yd, m, lam, loss=loss, stats=stats)
            saved = {"stats": stats}
        elif self.version in ("caffe", "factored"):
            Fp, saved = forward_caffe(F, Xd, Wd, yd, m, lam, in_place=True, alloc=self._buffer)
            P, _ = _softmax.cross_entropy_forward(Fp, yd, probs=self._buffer("P", (N, C)), loss=loss)
            saved["P"] = P
        self._saved = {"X": Xd, "W": Wd, "labels": yd, "F": F, "lam": lam, "shape": (N, C, D), **saved}
        mean = mean_loss(loss, out=self._buffer("mean", (1,)))
        return float(mean.get()[0]) if sync else mean

    def backward(self, sync: bool = True):
        """``(dX, dW)`` of the mean loss of the last forward (NumPy arrays, or device buffers with ``sync=False``)."""
        if self._saved is None:
            raise RuntimeError("backward() needs a forward() first")
        s = self._saved
        N, C, D = s["shape"]
        m, lam = self.m, s["lam"]
        if self.version in ("fused", "epilogue", TENSOR_CORES[0]):
            grad = self._buffers.get("grad_loss")
            if grad is None or tuple(grad.shape) != (N,):
                grad = self._buffers["grad_loss"] = to_device(np.full(N, 1.0 / N, np.float32))
            Gt, beta, delta = fused_backward(s["F"], s["labels"], s["stats"], grad, m, lam,
                                             Gt=self._buffer("Gt", (N, C)), beta=self._buffer("beta", (N,)),
                                             delta=self._buffer("delta", (N,)), patched=self.version == "epilogue")
            dX, dW = _gemm_backward(Gt, beta, delta, s["X"], s["W"], s["labels"], N, C, D,
                                    dWt=self._buffer("dWt", (D, C)),
                                    gamma=self._buffer("gamma", (C,)), dX=self._buffer("dX", (N, D)),
                                    dW=self._buffer("dW", (C, D)),
                                    Xt=self._buffer("Xt", (D, N)) if self.version == TENSOR_CORES[0] else None)
        else:
            G = _softmax.cross_entropy_backward(s["P"], s["labels"], out=self._buffer("G", (N, C)))
            saved = {k: s[k] for k in ("x_norm", "w_norm", "cos_theta")}
            step = backward_naive if self.version == "caffe" else backward_factored
            dX, dW = step(G, s["X"], s["W"], s["labels"], saved, m, lam, alloc=self._buffer)
        if not sync:
            return dX, dW
        return dX.get(), dW.get()


def layer_vjp(X, W, labels, m, lam, grad_loss):
    """``(dX, dW)`` of sum_i grad_loss[i] loss_i by the fused kernels and the factored GEMM backward."""
    N, C, D, labels, m, lam = check_layer_inputs(X, W, labels, m, lam)
    Xd, Wd, yd = _device(X), _device(W), _device(labels, np.int32)
    F = fc_forward(Xd, Wd)
    _, stats = fused_forward(F, Xd, Wd, yd, m, lam)
    Gt, beta, delta = fused_backward(F, yd, stats, _device(np.ravel(grad_loss)), m, lam)
    dX, dW = _gemm_backward(Gt, beta, delta, Xd, Wd, yd, N, C, D)
    return dX.get(), dW.get()


def layer_loss(X, W, labels, m, lam, version: str = "fused") -> float:
    """The mean loss of the layer on the book's kernels."""
    return LargeMarginSoftmax(m, version).forward(X, W, labels, lam)


def layer_gradients(X, W, labels, m, lam, version: str = "fused"):
    """``(mean loss, dX, dW)`` on the book's kernels."""
    layer = LargeMarginSoftmax(m, version)
    loss = layer.forward(X, W, labels, lam)
    dX, dW = layer.backward()
    return loss, dX, dW


# --------------------------------------------------------------------------- napkin math


def gemm_flops(N: int, C: int, D: int) -> float:
    """The three GEMMs of a training step (forward, dX, dW)."""
    return 3 * 2.0 * N * C * D


def after_gemm_bytes(N: int, C: int, D: int) -> int:
    """The least traffic of everything after the forward GEMM and before the backward GEMMs.

    Forward: read F once, X once and the label rows of W (at most min(N, C)
    rows), write one loss per sample.  Backward: read F again and write G~.
    """
    forward = 4 * (N * C + N * D + min(N, C) * D + N)
    backward = 4 * (2 * N * C + 2 * N)
    return forward + backward


# --------------------------------------------------------------------------- kernel records


def _grid_stride_launch(count):
    return lambda shape: launch_1d(_grid(int(count(shape))), BLOCK)


_cos_launch = _grid_stride_launch(lambda s: s["n"])
_patch_launch = _grid_stride_launch(lambda s: s["batch"] * s["classes"])


def _margin_grad_launch(shape) -> LaunchConfig:
    return launch_1d(blocks_for(int(shape["batch"]), MARGIN_GRAD_SAMPLES_PER_BLOCK), 32 * MARGIN_GRAD_SAMPLES_PER_BLOCK)


def _cos_reference(cos_theta, m):
    c = np.clip(np.asarray(cos_theta, np.float64), -1, 1)
    return np.cos(m * np.arccos(c)), margin_k(c, m)


def _margin_grad_reference(grad_target, X, W, labels, m, lam):
    X, W = np.asarray(X, np.float64), np.asarray(W, np.float64)
    b, a = norms(X, W, labels)
    coef_w, coef_x, _ = label_coefficients(cosine((X * W[labels]).sum(axis=1), a, b), a, b, m, lam)
    return np.asarray(grad_target, np.float64)[:, None] * (coef_w[:, None] * W[labels] + coef_x[:, None] * X)


def _patch_reference(F, labels, x_norm, w_norm, m, lam):
    return patch_reference(F, labels, x_norm, np.asarray(w_norm)[np.asarray(labels)], m, lam)


# The kernels the exercises grade, all of version 1.
_GRADED = (
    KernelVersion(TOPIC, "lsoftmax_cos_mtheta", cos_mtheta_kernel, _cos_launch,
                  bytes=lambda s: 12.0 * s["n"], flops=lambda s: 12.0 * s["n"] * s["m"], reference=_cos_reference,
                  number=1, title="cos(m theta) by the binomial expansion, and k"),
    KernelVersion(TOPIC, "lsoftmax_patch_logits", patch_logits, _patch_launch,
                  bytes=lambda s: 8.0 * s["batch"] * s["classes"] + 12.0 * s["batch"] + 4.0 * s["classes"],
                  flops=lambda s: 30.0 * s["batch"], reference=_patch_reference,
                  number=1, title="the three kernels after the GEMM as one out-of-place pass"),
    KernelVersion(TOPIC, "lsoftmax_margin_grad_input", margin_grad_input, _margin_grad_launch,
                  bytes=lambda s: 4.0 * (3 * s["batch"] * s["dim"] + min(s["batch"], s["classes"]) * s["dim"]
                                         + 2 * s["batch"]),
                  flops=lambda s: 10.0 * s["batch"] * s["dim"], reference=_margin_grad_reference,
                  number=1, title="the margin term's gradient with respect to the features"),
)


def _in_teaching_order(records) -> list[KernelVersion]:
    """The records in the order lsoftmax.cu defines their kernels, which is the chapter's order."""
    source = source_path(TOPIC).read_text()
    return sorted(records, key=lambda record: function_lines(source, record.kernel)[0])


# The layer versions' kernels are recorded in their own module (it is given this one, and imports nothing of it).
KERNELS = kernel_table(*_in_teaching_order((*_GRADED, *layer_records(sys.modules[__name__]))))
