"""Exercises of the chapter "Attention" (pages ``attention`` and ``attention_backward``): the online softmax
resumed from a saved state, and the fused float forward with a key-padding mask and with a sliding window.

The chapter prints a one-pass row softmax (version 2) that starts every row from nothing, and a fused forward
(version 3) that takes every key, or every key up to the query's own (causal), for a head dimension fixed at
compile time.  The exercises ask for the same ideas under the changes attention meets in practice:

* ``online_softmax_resume``: a row's scores arrive in two parts, an earlier one already folded into its state
  (m, l) (its maximum and its sum of exp(x - m)), and the new scores S, some of them masked (-inf).  The kernel
  merges the two (the chapter's merge rule) and writes the log-sum-exp of the whole row and the probabilities of
  the new scores under it.  Where no row has an earlier part, (-inf, 0), it is version 2's problem.
* ``attention_forward_padded``: sequences of a batch padded to one length N, each with its own count of real
  keys (kv_len, per sequence); the keys past it are masked for every query, and the tiles wholly past it need
  not be read.  The head dimension d is an argument (any d <= 64), where the chapter's kernel compiles one in.
* ``attention_forward_window``: a sliding window (local attention, as Longformer's and Mistral's): query i sees
  the keys within ``window`` positions of it (j in (i - window, i] with the causal mask, |i - j| < window
  without), and a block skips the key tiles wholly outside its queries' windows on both sides; window 0 is
  no window.

Where there is no padding (or no window) and d is 64, the chapter's attention_forward_float computes the same,
and there it is the speed reference (``ReferenceKernel.solves``).  Tensors are (batch, heads, N, d),
contiguous, float32, as the chapter's kernels take them; every hidden shape is small enough for the emulator,
with sequences that end inside a tile, a single position, masks that empty a row's part of a tile, and head
dimensions that are no multiple of 16.  Tolerances follow the float32 rounding of the scores (d products of
the size of |q| |k|) and of the sums over the keys.
"""

from __future__ import annotations

import math

import numpy as np

from kernels.attention import attention
from kernels.runtime.versions import LaunchConfig

from ..exercise import (Exercise, FormulaMistake, LaunchKey, ReferenceKernel, ceil_div, reducing, relative_rounding,
                        varied)
from ..secret_sizes import size_avoiding
from ._parts import one_dimensional_launch, warp_per_row_keys

F32_EPS = float(np.finfo(np.float32).eps)
#: float32 rounding in units of the exercises' rtol: an error of k eps of a scale is k * ROUNDING of rtol times it.
ROUNDING = F32_EPS / 1e-5


# ============================================================ 1. the online softmax, resumed from a saved state

ONLINE_REFERENCE = attention.KERNELS["attention_online_softmax"]


def _resume_inputs(shape, rng):
    rows, cols = int(shape["rows"]), int(shape["cols"])
    S = varied(rng, (rows, cols), 0.5, spread=3.0) + (rng.standard_normal((rows, 1)) * 20).astype(np.float32)
    m_prev = np.full(rows, -np.inf, np.float32)
    l_prev = np.zeros(rows, np.float32)
    if shape["earlier"]:
        seen = rng.random(rows) < 0.8  # most rows have an earlier part, some start from nothing
        row_max = S.max(axis=1)
        # the earlier part's maximum above, near or below the new scores' (a rescale either way), its sum >= 1
        m_prev[seen] = (row_max[seen] + rng.choice([-6.0, 0.5, 8.0], int(seen.sum()))).astype(np.float32)
        l_prev[seen] = rng.uniform(1.0, 40.0, int(seen.sum())).astype(np.float32)
    if shape["masked"]:
        S[rng.random((rows, cols)) < 0.3] = -np.inf
        if rows >= 3:  # a row with a single new score, and one with none at all (its earlier part is all it has)
            S[1, 1:] = -np.inf
            if shape["earlier"]:
                m_prev[0], l_prev[0] = np.float32(2.0), np.float32(3.0)
                S[0] = -np.inf
    seen_nothing = (m_prev == -np.inf) & (S == -np.inf).all(axis=1)
    S[seen_nothing, 0] = np.float32(1.5)  # every row has a score somewhere: its log-sum-exp is finite
    return {"S": S, "m_prev": m_prev, "l_prev": l_prev, "lse": None, "P": None, "rows": rows, "cols": cols}


