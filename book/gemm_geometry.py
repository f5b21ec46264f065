"""What the GEMM and convolution pictures show, computed the way the kernels compute it.

* :func:`splitk_schedule`: version 8's cut of K into slices (``sgemm_plan`` and the k-tile range each
  ``blockIdx.z`` takes in ``sgemm_splitk`` of ``kernels/gemm/sgemm.cu``);
* :func:`implicit_gather`: which element of X each column of one row of implicit GEMM's virtual unrolled
  matrix reads, by ``conv2d_implicit_gemm``'s own index arithmetic (``kernels/conv/conv2d_gemm.cu``);
* :func:`winograd_tile`: Winograd's F(4 x 4, 3 x 3) on one tile with the kernels' matrices
  (``kernels/conv/conv2d_gemm.py``), every intermediate and its count of multiplications;
* :func:`roofline_points`: rows of a results file as points under the roofline of the run's peaks.

:mod:`book.gemm_figures` draws what these return; ``tests/test_gemm_figures.py`` checks them against the
kernels' NumPy references.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from kernels.conv import conv2d_gemm, im2col
from kernels.gemm import sgemm
from kernels.runtime import blocks_for
from kernels.tools.roofline import Achieved, Peaks, achieved

# --------------------------------------------------------------------------- split-K (version 8)


@dataclass(frozen=True)
class SplitK:
    """Version 8's schedule of an M x N x K product: the grid, and the K range of each slice (``blockIdx.z``)."""

    M: int
    N: int
    K: int
    config: str  # a key of sgemm.SPLITK_CONFIGS
    block_m: int
    block_n: int
    k_step: int  # WT_BK: K is cut at multiples of it
    grid: tuple[int, int, int]  # (column tiles, row tiles, slices)
    slices: tuple[tuple[int, int], ...]  # [k0, k1) of slice z

    @property
    def splits(self) -> int:
        return len(self.slices)

    @property
    def partial_floats(self) -> int:
        """Floats of the partial tiles: one M x N product per slice (none with one slice: it writes C)."""
        return self.splits * self.M * self.N if self.splits > 1 else 0


