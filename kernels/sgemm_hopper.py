"""Version 10 of C = A B: float32 accuracy from TF32 tensor cores ("3xTF32"), on Hopper's warpgroup MMA.

``kernels/sgemm_hopper.cu`` explains the split; here are its launcher and the facts the chapter uses.
Two launches: ``tf32x3_split_b`` turns B into its big and small TF32 parts, in the product kernel's tile
order, then ``sgemm_tf32x3_wgmma`` multiplies.  Both are counted in every timing of this version.

Hopper only (compute capability 9.0): wgmma is an instruction of sm_90a.  The CPU emulator runs C++ and
cannot run inline PTX assembly; version 9 (``kernels/sgemm.py``'s ``sgemm_tf32x3_wmma``) is the same
split written with CUDA's portable WMMA API, which the emulator runs.
"""

from __future__ import annotations

import numpy as np

from kernels.runtime import DeviceBuffer, blocks_for, selection
from kernels.runtime.errors import KernelError
from kernels.runtime.gpu import ARCH_SPECIFIC_OPTION
from kernels.runtime.loader import launch, load_topic, output_like

TOPIC = "sgemm_hopper"
BN = 128                            # sgemm_hopper.cu: H_BN
SPLIT_THREADS = 256
#: The tile configuration (sgemm_hopper.cu's H_* defines); the benchmark compares a few.
DEFAULT_CONFIG = {"H_WARPGROUPS": 2, "H_BK": 32, "H_STAGES": 4, "H_PROMOTE": 4, "H_INFLIGHT": 1}


def _geometry(config: dict) -> dict:
    """Rows per block, threads, k per stage and shared-memory bytes of a configuration."""
    c = {**DEFAULT_CONFIG, **config}
    wg, bk, stages = int(c["H_WARPGROUPS"]), int(c["H_BK"]), int(c["H_STAGES"])
    a_stride = 16 if bk == 16 else bk + 4
    return {"BM": 64 * wg, "THREADS": 128 * wg, "BK": bk,
            "SHARED_BYTES": stages * (64 * wg * a_stride + 2 * BN * bk) * 4}


def split_floats(K: int, N: int, bk: int) -> int:
    """Floats of the split B: every (n-tile, k-tile) pair holds a big and a small tile."""
    return blocks_for(N, BN) * blocks_for(K, bk) * 2 * BN * bk


_capability: dict = {}  # id(backend) -> (backend, "major.minor"): asked once (describe() takes about a millisecond)


def require_hopper(backend=None) -> None:
    """Raise a clear error unless the current backend is a GPU of compute capability 9.0."""
    backend = backend or selection.current_backend()
    if backend.name != "gpu":
        raise KernelError(
            "version 10 (3xTF32 with wgmma) runs on a Hopper GPU only: wgmma is PTX assembly, which the CPU "
            "emulator cannot run. Version 9 (kernels.sgemm.sgemm_tf32x3_wmma) is the same split in CUDA C."
        )
    cc = _capability.get(id(backend))
    if cc is None or cc[0] is not backend:
        cc = _capability[id(backend)] = (backend, backend.describe().get("compute_capability"))
    cc = cc[1]
    if cc != "9.0":
        raise KernelError(f"version 10 (3xTF32 with wgmma) needs a Hopper GPU (compute capability 9.0); this one is {cc}")


_workspaces: dict = {}


def _split_buffer(floats: int, like):
    if not isinstance(like, DeviceBuffer):
        return np.empty(floats, np.float32)
    from kernels.runtime.module import empty

    backend = selection.current_backend()
    key = (id(backend), floats)
    hit = _workspaces.get(key)
    if hit is None or hit[0] is not backend:
        hit = _workspaces[key] = (backend, empty((floats,)))
    return hit[1]


def sgemm_tf32x3_wgmma(A, B, out=None, *, b_transposed: bool = False, sync=True, prepare_only=False,
                       config: dict | None = None):
    """C = A B with version 10.  ``A`` is (M, K); ``B`` is (K, N), or (N, K) with ``b_transposed`` (the
    weights W of X W^T, read as they are).  float32 in and out; any M, N, K >= 1."""
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
    g = _geometry(config)
    module = load_topic(TOPIC, {"DLK_ARCH_SPECIFIC": 1, **config})
    Bp = _split_buffer(split_floats(K, N, g["BK"]), A)
    split = launch(module.function("tf32x3_split_b"), (B, K, N, int(b_transposed), Bp),
                   grid=(blocks_for(K, g["BK"]), blocks_for(N, BN)), block=SPLIT_THREADS, sync=False,
                   prepare_only=prepare_only)
    tiles = blocks_for(M, g["BM"]) * blocks_for(N, BN)
    product = launch(module.function("sgemm_tf32x3_wgmma"), (M, N, K, A, Bp, C), grid=tiles, block=g["THREADS"],
                     shared=g["SHARED_BYTES"], sync=sync, prepare_only=prepare_only)
    if prepare_only:
        return lambda: (split(), product())
    return C
