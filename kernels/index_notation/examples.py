"""The comprehensions of the chapter (those of the Tensor Comprehensions write-up, made valid where
they were not), each with a float64 NumPy reference written independently of the language, inputs
for a given shape, and the three invalid forms the chapter corrects.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

import numpy as np


@dataclass(frozen=True)
class Example:
    name: str
    text: str
    #: float64 outputs (a tuple, in the order of the definition's outputs) from the inputs
    reference: Callable
    #: shape dict -> positional arguments (NumPy arrays and scalars) in the declaration's order
    make_inputs: Callable
    #: a few small shapes for the emulator, then the chapter's / benchmark's sizes
    shapes: tuple


def _f32(rng, shape, mean=0.0):
    return (mean + rng.standard_normal(shape)).astype(np.float32)


MV = """def mv(float(M,K) A, float(K) x) -> (C) {
    C(i) +=! A(i,k) * x(k)
}"""

MV_TWO_STATEMENTS = """def mv2(float(M,K) A, float(K) x) -> (C) {
    C(i) = 0 where i in 0:M      # the first form: start from zero ...
    C(i) += A(i,k) * x(k)        # ... then accumulate
}"""

#: A plain matrix product: what the benchmark compares with cuBLAS and the GEMM chapter.
MATMUL = """def matmul(float(M,K) A, float(K,N) B) -> (C) {
    C(i,j) +=! A(i,k) * B(k,j)
}"""

SGEMM_AS_WRITTEN = """def sgemm(float a, float b, float(N,M) A, float(M,K) B) -> (C) {
    C(i,j) = b * C(i,j)
    C(i,j) += a * A(i,k) * B(k,j)
}"""

SGEMM = """def sgemm(float a, float b, float(N,M) A, float(M,K) B, float(N,K) C) -> (D) {
    D(i,j) = b * C(i,j)
    D(i,j) += a * A(i,k) * B(k,j)
}"""

FCRELU = """def fcrelu(float(B,M) I, float(N,M) W1, float(N) B1) -> (O1) {
    O1(b,n) +=! I(b,m) * W1(n,m)
    O1(b,n) = O1(b,n) + B1(n)
    O1(b,n) = fmaxf(O1(b,n), 0)
}"""

CONV2D = """def conv2d(float(B,IP,H,W) input, float(OP,IP,KH,KW) weight) -> (output) {
    output(b,op,h,w) +=! input(b,ip,h + kh,w + kw) * weight(op,ip,kh,kw)
}"""

MAXPOOL2X2 = """def maxpool2x2(float(B,C,H,W) input) -> (output) {
    output(b,c,i,j) max=! input(b,c,2 * i + kw,2 * j + kh) where kw in 0:2, kh in 0:2
}"""

GATHER = """def gather(float(N) X, int(A,B) I) -> (Z) {
    Z(i,j) = X(I(i,j))
}"""

SCONV2D_AS_WRITTEN = """def sconv2d(int sh, int sw, float(N,C,H,W) I, float(F,C,KH,KW) W1, float(F) B) -> (O) {
    O(n,f,h,w) +=! I(n,c,sh * h + kh,sw * w + kw) * W1(f,c,kh,kw)
    O(n,f,h,w) = O(n,f,h,w) + B(f)
}"""

SCONV2D = """def sconv2d(float(N,C,H,W) I, float(F,C,KH,KW) W1, float(F) B) -> (O) {
    O(n,f,h,w) +=! I(n,c,2 * h + kh,2 * w + kw) * W1(f,c,kh,kw)   # stride 2, written as a literal
    O(n,f,h,w) = O(n,f,h,w) + B(f)
}"""

CONV1D_AS_WRITTEN = """def conv1d(float(M) I, float(N) K) -> (O) {
    O(i) = K(x) * I(i + x)
}"""

CONV1D = """def conv1d(float(M) I, float(N) K) -> (O) {
    O(i) +=! K(x) * I(i + x)
}"""

#: The three comprehensions that are not valid as the write-up gives them, and their corrections.
INVALID = {
    "sgemm": (SGEMM_AS_WRITTEN, SGEMM),
    "conv1d": (CONV1D_AS_WRITTEN, CONV1D),
    "sconv2d": (SCONV2D_AS_WRITTEN, SCONV2D),
}


def _conv_ref(X, Wt, stride=1):
    X, Wt = X.astype(np.float64), Wt.astype(np.float64)
    N, C, H, W = X.shape
    F, _, KH, KW = Wt.shape
    Ho, Wo = (H - KH) // stride + 1, (W - KW) // stride + 1
    out = np.zeros((N, F, Ho, Wo))
    for kh in range(KH):
        for kw in range(KW):
            patch = X[:, :, kh:kh + stride * (Ho - 1) + 1:stride, kw:kw + stride * (Wo - 1) + 1:stride]
            out += np.einsum("nchw,fc->nfhw", patch, Wt[:, :, kh, kw])
    return out


def _maxpool_ref(X):
    X = X.astype(np.float64)
    B, C, H, W = X.shape
    Ho, Wo = H // 2, W // 2
    return X[:, :, :2 * Ho, :2 * Wo].reshape(B, C, Ho, 2, Wo, 2).max(axis=(3, 5))


def _conv1d_ref(I, K):
    I, K = I.astype(np.float64), K.astype(np.float64)
    n = len(I) - len(K) + 1
    return np.array([np.dot(K, I[i:i + len(K)]) for i in range(n)])


EXAMPLES = {
    "mv": Example("mv", MV, lambda A, x: (A.astype(np.float64) @ x.astype(np.float64),),
                  lambda s, rng: (_f32(rng, (s["M"], s["K"]), 0.2), _f32(rng, s["K"], -0.1)),
                  ({"M": 1, "K": 1}, {"M": 7, "K": 33}, {"M": 65, "K": 40}, {"M": 3, "K": 300})),
    "mv2": Example("mv2", MV_TWO_STATEMENTS, lambda A, x: (A.astype(np.float64) @ x.astype(np.float64),),
                   lambda s, rng: (_f32(rng, (s["M"], s["K"]), 0.2), _f32(rng, s["K"], -0.1)),
                   ({"M": 1, "K": 1}, {"M": 9, "K": 17}, {"M": 40, "K": 70})),
    "sgemm": Example(
        "sgemm", SGEMM,
        lambda a, b, A, B, C: (b * C.astype(np.float64) + a * (A.astype(np.float64) @ B.astype(np.float64)),),
        lambda s, rng: (np.float32(1.5), np.float32(-0.5), _f32(rng, (s["N"], s["M"]), 0.3),
                        _f32(rng, (s["M"], s["K"]), -0.2), _f32(rng, (s["N"], s["K"]), 1.0)),
        ({"N": 1, "M": 1, "K": 1}, {"N": 33, "M": 17, "K": 40}, {"N": 70, "M": 35, "K": 66}, {"N": 5, "M": 64, "K": 3})),
    "fcrelu": Example(
        "fcrelu", FCRELU,
        lambda I, W1, B1: (np.maximum(I.astype(np.float64) @ W1.astype(np.float64).T + B1, 0.0),),
        lambda s, rng: (_f32(rng, (s["B"], s["M"]), 0.1), _f32(rng, (s["N"], s["M"])), _f32(rng, s["N"], 0.2)),
        ({"B": 1, "M": 1, "N": 1}, {"B": 5, "M": 37, "N": 20}, {"B": 33, "M": 50, "N": 65})),
    "conv2d": Example(
        "conv2d", CONV2D, lambda X, Wt: (_conv_ref(X, Wt),),
        lambda s, rng: (_f32(rng, (s["B"], s["IP"], s["H"], s["W"]), 0.1), _f32(rng, (s["OP"], s["IP"], s["K"], s["K"]))),
        ({"B": 1, "IP": 1, "H": 3, "W": 3, "OP": 1, "K": 3}, {"B": 2, "IP": 3, "H": 9, "W": 8, "OP": 4, "K": 3},
         {"B": 1, "IP": 6, "H": 14, "W": 14, "OP": 16, "K": 5})),
    "maxpool2x2": Example(
        "maxpool2x2", MAXPOOL2X2, lambda X: (_maxpool_ref(X),),
        lambda s, rng: (_f32(rng, (s["B"], s["C"], s["H"], s["W"])),),
        ({"B": 1, "C": 1, "H": 2, "W": 2}, {"B": 2, "C": 3, "H": 9, "W": 8}, {"B": 3, "C": 5, "H": 28, "W": 27})),
    "gather": Example(
        "gather", GATHER, lambda X, I: (X.astype(np.float64)[I],),
        lambda s, rng: (_f32(rng, s["N"]), rng.integers(0, s["N"], (s["A"], s["B"])).astype(np.int32)),
        ({"N": 1, "A": 1, "B": 1}, {"N": 50, "A": 7, "B": 9}, {"N": 1000, "A": 33, "B": 65})),
    "sconv2d": Example(
        "sconv2d", SCONV2D, lambda X, Wt, B: (_conv_ref(X, Wt, 2) + B.astype(np.float64)[None, :, None, None],),
        lambda s, rng: (_f32(rng, (s["N"], s["C"], s["H"], s["W"]), 0.1), _f32(rng, (s["F"], s["C"], s["K"], s["K"])),
                        _f32(rng, s["F"], 0.5)),
        ({"N": 1, "C": 1, "H": 3, "W": 3, "F": 1, "K": 3}, {"N": 2, "C": 3, "H": 11, "W": 10, "F": 4, "K": 3},
         {"N": 1, "C": 4, "H": 16, "W": 17, "F": 8, "K": 2})),
    "conv1d": Example(
        "conv1d", CONV1D, lambda I, K: (_conv1d_ref(I, K),),
        lambda s, rng: (_f32(rng, s["M"], 0.3), _f32(rng, s["N"])),
        ({"M": 1, "N": 1}, {"M": 40, "N": 7}, {"M": 300, "N": 40}, {"M": 9, "N": 9})),
}
