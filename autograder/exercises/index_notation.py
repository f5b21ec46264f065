"""Exercises of the chapter "Index notation": layers written as comprehensions, and one kernel
written by hand that must beat the kernel generated from a comprehension.

The index-notation exercises (``language="tc"``) are graded by generating the kernel from the
text of the ``%%tc`` cell in the grading process and running it on visible, hidden and secret
shapes against float64 NumPy: sizes of 1, primes, odd sizes that pooling must round down, and
one shape per student.  Only correctness is graded: the notation, not a schedule.  Each asks for
a variant of a comprehension the chapter prints (``kernels/index_notation/generated.py`` and
``examples.py``), so that the printed text is no answer: the batched product with its second
operand transposed (attention's scores Q K^T), average pooling over overlapping 3 x 3 windows at
stride 2, a depthwise convolution with a depth multiplier, the capsule prediction with matrices
shared across positions.  Their answers are written nowhere a student is given (not even as a
generated reference kernel, whose source would spell the answer out), so they have no reference
kernel and their flop and byte counts are declared here.

``mv_faster`` is a CUDA exercise: the product of a matrix with a few vectors at once, C = x A^T for
N vectors x, each row of A read once for all of them.  With one vector it is the chapter's ``mv``,
and there the naive kernel the generator writes for ``C(i) +=! A(i,k) * x(k)`` (one thread per
row) is the speed reference: the speed points go to a kernel that beats it on a matrix with few,
long rows.
"""

from __future__ import annotations

import numpy as np

from kernels.index_notation import generated
from kernels.index_notation.examples import MV

from ..exercise import Exercise, FormulaMistake, LaunchConfig, LaunchKey, ReferenceKernel, ceil_div, reducing
from ..exercise import varied as _varied
from ._parts import shapes


def varied(rng: np.random.Generator, shape, mean: float) -> np.ndarray:
    """Values around ``mean`` with a scale spread over one decade, float32 (no exact zeros)."""
    return _varied(rng, shape, mean, decades=1.0, spread=0.6)


def _no_launch(shape, launch) -> LaunchConfig:
    return LaunchConfig((1, 1, 1), (1, 1, 1), 0)


def _f64(a) -> np.ndarray:
    return np.asarray(a, np.float64)


def _tc_exercise(name, title, signature, make_inputs, output, compute, visible, hidden, secret, flops, bytes_moved,
                 description, reductions=(), mistakes=()) -> Exercise:
    """An index-notation exercise: correctness only.  ``signature`` is the first line of the comprehension asked
    for (what the student's cell starts with); ``compute(inputs, magnitude)`` its float64 result from the inputs
    (from their magnitudes when ``magnitude``: the error scale of a sum of products); ``mistakes``, the common ways
    to get it wrong, each named when the output shows it: a :class:`~autograder.exercise.FormulaMistake`, or
    (key, words, compute) made into one whose scale comes from the magnitudes as well."""

    def magnitudes(inputs):
        return {key: np.abs(value) if isinstance(value, np.ndarray) else value for key, value in inputs.items()}

    formula_mistakes = tuple(
        mistake if isinstance(mistake, FormulaMistake) else
        FormulaMistake(mistake[0], mistake[1], lambda inputs, wrong=mistake[2]: {output: wrong(inputs)},
                       lambda inputs, wrong=mistake[2]: {output: wrong(magnitudes(inputs))})
        for mistake in mistakes)

    return Exercise(
        name=name, title=title, kernel=name, signature=signature, make_inputs=make_inputs,
        reference=lambda inputs: {output: compute(inputs)},
        error_scale=lambda inputs: {output: compute(magnitudes(inputs))},
        visible_shapes=visible, hidden_shapes=hidden, secret_shapes=secret, launch_keys=(), launch_config=_no_launch,
        correctness_points=5.0, speed_points=0.0, reference_kernel=None, flops=flops, bytes_moved=bytes_moved,
        description=description, language="tc", reductions=reductions, formula_mistakes=formula_mistakes)


# ------------------------------------------------------------------------------ 1. batched product, Y transposed
def _bmm_inputs(s, rng):
    return {"X": varied(rng, (s["B"], s["M"], s["K"]), 0.3), "Y": varied(rng, (s["B"], s["N"], s["K"]), -0.2),
            "Z": None}


