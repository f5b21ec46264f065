"""Versions 10 and 11 of C = A B: float32 accuracy from TF32 tensor cores ("3xTF32"), on Hopper's warpgroup MMA.

``kernels/gemm/sgemm_hopper.cu`` explains the split; here are the launchers and the facts the chapter uses.
Version 10: ``tf32x3_split_b`` turns B into its big and small TF32 parts, in the product kernel's tile
order, then ``sgemm_tf32x3_wgmma`` multiplies, its threads copying every stage with ``cp.async``.
Version 11: ``tf32x3_pack_a`` also stores A tile by tile, so that ``sgemm_tf32x3_tma`` has each stage
copied by the TMA unit as two blocks and paces its warps with mbarriers.  Every launch of a version is
counted in its timings.

Hopper only (compute capability 9.0): wgmma, the TMA's bulk copies and mbarriers are instructions of
sm_90a.  The CPU emulator runs C++ and cannot run inline PTX assembly; version 9 (``kernels/gemm/sgemm.py``'s
``sgemm_tf32x3_wmma``) is the same split written with CUDA's portable WMMA API, which the emulator runs.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from kernels.runtime import DeviceBuffer, blocks_for, selection
from kernels.runtime.errors import KernelError
from kernels.runtime.loader import launch, load_topic, output_like
from kernels.runtime.versions import KernelVersion, as_launch, kernel_table
from kernels.gemm.sgemm import KERNELS as SGEMM_KERNELS, reference as sgemm_reference, tf32
from kernels.gemm.sgemm import _workspace  # the device buffer kept per backend and shape (version 8's partial sums)

TOPIC = "sgemm_hopper"
BN = 128                            # sgemm_hopper.cu: H_BN
SPLIT_THREADS = 256
#: The tile configuration (sgemm_hopper.cu's H_* defines); the benchmark compares a few.
DEFAULT_CONFIG = {"H_WARPGROUPS": 2, "H_BK": 32, "H_STAGES": 4, "H_PROMOTE": 4, "H_INFLIGHT": 1}


def _geometry(config: dict, kernel: str = "sgemm_tf32x3_wgmma") -> dict:
    """Rows per block, threads, k per stage and shared-memory bytes of a configuration (version 11 keeps
    two 8-byte mbarriers per stage after its stages)."""
    c = {**DEFAULT_CONFIG, **config}
    wg, bk, stages = int(c["H_WARPGROUPS"]), int(c["H_BK"]), int(c["H_STAGES"])
    a_stride = 16 if bk == 16 else bk + 4
    if kernel == "sgemm_tf32x3_tma":  # A's tile unpadded (its rows' pieces permuted instead), two mbarriers per stage
        shared = stages * (64 * wg * bk + 2 * BN * bk) * 4 + 2 * stages * 8
    else:
        shared = stages * (64 * wg * a_stride + 2 * BN * bk) * 4
    return {"BM": 64 * wg, "THREADS": 128 * wg, "BK": bk, "SHARED_BYTES": shared}


def split_floats(K: int, N: int, bk: int) -> int:
    """Floats of the split B: every (n-tile, k-tile) pair holds a big and a small tile."""
    return blocks_for(N, BN) * blocks_for(K, bk) * 2 * BN * bk


def is_hopper(backend=None) -> bool:
    """Whether ``backend`` (default: the current one) is a GPU of compute capability 9.0, where versions 10 and 11 run."""
    backend = backend or selection.current_backend()
    return backend.name == "gpu" and backend.arch == "sm_90"


def require_hopper(backend=None) -> None:
    """Raise a clear error unless the current backend is a GPU of compute capability 9.0."""
    backend = backend or selection.current_backend()
    if backend.name != "gpu":
        raise KernelError(
            "versions 10 and 11 (3xTF32 with wgmma) run on a Hopper GPU only: wgmma is PTX assembly, which the CPU "
            "emulator cannot run. Version 9 (kernels.gemm.sgemm.sgemm_tf32x3_wmma) is the same split in CUDA C."
        )
    if not is_hopper(backend):
        raise KernelError(f"versions 10 and 11 (3xTF32 with wgmma) need a Hopper GPU (sm_90); this one is {backend.arch}")


def sgemm_tf32x3_wgmma(A, B, out=None, *, b_transposed: bool = False, sync=True, prepare_only=False,
                       config: dict | None = None):
    """C = A B with version 10.  ``A`` is (M, K); ``B`` is (K, N), or (N, K) with ``b_transposed`` (the
    weights W of X W^T, read as they are).  float32 in and out; any M, N, K >= 1."""
    return _tf32x3("sgemm_tf32x3_wgmma", A, B, out, b_transposed, sync, prepare_only, config)


def sgemm_tf32x3_tma(A, B, out=None, *, b_transposed: bool = False, sync=True, prepare_only=False,
                     config: dict | None = None):
    """C = A B with version 11: version 10's products, its stages copied by the TMA unit and paced by
    mbarriers.  Arguments as version 10's.  Three launches: A packed tile by tile, B split, the product."""
    return _tf32x3("sgemm_tf32x3_tma", A, B, out, b_transposed, sync, prepare_only, config)


