"""The kernels of the chapter "Index notation": kernels generated (naive schedule) from comprehensions.

These have no ``.cu`` file: their CUDA C is what the language of
:mod:`kernels.index_notation` writes for each comprehension below, so the
source can never drift from the generator.  ``KERNELS`` holds one
:class:`~kernels.runtime.versions.KernelVersion` per comprehension, as the
other topics do (no rung of a ladder): its launch for a shape is the
generated kernel's plan, and its bytes, flops and float64 reference are the
comprehension's.

* ``mv``: ``C(i) +=! A(i,k) * x(k)``, one thread per row; the kernel the
  exercise ``mv_faster`` must beat (with one vector: the exercise multiplies
  several).  ``MV_SPLIT`` is the split reduction the chapter shows for it.
* ``batched_matmul``, ``avgpool2x2``, ``depthwise``, ``capsule_predict``: four
  layers of earlier chapters in their plain form, the forms the chapter's
  index-notation exercises start from (each exercise asks for a variant: a
  transposed operand, overlapping windows, a depth multiplier, matrices shared
  across positions).

A shape uses the size names of the comprehension; ``sizes`` maps them to the
comprehension's where they differ (the depthwise record's ``K`` is the filter's
``KH`` and ``KW``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from . import NAIVE, Schedule, compile_tc
from .examples import MV
from .runner import check_ranges
from ..runtime.versions import KernelVersion, LaunchConfig, as_launch, kernel_table

TOPIC = "index_notation"

BATCHED_MATMUL = """def batched_matmul(float(B,M,K) X, float(B,K,N) Y) -> (Z) {
    Z(b,i,j) +=! X(b,i,k) * Y(b,k,j)
}"""

AVGPOOL2X2 = """def avgpool2x2(float(N,C,H,W) X) -> (Y) {
    Y(n,c,i,j) +=! X(n,c,2 * i + u,2 * j + v) / 4 where u in 0:2, v in 0:2
}"""

DEPTHWISE = """def depthwise(float(N,C,H,W) X, float(C,KH,KW) F) -> (Y) {
    Y(n,c,h,w) +=! X(n,c,h + kh,w + kw) * F(c,kh,kw)
}"""

CAPSULE_PREDICT = """def capsule_predict(float(B,I,E) u, float(I,J,D,E) W) -> (u_hat) {
    u_hat(b,i,j,d) +=! W(i,j,d,e) * u(b,i,e)
}"""

#: Every comprehension of this module, by name.
COMPREHENSIONS = {"mv": MV, "batched_matmul": BATCHED_MATMUL, "avgpool2x2": AVGPOOL2X2, "depthwise": DEPTHWISE,
                  "capsule_predict": CAPSULE_PREDICT}

#: The split reduction the chapter shows for mv: 128 threads share the sum of one row, two rows per block.
MV_SPLIT = Schedule(split=128, block=(128, 2))


@lru_cache(maxsize=None)
def generated(text: str):
    """The comprehension ``text`` under the naive schedule (compiled once per process)."""
    return compile_tc(text, NAIVE)


def _f64(a) -> np.ndarray:
    return np.asarray(a, np.float64)


# ------------------------------------------------------------------ float64 references
def mv_reference(A, x) -> np.ndarray:
    return _f64(A) @ _f64(x)


def batched_matmul_reference(X, Y) -> np.ndarray:
    return np.einsum("bmk,bkn->bmn", _f64(X), _f64(Y))


def avgpool2x2_reference(X) -> np.ndarray:
    """The mean of every 2 x 2 window at stride 2; an odd last row or column is left out."""
    X = _f64(X)
    N, C, H, W = X.shape
    Ho, Wo = H // 2, W // 2
    return X[:, :, :2 * Ho, :2 * Wo].reshape(N, C, Ho, 2, Wo, 2).mean(axis=(3, 5))


def depthwise_reference(X, F) -> np.ndarray:
    """Each channel convolved with its own K x K filter: no padding, stride 1, no sum over channels."""
    X, F = _f64(X), _f64(F)
    N, C, H, W = X.shape
    _, K, _ = F.shape
    out = np.zeros((N, C, H - K + 1, W - K + 1))
    for u in range(K):
        for v in range(K):
            out += X[:, :, u:u + H - K + 1, v:v + W - K + 1] * F[None, :, u, v, None, None]
    return out


def capsule_predict_reference(u, W) -> np.ndarray:
    return np.einsum("ijde,bie->bijd", _f64(W), _f64(u))


# ------------------------------------------------------------------ launchers
def mv(A, x):
    return generated(MV)(A=A, x=x)


def batched_matmul(X, Y):
    return generated(BATCHED_MATMUL)(X=X, Y=Y)


def avgpool2x2(X):
    return generated(AVGPOOL2X2)(X=X)


def depthwise(X, F):
    return generated(DEPTHWISE)(X=X, F=F)


def capsule_predict(u, W):
    return generated(CAPSULE_PREDICT)(u=u, W=W)


# ------------------------------------------------------------------ records
def _same_names(shape) -> dict:
    return {k: int(v) for k, v in shape.items()}


def _depthwise_sizes(shape) -> dict:
    sizes = {k: int(v) for k, v in shape.items() if k != "K"}
    sizes["KH"] = sizes["KW"] = int(shape["K"])
    return sizes


def launch_of(text: str, sizes: Callable[[dict], dict] = _same_names) -> Callable[[dict], LaunchConfig]:
    """``launch(shape)``: the grid and block the runner launches the generated kernel with."""

    def launch(shape) -> LaunchConfig:
        program = generated(text).program
        (extents,) = check_ranges(program, sizes(shape))
        plan = program.kernels[0]
        return as_launch(plan.grid(extents), plan.block)

    return launch


def source_of(text: str) -> str:
    """The CUDA C the generator writes for ``text`` (naive schedule)."""
    return generated(text).source


def kernel_name(text: str) -> str:
    (plan,) = generated(text).program.kernels
    return plan.name


def _record(text: str, launcher, reference, bytes_, flops, title: str, sizes=_same_names) -> KernelVersion:
    """The record of the kernel generated for ``text``: no rung of a ladder, an exercise's reference."""
    return KernelVersion(TOPIC, kernel_name(text), launcher, launch_of(text, sizes), bytes_, flops, reference,
                         number=None, title=title)