BMM = "B M K N"


def _bmm_terms(inputs) -> np.ndarray:
    """X(b,i,k) and Y(b,j,k) side by side: axes b, i, j, k."""
    return _f64(inputs["X"])[:, :, None, :], _f64(inputs["Y"])[:, None, :, :]


BMM_MISTAKES = (
    FormulaMistake("maximum for sum", "with the largest product over k (max=!) where their sum is asked for (+=!)",
                   lambda inputs: {"Z": np.max(np.multiply(*_bmm_terms(inputs)), axis=3)}),
    FormulaMistake("added for multiplied", "with X(b,i,k) + Y(b,j,k) summed over k, the terms added where they are "
                   "to be multiplied: is the operator between X and Y *?",
                   lambda inputs: {"Z": np.sum(np.add(*_bmm_terms(inputs)), axis=3)}),
)

TC_BATCHED_MATMUL = _tc_exercise(
    "tc_batched_matmul", "A batched matrix product with the second operand transposed (attention's scores)",
    "def batched_matmul_nt(float(B,M,K) X, float(B,N,K) Y) -> (Z)", _bmm_inputs, "Z",
    lambda i: np.einsum("bik,bjk->bij", _f64(i["X"]), _f64(i["Y"])),
    shapes(BMM, ((1, 2, 3, 4), (3, 5, 7, 6), (2, 17, 9, 33))),
    shapes(BMM, ((1, 1, 1, 1), (4, 1, 40, 3), (2, 33, 1, 17), (5, 13, 29, 2), (1, 64, 70, 65))),
    lambda rng, launch: shapes(BMM, [tuple(int(v) for v in rng.integers(2, 20, 4))]),
    flops=lambda s: 2.0 * s["B"] * s["M"] * s["N"] * s["K"],
    bytes_moved=lambda s: 4.0 * s["B"] * (s["M"] * s["K"] + s["N"] * s["K"] + s["M"] * s["N"]),
    description="Z(b,i,j) = sum over k of X(b,i,k) * Y(b,j,k): one product X[b] Y[b]^T per b, both operands read "
                "along k (the scores Q K^T of attention, one matrix per head).",
    reductions=reducing("X", 2), mistakes=BMM_MISTAKES)


# ------------------------------------------------------------------------------ 2. average pooling, 3 x 3 windows, stride 2
def _pool_inputs(s, rng):
    return {"X": varied(rng, (s["N"], s["C"], s["H"], s["W"]), 0.5), "Y": None}


def pooled(H: int, W: int) -> tuple[int, int]:
    """The output size of 3 x 3 windows at stride 2: floor((H - 3) / 2) + 1 by floor((W - 3) / 2) + 1."""
    return (H - 3) // 2 + 1, (W - 3) // 2 + 1


def _avgpool(inputs) -> np.ndarray:
    X = _f64(inputs["X"])
    return _windows(X, 3, np.add) / 9


def _windows(X, window: int, combine) -> np.ndarray:
    """``combine`` over the window x window values at rows 2i.., columns 2j.. of X, for the output of 3 x 3 windows
    at stride 2 (np.add: their sum; np.maximum: their largest)."""
    Ho, Wo = pooled(*X.shape[2:])
    Y = np.full((*X.shape[:2], Ho, Wo), 0.0 if combine is np.add else -np.inf)
    for u in range(window):
        for v in range(window):
            Y = combine(Y, X[:, :, u:u + 2 * (Ho - 1) + 1:2, v:v + 2 * (Wo - 1) + 1:2])
    return Y


NCHW = "N C H W"