def _tf32x3(kernel: str, A, B, out, b_transposed: bool, sync, prepare_only, config: dict | None):
    require_hopper()
    if isinstance(A, np.ndarray):
        A = np.ascontiguousarray(A, dtype=np.float32)
    if isinstance(B, np.ndarray):
        B = np.ascontiguousarray(B, dtype=np.float32)
    if len(A.shape) != 2 or len(B.shape) != 2:
        raise ValueError(f"A and B must be matrices, got shapes {tuple(A.shape)} and {tuple(B.shape)}")
    M, K = (int(s) for s in A.shape)
    N, K2 = (int(s) for s in B.shape) if b_transposed else (int(B.shape[1]), int(B.shape[0]))
    if K != K2:
        what = f"B^T is {N}x{K2}" if b_transposed else f"B is {K2}x{N}"
        raise ValueError(f"A is {M}x{K} but {what}: the inner dimensions differ")
    if min(M, N, K) < 1:
        raise ValueError(f"empty product: M, N, K = {M}, {N}, {K}")
    C = output_like(A, (M, N)) if out is None else out
    if tuple(C.shape) != (M, N):
        raise ValueError(f"out has shape {tuple(C.shape)}, C is {M}x{N}")
    config = {**DEFAULT_CONFIG, **(config or {})}
    g = _geometry(config, kernel)
    module = load_topic(TOPIC, {"DLK_ARCH_SPECIFIC": 1, **config})
    floats = split_floats(K, N, g["BK"])
    Bp = _workspace((floats,), "3xTF32 split B") if isinstance(A, DeviceBuffer) else np.empty(floats, np.float32)
    split = launch(module.function("tf32x3_split_b"), (B, K, N, int(b_transposed), Bp),
                   grid=(blocks_for(K, g["BK"]), blocks_for(N, BN)), block=SPLIT_THREADS, sync=False,
                   prepare_only=prepare_only)
    steps = [split]
    if kernel == "sgemm_tf32x3_tma":
        packed = packed_a_floats(M, K, g["BM"], g["BK"])
        Ap = _workspace((packed,), "3xTF32 packed A") if isinstance(A, DeviceBuffer) else np.empty(packed, np.float32)
        steps.append(launch(module.function("tf32x3_pack_a"), (A, M, K, Ap),
                            grid=(blocks_for(K, g["BK"]), blocks_for(M, g["BM"])), block=SPLIT_THREADS, sync=False,
                            prepare_only=prepare_only))
        A = Ap
    tiles = blocks_for(M, g["BM"]) * blocks_for(N, BN)
    steps.append(launch(module.function(kernel), (M, N, K, A, Bp, C), grid=tiles, block=g["THREADS"],
                        shared=g["SHARED_BYTES"], sync=sync, prepare_only=prepare_only))
    if prepare_only:
        return lambda: [step() for step in steps]
    return C


def packed_a_floats(M: int, K: int, bm: int, bk: int) -> int:
    """Floats of version 11's packed A: every (m-tile, k-tile) pair holds one bm x bk tile."""
    return blocks_for(M, bm) * blocks_for(K, bk) * bm * bk


