"""Attention with BF16 inputs on the tensor cores: launchers of ``attention_bf16.cu`` (version 4, the BF16 half of 5).

``Q``, ``K``, ``V`` (``O``, ``dO`` and the gradients) are ``(batch, heads, N, d)`` arrays of ``ml_dtypes.bfloat16``
(or device buffers of it); the log-sum-exp is float32.  The references are float64 on the BF16 values
(``kernels/attention/attention.py``): what the kernels compute before their own float and BF16 rounding.

On a GPU (compute capability 8.0 or newer) the products are ``mma.sync`` instructions; on the CPU emulator the same
kernels run with those warp-level operations written as shuffles (``kernels/warp_mma.cuh``), slowly: keep shapes small
there.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from kernels.attention import attention as fp32
from kernels.runtime import DeviceBuffer, blocks_for, empty, to_device
from kernels.runtime.loader import grid_stride_blocks, launch, load_topic
from kernels.runtime.versions import KernelVersion, as_launch, kernel_table

TOPIC = "attention_bf16"
BF16 = np.dtype(ml_dtypes.bfloat16)
#: The tile configuration built for each head dimension the benchmark measures (attention_bf16.cu's BF_* defines):
#: the forward pass's warps per block, keys per tile, 16-row query tiles per warp, blocks per multiprocessor the
#: registers must allow and whether O's rescale is skipped when no row's maximum grew; the backward pass's warps per
#: block (16 keys each) and queries per tile.  The fastest of benchmarks/attention.py's CONFIGURATIONS on an H100
#: at N = 4096, with and without the mask (its ``configurations`` rows).
DEFAULT_CONFIGS = {
    64: {"BF_WARPS": 8, "BF_BN": 128, "BF_M_TILES": 1, "BF_MIN_BLOCKS": 2, "BF_RESCALE_SKIP": 0,
         "BF_BWD_WARPS": 8, "BF_BWD_BQ": 128},
    128: {"BF_WARPS": 4, "BF_BN": 64, "BF_M_TILES": 2, "BF_RESCALE_SKIP": 1, "BF_BWD_WARPS": 8, "BF_BWD_BQ": 64},
}
PRE_WARPS = 4                        # attention_bf16.cu: PRE_WARPS
CONVERT_THREADS = 256
HEAD_DIMS = fp32.HEAD_DIMS
RECORDED_HEAD_DIM = fp32.RECORDED_HEAD_DIM



def default_config(head_dim: int) -> dict:
    """The tile configuration of ``head_dim``: that of the nearest measured head dimension at or above it."""
    return dict(DEFAULT_CONFIGS[min(d for d in DEFAULT_CONFIGS if d >= head_dim)])


def defines(head_dim: int, config: dict | None = None) -> dict:
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"the BF16 kernels take head dimensions {', '.join(map(str, HEAD_DIMS))}, not {head_dim}")
    return {**default_config(head_dim), **(config or {}), "ATT_D": int(head_dim)}


def module(head_dim: int = RECORDED_HEAD_DIM, config: dict | None = None):
    return load_topic(TOPIC, defines(head_dim, config))


def bf16(a) -> np.ndarray:
    """``a`` rounded to BF16 (to nearest even), as ``ml_dtypes.bfloat16``."""
    return np.ascontiguousarray(np.asarray(a, np.float32).astype(BF16))


# --------------------------------------------------------------------------- shapes


def geometry(head_dim: int, config: dict | None = None) -> dict:
    """The tiling of a configuration (the default of ``head_dim`` unless given): the forward pass's warps, 16-row
    query tiles per warp, query rows per block, keys per tile, whether Q's fragments stay in registers and its
    shared memory; the backward pass's warps, keys per block (``tile``), queries per tile and shared memory."""
    c = {**default_config(head_dim), **(config or {})}
    keys = 16 * int(c["BF_BWD_WARPS"])             # keys per backward block
    queries = int(c["BF_BWD_BQ"])                  # queries per backward tile
    warps, m_tiles = int(c["BF_WARPS"]), int(c["BF_M_TILES"])
    rows = 16 * warps * m_tiles                    # query rows per forward block
    return {"warps": warps, "m_tiles": m_tiles, "rows": rows, "threads": 32 * warps, "keys": int(c["BF_BN"]),
            "q_in_registers": bool(int(c.get("BF_Q_IN_REGISTERS", m_tiles == 1))),
            "backward_warps": int(c["BF_BWD_WARPS"]), "tile": keys, "queries": queries,
            "backward_threads": 32 * int(c["BF_BWD_WARPS"]),
            # Q, two stages of K and of V (BF16)
            "forward_shared": 2 * head_dim * (rows + 4 * int(c["BF_BN"])),
            # K, V (BF16), two stages of Q and dO (BF16), dS^T (BF16), two stages of L and D (float)
            "backward_shared": 2 * (2 * keys * head_dim + 4 * queries * head_dim + keys * queries) + 4 * 4 * queries}