TC_AVGPOOL = _tc_exercise(
    "tc_avgpool2x2", "Average pooling over overlapping 3 x 3 windows with stride 2",
    "def avgpool3x3s2(float(N,C,H,W) X) -> (Y)", _pool_inputs, "Y", _avgpool,
    shapes(NCHW, ((1, 1, 3, 3), (2, 3, 8, 6), (1, 4, 9, 7))),
    shapes(NCHW, ((1, 1, 4, 3), (3, 2, 3, 5), (2, 5, 17, 16), (1, 1, 28, 28), (4, 3, 11, 4))),
    lambda rng, launch: shapes(NCHW, [(int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(3, 24)),
                                       int(rng.integers(3, 24)))]),
    flops=lambda s: 9.0 * s["N"] * s["C"] * pooled(s["H"], s["W"])[0] * pooled(s["H"], s["W"])[1],
    bytes_moved=lambda s: 4.0 * s["N"] * s["C"] * (s["H"] * s["W"] + pooled(s["H"], s["W"])[0] * pooled(s["H"], s["W"])[1]),
    description="Y(n,c,i,j) = the mean of X over the 3 x 3 window at rows 2i .. 2i+2 and columns 2j .. 2j+2: windows "
                "that overlap by one row and column; Y is N x C x (floor((H-3)/2) + 1) x (floor((W-3)/2) + 1).",
    reductions=reducing("X", 2, 3),
    mistakes=(("maximum", "with the largest value of each window where its mean belongs: max=! where the sum of the "
                          "window's nine values divided by nine (+=! ... / 9) is asked for.",
               lambda inputs: _windows(_f64(inputs["X"]), 3, np.maximum)),
              ("2 x 2 windows", "with windows of two by two values (the chapter's avgpool2x2: the mean of X at rows 2i, "
                                "2i+1 and columns 2j, 2j+1) where windows of three by three belong: u and v each run "
                                "over three values, and the sum is divided by nine.",
               lambda inputs: _windows(_f64(inputs["X"]), 2, np.add) / 4)))


# ------------------------------------------------------------------------------ 3. depthwise convolution, depth multiplier
def _dw_inputs(s, rng):
    return {"X": varied(rng, (s["N"], s["C"], s["H"], s["W"]), 0.2),
            "F": varied(rng, (s["C"], s["Q"], s["K"], s["K"]), 0.0), "Y": None}


def _depthwise(inputs) -> np.ndarray:
    X, F = _f64(inputs["X"]), _f64(inputs["F"])
    N, C, H, W = X.shape
    _, Q, K, _ = F.shape
    Y = np.zeros((N, C, Q, H - K + 1, W - K + 1))
    for u in range(K):
        for v in range(K):
            Y += X[:, :, None, u:u + H - K + 1, v:v + W - K + 1] * F[None, :, :, u, v, None, None]
    return Y


def _depthwise_channels_summed(inputs) -> np.ndarray:
    """The output of an ordinary convolution over the channels (sum over c of X(n,c) with F(c,q)), the same for every c."""
    Y = _depthwise(inputs).sum(axis=1, keepdims=True)
    return np.broadcast_to(Y, (Y.shape[0], np.shape(inputs["X"])[1], *Y.shape[2:])).copy()


def _dw_out(s) -> int:
    return s["N"] * s["C"] * s["Q"] * (s["H"] - s["K"] + 1) * (s["W"] - s["K"] + 1)


NCQHWK = "N C Q H W K"

TC_DEPTHWISE = _tc_exercise(
    "tc_depthwise_conv", "A depthwise convolution with a depth multiplier",
    "def depthwise_multiplier(float(N,C,H,W) X, float(C,Q,KH,KW) F) -> (Y)", _dw_inputs, "Y", _depthwise,
    shapes(NCQHWK, ((1, 1, 1, 3, 3, 3), (2, 3, 2, 8, 7, 3), (1, 4, 3, 10, 12, 5))),
    shapes(NCQHWK, ((1, 1, 2, 1, 1, 1), (3, 2, 4, 5, 9, 2), (1, 7, 1, 13, 11, 3), (2, 16, 3, 9, 9, 1), (1, 3, 5, 6, 6, 6))),
    lambda rng, launch: shapes(NCQHWK, [(int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(2, 5)),
                                         int(rng.integers(5, 16)), int(rng.integers(5, 16)), int(rng.choice([1, 3, 5])))]),
    flops=lambda s: 2.0 * _dw_out(s) * s["K"] ** 2,
    bytes_moved=lambda s: 4.0 * (s["N"] * s["C"] * s["H"] * s["W"] + s["C"] * s["Q"] * s["K"] ** 2 + _dw_out(s)),
    description="Y(n,c,q,h,w) = sum over kh, kw of X(n,c,h+kh,w+kw) * F(c,q,kh,kw): each input channel c convolved "
                "with Q filters of its own (the depth multiplier of MobileNet's depthwise layers: Y, N x C x Q x H' x W', "
                "is the NCHW output of C*Q maps, map c*Q + q); no sum over channels, no padding, stride 1.",
    reductions=reducing("F", 2, 3),
    mistakes=(("channels summed", "with the channels summed, as in an ordinary convolution: every Y(n,c,q,h,w) holds the "
                                  "sum over all channels of X(n,c',..) * F(c',q,..), where a depthwise convolution "
                                  "keeps channel c apart -- c is an index of the output, read in X and F as c.",
               _depthwise_channels_summed),))


