"""Exercises of the chapter "Index notation": layers written as comprehensions, and one kernel
written by hand that must beat the kernel generated from a comprehension.

The index-notation exercises (``language="tc"``) are graded by generating the kernel from the
text of the ``%%tc`` cell in the grading process and running it on visible, hidden and secret
shapes against float64 NumPy: sizes of 1, primes, odd sizes that pooling must round down, and
one shape per student.  Only correctness is graded: the notation, not a schedule.

``mv_faster`` is a CUDA exercise whose reference kernel is the naive kernel the generator writes
for ``C(i) +=! A(i,k) * x(k)`` (one thread per row): the speed points go to a kernel that beats it
on a matrix with few, long rows.

Every exercise's reference record is a kernel generated from a comprehension, in
``kernels/index_notation/generated.py`` (``KERNELS``), with its float64 reference, bytes and flops.
"""

from __future__ import annotations

import numpy as np

from kernels.index_notation import generated
from kernels.index_notation.examples import MV

from ..exercise import Exercise, LaunchConfig, LaunchKey, ReferenceKernel, ceil_div, reducing
from ..exercise import varied as _varied
from ._parts import from_record, shapes


def varied(rng: np.random.Generator, shape, mean: float) -> np.ndarray:
    """Values around ``mean`` with a scale spread over one decade, float32 (no exact zeros)."""
    return _varied(rng, shape, mean, decades=1.0, spread=0.6)


def _no_launch(shape, launch) -> LaunchConfig:
    return LaunchConfig((1, 1, 1), (1, 1, 1), 0)


def _tc_exercise(name, title, text, make_inputs, visible, hidden, secret, description, reductions) -> Exercise:
    """An index-notation exercise: correctness only.  ``text`` is the comprehension asked for: its first
    line is the signature the student writes, its generated kernel the reference record (timed on the last
    hidden shape, for information only), and that record's float64 reference the exercise's."""
    comprehension = generated.generated(text)
    definition = comprehension.checked.definition
    (output,) = definition.outputs
    record = generated.KERNELS[comprehension.name]
    return Exercise(
        name=name, title=title, kernel=name, signature=text.split("{")[0].strip(), make_inputs=make_inputs,
        **from_record(record, output, tuple(p.name for p in definition.params)), visible_shapes=visible,
        hidden_shapes=hidden, secret_shapes=secret, launch_keys=(), launch_config=_no_launch,
        correctness_points=5.0, speed_points=0.0, reference_kernel=ReferenceKernel(record, source=generated.source_of(text)),
        timing_shape=hidden[-1], description=description, language="tc", reductions=reductions)


# ------------------------------------------------------------------------------ 1. batched matrix product
def _bmm_inputs(s, rng):
    return {"X": varied(rng, (s["B"], s["M"], s["K"]), 0.3), "Y": varied(rng, (s["B"], s["K"], s["N"]), -0.2),
            "Z": None}


BMM = "B M K N"

TC_BATCHED_MATMUL = _tc_exercise(
    "tc_batched_matmul", "A batched matrix product", generated.BATCHED_MATMUL, _bmm_inputs,
    shapes(BMM, ((1, 2, 3, 4), (3, 5, 7, 6), (2, 17, 9, 33))),
    shapes(BMM, ((1, 1, 1, 1), (4, 1, 40, 3), (2, 33, 1, 17), (5, 13, 29, 2), (1, 64, 70, 65))),
    lambda rng, launch: shapes(BMM, [tuple(int(v) for v in rng.integers(2, 20, 4))]),
    "Z(b,i,j) = sum over k of X(b,i,k) * Y(b,k,j): one matrix product per b.", reducing("X", 2))


# ------------------------------------------------------------------------------ 2. average pooling, stride 2
def _pool_inputs(s, rng):
    return {"X": varied(rng, (s["N"], s["C"], s["H"], s["W"]), 0.5), "Y": None}


NCHW = "N C H W"

TC_AVGPOOL = _tc_exercise(
    "tc_avgpool2x2", "Average pooling over 2 x 2 windows with stride 2", generated.AVGPOOL2X2, _pool_inputs,
    shapes(NCHW, ((1, 1, 2, 2), (2, 3, 8, 6), (1, 4, 9, 7))),
    shapes(NCHW, ((1, 1, 3, 3), (3, 2, 2, 5), (2, 5, 17, 16), (1, 1, 28, 28), (4, 3, 11, 2))),
    lambda rng, launch: shapes(NCHW, [(int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(2, 24)),
                                       int(rng.integers(2, 24)))]),
    "Y(n,c,i,j) = the mean of X over the 2 x 2 window at rows 2i, 2i+1 and columns 2j, 2j+1; an odd last row "
    "or column of X is left out (Y is N x C x floor(H/2) x floor(W/2)).", reducing("X", 2, 3))