def _resume_state(inputs):
    """(the whole row's maximum M, its sum of exp(x - M), the new scores in float64)."""
    S = inputs["S"].astype(np.float64)
    m_prev = inputs["m_prev"].astype(np.float64)
    M = np.maximum(S.max(axis=1, initial=-np.inf), m_prev)
    with np.errstate(invalid="ignore"):
        earlier = np.where(m_prev > -np.inf, inputs["l_prev"].astype(np.float64) * np.exp(m_prev - M), 0.0)
    return M, earlier + np.exp(S - M[:, None]).sum(axis=1), S


def _resume_reference(inputs):
    M, total, S = _resume_state(inputs)
    lse = M + np.log(total)
    return {"P": np.exp(S - lse[:, None]), "lse": lse}


def _resume_scale(inputs):
    # An exponent x - lse is rounded on the scale |x| + |lse|, and lse itself on |M| and the sum's c/32
    # additions a lane and 5 shuffles
    M, _, S = _resume_state(inputs)
    expected = _resume_reference(inputs)
    lse = expected["lse"]
    cols = S.shape[1]
    summing = cols / 32 + 5
    size = np.where(np.isfinite(S), np.abs(S), 0.0) + np.abs(lse)[:, None] + np.abs(M)[:, None]
    return {"P": expected["P"] * (1.0 + 4 * ROUNDING * (size + summing)),
            "lse": np.abs(lse) + 4 * ROUNDING * (np.abs(M) + summing)}


def _resume_probe(shape, run) -> str:
    """Rising scores with no earlier part, in rows of 64 (two per lane) and of 5 (most lanes see none): inf points
    at an exponent taken before the maximum was updated, NaN in the short rows alone at two empty states merged."""
    rows = int(shape["rows"])

    def lse_of(cols: int) -> np.ndarray:
        S = np.tile(np.linspace(0.0, 3.0, cols, dtype=np.float32), (rows, 1))
        return run({"S": S, "m_prev": np.full(rows, -np.inf, np.float32), "l_prev": np.zeros(rows, np.float32),
                    "lse": None, "P": None, "rows": rows, "cols": cols})["lse"]

    full, short = lse_of(64), lse_of(5)
    if np.isinf(full).any():
        return ("The log-sum-exp is inf on a row of rising scores: an exponential overflowed. Take each score's "
                "exponent against the maximum updated to include it (a lane's first score against -inf is e^inf), "
                "and rescale the sum so far by e^(m_old - m_new).")
    if np.isfinite(full).all() and np.isnan(short).any():
        return ("Rows of 5 scores come out NaN where rows of 64 do not: the lanes that saw no score hold (-inf, 0), "
                "and merging two of them computes e^(-inf - (-inf)) = NaN. Leave a merge of two empty states as it is.")
    return ""


def _resume_shape(rows, cols, earlier, masked):
    return {"rows": rows, "cols": cols, "earlier": earlier, "masked": masked}


def _secret_resume_shapes(rng: np.random.Generator, launch: dict) -> list[dict]:
    return [_resume_shape(size_avoiding(rng, 40, 200, 32), size_avoiding(rng, 33, 1200, 32), 1, 1)]