# ------------------------------------------------------------------------------ 4. capsule predictions, shared matrices
def _caps_inputs(s, rng):
    return {"u": varied(rng, (s["B"], s["P"], s["T"], s["E"]), 0.1),
            "W": varied(rng, (s["T"], s["J"], s["D"], s["E"]), 0.0), "u_hat": None}


def _caps_out(s) -> int:
    return s["B"] * s["P"] * s["T"] * s["J"] * s["D"]


CAPSULE_AXES = "B P T E J D"

TC_CAPSULE = _tc_exercise(
    "tc_capsule_predict", "The predictions of a convolutional capsule layer, matrices shared across positions",
    "def capsule_predict_shared(float(B,P,T,E) u, float(T,J,D,E) W) -> (u_hat)", _caps_inputs, "u_hat",
    lambda i: np.einsum("tjde,bpte->bptjd", _f64(i["W"]), _f64(i["u"])),
    shapes(CAPSULE_AXES, ((1, 1, 2, 8, 3, 16), (2, 3, 5, 8, 4, 16), (3, 4, 7, 4, 2, 5))),
    shapes(CAPSULE_AXES, ((1, 1, 1, 1, 1, 1), (2, 36, 4, 8, 10, 16), (1, 2, 3, 9, 1, 7), (4, 5, 2, 8, 3, 2))),
    lambda rng, launch: shapes(CAPSULE_AXES, [tuple(int(v) for v in rng.integers(1, 10, 6))]),
    flops=lambda s: 2.0 * _caps_out(s) * s["E"],
    bytes_moved=lambda s: 4.0 * (s["B"] * s["P"] * s["T"] * s["E"] + s["T"] * s["J"] * s["D"] * s["E"] + _caps_out(s)),
    description="u_hat(b,p,t,j,d) = sum over e of W(t,j,d,e) * u(b,p,t,e): the input capsule of type t at position p "
                "of the grid predicts every output capsule j through the D x E matrix W(t,j) of its type, the same at "
                "every position (a convolutional capsule layer's weight sharing).",
    reductions=reducing("W", 3),
    mistakes=(("products squared", "with every product squared: the sum over e of (W(t,j,d,e) * u(b,p,t,e))^2, where "
                                   "the sum of the products W(t,j,d,e) * u(b,p,t,e) belongs (each factor once).",
               lambda i: np.einsum("tjde,bpte->bptjd", _f64(i["W"]) ** 2, _f64(i["u"]) ** 2)),))


# ------------------------------------------------------------------------------ 5. beat the generated kernel, N vectors
MV_AXES = "M K N"


def _mv_dims(s):
    return int(s["M"]), int(s["K"]), int(s["N"])


def _mv_inputs(s, rng):
    M, K, N = _mv_dims(s)
    return {"M": M, "K": K, "N": N, "A": varied(rng, (M, K), 0.2), "x": varied(rng, (N, K), -0.1), "C": None}


def _products(A, x) -> np.ndarray:
    """C[n] = A x[n] for every vector n, float64 (the chapter's mv, once per vector): C is N x M."""
    return generated.KERNELS["mv"].reference(A, np.asarray(x).T).T


#: Lanes whose partial sums a warp's shuffle tree adds when it starts at offset lanes / 2 (none at 1: no tree).
TREE_LANES = (1, 2, 4, 8, 16)


def _lanes_only(lanes: int):
    """C from the terms of a warp's first ``lanes`` lanes alone, where lane l takes k = l, l + 32, ... ."""
    def reference(inputs):
        A = _f64(inputs["A"]).copy()
        A[:, np.arange(A.shape[1]) % 32 >= lanes] = 0.0
        return {"C": _products(A, inputs["x"])}
    return reference