# ------------------------------------------------------------------------------ 3. depthwise convolution
def _dw_inputs(s, rng):
    return {"X": varied(rng, (s["N"], s["C"], s["H"], s["W"]), 0.2), "F": varied(rng, (s["C"], s["K"], s["K"]), 0.0),
            "Y": None}


NCHWK = "N C H W K"

TC_DEPTHWISE = _tc_exercise(
    "tc_depthwise_conv", "A depthwise convolution", generated.DEPTHWISE, _dw_inputs,
    shapes(NCHWK, ((1, 1, 3, 3, 3), (2, 3, 8, 7, 3), (1, 4, 10, 12, 5))),
    shapes(NCHWK, ((1, 1, 1, 1, 1), (3, 2, 5, 9, 2), (1, 7, 13, 11, 3), (2, 16, 9, 9, 1), (1, 3, 6, 6, 6))),
    lambda rng, launch: shapes(NCHWK, [(int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(5, 16)),
                                        int(rng.integers(5, 16)), int(rng.choice([1, 3, 5])))]),
    "Y(n,c,h,w) = sum over kh, kw of X(n,c,h+kh,w+kw) * F(c,kh,kw): each channel with its own filter, no "
    "sum over channels; no padding, stride 1.", reducing("F", 1, 2))


# ------------------------------------------------------------------------------ 4. capsule predictions
def _caps_inputs(s, rng):
    return {"u": varied(rng, (s["B"], s["I"], s["E"]), 0.1), "W": varied(rng, (s["I"], s["J"], s["D"], s["E"]), 0.0),
            "u_hat": None}


CAPSULE_AXES = "B I E J D"

TC_CAPSULE = _tc_exercise(
    "tc_capsule_predict", "The capsule layer's predictions", generated.CAPSULE_PREDICT, _caps_inputs,
    shapes(CAPSULE_AXES, ((1, 2, 8, 3, 16), (2, 5, 8, 4, 16), (3, 7, 4, 2, 5))),
    shapes(CAPSULE_AXES, ((1, 1, 1, 1, 1), (2, 32, 8, 10, 16), (1, 3, 9, 1, 7), (4, 2, 8, 3, 2))),
    lambda rng, launch: shapes(CAPSULE_AXES, [tuple(int(v) for v in rng.integers(1, 10, 5))]),
    "u_hat(b,i,j,d) = sum over e of W(i,j,d,e) * u(b,i,e): every input capsule i predicts every output capsule j "
    "through its own D x E matrix W(i,j).", reducing("W", 3))


# ------------------------------------------------------------------------------ 5. beat the generated kernel
def _mv_dims(s):
    return int(s["M"]), int(s["K"])


def _mv_inputs(s, rng):
    M, K = _mv_dims(s)
    return {"M": M, "K": K, "A": varied(rng, (M, K), 0.2), "x": varied(rng, K, -0.1), "C": None}


MV_FASTER = Exercise(
    name="mv_faster",
    title="Faster than the generated kernel: a matrix-vector product with few rows",
    signature="mv_faster(int M, int K, const float* A, const float* x, float* C)",
    make_inputs=_mv_inputs,
    **from_record(generated.KERNELS["mv"], "C", ("A", "x")),
    visible_shapes=shapes("M K", ((1, 1), (7, 33), (64, 100), (3, 1000))),
    hidden_shapes=shapes("M K", ((1, 5000), (33, 1), (257, 31), (100, 4097), (2, 65), (1000, 3))),
    secret_shapes=lambda rng, launch: shapes("M K", [(int(rng.integers(2, 300)), int(rng.integers(2, 3000)))]),
    launch_keys=(
        LaunchKey("block", 32, 1024, default=256, multiple_of=32, help="threads per block; default 256"),
        LaunchKey("rows", 1, 1024, default=1, help="rows of A per block; default 1 (grid = ceil(M / rows))"),
    ),
    launch_config=lambda s, launch: LaunchConfig((ceil_div(_mv_dims(s)[0], launch["rows"]), 1, 1),
                                                 (launch["block"], 1, 1), 0),
    correctness_points=4.0,
    speed_points=4.0,
    reference_kernel=ReferenceKernel(generated.KERNELS["mv"], source=generated.source_of(MV)),
    timing_shape={"M": 64, "K": 1 << 17},
    speed_bands=((4.0, 1.0), (2.0, 0.75), (1.2, 0.5)),
    reductions=reducing("A", 1),
    description=("C[i] = sum over k < K of A[i][k] * x[k] for i < M (A is M x K, row-major). Block b computes "
                 "rows b*rows .. b*rows + rows - 1 with `block` threads: grid ceil(M / rows). Speed is measured "
                 "against the naive generated kernel (one thread per row) at M = 64, K = 131072."),
)

EXERCISES = [TC_BATCHED_MATMUL, TC_AVGPOOL, TC_DEPTHWISE, TC_CAPSULE, MV_FASTER]
