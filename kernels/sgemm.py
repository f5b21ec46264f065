"""C = A B in single precision: the NumPy reference and one launcher per version of ``kernels/sgemm.cu``.

``A`` is ``(M, K)``, ``B`` is ``(K, N)``, ``C`` is ``(M, N)``, all float32 and
row-major.  Every launcher takes NumPy arrays or device buffers and returns
``C`` (a new NumPy array filled with NaN before the launch, so an element the
kernel forgets shows up, or the ``out`` given).  With ``prepare_only=True`` it
returns a function that only enqueues the launch, for timing::

    from kernels.runtime.timing import time_kernel
    time_kernel(sgemm_warptile(A_dev, B_dev, out=C_dev, prepare_only=True))

Every version accepts any ``M, N, K >= 1``: the kernels guard their loads
and stores, so no padding is needed.
"""

from __future__ import annotations

import numpy as np

from kernels.runtime import blocks_for
from kernels.runtime.loader import launch, load_topic, output_like
from kernels.runtime.versions import KernelVersion, as_launch, kernel_table

TOPIC = "sgemm"

#: The versions of sgemm.cu in teaching order: (launcher name, what changed at that step).
VERSIONS = (
    ("naive", "one thread per element of C, threadIdx.x down a column (uncoalesced)"),
    ("coalesced", "threadIdx.x along a row of C: coalesced reads of B and writes of C"),
    ("shared_tiled", "32x32 tiles of A and B in shared memory"),
    ("blocktile_1d", "64x64 tile per block, 8 results per thread (1-D register blocking)"),
    ("blocktile_2d", "128x128 tile per block, 8x8 results per thread (2-D register blocking)"),
    ("vectorized", "float4 loads from global and shared memory, A transposed in shared memory"),
    ("warptile", "warp tiling, conflict-free fragments, double-buffered k-tiles"),
)

TILE = 32  # sgemm.cu: TILE (versions 1-3 use TILE x TILE threads)
BT1 = (64, 64, 512)  # BT1_BM, BT1_BN, threads
BT2 = (128, 128, 256)  # BT2_BM, BT2_BN, threads (and VEC_*)

#: Default tile configuration of version 7 (the benchmark also tries others).
WARPTILE_DEFAULT = {"WT_BM": 128, "WT_BN": 128, "WT_BK": 16, "WT_MIN_BLOCKS": 2, "WT_GROUP": 0, "WT_NQ": 4}


def reference(A, B) -> np.ndarray:
    """C = A B in float64."""
    return np.asarray(A, np.float64) @ np.asarray(B, np.float64)


def flops(M: int, N: int, K: int) -> float:
    """One multiply and one add per (i, j, k)."""
    return 2.0 * M * N * K


def min_bytes(M: int, N: int, K: int) -> float:
    """Each of A and B read once, C written once."""
    return 4.0 * (M * K + K * N + M * N)


def _shapes(A, B):
    if len(A.shape) != 2 or len(B.shape) != 2:
        raise ValueError(f"A and B must be matrices, got shapes {tuple(A.shape)} and {tuple(B.shape)}")
    M, K = (int(s) for s in A.shape)
    K2, N = (int(s) for s in B.shape)
    if K != K2:
        raise ValueError(f"A is {M}x{K} but B is {K2}x{N}: the inner dimensions differ")
    if min(M, N, K) < 1:
        raise ValueError(f"empty product {M}x{K} times {K2}x{N}")
    return M, N, K


def _f32(a):
    if isinstance(a, np.ndarray):
        return np.ascontiguousarray(a, dtype=np.float32)
    return a


def _run(kernel_name, A, B, out, grid, block, sync, prepare_only, defines=None):
    A, B = _f32(A), _f32(B)
    M, N, K = _shapes(A, B)
    C = output_like(A, (M, N)) if out is None else out
    if tuple(C.shape) != (M, N):
        raise ValueError(f"out has shape {tuple(C.shape)}, C is {M}x{N}")
    kernel = load_topic(TOPIC, defines or WARPTILE_DEFAULT).function(kernel_name)
    enqueue = launch(kernel, (M, N, K, A, B, C), grid=grid(M, N), block=block, sync=sync, prepare_only=prepare_only)
    return enqueue if prepare_only else C


def sgemm_naive(A, B, out=None, *, sync=True, prepare_only=False):
    """Version 1: 32x32 threads per block, threadIdx.x along the rows of C."""
    return _run("sgemm_naive", A, B, out, lambda M, N: (blocks_for(N, TILE), blocks_for(M, TILE)),
                (TILE, TILE), sync, prepare_only)


def sgemm_coalesced(A, B, out=None, *, sync=True, prepare_only=False):
    """Version 2: 32x32 threads per block, threadIdx.x along the columns of C."""
    return _run("sgemm_coalesced", A, B, out, lambda M, N: (blocks_for(N, TILE), blocks_for(M, TILE)),
                (TILE, TILE), sync, prepare_only)


def sgemm_shared_tiled(A, B, out=None, *, sync=True, prepare_only=False):
    """Version 3: TILE x TILE threads, one per element of a TILE x TILE tile of C."""
    return _run("sgemm_shared_tiled", A, B, out, lambda M, N: (blocks_for(N, TILE), blocks_for(M, TILE)),
                (TILE, TILE), sync, prepare_only)