def split_b_reference(B, b_transposed: bool = False, bk: int = DEFAULT_CONFIG["H_BK"]) -> np.ndarray:
    """What ``tf32x3_split_b`` writes, in NumPy: for each n-tile and k-tile, B_big then B_small in the order
    [k-step s][core matrix along k c][n group][n][k] with the k order of the kernel's header comment."""
    Bm = np.asarray(B, np.float32).T if b_transposed else np.asarray(B, np.float32)   # K x N
    K, N = Bm.shape
    k_tiles, n_tiles = blocks_for(K, bk), blocks_for(N, BN)
    padded = np.zeros((k_tiles * bk, n_tiles * BN), np.float32)
    padded[:K, :N] = Bm
    e = np.arange(BN * bk)
    kk, nr, ng, c, s = e % 4, (e // 4) % 8, (e // 32) % (BN // 8), (e // (4 * BN)) % 2, e // (8 * BN)
    k_in_tile, n_in_tile = (bk // 4) * kk + 2 * s + c, ng * 8 + nr
    out = np.empty((n_tiles, k_tiles, 2, BN * bk), np.float32)
    for nt in range(n_tiles):
        for kt in range(k_tiles):
            v = padded[kt * bk + k_in_tile, nt * BN + n_in_tile]
            big = tf32(v)
            out[nt, kt, 0], out[nt, kt, 1] = big, tf32(v - big)
    return out.ravel()


def a_packed_offset(r, c, bk: int = DEFAULT_CONFIG["H_BK"]):
    """sgemm_hopper.cu's a_packed_offset: where version 11 keeps element (r, c) of a k-tile of A, in floats."""
    return r * bk + ((((c >> 2) ^ r) & (bk // 4 - 1)) << 2) + (c & 3)


def pack_a_reference(A, bm: int = 64 * DEFAULT_CONFIG["H_WARPGROUPS"], bk: int = DEFAULT_CONFIG["H_BK"]) -> np.ndarray:
    """What ``tf32x3_pack_a`` writes, in NumPy: A's (bm x bk) tiles, zero-padded, in the order [m-tile][k-tile],
    each tile's element (r, c) at ``a_packed_offset(r, c)``."""
    A = np.asarray(A, np.float32)
    M, K = A.shape
    m_tiles, k_tiles = blocks_for(M, bm), blocks_for(K, bk)
    padded = np.zeros((m_tiles * bm, k_tiles * bk), np.float32)
    padded[:M, :K] = A
    r, c = np.divmod(np.arange(bm * bk), bk)
    out = np.empty((m_tiles, k_tiles, bm * bk), np.float32)
    for mt in range(m_tiles):
        for kt in range(k_tiles):
            out[mt, kt, a_packed_offset(r, c, bk)] = padded[mt * bm + r, kt * bk + c]
    return out.ravel()


def _mnk(shape) -> tuple[int, int, int]:
    return int(shape["M"]), int(shape["N"]), int(shape["K"])


def _product_launch(shape, kernel: str = "sgemm_tf32x3_wgmma"):
    M, N, _ = _mnk(shape)
    g = _geometry(DEFAULT_CONFIG, kernel)
    return as_launch(blocks_for(M, g["BM"]) * blocks_for(N, BN), g["THREADS"], g["SHARED_BYTES"])


def _pack_launch(shape):
    M, _, K = _mnk(shape)
    g = _geometry(DEFAULT_CONFIG)
    return as_launch((blocks_for(K, g["BK"]), blocks_for(M, g["BM"])), SPLIT_THREADS)


def _split_launch(shape):
    _, N, K = _mnk(shape)
    return as_launch((blocks_for(K, DEFAULT_CONFIG["H_BK"]), blocks_for(N, BN)), SPLIT_THREADS)


_DEFINES = {"DLK_ARCH_SPECIFIC": 1, **DEFAULT_CONFIG}

def _split_bytes(shape) -> float:
    """B read once, its big and small parts (padded to whole tiles) written once."""
    _, N, K = _mnk(shape)
    return 4.0 * K * N + 4.0 * split_floats(K, N, DEFAULT_CONFIG["H_BK"])


def _product_bytes(shape) -> float:
    """A read and C written once, the split B read once."""
    M, N, K = _mnk(shape)
    return 4.0 * (M * K + M * N) + 4.0 * split_floats(K, N, DEFAULT_CONFIG["H_BK"])


def _packed_a_floats(shape) -> int:
    M, _, K = _mnk(shape)
    g = _geometry(DEFAULT_CONFIG)
    return packed_a_floats(M, K, g["BM"], g["BK"])


def _pack_bytes(shape) -> float:
    """A read once, its tiles (padded) written once."""
    M, _, K = _mnk(shape)
    return 4.0 * M * K + 4.0 * _packed_a_floats(shape)


def _tma_product_bytes(shape) -> float:
    """The packed A and the split B read once, C written once."""
    M, N, K = _mnk(shape)
    return 4.0 * (_packed_a_floats(shape) + M * N) + 4.0 * split_floats(K, N, DEFAULT_CONFIG["H_BK"])


def _product_flops(shape) -> float:
    M, N, K = _mnk(shape)
    return 2.0 * M * N * K


# The GEMM chapter's ladder goes on from kernels/gemm/sgemm.py's last version: versions 10 and 11.
KERNELS = kernel_table(
    KernelVersion(TOPIC, "tf32x3_split_b", sgemm_tf32x3_wgmma, _split_launch, bytes=_split_bytes,
                  flops=lambda shape: 0.0, reference=split_b_reference, defines=_DEFINES, number=None,
                  title="B split into B_big and B_small, stored in the product's tile order"),
    KernelVersion(TOPIC, "sgemm_tf32x3_wgmma", sgemm_tf32x3_wgmma, _product_launch, bytes=_product_bytes,
                  flops=_product_flops, reference=sgemm_reference, defines=_DEFINES, number=10,
                  title="3xTF32 with Hopper's warpgroup MMA (wgmma), k-tiles by cp.async"),
    KernelVersion(TOPIC, "tf32x3_pack_a", sgemm_tf32x3_tma, _pack_launch, bytes=_pack_bytes,
                  flops=lambda shape: 0.0, reference=pack_a_reference, defines=_DEFINES, number=None,
                  title="A packed tile by tile for the TMA unit's bulk copies"),
    KernelVersion(TOPIC, "sgemm_tf32x3_tma", sgemm_tf32x3_tma, partial(_product_launch, kernel="sgemm_tf32x3_tma"),
                  bytes=_tma_product_bytes,
                  flops=_product_flops, reference=sgemm_reference, defines=_DEFINES, number=11,
                  title="version 10's products, fed by the TMA unit and paced by mbarriers"),
    continues=SGEMM_KERNELS,
)