def _recorded_build(shape, kernel: str) -> None:
    if int(shape["head_dim"]) != RECORDED_HEAD_DIM:
        raise ValueError(f"the {kernel} record describes the build for head dimension {RECORDED_HEAD_DIM}; head "
                         f"dimension {shape['head_dim']} is compiled with attention_bf16.defines({shape['head_dim']})")


def _forward_launch(shape, config: dict | None = None, check: bool = True):
    if check:
        _recorded_build(shape, "attention_forward_bf16")
    bh, n, d = fp32.sizes(shape)
    g = geometry(d, config)
    return as_launch((blocks_for(n, g["rows"]), bh), g["threads"], g["forward_shared"])


def _preprocess_launch(shape, check: bool = True):
    if check:
        _recorded_build(shape, "attention_bf16_backward_preprocess")
    bh, n, _ = fp32.sizes(shape)
    return as_launch(blocks_for(bh * n, PRE_WARPS), 32 * PRE_WARPS)


def _backward_launch(shape, config: dict | None = None, check: bool = True):
    if check:
        _recorded_build(shape, "attention_backward_bf16")
    bh, n, d = fp32.sizes(shape)
    g = geometry(d, config)
    return as_launch((blocks_for(n, g["tile"]), bh), g["backward_threads"], g["backward_shared"])


def _convert_launch(shape, check: bool = True):
    if check:
        _recorded_build(shape, "attention_bf16_dq_convert")
    return as_launch(grid_stride_blocks(int(np.prod(fp32.sizes(shape))), CONVERT_THREADS), CONVERT_THREADS)


# --------------------------------------------------------------------------- launchers


def _operands(*arrays):
    """BF16 device buffers of the arrays (NumPy ones rounded and copied), whether the first was NumPy, its shape."""
    host = not isinstance(arrays[0], DeviceBuffer)
    out = []
    for a in arrays:
        if isinstance(a, DeviceBuffer):
            if a.dtype != BF16:
                raise TypeError(f"the BF16 kernels take bfloat16 tensors, got a buffer of {a.dtype}")
            out.append(a)
        else:
            out.append(to_device(bf16(a)))
    shape = tuple(int(s) for s in out[0].shape)
    if len(shape) != 4:
        raise ValueError(f"Q, K and V must be (batch, heads, N, d), got shape {shape}")
    for name, a in zip("QKV", out[:3]):
        if tuple(a.shape) != shape:
            raise ValueError(f"Q is {shape} but {name} is {tuple(a.shape)}: Q, K and V must have one shape")
    return host, out, shape


def attention_forward(Q, K, V, causal: bool = False, scale: float | None = None, *, out=None, lse=None,
                      config: dict | None = None, sync: bool = True):
    """Version 4: ``(O, lse)``, O in BF16 and lse (natural log-sum-exp of each row of scores) in float."""
    host, (Q, K, V), (batch, heads, n, d) = _operands(Q, K, V)
    O = out if out is not None else empty(Q.shape, BF16)
    L = lse if lse is not None else empty((batch, heads, n))
    shape = {"batch": batch, "heads": heads, "seq": n, "head_dim": d}
    c = _forward_launch(shape, config, check=False)
    launch(module(d, config).function("attention_forward_bf16"),
           (Q, K, V, O, L, n, fp32._scale(d, scale), int(bool(causal))),
           grid=c.grid, block=c.block, shared=c.shared, sync=sync)
    return fp32._results(host, O, L)


def backward_workspace(shape) -> tuple[DeviceBuffer, DeviceBuffer]:
    """D (bh, N) and the float accumulator of dQ (bh, N, d)."""
    bh, n, d = fp32.sizes(shape)
    return empty((bh, n)), empty((bh, n, d))


