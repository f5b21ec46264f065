"""What attention's arithmetic does to its answer: NumPy models of the kernels' rounding, and three ways to break it.

* :func:`forward_model` computes O as a kernel does, in a given precision: ``"float32"`` (versions 1 and 3),
  ``"bf16"`` (version 4: BF16 inputs, float products and sums, P rounded to BF16 for P V, O rounded at the end),
  ``"bf16 accumulation"`` (version 4 with its running sums kept in BF16 between key tiles, which no kernel here
  does: what it would cost).  BF16 rounding is ``ml_dtypes``' round to nearest even.
* :func:`error_table` is their error against float64 at growing sequence lengths.
* :func:`without_running_max`, :func:`masked_row` show the two ways a softmax turns into NaN.

The GPU's own figures (the kernels and PyTorch's SDPA against float64) come from ``benchmarks/attention.py``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from kernels.attention import attention as A

BF16 = ml_dtypes.bfloat16
PRECISIONS = ("float32", "bf16", "bf16 accumulation")
TILE = A.TILE


def bf16(x) -> np.ndarray:
    """``x`` rounded to BF16, returned as float32 (every BF16 value is a float32)."""
    return np.asarray(x, np.float32).astype(BF16).astype(np.float32)


def forward_model(Q, K, V, precision: str, causal: bool = False) -> np.ndarray:
    """O for one head (Q, K, V of shape (N, d)) computed in ``precision`` (one of :data:`PRECISIONS`), tile by tile
    of 64 keys as the fused kernels walk them: a running maximum m, sum l and output o per row."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    low = precision != "float32"
    Q, K, V = (bf16(a) if low else np.asarray(a, np.float32) for a in (Q, K, V))
    n, d = Q.shape
    scale = np.float32(A.default_scale(d))
    m = np.full(n, -np.inf, np.float32)
    l = np.zeros(n, np.float32)
    o = np.zeros((n, d), np.float32)
    rows = np.arange(n)[:, None]
    for k0 in range(0, n, TILE):
        s = (Q @ K[k0:k0 + TILE].T) * scale                         # float sums of exact products
        if causal:
            s = np.where(np.arange(k0, min(n, k0 + TILE))[None, :] <= rows, s, np.float32(-np.inf))
        m_new = np.maximum(m, s.max(axis=1))
        base = np.where(m_new == -np.inf, np.float32(0), m_new)
        alpha = np.exp(m - base)
        p = np.exp(s - base[:, None])
        l = l * alpha + p.sum(axis=1)
        o = o * alpha[:, None] + (bf16(p) if low else p) @ V[k0:k0 + TILE]
        if precision == "bf16 accumulation":
            l, o = bf16(l), bf16(o)
        m = m_new
    O = o / np.where(l > 0, l, 1)[:, None]
    return bf16(O) if low else O


def relative_error(got, expected) -> float:
    """max |got - expected| / max |expected|."""
    expected = np.asarray(expected, np.float64)
    return float(np.abs(np.asarray(got, np.float64) - expected).max() / np.abs(expected).max())


def error_table(lengths=(256, 1024, 4096), head_dim: int = 64, causal: bool = False, seed: int = 0) -> list[dict]:
    """For each sequence length, the relative error of O in each precision against float64 on the same inputs
    (the BF16 ones against float64 on the BF16-rounded inputs: the error of the arithmetic, not of the inputs'
    rounding).  One head, inputs N(0, 1)."""
    rng = np.random.default_rng(seed)
    table = []
    for n in lengths:
        Q, K, V = (rng.standard_normal((n, head_dim)).astype(np.float32) for _ in range(3))
        exact = A.output_reference(Q, K, V, causal)
        exact_bf16 = A.output_reference(bf16(Q), bf16(K), bf16(V), causal)
        row = {"seq": n, "head_dim": head_dim}
        for precision in PRECISIONS:
            row[precision] = relative_error(forward_model(Q, K, V, precision, causal),
                                            exact if precision == "float32" else exact_bf16)
        table.append(row)
    return table


def without_running_max(scores) -> np.ndarray:
    """A float32 softmax of each row that does not subtract the maximum: exp overflows to inf past 88.7, and
    inf / inf is NaN."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(scores, np.float32))
        return e / e.sum(axis=-1, keepdims=True)


def masked_row(guarded: bool) -> np.ndarray:
    """The float32 online-softmax step on a row whose keys are all masked (-inf): without the guard, the maximum
    is -inf and exp(x - m) = exp(-inf + inf) = NaN; with it (a -inf maximum shifts by 0, as the kernels do) the
    row's weights are 0."""
    x = np.full(4, -np.inf, np.float32)
    m = x.max()
    base = np.float32(0) if guarded and m == -np.inf else m
    with np.errstate(invalid="ignore"):
        return np.exp(x - base)