def splitk_schedule(M: int, N: int, K: int, sms: int, plan: dict | None = None) -> SplitK:
    """The slices ``sgemm_splitk`` computes for an M x N x K product on a GPU of ``sms`` multiprocessors
    (``plan`` overrides ``sgemm_plan``, as the launcher's argument does)."""
    p = dict(plan) if plan is not None else sgemm.sgemm_plan(M, N, K, sms=sms)
    c = sgemm.SPLITK_CONFIGS[p["config"]]
    kt_total = blocks_for(K, c["WT_BK"])  # int kt_total = (K + WT_BK - 1) / WT_BK;
    per = p.get("tiles_per_split") or -(-kt_total // int(p["splits"]))
    splits = -(-kt_total // per)  # the launcher leaves no slice empty
    slices = []
    for z in range(splits):
        kt_begin = z * per  # int kt_begin = blockIdx.z * tiles_per_split;
        kt_end = min(kt_total, kt_begin + per)  # int kt_end = min(kt_total, kt_begin + tiles_per_split);
        slices.append((kt_begin * c["WT_BK"], min(K, kt_end * c["WT_BK"])))
    grid = (blocks_for(N, c["WT_BN"]), blocks_for(M, c["WT_BM"]), splits)
    return SplitK(M, N, K, p["config"], c["WT_BM"], c["WT_BN"], c["WT_BK"], grid, tuple(slices))


def splitk_partials(A: np.ndarray, B: np.ndarray, schedule: SplitK) -> np.ndarray:
    """The partial products the slices write (float64): ``partial[z] = A[:, k0:k1] @ B[k0:k1]``; their sum in
    the order z = 0, 1, ... is what ``sgemm_splitk_sum`` writes to C."""
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    return np.stack([A[:, k0:k1] @ B[k0:k1] for k0, k1 in schedule.slices])


# --------------------------------------------------------------------------- implicit GEMM's gather


@dataclass(frozen=True)
class Gather:
    """Row ``row`` of the virtual unrolled matrix, over the IG_BN columns of block ``block`` (``blockIdx.x``).

    ``source[q]`` is the flat index into X (N, C, H, W) that column ``first_column + q`` reads, or -1 where the
    tap falls into the padding (the kernel stores a zero); ``lane[q]``, ``warp`` and ``tile_row``: the lane that
    gathers column q, the warp that gathers the row, and the row's place in its k-tile."""

    row: int
    tap: tuple[int, int, int]  # (c, i, j)
    first_column: int
    source: np.ndarray
    lane: np.ndarray
    warp: int
    tile_row: int
    shape: tuple[int, ...]  # N, C, H, W, K, pad, stride, H_out, W_out

    def pixels(self) -> list[tuple[int, int, int, int] | None]:
        """``source`` as (n, c, h, w) of X, None in the padding."""
        N, C, H, W = self.shape[:4]
        return [None if s < 0 else tuple(int(v) for v in np.unravel_index(s, (N, C, H, W))) for s in self.source]


def implicit_config() -> dict:
    """The IG_* tile of ``conv2d_implicit_gemm`` as its launcher compiles it."""
    return {k: v for k, v in conv2d_gemm.DEFAULT_CONFIG.items() if k.startswith("IG_")}


def implicit_gather(N: int, C: int, H: int, W: int, K: int, pad: int, stride: int, row: int,
                    block: int = 0) -> Gather:
    """What ``conv2d_implicit_gemm`` gathers for row ``row`` of its unrolled matrix in block ``block``, from its
    index arithmetic: a column's base offset and padding mask (once per thread), the row's tap-table entry."""
    H_out, W_out = im2col.output_size(H, W, K, pad, stride)
    P, KK = H_out * W_out, K * K
    CKK, NP = C * KK, N * P
    c_cfg = implicit_config()
    grid, threads = conv2d_gemm.implicit_launch(N, 1, H_out, W_out, conv2d_gemm.DEFAULT_CONFIG)
    if not 0 <= row < CKK:
        raise ValueError(f"row must be between 0 and {CKK - 1} (the C*K*K = {CKK} taps), got {row}")
    if not 0 <= block < grid[0]:
        raise ValueError(f"block must be between 0 and {grid[0] - 1} (blockIdx.x of the launch), got {block}")
    BN, BK = c_cfg["IG_BN"], c_cfg["IG_BK"]
    warps = threads // 32
    tile_j = block * BN  # long long tile_j = (long long)blockIdx.x * IG_BN;
    c, i, j = row // KK, (row % KK) // K, row % K  # int c = k / KK, i = (k % KK) / K, j = k % K;
    tap = c * H * W + i * W + j  # the tap table's offset (entry >> 6)
    source = np.full(BN, -1, np.int64)
    lanes = np.arange(BN) % 32  # column lane + 32 q is gathered by lane `lane`
    for q in range(BN):
        col = tile_j + q  # long long col = tile_j + lane + 32 * q;
        if col >= NP:
            continue  # col_mask[q] = col < NP ? mask : 0;
        n, p = col // P, col % P
        h0, w0 = (p // W_out) * stride - pad, (p % W_out) * stride - pad
        col_base = n * C * H * W + h0 * W + w0
        if 0 <= h0 + i < H and 0 <= w0 + j < W:  # (col_mask[q] >> bit) & 1, bit = i*K + j
            source[q] = col_base + tap  # X[col_base[q] + tap]
    k_in_tile = row % BK
    return Gather(row, (c, i, j), tile_j, source, lanes, k_in_tile % warps, k_in_tile,
                  (N, C, H, W, K, pad, stride, H_out, W_out))


# --------------------------------------------------------------------------- Winograd


@dataclass(frozen=True)
class WinogradTile:
    """F(m x m, r x r) on one tile: input patch d, filter g, their transforms V = Bᵀ d B and U = G g Gᵀ, the
    element-wise product M = U ⊙ V and the output tile Y = Aᵀ M A."""

    d: np.ndarray
    g: np.ndarray
    V: np.ndarray
    U: np.ndarray
    M: np.ndarray
    Y: np.ndarray

    @property
    def multiplications(self) -> int:
        """Multiplications of the element-wise product: one per element of the transformed tile."""
        return self.M.size

    @property
    def direct_multiplications(self) -> int:
        """What the direct method does for the same outputs: r² per output."""
        return self.Y.size * self.g.size


def winograd_matrices() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bᵀ, G and Aᵀ as the kernels apply them."""
    return conv2d_gemm.WINOGRAD_BT, conv2d_gemm.WINOGRAD_G, conv2d_gemm.WINOGRAD_AT


def winograd_tile(d, g) -> WinogradTile:
    """One output tile by Winograd's transforms, in float64."""
    BT, G, AT = winograd_matrices()
    d, g = np.asarray(d, np.float64), np.asarray(g, np.float64)
    if d.shape != (BT.shape[1],) * 2 or g.shape != (G.shape[1],) * 2:
        raise ValueError(f"d must be {BT.shape[1]} x {BT.shape[1]} and g {G.shape[1]} x {G.shape[1]}, "
                         f"got {d.shape} and {g.shape}")
    V = BT @ d @ BT.T
    U = G @ g @ G.T
    M = U * V
    return WinogradTile(d, g, V, U, M, AT @ M @ AT.T)


def correlate_valid(d, g) -> np.ndarray:
    """The direct 'valid' cross-correlation of d with g (what a convolution layer computes), float64."""
    d, g = np.asarray(d, np.float64), np.asarray(g, np.float64)
    r = g.shape[0]
    out = d.shape[0] - r + 1
    return np.array([[np.sum(d[y:y + r, x:x + r] * g) for x in range(out)] for y in range(out)])


# --------------------------------------------------------------------------- roofline points


def roofline_points(rows: Iterable[dict], peaks: Peaks, label: Callable[[dict], str]) -> dict[str, Achieved]:
    """The timed rows (``median_ms``, ``bytes``, ``flops`` > 0) as points under ``peaks``, by ``label(row)``; where two
    rows get one label, the faster is kept (the best configuration of a version)."""
    points: dict[str, Achieved] = {}
    for r in rows:
        if not r.get("median_ms") or not r.get("flops") or not r.get("bytes"):
            continue
        point = achieved(r["bytes"], r["flops"], r["median_ms"] / 1e3, peaks)
        name = label(r)
        if name not in points or point.gflops > points[name].gflops:
            points[name] = point
    return points