def _pooled(s) -> int:
    return s["N"] * s["C"] * (s["H"] // 2) * (s["W"] // 2)


def _depthwise_out(s) -> int:
    return s["N"] * s["C"] * (s["H"] - s["K"] + 1) * (s["W"] - s["K"] + 1)


KERNELS = kernel_table(
    _record(MV, mv, mv_reference,
            bytes_=lambda s: 4.0 * (s["M"] * s["K"] + s["K"] + s["M"]),
            flops=lambda s: 2.0 * s["M"] * s["K"], title="the matrix-vector product, one thread per row"),
    _record(BATCHED_MATMUL, batched_matmul, batched_matmul_reference,
            bytes_=lambda s: 4.0 * s["B"] * (s["M"] * s["K"] + s["K"] * s["N"] + s["M"] * s["N"]),
            flops=lambda s: 2.0 * s["B"] * s["M"] * s["N"] * s["K"], title="a batch of matrix products"),
    _record(AVGPOOL2X2, avgpool2x2, avgpool2x2_reference,
            bytes_=lambda s: 4.0 * (s["N"] * s["C"] * s["H"] * s["W"] + _pooled(s)),
            flops=lambda s: 4.0 * _pooled(s),  # three additions and a division per output
            title="2 x 2 average pooling"),
    _record(DEPTHWISE, depthwise, depthwise_reference,
            bytes_=lambda s: 4.0 * (s["N"] * s["C"] * s["H"] * s["W"] + s["C"] * s["K"] ** 2 + _depthwise_out(s)),
            flops=lambda s: 2.0 * _depthwise_out(s) * s["K"] ** 2, title="a depthwise convolution",
            sizes=_depthwise_sizes),
    _record(CAPSULE_PREDICT, capsule_predict, capsule_predict_reference,
            bytes_=lambda s: 4.0 * (s["B"] * s["I"] * s["E"] + s["I"] * s["J"] * s["D"] * s["E"]
                                    + s["B"] * s["I"] * s["J"] * s["D"]),
            flops=lambda s: 2.0 * s["B"] * s["I"] * s["J"] * s["D"] * s["E"], title="the capsule prediction vectors"),
)