def sgemm_blocktile_1d(A, B, out=None, *, sync=True, prepare_only=False):
    """Version 4: 512 threads per 64x64 tile."""
    bm, bn, threads = BT1
    return _run("sgemm_blocktile_1d", A, B, out, lambda M, N: (blocks_for(N, bn), blocks_for(M, bm)),
                threads, sync, prepare_only)


def sgemm_blocktile_2d(A, B, out=None, *, sync=True, prepare_only=False):
    """Version 5: 256 threads per 128x128 tile."""
    bm, bn, threads = BT2
    return _run("sgemm_blocktile_2d", A, B, out, lambda M, N: (blocks_for(N, bn), blocks_for(M, bm)),
                threads, sync, prepare_only)


def sgemm_vectorized(A, B, out=None, *, sync=True, prepare_only=False):
    """Version 6: 256 threads per 128x128 tile, float4 traffic."""
    bm, bn, threads = BT2
    return _run("sgemm_vectorized", A, B, out, lambda M, N: (blocks_for(N, bn), blocks_for(M, bm)),
                threads, sync, prepare_only)


def warptile_threads(config: dict | None = None) -> int:
    c = {**WARPTILE_DEFAULT, **(config or {})}
    return (c["WT_BM"] // 64) * (c["WT_BN"] // (16 * c["WT_NQ"])) * 32


def sgemm_warptile(A, B, out=None, *, config: dict | None = None, sync=True, prepare_only=False):
    """Version 7: warp tiling and double buffering; ``config`` overrides WT_BM, WT_BN, WT_BK, WT_MIN_BLOCKS, WT_GROUP, WT_NQ."""
    c = {**WARPTILE_DEFAULT, **(config or {})}
    return _run("sgemm_warptile", A, B, out, lambda M, N: (blocks_for(N, c["WT_BN"]), blocks_for(M, c["WT_BM"])),
                warptile_threads(c), sync, prepare_only, defines=c)


LAUNCHERS = {
    "naive": sgemm_naive,
    "coalesced": sgemm_coalesced,
    "shared_tiled": sgemm_shared_tiled,
    "blocktile_1d": sgemm_blocktile_1d,
    "blocktile_2d": sgemm_blocktile_2d,
    "vectorized": sgemm_vectorized,
    "warptile": sgemm_warptile,
}


def _mnk(shape) -> tuple[int, int, int]:
    return int(shape["M"]), int(shape["N"]), int(shape["K"])


def _facts(kernel: str, launcher, tile_m: int, tile_n: int, threads) -> KernelVersion:
    """C's tiles of tile_m x tile_n, one block each: grid (ceil(N / tile_n), ceil(M / tile_m))."""

    def launch_for(shape):
        M, N, _ = _mnk(shape)
        return as_launch((blocks_for(N, tile_n), blocks_for(M, tile_m)), threads)

    return KernelVersion(TOPIC, kernel, launcher, launch_for,
                         bytes=lambda shape: min_bytes(*_mnk(shape)), flops=lambda shape: flops(*_mnk(shape)),
                         reference=reference, defines=WARPTILE_DEFAULT)


KERNELS = kernel_table(
    _facts("sgemm_naive", sgemm_naive, TILE, TILE, (TILE, TILE)),
    _facts("sgemm_coalesced", sgemm_coalesced, TILE, TILE, (TILE, TILE)),
    _facts("sgemm_shared_tiled", sgemm_shared_tiled, TILE, TILE, (TILE, TILE)),
    _facts("sgemm_blocktile_1d", sgemm_blocktile_1d, BT1[0], BT1[1], BT1[2]),
    _facts("sgemm_blocktile_2d", sgemm_blocktile_2d, BT2[0], BT2[1], BT2[2]),
    _facts("sgemm_vectorized", sgemm_vectorized, BT2[0], BT2[1], BT2[2]),
    _facts("sgemm_warptile", sgemm_warptile, WARPTILE_DEFAULT["WT_BM"], WARPTILE_DEFAULT["WT_BN"], warptile_threads()),
)


def sgemm(A, B, out=None, **kwargs):
    """The fastest version (what the convolution chapter calls)."""
    return sgemm_warptile(A, B, out, **kwargs)


def version_source(number: int | str) -> str:
    """The section of ``kernels/sgemm.cu`` that holds version ``number`` (its comment, defines and kernel).

    The file separates its sections with ``// ----`` lines; version ``n``'s section starts with ``// n.``.
    ``"helpers"`` gives the float4 helpers that versions 6 and 7 share.
    """
    from kernels import read_source

    sections = []
    current: list[str] = []
    for line in read_source(TOPIC).splitlines():
        if line.startswith("// ----"):
            sections.append("\n".join(current).strip("\n"))
            current = []
        else:
            current.append(line)
    sections.append("\n".join(current).strip("\n"))
    prefix = "// Helpers" if number == "helpers" else f"// {number}."
    for section in sections:
        if section.startswith(prefix):
            return section
    raise KeyError(f"kernels/sgemm.cu has no section starting with {prefix!r}")
