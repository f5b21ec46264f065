"""Scaled dot-product attention in float32: the float64 references and one launcher per version of ``attention.cu``.

``Q``, ``K``, ``V`` (and ``O``, ``dO``, the gradients) are ``(batch, heads, N, d)`` float32 arrays, NumPy or
device buffers; ``lse`` (the log-sum-exp of each row of scores) is ``(batch, heads, N)``.  The scale is
``1/sqrt(d)`` unless given.  A launcher returns NumPy arrays for NumPy inputs and device buffers for device
buffers; ``sync=False`` only queues the launches (for timing).

A kernel's facts take a shape ``{"batch", "heads", "seq", "head_dim", "causal"}`` (``causal`` 0 or 1), the online
softmax's ``{"rows", "cols"}``.  The fused kernels are compiled for one head dimension (``ATT_D``): their records
describe the build for :data:`RECORDED_HEAD_DIM`, and :func:`defines` gives the others.
"""

from __future__ import annotations

import math

import numpy as np

from kernels.dense import softmax
from kernels.runtime import DeviceBuffer, blocks_for, empty, to_device
from kernels.runtime.loader import grid_stride_blocks, launch, load_topic
from kernels.runtime.versions import KernelVersion, as_launch, kernel_table

TOPIC = "attention"

#: The GEMM tile of version 1 (kernels/sgemm.cu's WT_* defines): 128 x 64, 128 threads, 8 x 8 results each.  64
#: columns suit the output product, whose width is the head dimension.
GEMM_TILE = {"WT_BM": 128, "WT_BN": 64, "WT_BK": 16, "WT_NQ": 2, "WT_MIN_BLOCKS": 2, "WT_GROUP": 0}
GEMM_THREADS = (GEMM_TILE["WT_BM"] // 64) * (GEMM_TILE["WT_BN"] // (16 * GEMM_TILE["WT_NQ"])) * 32
TRANSPOSE_THREADS = 256
MASK_THREADS = 256
ONLINE_WARPS = 4                     # attention.cu: ONLINE_WARPS (a warp per row)
PRE_WARPS = 4                        # attention.cu: PRE_WARPS
TILE = 64                            # attention.cu: ATT_BR = ATT_BC, rows of a query tile and keys of a key tile
PAD = 4                              # attention.cu: ATT_PAD
FORWARD_THREADS = 128                # attention.cu: FWD_THREADS
BACKWARD_THREADS = 256               # attention.cu: BWD_THREADS
HEAD_DIMS = tuple(range(16, 129, 16))  # what ATT_D may be
RECORDED_HEAD_DIM = 64



def defines(head_dim: int) -> dict:
    """The compile-time definitions of the module for head dimension ``head_dim``."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"the fused kernels take head dimensions {', '.join(map(str, HEAD_DIMS))}, not {head_dim}")
    return {**GEMM_TILE, "ATT_D": int(head_dim)}


def module(head_dim: int = RECORDED_HEAD_DIM):
    return load_topic(TOPIC, defines(head_dim))


# --------------------------------------------------------------------------- float64 references


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def causal_mask(n: int) -> np.ndarray:
    """True where a score is kept: key j <= query i."""
    return np.tril(np.ones((n, n), dtype=bool))


def scores_reference(Q, K, causal: bool = False, scale: float | None = None) -> np.ndarray:
    """S = scale Q K^T in float64, -inf where the causal mask hides a key."""
    Q, K = np.asarray(Q, np.float64), np.asarray(K, np.float64)
    scale = default_scale(Q.shape[-1]) if scale is None else scale
    S = scale * Q @ np.swapaxes(K, -1, -2)
    if causal:
        S = np.where(causal_mask(S.shape[-1]), S, -np.inf)
    return S


def softmax_rows_reference(S) -> tuple[np.ndarray, np.ndarray]:
    """(P, lse) of each row of S in float64; a row of -inf only gives P = 0 and lse = -inf (no key to attend to)."""
    S = np.asarray(S, np.float64)
    m = S.max(axis=-1, keepdims=True)
    empty_row = m == -np.inf
    shift = np.where(empty_row, 0.0, m)
    with np.errstate(invalid="ignore"):
        e = np.exp(S - shift)
    total = e.sum(axis=-1, keepdims=True)
    P = np.where(empty_row, 0.0, e / np.where(total > 0, total, 1.0))
    with np.errstate(divide="ignore"):
        lse = np.where(empty_row, -np.inf, shift + np.log(np.where(total > 0, total, 1.0)))
    return P, lse[..., 0]


def online_softmax_reference(S) -> tuple[np.ndarray, np.ndarray]:
    """What version 2 computes: the row softmax and log-sum-exp (:func:`softmax_rows_reference`)."""
    return softmax_rows_reference(S)


def reference(Q, K, V, causal: bool = False, scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(O, lse) in float64: O = softmax(scale Q K^T) V, lse the log-sum-exp of each row of scores."""
    P, lse = softmax_rows_reference(scores_reference(Q, K, causal, scale))
    return P @ np.asarray(V, np.float64), lse


def output_reference(Q, K, V, causal: bool = False, scale: float | None = None) -> np.ndarray:
    return reference(Q, K, V, causal, scale)[0]


def backward_reference(Q, K, V, dO, causal: bool = False, scale: float | None = None):
    """(dQ, dK, dV) in float64 for the loss whose gradient at O is dO."""
    Q, K, V, dO = (np.asarray(a, np.float64) for a in (Q, K, V, dO))
    scale = default_scale(Q.shape[-1]) if scale is None else scale
    P, _ = softmax_rows_reference(scores_reference(Q, K, causal, scale))
    O = P @ V
    dV = np.swapaxes(P, -1, -2) @ dO
    dP = dO @ np.swapaxes(V, -1, -2)
    D = (dO * O).sum(axis=-1, keepdims=True)
    dS = P * (dP - D)
    return scale * dS @ K, scale * np.swapaxes(dS, -1, -2) @ Q, dV


def softmax_merge(a: tuple, b: tuple) -> tuple:
    """The merge rule of two partial softmax states ``(m, l, o)`` (maximum, sum of exp(x - m), and the
    exp-weighted sum of value rows, unnormalised), in float64: the state of both parts together."""
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    M = max(m_a, m_b)
    if M == -np.inf:
        return M, 0.0, np.zeros_like(np.asarray(o_a, np.float64))
    wa, wb = math.exp(m_a - M), math.exp(m_b - M)
    return M, l_a * wa + l_b * wb, np.asarray(o_a, np.float64) * wa + np.asarray(o_b, np.float64) * wb


def softmax_state(x, values) -> tuple:
    """The state ``(m, l, o)`` of scores ``x`` and their value rows, computed directly (float64)."""
    x, values = np.asarray(x, np.float64), np.asarray(values, np.float64)
    m = x.max() if x.size else -np.inf
    if m == -np.inf:
        return -np.inf, 0.0, np.zeros(values.shape[1:])
    w = np.exp(x - m)
    return m, float(w.sum()), w @ values


# --------------------------------------------------------------------------- shapes and operands


def _operands(*arrays):
    """The arrays as float32 device buffers (copied when NumPy), the NumPy-ness of the first, and the shape."""
    host = isinstance(arrays[0], np.ndarray) or not isinstance(arrays[0], DeviceBuffer)
    out = []
    for a in arrays:
        if isinstance(a, DeviceBuffer):
            if a.dtype != np.float32:
                raise TypeError(f"attention takes float32 tensors, got a buffer of {a.dtype}")
            out.append(a)
        else:
            out.append(to_device(np.ascontiguousarray(a, dtype=np.float32)))
    shape = tuple(int(s) for s in out[0].shape)
    if len(shape) != 4:
        raise ValueError(f"Q, K and V must be (batch, heads, N, d), got shape {shape}")
    for name, a in zip("QKV", out[:3]):
        if tuple(a.shape) != shape:
            raise ValueError(f"Q is {shape} but {name} is {tuple(a.shape)}: Q, K and V must have one shape")
    return host, out, shape


def _results(host: bool, *buffers):
    return tuple(b.get() for b in buffers) if host else buffers


def _scale(d: int, scale) -> float:
    return default_scale(d) if scale is None else float(scale)


def shape_of(Q, causal: bool = False) -> dict:
    batch, heads, n, d = (int(s) for s in Q.shape)
    return {"batch": batch, "heads": heads, "seq": n, "head_dim": d, "causal": int(bool(causal))}


def sizes(shape) -> tuple[int, int, int]:
    """(batch x heads, N, d) of a shape."""
    return int(shape["batch"]) * int(shape["heads"]), int(shape["seq"]), int(shape["head_dim"])


def visible_pairs(shape) -> int:
    """(query, key) pairs the mask keeps, over all heads: N^2, or N (N + 1) / 2 with the causal mask."""
    bh, n, _ = sizes(shape)
    return bh * (n * (n + 1) // 2 if shape.get("causal") else n * n)


def forward_flops(shape) -> float:
    """Two products of 2 d flops per visible (query, key) pair (the softmax's exponentials not counted)."""
    return 4.0 * shape["head_dim"] * visible_pairs(shape)


def backward_flops(shape) -> float:
    """Five products: S recomputed, dV, dP, dK, dQ."""
    return 2.5 * forward_flops(shape)


def forward_bytes(shape, element: int = 4) -> float:
    """Q, K, V read once, O written once (``element`` bytes each), the float log-sum-exp written."""
    bh, n, d = sizes(shape)
    return 4.0 * bh * n * d * element + 4.0 * bh * n


def backward_bytes(shape, element: int = 4) -> float:
    """Q, K, V, O, dO read, dQ, dK, dV written once, the float log-sum-exp and D read."""
    bh, n, d = sizes(shape)
    return 8.0 * bh * n * d * element + 8.0 * bh * n


# --------------------------------------------------------------------------- version 1: unfused


def unfused_workspace(shape) -> tuple[DeviceBuffer, DeviceBuffer, DeviceBuffer]:
    """Device buffers for version 1: s K^T (bh, d, N), and S and P as (bh N, N) matrices: every head's N rows
    one after another, the matrix of rows the softmax takes."""
    bh, n, d = sizes(shape)
    return empty((bh, d, n)), empty((bh * n, n)), empty((bh * n, n))


def unfused_bytes_needed(shape) -> int:
    """Bytes version 1 holds on the device besides Q, K, V and O: two N x N matrices per head, and s K^T."""
    bh, n, d = sizes(shape)
    return 4 * bh * (2 * n * n + d * n)


def _transpose_launch(shape):
    bh, n, d = sizes(shape)
    return as_launch((blocks_for(n, TRANSPOSE_THREADS), d, bh), TRANSPOSE_THREADS)


def _scores_launch(shape):
    bh, n, _ = sizes(shape)
    return as_launch((blocks_for(n, GEMM_TILE["WT_BN"]), blocks_for(n, GEMM_TILE["WT_BM"]), bh), GEMM_THREADS)


def _mask_launch(shape):
    bh, n, _ = sizes(shape)
    if not shape.get("causal"):
        raise ValueError("attention_causal_mask runs only with the causal mask (causal = 1)")
    return as_launch(grid_stride_blocks(bh * n * n, MASK_THREADS), MASK_THREADS)


def _output_launch(shape):
    bh, n, d = sizes(shape)
    return as_launch((blocks_for(d, GEMM_TILE["WT_BN"]), blocks_for(n, GEMM_TILE["WT_BM"]), bh), GEMM_THREADS)


def attention_unfused(Q, K, V, causal: bool = False, scale: float | None = None, *, out=None, workspace=None,
                      sync: bool = True):
    """Version 1: O = softmax(scale Q K^T) V with S and P (N x N per head) in memory.  Five launches: s K^T,
    S = Q (s K^T), the causal mask (if causal), the MLP chapter's ``softmax_stable`` over every row, O = P V.
    ``workspace``: :func:`unfused_workspace`'s buffers (allocated when not given)."""
    host, (Q, K, V), (batch, heads, n, d) = _operands(Q, K, V)
    shape = {"batch": batch, "heads": heads, "seq": n, "head_dim": d, "causal": int(bool(causal))}
    Kt, S, P = workspace if workspace is not None else unfused_workspace(shape)
    O = out if out is not None else empty(Q.shape)
    kernels = module()   # version 1 does not use ATT_D: one build serves every head dimension
    bh = batch * heads

    def run(name, args, config):   # queued: the last launch waits for all (unless sync=False)
        launch(kernels.function(name), args, grid=config.grid, block=config.block, sync=False)

    run("attention_keys_transposed", (K, Kt, n, d, _scale(d, scale)), _transpose_launch(shape))
    run("attention_scores_gemm", (Q, Kt, S, n, d), _scores_launch(shape))
    if causal:
        run("attention_causal_mask", (S, n, bh), _mask_launch(shape))
    rows = softmax.KERNELS["softmax_stable"]
    config = rows.launch({"n": bh * n, "c": n})
    launch(softmax.module().function(rows.kernel), (S, P, bh * n, n), grid=config.grid, block=config.block, sync=False)
    config = _output_launch(shape)
    launch(kernels.function("attention_output_gemm"), (P, V, O, n, d), grid=config.grid, block=config.block, sync=sync)
    return _results(host, O)[0]


# --------------------------------------------------------------------------- version 2: the online softmax


def _online_launch(shape):
    return as_launch(blocks_for(int(shape["rows"]), ONLINE_WARPS), 32 * ONLINE_WARPS)


def online_softmax(S, *, out=None, lse=None, sync: bool = True):
    """Version 2: ``(P, lse)`` of each row of the (rows, cols) matrix ``S`` (entries may be -inf: masked)."""
    host = not isinstance(S, DeviceBuffer)
    S = to_device(np.ascontiguousarray(S, dtype=np.float32)) if host else S
    if len(S.shape) != 2:
        raise ValueError(f"S must be a matrix (rows, cols), got shape {tuple(S.shape)}")
    rows, cols = (int(s) for s in S.shape)
    P = out if out is not None else empty((rows, cols))
    L = lse if lse is not None else empty((rows,))
    config = _online_launch({"rows": rows, "cols": cols})
    launch(module().function("attention_online_softmax"), (S, P, L, rows, cols),
           grid=config.grid, block=config.block, sync=sync)
    return _results(host, P, L)


# --------------------------------------------------------------------------- version 3: the fused forward


def forward_shared_bytes(head_dim: int) -> int:
    """attention_forward_float's shared memory: Q^T and K^T (d x 68), V (64 x d), P^T (64 x 68), floats."""
    return 4 * (2 * head_dim * (TILE + PAD) + TILE * head_dim + TILE * (TILE + PAD))


def backward_shared_bytes(head_dim: int) -> int:
    """attention_backward_float's: K, V, Q, dO (64 x (d + 1)), P^T and dS^T (64 x 65), L and D (64 each)."""
    return 4 * (4 * TILE * (head_dim + 1) + 2 * TILE * (TILE + 1) + 2 * TILE)


def _recorded_build(shape, kernel: str) -> None:
    if int(shape["head_dim"]) != RECORDED_HEAD_DIM:
        raise ValueError(f"the {kernel} record describes the build for head dimension {RECORDED_HEAD_DIM} "
                         f"(its defines); head dimension {shape['head_dim']} is compiled with "
                         f"attention.defines({shape['head_dim']})")


def _forward_launch(shape, check: bool = True):
    if check:
        _recorded_build(shape, "attention_forward_float")
    bh, n, d = sizes(shape)
    return as_launch((blocks_for(n, TILE), bh), FORWARD_THREADS, forward_shared_bytes(d))


def attention_forward(Q, K, V, causal: bool = False, scale: float | None = None, *, out=None, lse=None,
                      sync: bool = True):
    """Version 3: ``(O, lse)`` by the fused float kernel; lse is the natural log-sum-exp of each row of scores."""
    host, (Q, K, V), (batch, heads, n, d) = _operands(Q, K, V)
    O = out if out is not None else empty(Q.shape)
    L = lse if lse is not None else empty((batch, heads, n))
    config = _forward_launch({"batch": batch, "heads": heads, "seq": n, "head_dim": d}, check=False)
    launch(module(d).function("attention_forward_float"), (Q, K, V, O, L, n, _scale(d, scale), int(bool(causal))),
           grid=config.grid, block=config.block, shared=config.shared, sync=sync)
    return _results(host, O, L)


# --------------------------------------------------------------------------- version 5: the backward pass


def _preprocess_launch(shape, check: bool = True):
    if check:
        _recorded_build(shape, "attention_backward_preprocess")
    bh, n, _ = sizes(shape)
    return as_launch(blocks_for(bh * n, PRE_WARPS), 32 * PRE_WARPS)


def _backward_launch(shape, check: bool = True):
    if check:
        _recorded_build(shape, "attention_backward_float")
    bh, n, d = sizes(shape)
    return as_launch((blocks_for(n, TILE), bh), BACKWARD_THREADS, backward_shared_bytes(d))


def attention_backward(Q, K, V, O, lse, dO, causal: bool = False, scale: float | None = None, *, out=None,
                       workspace=None, sync: bool = True):
    """Version 5 in float: ``(dQ, dK, dV)`` from the forward pass's O and log-sum-exp.  Two launches: D and
    dQ = 0, then a block per key tile.  ``out``: three buffers for dQ, dK, dV; ``workspace``: a (batch x heads, N)
    buffer for D (allocated when not given)."""
    host, (Q, K, V, O, dO), (batch, heads, n, d) = _operands(Q, K, V, O, dO)
    lse = lse if isinstance(lse, DeviceBuffer) else to_device(np.ascontiguousarray(lse, dtype=np.float32))
    for name, a in (("O", O), ("dO", dO)):
        if tuple(a.shape) != tuple(Q.shape):
            raise ValueError(f"{name} has shape {tuple(a.shape)}, Q {tuple(Q.shape)}: they must agree")
    dQ, dK, dV = out if out is not None else (empty(Q.shape), empty(Q.shape), empty(Q.shape))
    Dvec = workspace if workspace is not None else empty((batch * heads, n))
    shape = {"batch": batch, "heads": heads, "seq": n, "head_dim": d}
    kernels = module(d)
    pre = _preprocess_launch(shape, check=False)
    launch(kernels.function("attention_backward_preprocess"), (O, dO, Dvec, dQ, batch * heads * n),
           grid=pre.grid, block=pre.block, sync=False)
    config = _backward_launch(shape, check=False)
    launch(kernels.function("attention_backward_float"),
           (Q, K, V, dO, lse, Dvec, dQ, dK, dV, n, _scale(d, scale), int(bool(causal))),
           grid=config.grid, block=config.block, shared=config.shared, sync=sync)
    return _results(host, dQ, dK, dV)


# --------------------------------------------------------------------------- the versions' facts


def _mnk_bytes(m: int, n: int, k: int, heads: int) -> float:
    return 4.0 * heads * (m * k + k * n + m * n)


def _gemm_facts(kernel, launch_for, product, title: str):
    """A product of version 1: ``product(shape)`` gives its (M, N, K) per head."""

    def nbytes(shape):
        bh = sizes(shape)[0]
        return _mnk_bytes(*product(shape), bh)

    def flops(shape):
        m, n, k = product(shape)
        return 2.0 * sizes(shape)[0] * m * n * k

    return KernelVersion(TOPIC, kernel, attention_unfused, launch_for, bytes=nbytes, flops=flops,
                         reference=output_reference, defines=defines(RECORDED_HEAD_DIM), number=1, title=title)


def _scores_product(shape):
    _, n, d = sizes(shape)
    return n, n, d


def _output_product(shape):
    _, n, d = sizes(shape)
    return n, d, n


def _keys_transposed_reference(K, scale: float | None = None) -> np.ndarray:
    K = np.asarray(K, np.float64)
    return _scale(K.shape[-1], scale) * np.swapaxes(K, -1, -2)


def _masked_reference(S) -> np.ndarray:
    S = np.array(S, np.float64)
    return np.where(causal_mask(S.shape[-1]), S, -np.inf)


KERNELS = kernel_table(
    KernelVersion(TOPIC, "attention_keys_transposed", attention_unfused, _transpose_launch,
                  bytes=lambda shape: 8.0 * math.prod(sizes(shape)), flops=lambda shape: float(math.prod(sizes(shape))),
                  reference=_keys_transposed_reference, defines=defines(RECORDED_HEAD_DIM),
                  number=1, title="unfused: K transposed and scaled"),
    _gemm_facts("attention_scores_gemm", _scores_launch, _scores_product,
                "unfused: the scores S = Q K^T / sqrt(d) in memory"),
    KernelVersion(TOPIC, "attention_causal_mask", attention_unfused, _mask_launch,
                  # writes the masked half of S, reads nothing
                  bytes=lambda shape: 4.0 * sizes(shape)[0] * shape["seq"] * (shape["seq"] - 1) / 2,
                  flops=lambda shape: 0.0, reference=_masked_reference, defines=defines(RECORDED_HEAD_DIM),
                  number=1, title="unfused: the causal mask written into S"),
    _gemm_facts("attention_output_gemm", _output_launch, _output_product,
                "unfused: O = P V from the probabilities in memory"),
    KernelVersion(TOPIC, "attention_online_softmax", online_softmax, _online_launch,
                  bytes=lambda shape: 4.0 * (2 * shape["rows"] * shape["cols"] + shape["rows"]),
                  flops=lambda shape: 4.0 * shape["rows"] * shape["cols"], reference=online_softmax_reference,
                  defines=defines(RECORDED_HEAD_DIM),
                  number=2, title="the one-pass (online) row softmax"),
    KernelVersion(TOPIC, "attention_forward_float", attention_forward, _forward_launch, bytes=forward_bytes,
                  flops=forward_flops, reference=reference, defines=defines(RECORDED_HEAD_DIM),
                  number=3, title="fused forward in float: key/value tiles, online softmax, log-sum-exp saved"),
    KernelVersion(TOPIC, "attention_backward_preprocess", attention_backward, _preprocess_launch,
                  bytes=lambda shape: 4.0 * sizes(shape)[0] * shape["seq"] * (3 * shape["head_dim"] + 1),
                  flops=lambda shape: 2.0 * math.prod(sizes(shape)),
                  reference=lambda O, dO: (np.asarray(O, np.float64) * np.asarray(dO, np.float64)).sum(axis=-1),
                  defines=defines(RECORDED_HEAD_DIM),
                  number=5, title="backward: D = rowsum(dO o O), dQ zeroed"),
    KernelVersion(TOPIC, "attention_backward_float", attention_backward, _backward_launch, bytes=backward_bytes,
                  flops=backward_flops, reference=backward_reference, defines=defines(RECORDED_HEAD_DIM),
                  number=5, title="backward in float: a block per key tile, dQ by atomics"),
    taught_elsewhere=(4,),  # version 4, the BF16 forward, is in kernels/attention/attention_bf16.py
)