def _new_part_state(S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the new scores' own maximum, their sum of exp(x - it)) per row; (-inf, 0) where every new score is masked."""
    m_new = S.max(axis=1, initial=-np.inf)
    with np.errstate(invalid="ignore"):
        l_new = np.where(m_new > -np.inf, np.exp(S - np.where(m_new > -np.inf, m_new, 0.0)[:, None]).sum(axis=1), 0.0)
    return m_new, l_new


def _resumed(inputs, l_new_at_m_new, earlier_rescaled=True) -> dict:
    """lse and P from the new scores' (m_new, l_new) and the earlier part's state, merged as the formula does;
    ``earlier_rescaled`` False: l_prev added as it is, never brought to the common maximum."""
    S = inputs["S"].astype(np.float64)
    m_new, l_new = l_new_at_m_new
    m_prev, l_prev = inputs["m_prev"].astype(np.float64), inputs["l_prev"].astype(np.float64)
    M = np.maximum(m_new, m_prev)
    with np.errstate(invalid="ignore", divide="ignore"):
        new = np.where(m_new > -np.inf, l_new * np.exp(m_new - M), 0.0)
        earlier = np.where(m_prev > -np.inf, l_prev * (np.exp(m_prev - M) if earlier_rescaled else 1.0), 0.0)
        lse = M + np.log(new + earlier)
    return {"P": np.exp(S - lse[:, None]), "lse": lse}


def _lanes_added_as_they_are(inputs) -> dict:
    """The lanes' sums (lane l holding the scores l, l + 32, ..., each summed against its own maximum) added without
    bringing them to the row's maximum, then merged with the earlier part."""
    S = inputs["S"].astype(np.float64)
    lane_max, lane_sum = zip(*(_new_part_state(S[:, lane::32]) for lane in range(min(32, S.shape[1]))))
    return _resumed(inputs, (np.max(lane_max, axis=0), np.sum(lane_sum, axis=0)))


def _probabilities_of_the_new_part(inputs) -> dict:
    """lse as it should be, P normalised by the new scores' own log-sum-exp (NaN where they are all masked: the
    kernel's e^(-inf + inf))."""
    S = inputs["S"].astype(np.float64)
    m_new, l_new = _new_part_state(S)
    with np.errstate(invalid="ignore", divide="ignore"):
        new_lse = m_new + np.log(l_new)
        P = np.exp(S - new_lse[:, None])
    return {"P": P, "lse": _resume_reference(inputs)["lse"]}


def _resume_rounding(inputs, wrong: dict) -> dict:
    """The error scales of a mistaken merge's outputs ``wrong``: the right formula's relative rounding, on them."""
    right, scale = _resume_reference(inputs), _resume_scale(inputs)
    with np.errstate(invalid="ignore"):
        lse = np.where(np.isfinite(wrong["lse"]), np.abs(wrong["lse"]), 0.0) + scale["lse"] - np.abs(right["lse"])
    return {"P": relative_rounding(right["P"], scale["P"], wrong["P"]), "lse": lse}


def _resume_mistake(key: str, words: str, reference) -> FormulaMistake:
    return FormulaMistake(key, words, reference, lambda inputs: _resume_rounding(inputs, reference(inputs)))


RESUME_MISTAKES = (
    _resume_mistake("earlier sum not rescaled",
                    "with the earlier part's sum added as it is, l e^(m - M) + l_prev, where it counts exponentials "
                    "against m_prev: it must be brought to the common maximum too, l_prev e^(m_prev - M).",
                    lambda inputs: _resumed(inputs, _new_part_state(inputs["S"].astype(np.float64)), False)),
    _resume_mistake("lanes added without rescale",
                    "with the lanes' sums added as they are, each counting exponentials against its own lane's "
                    "maximum: when two states merge, each sum must be brought to the common maximum, l_a e^(m_a - M) "
                    "+ l_b e^(m_b - M), not l_a + l_b.",
                    _lanes_added_as_they_are),
    _resume_mistake("probabilities of the new part alone",
                    "with lse right but P normalised by the new scores' own log-sum-exp, as if the earlier part had "
                    "no probability: P = e^(S - lse) with the whole row's lse, the one written.",
                    _probabilities_of_the_new_part),
)


ONLINE_SOFTMAX_RESUME = Exercise(
    name="online_softmax_resume",
    title="The online softmax resumed from a saved state: merging (m, l) of an earlier part of each row",
    signature=("softmax_resume(const float* S, const float* m_prev, const float* l_prev, float* lse, float* P, "
               "int rows, int cols)"),
    make_inputs=_resume_inputs,
    reference=_resume_reference,
    # the row's maximum and sum of exponentials: new scores a kernel did not read are scores at -inf
    reductions=reducing("S", 1, kind="max"),
    error_scale=_resume_scale,
    formula_mistakes=RESUME_MISTAKES,
    visible_shapes=(_resume_shape(1, 1, 0, 0), _resume_shape(4, 40, 1, 0), _resume_shape(30, 100, 1, 1),
                    _resume_shape(64, 64, 0, 1)),
    hidden_shapes=(_resume_shape(1, 5, 1, 0), _resume_shape(3, 31, 1, 1), _resume_shape(37, 33, 1, 1),
                   _resume_shape(100, 300, 0, 1), _resume_shape(65, 1025, 1, 1), _resume_shape(5, 3001, 1, 0)),
    secret_shapes=_secret_resume_shapes,
    launch_keys=warp_per_row_keys(lambda shape: int(shape["rows"]), "rows"),
    launch_config=one_dimensional_launch,
    correctness_points=4.0,
    speed_points=2.0,
    reference_kernel=ReferenceKernel(ONLINE_REFERENCE, arg_order=("S", "P", "lse", "rows", "cols"),
                                     solves={"earlier": 0}),
    timing_shape=_resume_shape(16384, 1024, 0, 0),
    label=lambda shape: (f"rows={shape['rows']}, cols={shape['cols']}"
                         + (", an earlier part" if shape["earlier"] else "")
                         + (", masked scores" if shape["masked"] else "")),
    probe=_resume_probe,
    description=("Row r's scores come in two parts: an earlier one folded into its state (m_prev[r], l_prev[r]) (its "
                 "maximum and its sum of exp(x - m_prev); (-inf, 0) where there was none) and the new scores "
                 "S[r][0..cols-1] "
                 "(row-major, some -inf: masked). Write lse[r], the log-sum-exp of both parts together, and "
                 "P[r][j] = exp(S[r][j] - lse[r]), the probabilities of the new scores under the whole row. One warp "
                 "per row (block a multiple of 32; grid by default ceil(rows / (block / 32))), its (m, l) by the merge "
                 "rule through warp shuffles. Speed is compared with the chapter's attention_online_softmax where no "
                 "row has an earlier part."),
)


# ============================================================ 2 and 3: the fused forward, padded or windowed

FORWARD_REFERENCE = attention.KERNELS["attention_forward_float"]
#: The chapter's kernel as the exercise's reference: its arguments, named as the exercise names them.
FORWARD_ORDER = ("Q", "K", "V", "O", "lse", "N", "scale", "causal")


def _sequences(shape) -> tuple[int, int, int]:
    """(batch x heads, N, d) of a shape."""
    return int(shape["batch"]) * int(shape["heads"]), int(shape["seq"]), int(shape["head_dim"])


def _qkv(shape, rng) -> dict:
    """Q and K with scores s q.k of a spread of about 2 (a peaked softmax), V around 0.5 at varied scales."""
    dims = (int(shape["batch"]), int(shape["heads"]), int(shape["seq"]), int(shape["head_dim"]))
    spread = math.sqrt(2.0)
    return {"Q": (rng.standard_normal(dims) * spread).astype(np.float32),
            "K": (rng.standard_normal(dims) * spread).astype(np.float32),
            "V": varied(rng, dims, 0.5)}


def _attention(inputs, visible) -> tuple[np.ndarray, np.ndarray]:
    """(O, lse) in float64, one head at a time; ``visible(b) -> (N, N)`` bool says which keys each query of
    sequence b sees."""
    Q, K, V = (inputs[name] for name in "QKV")
    batch, heads = Q.shape[:2]
    O = np.empty(Q.shape, np.float64)
    lse = np.empty(Q.shape[:3], np.float64)
    for b in range(batch):
        mask = visible(b)
        for h in range(heads):
            S = float(inputs["scale"]) * (Q[b, h].astype(np.float64) @ K[b, h].astype(np.float64).T)
            P, lse[b, h] = attention.softmax_rows_reference(np.where(mask, S, -np.inf))
            O[b, h] = P @ V[b, h].astype(np.float64)
    return O, lse


def _attention_scale(inputs, visible) -> dict:
    """The size of what float32 rounds: each score is a sum of d products of the size of s |q| |k| (T, the largest
    a query sees), its rounding a few eps T sqrt(d) and every exponent off by that; O adds P |V| over the N keys
    (a few eps sqrt(N) of it); lse is off by the exponents' rounding."""
    Q, K, V = (inputs[name] for name in "QKV")
    batch, heads, n, d = Q.shape
    O = np.empty(Q.shape, np.float64)
    lse = np.empty(Q.shape[:3], np.float64)
    for b in range(batch):
        mask = visible(b)
        for h in range(heads):
            S = float(inputs["scale"]) * (Q[b, h].astype(np.float64) @ K[b, h].astype(np.float64).T)
            T = float(inputs["scale"]) * (np.abs(Q[b, h]).astype(np.float64) @ np.abs(K[b, h]).astype(np.float64).T)
            P, row_lse = attention.softmax_rows_reference(np.where(mask, S, -np.inf))
            spread = 4 * ROUNDING * (math.sqrt(d) * np.where(mask, T, 0.0).max(axis=1) + math.sqrt(n) + 8)
            O[b, h] = (P @ np.abs(V[b, h]).astype(np.float64)) * (1.0 + spread[:, None])
            lse[b, h] = np.abs(row_lse) + spread
    return {"O": O, "lse": lse}


def _forward_launch(shape, launch) -> LaunchConfig:
    bh, n, _ = _sequences(shape)
    return LaunchConfig((ceil_div(n, launch["rows"]), bh, 1), (launch["block"], 1, 1), launch["shared"])


FORWARD_KEYS = (
    LaunchKey("block", 32, 1024, default=128, multiple_of=32, help="threads per block, whole warps; default 128"),
    LaunchKey("rows", 1, 1024, default=64,
              help="query rows per block; default 64 (grid: ceil(N / rows) x batch * heads)"),
    LaunchKey("shared", 0, 227 * 1024, default=0, help="bytes of dynamic shared memory per block; default 0"),
)


def _forward_shape(batch, heads, seq, head_dim, causal, scale=None, **extra):
    return {"batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim, "causal": causal,
            "scale": 1.0 / math.sqrt(head_dim) if scale is None else scale, **extra}


def _forward_label(extra):
    def label(shape):
        words = [f"batch={shape['batch']}, heads={shape['heads']}, N={shape['seq']}, d={shape['head_dim']}"]
        words.append("causal" if shape["causal"] else "not causal")
        if abs(shape["scale"] - 1.0 / math.sqrt(shape["head_dim"])) > 1e-12:
            words.append(f"scale={shape['scale']:g}")
        return ", ".join(words + [extra(shape)] if extra(shape) else words)
    return label


def _secret_forward(rng, **extra):
    return _forward_shape(int(rng.integers(1, 3)), int(rng.integers(1, 3)), size_avoiding(rng, 20, 140, 32, 64),
                          int(rng.choice([8, 16, 24, 40, 48, 56, 64])), int(rng.integers(0, 2)), **extra)


FORWARD_TIMING = {"batch": 2, "heads": 8, "seq": 2048, "head_dim": attention.RECORDED_HEAD_DIM}
#: the chapter's kernel is tuned (float4 reads of transposed tiles, 64 x 64 score tiles); a plain tile of scalar
#: reads from shared memory does a little more than half its work per cycle
FORWARD_BANDS = ((0.8, 1.0), (0.55, 0.75), (0.35, 0.5), (0.2, 0.25))


def _fused_forward(*, visible, mask: dict, extra_label, **declared) -> Exercise:
    """A fused-forward exercise with the mask ``visible(inputs) -> (b -> (N, N) bool)``, which the chapter's kernel
    computes where the shape has ``mask`` (and d = 64); 6 points for correctness, 3 for speed against
    attention_forward_float."""
    return Exercise(
        reference=lambda inputs: dict(zip(("O", "lse"), _attention(inputs, visible(inputs)))),
        error_scale=lambda inputs: _attention_scale(inputs, visible(inputs)),
        launch_keys=FORWARD_KEYS, launch_config=_forward_launch, correctness_points=6.0, speed_points=3.0,
        reference_kernel=ReferenceKernel(FORWARD_REFERENCE, arg_order=FORWARD_ORDER,
                                         solves={**mask, "head_dim": attention.RECORDED_HEAD_DIM}),
        speed_bands=FORWARD_BANDS, label=_forward_label(extra_label),
        # O sums P V over the keys: a kernel that accumulates a share of them and scales it up reads part of V
        reductions=reducing("V", 2), **declared)


# ------------------------------------------------------------ 2. key padding

def _padded_inputs(shape, rng):
    bh, n, d = _sequences(shape)
    batch = int(shape["batch"])
    kv_len = np.full(batch, n, np.int32)
    if shape["padded"]:
        kv_len = rng.integers(1, n + 1, batch).astype(np.int32)
        kv_len[0] = min(n, max(1, n // 2 + 1))   # a sequence that ends inside a tile
        if batch > 1:
            kv_len[-1] = 1                       # one real key: every query sees the first only
    return {**_qkv(shape, rng), "kv_len": kv_len, "O": None, "lse": None, "N": n, "d": d,
            "heads": int(shape["heads"]), "scale": np.float32(shape["scale"]), "causal": int(shape["causal"])}


def _padded_reference(inputs) -> dict:
    return dict(zip(("O", "lse"), _attention(inputs, _padded_visible(inputs))))


def _padded_visible(inputs):
    n = int(inputs["N"])
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]

    def visible(b):
        keep = np.broadcast_to(j < int(inputs["kv_len"][b]), (n, n))
        return keep & (j <= i) if inputs["causal"] else keep
    return visible


PADDED_VISIBLE_SHAPES = (_forward_shape(1, 1, 16, 16, 0, padded=0), _forward_shape(1, 2, 37, 24, 1, padded=1),
                         _forward_shape(2, 1, 70, 40, 0, padded=1), _forward_shape(2, 1, 64, 64, 1, padded=1))
PADDED_HIDDEN_SHAPES = (_forward_shape(1, 1, 1, 8, 0, padded=0), _forward_shape(2, 2, 33, 16, 1, padded=1),
                        _forward_shape(3, 1, 100, 64, 0, padded=1), _forward_shape(2, 1, 65, 3, 1, padded=1, scale=0.7),
                        _forward_shape(2, 1, 130, 48, 0, padded=1))

def _lse_without_the_maximum(inputs, visible) -> dict:
    """O as it should be, lse as log l alone: each row's log-sum-exp less its largest visible score."""
    O, lse = _attention(inputs, visible)
    Q, K = inputs["Q"].astype(np.float64), inputs["K"].astype(np.float64)
    top = np.empty(lse.shape)
    for b in range(Q.shape[0]):
        mask = visible(b)
        S = float(inputs["scale"]) * np.einsum("hid,hjd->hij", Q[b], K[b])
        top[b] = np.where(mask, S, -np.inf).max(axis=-1)
    return {"O": O, "lse": lse - top}


def _unpadded(inputs) -> dict:
    """The inputs with every sequence N keys long: what a kernel that never reads kv_len computes on."""
    return {**inputs, "kv_len": np.full_like(inputs["kv_len"], int(inputs["N"]))}


def _one_key_long(inputs) -> tuple[dict, object]:
    """(inputs, visible) of the mask j <= kv_len[b] where j < kv_len[b] is meant: one key of padding more, and for a
    sequence with no padding a key of zeros past N (what a kernel that fills a tile's keys past N with zeros reads
    there)."""
    n = int(inputs["N"])
    zeros = np.zeros((*inputs["K"].shape[:2], 1, inputs["K"].shape[3]), np.float32)
    longer = {**inputs, "K": np.concatenate([inputs["K"], zeros], axis=2),
              "V": np.concatenate([inputs["V"], zeros], axis=2)}
    i, j = np.arange(n)[:, None], np.arange(n + 1)[None, :]

    def visible(b):
        keep = np.broadcast_to(j <= int(inputs["kv_len"][b]), (n, n + 1))
        return keep & (j <= i) if inputs["causal"] else keep
    return longer, visible


PADDED_MISTAKES = (
    FormulaMistake("lse without the maximum",
                   "with lse = log l alone, each row's log-sum-exp less its largest score: l sums exponentials "
                   "against the running maximum m, so the log-sum-exp is m + log l (in log2 units (m + log2 l) ln 2).",
                   lambda inputs: _lse_without_the_maximum(inputs, _padded_visible(inputs))),
    FormulaMistake("padding seen",
                   "with every key seen, the padding from kv_len[b] on included: is kv_len read, and are the keys "
                   "from kv_len[b] on masked (and their tiles skipped)?",
                   lambda inputs: _padded_reference(_unpadded(inputs)),
                   lambda inputs: _attention_scale(_unpadded(inputs), _padded_visible(_unpadded(inputs)))),
    FormulaMistake("padding mask one key long",
                   "with the keys j <= kv_len[b] seen, one key of padding more than j < kv_len[b] (where a sequence "
                   "has no padding, a key of zeros past N): is the mask off by one, <= where < is meant?",
                   lambda inputs: dict(zip(("O", "lse"), _attention(*_one_key_long(inputs)))),
                   lambda inputs: _attention_scale(*_one_key_long(inputs))),
)


ATTENTION_FORWARD_PADDED = _fused_forward(
    name="attention_forward_padded",
    title="Fused attention forward in float with a key-padding mask and any head dimension up to 64",
    signature=("attention_forward_padded(const float* Q, const float* K, const float* V, const int* kv_len, float* O, "
               "float* lse, int N, int d, int heads, float scale, int causal)"),
    make_inputs=_padded_inputs,
    visible=_padded_visible,
    mask={"padded": 0},
    formula_mistakes=PADDED_MISTAKES,
    visible_shapes=PADDED_VISIBLE_SHAPES,
    hidden_shapes=PADDED_HIDDEN_SHAPES,
    secret_shapes=lambda rng, launch: [_secret_forward(rng, padded=1)],
    timing_shape=_forward_shape(**FORWARD_TIMING, causal=0, padded=0),
    extra_label=lambda shape: "padded" if shape["padded"] else "",
    description=("O = softmax(scale Q K^T + mask) V and lse, the natural log-sum-exp of each row of masked scores, "
                 "for every one of batch x heads heads (blockIdx.y = b * heads + h): Q, K, V, O are (batch, heads, N, "
                 "d), lse (batch, heads, N), contiguous. Sequence b has kv_len[b] real keys (1..N); the keys from "
                 "kv_len[b] on are padding, masked for every query, as are the keys after the query's own position "
                 "when causal is 1. d is any head dimension up to 64. One block per `rows` query rows walks the key "
                 "tiles through shared memory with the online softmax, never writing the N x N scores. Speed is "
                 "compared with the chapter's attention_forward_float with no padding at d = 64."),
)


# ------------------------------------------------------------ 3. a sliding window

def _window_inputs(shape, rng):
    _, n, d = _sequences(shape)
    return {**_qkv(shape, rng), "O": None, "lse": None, "N": n, "d": d, "scale": np.float32(shape["scale"]),
            "causal": int(shape["causal"]), "window": int(shape["window"])}


def window_mask(n: int, causal: int, window: int) -> np.ndarray:
    """True where query i sees key j: j <= i if causal, and |i - j| < window if window > 0."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    keep = (j <= i) if causal else np.ones((n, n), bool)
    return keep & (np.abs(i - j) < window) if window > 0 else keep


def _window_visible(inputs):
    mask = window_mask(int(inputs["N"]), int(inputs["causal"]), int(inputs["window"]))
    return lambda b: mask


WINDOW_VISIBLE_SHAPES = (_forward_shape(1, 1, 16, 16, 1, window=0), _forward_shape(1, 2, 40, 24, 1, window=5),
                         _forward_shape(1, 1, 70, 40, 0, window=9), _forward_shape(2, 1, 64, 64, 1, window=33))
WINDOW_HIDDEN_SHAPES = (_forward_shape(1, 1, 1, 8, 1, window=1), _forward_shape(2, 1, 50, 16, 1, window=1),
                        _forward_shape(1, 2, 100, 64, 1, window=40), _forward_shape(2, 1, 97, 24, 0, window=31),
                        _forward_shape(1, 1, 130, 48, 1, window=65, scale=0.3),
                        _forward_shape(1, 1, 70, 32, 0, window=0))


def _window_probe(shape, run) -> str:
    """Causal with a window of 1 (a query sees itself only) against no window, on the failing case's sizes: NaN with
    the window alone points at rows that see no key of a tile their block reads."""
    outputs = {}
    for window in (0, 1):
        inputs = _window_inputs({**shape, "causal": 1, "window": window}, np.random.default_rng(0))
        outputs[window] = run(inputs)["O"]
    if np.isfinite(outputs[0]).all() and np.isnan(outputs[1]).any():
        return ("With a window of 1 (each query sees only itself) rows come out NaN: a row that sees no key of the "
                "first tile its block reads still has the maximum -inf there, and 2^(-inf - (-inf)) is NaN. Rescale "
                "by 0 (shift by 0) while a row's maximum is -inf.")
    return ""


def _secret_window(rng, launch):
    shape = _secret_forward(rng, window=0)
    return [{**shape, "window": int(rng.integers(1, shape["seq"]))}]


def _window_mistake(inputs, mask: np.ndarray) -> dict:
    """O and lse of the scores under ``mask`` (N, N); a row that sees no key has O NaN (0 / 0) and lse -inf."""
    O, lse = _attention(inputs, lambda b: mask)
    O[:, :, ~mask.any(axis=1)] = np.nan
    return {"O": O, "lse": lse}


def _window_one_key_wider(inputs) -> np.ndarray:
    window = int(inputs["window"])
    return window_mask(int(inputs["N"]), int(inputs["causal"]), window + 1 if window else 0)


def _window_behind_only(inputs) -> np.ndarray:
    n, window = int(inputs["N"]), int(inputs["window"])
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    keep = (j <= i) if inputs["causal"] else np.ones((n, n), bool)
    return keep & (i - j < window) if window else keep


def _causal_before_the_query(inputs) -> np.ndarray:
    n = int(inputs["N"])
    mask = window_mask(n, 0, int(inputs["window"]))
    return mask & (np.arange(n)[None, :] < np.arange(n)[:, None]) if inputs["causal"] else mask


def _mask_mistake(key: str, words: str, mask_of) -> FormulaMistake:
    """The mistake of a mask ``mask_of(inputs) -> (N, N)`` other than the window's, rounding on the keys it lets in."""
    return FormulaMistake(key, words, lambda inputs: _window_mistake(inputs, mask_of(inputs)),
                          lambda inputs: _attention_scale(inputs, lambda b: mask_of(inputs)))


WINDOW_MISTAKES = (
    _mask_mistake("window one key wider",
                   "with the keys |i - j| <= window seen where |i - j| < window is meant: one key too many on each "
                   "side of the window -- is the window's mask off by one, <= where < is meant?",
                   _window_one_key_wider),
    _mask_mistake("window behind only",
                   "with the window checked on one side only, i - j < window: without the causal mask a query also "
                   "sees every key after it, where the window stops at i + window - 1 (|i - j| < window, and the "
                   "key tiles past the last query's window skipped)",
                   _window_behind_only),
    _mask_mistake("causal mask without the query's own key",
                   "with the causal mask keeping the keys j < i, before the query, where j <= i is meant: a query "
                   "does not see its own key, and the first query sees none (0 / 0: NaN)",
                   _causal_before_the_query),
)


ATTENTION_FORWARD_WINDOW = _fused_forward(
    name="attention_forward_window",
    title="Fused attention forward in float with a sliding window: masks and the tiles they skip",
    signature=("attention_forward_window(const float* Q, const float* K, const float* V, float* O, float* lse, int N, "
               "int d, float scale, int causal, int window)"),
    make_inputs=_window_inputs,
    visible=_window_visible,
    mask={"window": 0},
    formula_mistakes=WINDOW_MISTAKES,
    visible_shapes=WINDOW_VISIBLE_SHAPES,
    hidden_shapes=WINDOW_HIDDEN_SHAPES,
    secret_shapes=_secret_window,
    #: timed causal with no window: what counts is skipping the tiles above the diagonal, as the chapter's does
    timing_shape=_forward_shape(**FORWARD_TIMING, causal=1, window=0),
    extra_label=lambda shape: f"window={shape['window']}" if shape["window"] else "no window",
    probe=_window_probe,
    description=("O = softmax(scale Q K^T + mask) V and lse, the natural log-sum-exp of each row of masked scores, "
                 "for every one of the heads (blockIdx.y; Q, K, V, O (heads, N, d), lse (heads, N), contiguous), where "
                 "query i sees key j if |i - j| < window (window > 0; 0: every key) and, when causal is 1, j <= i: "
                 "the keys (i - window, i] with the causal mask, (i - window, i + window) without. d is any head "
                 "dimension up to 64. A block of `rows` query rows reads only the key tiles its queries' windows "
                 "reach. Speed is compared with the chapter's attention_forward_float with no window at d = 64, "
                 "causal: the tiles above the diagonal must be skipped."),
)

EXERCISES = [ONLINE_SOFTMAX_RESUME, ATTENTION_FORWARD_PADDED, ATTENTION_FORWARD_WINDOW]