def _first_vector_only(inputs):
    """C[0] alone; the rows of the other vectors never written (the grader's NaN)."""
    C = np.full((int(inputs["N"]), int(inputs["M"])), np.nan)
    C[0] = _products(inputs["A"], inputs["x"][:1])[0]
    return {"C": C}


MV_MISTAKES = (
    *(FormulaMistake(f"lanes below {lanes}",
                     ("with the terms of lane 0 alone (k = 0, 32, 64, ...) where a warp's lanes take every 32nd k: the "
                      "other 31 lanes' partial sums are never added to lane 0's -- is there a shuffle sum over the "
                      "warp (offsets 16, 8, 4, 2, 1) before lane 0 stores?" if lanes == 1 else
                      f"with the terms of the first {lanes} lanes alone (k % 32 < {lanes}) where a warp's lanes take "
                      f"every 32nd k: the shuffle tree starts at offset {lanes // 2}, so only {lanes} lanes' partial "
                      f"sums reach lane 0 -- it starts at 16 to add all 32"),
                     _lanes_only(lanes)) for lanes in TREE_LANES),
    FormulaMistake("first vector only", "with the first vector alone: C[0] is right, and the rows of C for the other "
                   "vectors are never written -- does the loop over the N vectors run past the first?",
                   _first_vector_only),
)


MV_FASTER = Exercise(
    name="mv_faster",
    title="Faster than the generated kernel: a matrix with few rows times a few vectors",
    signature="mv_faster(int M, int K, int N, const float* A, const float* x, float* C)",
    make_inputs=_mv_inputs,
    reference=lambda inputs: {"C": _products(inputs["A"], inputs["x"])},
    error_scale=lambda inputs: {"C": _products(np.abs(inputs["A"]), np.abs(inputs["x"]))},
    visible_shapes=shapes(MV_AXES, ((1, 1, 1), (7, 33, 2), (64, 100, 1), (3, 1000, 3))),
    hidden_shapes=shapes(MV_AXES, ((1, 5000, 3), (33, 1, 2), (257, 31, 1), (100, 4097, 4), (2, 65, 7), (1000, 3, 5))),
    secret_shapes=lambda rng, launch: shapes(MV_AXES, [(int(rng.integers(2, 300)), int(rng.integers(2, 3000)),
                                                        int(rng.integers(2, 7)))]),
    launch_keys=(
        LaunchKey("block", 32, 1024, default=256, multiple_of=32, help="threads per block; default 256"),
        LaunchKey("rows", 1, 1024, default=1, help="rows of A per block; default 1 (grid = ceil(M / rows))"),
    ),
    launch_config=lambda s, launch: LaunchConfig((ceil_div(_mv_dims(s)[0], launch["rows"]), 1, 1),
                                                 (launch["block"], 1, 1), 0),
    correctness_points=4.0,
    speed_points=4.0,
    reference_kernel=ReferenceKernel(generated.KERNELS["mv"], source=generated.source_of(MV),
                                     arg_order=("M", "K", "A", "x", "C"), solves={"N": 1}),
    timing_shape={"M": 64, "K": 1 << 17, "N": 1},
    speed_bands=((4.0, 1.0), (2.0, 0.75), (1.2, 0.5)),
    reductions=reducing("A", 1),
    formula_mistakes=MV_MISTAKES,
    description=("C[n][i] = sum over k < K of A[i][k] * x[n][k] for every vector n < N and row i < M (A is M x K, x is "
                 "N x K, C is N x M, row-major): a matrix times N vectors, each row of A best read once for all of "
                 "them. Block b computes rows b*rows .. b*rows + rows - 1 with `block` threads: grid ceil(M / rows). "
                 "Speed is measured against the naive generated kernel of C(i) +=! A(i,k) * x(k) (one thread per "
                 "row) at M = 64, K = 131072 and one vector, where the two compute the same."),
)

EXERCISES = [TC_BATCHED_MATMUL, TC_AVGPOOL, TC_DEPTHWISE, TC_CAPSULE, MV_FASTER]