def attention_backward(Q, K, V, O, lse, dO, causal: bool = False, scale: float | None = None, *, out=None,
                       workspace=None, config: dict | None = None, sync: bool = True):
    """Version 5 in BF16: ``(dQ, dK, dV)`` in BF16.  Three launches: D and the zeroed dQ accumulator, a block per
    key tile, dQ converted.  ``workspace``: :func:`backward_workspace`'s buffers."""
    host, (Q, K, V, O, dO), (batch, heads, n, d) = _operands(Q, K, V, O, dO)
    lse = lse if isinstance(lse, DeviceBuffer) else to_device(np.ascontiguousarray(lse, dtype=np.float32))
    shape = {"batch": batch, "heads": heads, "seq": n, "head_dim": d}
    dQ, dK, dV = out if out is not None else tuple(empty(Q.shape, BF16) for _ in range(3))
    Dvec, dQ_sum = workspace if workspace is not None else backward_workspace(shape)
    kernels = module(d, config)
    c = _preprocess_launch(shape, check=False)
    launch(kernels.function("attention_bf16_backward_preprocess"), (O, dO, Dvec, dQ_sum, batch * heads * n),
           grid=c.grid, block=c.block, sync=False)
    c = _backward_launch(shape, config, check=False)
    launch(kernels.function("attention_backward_bf16"),
           (Q, K, V, dO, lse, Dvec, dQ_sum, dK, dV, n, fp32._scale(d, scale), int(bool(causal))),
           grid=c.grid, block=c.block, shared=c.shared, sync=False)
    c = _convert_launch(shape, check=False)
    launch(kernels.function("attention_bf16_dq_convert"), (dQ_sum, dQ, batch * heads * n * d),
           grid=c.grid, block=c.block, sync=sync)
    return fp32._results(host, dQ, dK, dV)


# --------------------------------------------------------------------------- the versions' facts


def _bf16_reference(Q, K, V, causal: bool = False, scale: float | None = None):
    """(O, lse) in float64 from the BF16 values of the operands."""
    return fp32.reference(*(np.asarray(a, np.float64) for a in (Q, K, V)), causal, scale)


def _dq_convert_reference(dQ_sum) -> np.ndarray:
    return bf16(dQ_sum)


KERNELS = kernel_table(
    KernelVersion(TOPIC, "attention_forward_bf16", attention_forward, _forward_launch,
                  bytes=lambda shape: fp32.forward_bytes(shape, element=2), flops=fp32.forward_flops,
                  reference=_bf16_reference, defines=defines(RECORDED_HEAD_DIM),
                  number=4, title="fused forward in BF16 on the tensor cores: mma.sync m16n8k16, ldmatrix, cp.async"),
    KernelVersion(TOPIC, "attention_bf16_backward_preprocess", attention_backward, _preprocess_launch,
                  # O and dO read (BF16), D written and the dQ accumulator zeroed (float)
                  bytes=lambda shape: float(np.prod(fp32.sizes(shape))) * 8 + 4.0 * np.prod(fp32.sizes(shape)[:2]),
                  flops=lambda shape: 2.0 * np.prod(fp32.sizes(shape)),
                  reference=lambda O, dO: (np.asarray(O, np.float64) * np.asarray(dO, np.float64)).sum(axis=-1),
                  defines=defines(RECORDED_HEAD_DIM),
                  number=5, title="BF16 backward: D = rowsum(dO o O), the dQ accumulator zeroed"),
    KernelVersion(TOPIC, "attention_backward_bf16", attention_backward, _backward_launch,
                  bytes=lambda shape: fp32.backward_bytes(shape, element=2), flops=fp32.backward_flops,
                  reference=fp32.backward_reference, defines=defines(RECORDED_HEAD_DIM),
                  number=5, title="BF16 backward on the tensor cores: a block per key tile, dQ by float atomics"),
    KernelVersion(TOPIC, "attention_bf16_dq_convert", attention_backward, _convert_launch,
                  bytes=lambda shape: 6.0 * np.prod(fp32.sizes(shape)), flops=lambda shape: 0.0,
                  reference=_dq_convert_reference, defines=defines(RECORDED_HEAD_DIM),
                  number=5, title="BF16 backward: dQ from its float accumulator"),
    taught_elsewhere=(1, 2, 3),  # versions 1 to 3 and the float backward are in kernels/attention/attention.py
)
