"""Which data each block, warp and thread of a kernel touches: the numbers behind the book's mapping pictures.

Each function applies a kernel's own index formula (the line of the ``.cu`` file is quoted beside it)
with the tile sizes its Python module states (``kernels/conv/conv2d.py``, ``kernels/gemm/sgemm.py``,
``kernels/capsules/capsule_prediction.py``) or, where only the ``.cu`` file states them, the ``#define`` s read
from that file (``FC_TILE`` of ``kernels/dense/fully_connected.cu``).  :mod:`book.figures` draws what these return; ``tests/test_tile_geometry.py`` checks
that the geometry adds up (tiles cover their outputs exactly once, halos have the kernel's extent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from kernels import read_source
from kernels.capsules import capsule_prediction
from kernels.conv import conv2d
from kernels.gemm import sgemm
from kernels.runtime.versions import versions

# --------------------------------------------------------------------------- tiled direct convolution


@dataclass(frozen=True)
class ConvTile:
    """One block of ``conv2d_forward_tiled``: rectangles as (row0, col0, rows, cols) in pixels of one map."""

    output: tuple[int, int, int, int]  # the TILE_WIDTH x TILE_WIDTH outputs its threads compute
    written: tuple[int, int, int, int]  # the part of ``output`` inside the output map (the threads that store)
    input: tuple[int, int, int, int]  # the (TILE_WIDTH + K - 1)^2 input tile it loads into shared memory
    loaded: tuple[int, int, int, int]  # the part of ``input`` inside the input map (the rest is set to zero)
    K: int
    loads_per_thread: tuple[int, int]  # fewest and most input pixels a thread loads per input map


def conv_tiled_block(tile: int, H: int, W: int, K: int) -> ConvTile:
    """The regions of block ``tile`` (``blockIdx.y``) of ``conv2d_forward_tiled`` on an H x W input map."""
    if not 1 <= K <= min(H, W):
        raise ValueError(f"K must be between 1 and the map size {min(H, W)}, got {K}")
    T = conv2d.TILE_WIDTH
    H_out, W_out = H - K + 1, W - K + 1
    H_grid, W_grid = conv2d.tile_grid(H_out, W_out)
    if not 0 <= tile < H_grid * W_grid:
        raise ValueError(f"tile must be between 0 and {H_grid * W_grid - 1} (the {H_grid} x {W_grid} tiles), got {tile}")
    h0, w0 = (tile // W_grid) * T, (tile % W_grid) * T  # int h0 = (blockIdx.y / W_grid) * TILE_WIDTH; ...
    extent = T + K - 1  # int X_tile_width = TILE_WIDTH + K - 1;
    # for (int i = ty; i < X_tile_width; i += TILE_WIDTH): how many i (and j) a thread takes
    per_axis = [len(range(t, extent, T)) for t in range(T)]
    return ConvTile(
        output=(h0, w0, T, T),
        written=(h0, w0, max(0, min(T, H_out - h0)), max(0, min(T, W_out - w0))),
        input=(h0, w0, extent, extent),
        loaded=(h0, w0, max(0, min(extent, H - h0)), max(0, min(extent, W - w0))),
        K=K,
        loads_per_thread=(min(per_axis) ** 2, max(per_axis) ** 2),
    )


# --------------------------------------------------------------------------- the SGEMM ladder


def cuda_defines(source: str) -> dict[str, int]:
    """The ``#define NAME <integer>`` lines of a CUDA source (expressions and macros with arguments left out)."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^#define\s+(\w+)\s+(\d+)\b", source, re.M)}


@dataclass(frozen=True)
class SgemmTiling:
    """Who owns which element of C in one block of one SGEMM version, and what it loads per k-step.

    ``owner[r, c]`` is the thread (``threadIdx.x + blockDim.x * threadIdx.y``) that computes element
    (r, c) of the block's ``block_m x block_n`` tile of C; its warp is ``owner // 32``.  ``k_step``
    columns of A and rows of B are staged per step (``shared`` says whether through shared memory;
    versions 1 and 2 read one k at a time straight from global memory).  ``k_split``: version 8 also
    divides the k-steps among blocks (``blockIdx.z``).
    """

    step: int
    name: str
    block_m: int
    block_n: int
    k_step: int
    threads: int
    owner: np.ndarray
    shared: bool
    k_split: bool = False

    @property
    def thread_tile(self) -> tuple[int, int]:
        """Rows and columns of C that thread 0 computes (every thread computes as many)."""
        rows, cols = np.nonzero(self.owner == 0)
        return len(set(rows)), len(set(cols))

    def elements_of(self, thread: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and columns of the elements of C that ``thread`` computes."""
        return np.nonzero(self.owner == thread)


def _owner(block_m: int, block_n: int, threads: int, rows_cols) -> np.ndarray:
    """The owner map from ``rows_cols(t) -> (rows, cols)`` (index arrays of thread t's elements);
    -1 where no thread computes, and an error where two do (the formulas below must tile exactly)."""
    owner = np.full((block_m, block_n), -1)
    for t in range(threads):
        rows, cols = rows_cols(t)
        r, c = np.meshgrid(rows, cols, indexing="ij")
        if (owner[r, c] != -1).any():
            raise AssertionError(f"thread {t} computes an element another thread computes")
        owner[r, c] = t
    return owner


def _ladder_threads(kernel: str) -> int:
    """Threads per block of a version, from its record's launch (any shape: the block does not depend on it)."""
    block = sgemm.KERNELS[kernel].launch({"M": 256, "N": 256, "K": 256}).block
    return block[0] * block[1] * block[2]


def _warptile_rows_cols(config: dict):
    """sgemm_warptile_tile_range's mapping: warps of 64 x 16*WT_NQ, lanes in an 8 x 4 grid, each lane
    4 x 4 pieces at rows {lr, lr + 32} and columns {lc + 16 g : g < WT_NQ}."""
    warp_cols = 16 * config["WT_NQ"]  # WT_WARP_COLS

    def rows_cols(t):
        warp, lane = divmod(t, 32)
        warp_row = (warp // (config["WT_BN"] // warp_cols)) * 64
        warp_col = (warp % (config["WT_BN"] // warp_cols)) * warp_cols
        lr = warp_row + (lane // 4) * 4  # int lr = warp_row + (lane / 4) * 4;
        lc = warp_col + (lane % 4) * 4  # int lc = warp_col + (lane % 4) * 4;
        rows = np.r_[lr:lr + 4, lr + 32:lr + 36]
        cols = np.concatenate([np.arange(lc + 16 * g, lc + 16 * g + 4) for g in range(config["WT_NQ"])])
        return rows, cols

    return rows_cols


def sgemm_tiling(name: str) -> SgemmTiling:
    """The tiling of ladder step ``name`` (a key of ``versions(sgemm.KERNELS)``); version 8 with its 128 x 16 tile."""
    ladder = versions(sgemm.KERNELS)
    if name not in ladder:
        raise ValueError(f"name must be one of {', '.join(ladder)}, got {name!r}")
    step, kernel = ladder[name].number, ladder[name].kernel
    T = sgemm.TILE
    if name == "naive":  # int i = blockIdx.y * blockDim.x + threadIdx.x; int j = ... + threadIdx.y;
        threads = _ladder_threads(kernel)
        owner = _owner(T, T, threads, lambda t: ([t % T], [t // T]))
        return SgemmTiling(step, name, T, T, 1, threads, owner, shared=False)
    if name in ("coalesced", "shared_tiled"):  # int j = ... + threadIdx.x; int i = ... + threadIdx.y;
        threads = _ladder_threads(kernel)
        owner = _owner(T, T, threads, lambda t: ([t // T], [t % T]))
        shared = name == "shared_tiled"
        return SgemmTiling(step, name, T, T, T if shared else 1, threads, owner, shared=shared)
    if name == "blocktile_1d":
        d = cuda_defines(ladder[name].source)
        bm, bn, threads = sgemm.BT1
        tm = d["BT1_TM"]
        # int col = t % BT1_BN; int row0 = (t / BT1_BN) * BT1_TM;
        owner = _owner(bm, bn, threads, lambda t: (np.arange((t // bn) * tm, (t // bn) * tm + tm), [t % bn]))
        return SgemmTiling(step, name, bm, bn, d["BT1_BK"], threads, owner, shared=True)
    if name in ("blocktile_2d", "vectorized"):
        prefix = "BT2" if name == "blocktile_2d" else "VEC"
        d = cuda_defines(ladder[name].source)
        bm, bn, threads = sgemm.BT2
        tm, tn = d[f"{prefix}_TM"], d[f"{prefix}_TN"]

        def rows_cols(t):  # int trow = (t / (BN / TN)) * TM; int tcol = (t % (BN / TN)) * TN;
            trow, tcol = (t // (bn // tn)) * tm, (t % (bn // tn)) * tn
            return np.arange(trow, trow + tm), np.arange(tcol, tcol + tn)

        owner = _owner(bm, bn, threads, rows_cols)
        return SgemmTiling(step, name, bm, bn, d[f"{prefix}_BK"], threads, owner, shared=True)
    config = sgemm.WARPTILE_DEFAULT if name == "warptile" else sgemm.SPLITK_CONFIGS["128x16"]
    threads = sgemm.warptile_threads(config)
    owner = _owner(config["WT_BM"], config["WT_BN"], threads, _warptile_rows_cols(config))
    return SgemmTiling(step, name, config["WT_BM"], config["WT_BN"], config["WT_BK"], threads, owner,
                       shared=True, k_split=name == "splitk")


# --------------------------------------------------------------------------- capsule prediction, versions 3 and 4


@dataclass(frozen=True)
class WarpAccess:
    """One memory instruction of a warp: lane ``l`` touches bytes ``start[l] .. start[l] + width - 1``
    (offsets from the start of the array row the block works on)."""

    label: str
    start: np.ndarray
    width: int

    def bytes_touched(self) -> set[int]:
        return {int(s) + b for s in self.start for b in range(self.width)}

    def sectors(self, size: int = 32) -> set[int]:
        """The ``size``-byte sectors of memory the instruction touches."""
        return {b // size for b in self.bytes_touched()}


def _first_warp_lanes(out_caps: int, out_dim: int) -> np.ndarray:
    """``threadIdx.x`` of the lanes of the block's first warp that own outputs (tid = y * blockDim.x + x)."""
    bx, _ = capsule_prediction.register_block_shape(out_caps, out_dim)
    tid = np.arange(32)
    x, y = tid % bx, tid // bx
    return x[(y == 0) & (x * capsule_prediction.CAPS_OUTS_PER_THREAD < out_caps * out_dim)]


def capsule_warp_stores(version: int, out_caps: int, out_dim: int) -> list[WarpAccess]:
    """The stores of u_hat that the first warp of a block issues for one sample, in order.

    Version 3 (``out[s] = sum``, s < CAPS_OUTS_PER_THREAD): one 4-byte store per s, lanes
    4 * CAPS_OUTS_PER_THREAD bytes apart.  Version 4 (``__stcs(out, make_float4(...))``): one 16-byte store.
    """
    per = capsule_prediction.CAPS_OUTS_PER_THREAD
    r0 = _first_warp_lanes(out_caps, out_dim) * per  # const int r0 = threadIdx.x * CAPS_OUTS_PER_THREAD;
    if version == 3:
        return [WarpAccess(f"out[{s}]", 4 * (r0 + s), 4) for s in range(per)]
    if version == 4:
        return [WarpAccess("float4 out", 4 * r0, 16)]
    raise ValueError(f"version must be 3 or 4, got {version}")


def capsule_warp_weight_loads(version: int, in_dim: int, out_caps: int, out_dim: int) -> list[WarpAccess]:
    """The loads of W[i] that the first warp of a block issues, in order (offsets from the start of W[i]).

    Version 3: ``W_i + (r0 + s) * CAPS_IN_DIM + k``, 4 bytes each; version 4: the float4
    ``W4 + (r0 + s) * QUADS_IN + q``.  Either way a lane reads its own 4 rows of in_dim weights.
    """
    per = capsule_prediction.CAPS_OUTS_PER_THREAD
    r0 = _first_warp_lanes(out_caps, out_dim) * per
    if version == 3:
        return [WarpAccess(f"w[{s}][{k}]", 4 * ((r0 + s) * in_dim + k), 4) for s in range(per) for k in range(in_dim)]
    if version == 4:
        if in_dim % 4:
            raise ValueError(f"version 4 needs in_dim to be a multiple of 4, got {in_dim}")
        quads = in_dim // 4
        return [WarpAccess(f"float4 w[{s}][{4 * q}..]", 16 * ((r0 + s) * quads + q), 16)
                for s in range(per) for q in range(quads)]
    raise ValueError(f"version must be 3 or 4, got {version}")


# --------------------------------------------------------------------------- the tiled dense layer

#: Lines of ``fc_forward_tiled`` that the functions below apply; tests/test_tile_geometry.py checks they
#: are still in ``kernels/dense/fully_connected.cu``, so the picture cannot outlive a change of the kernel.
FC_TILED_LINES = (
    "__shared__ float Xs[FC_TILE][FC_TILE];",
    "__shared__ float Ws[FC_TILE][FC_TILE + 1];",
    "int j = blockIdx.x * FC_TILE + tx;",
    "int i = blockIdx.y * FC_TILE + ty;",
    "for (int k0 = 0; k0 < in_features; k0 += FC_TILE) {",
    "int wrow = blockIdx.x * FC_TILE + ty;",
    "Xs[ty][tx] = (i < n && k0 + tx < in_features) ? X[i * in_features + k0 + tx] : 0.0f;",
    "Ws[ty][tx] = (wrow < out_features && k0 + tx < in_features) ? W[wrow * in_features + k0 + tx] : 0.0f;",
    "acc += Xs[ty][kk] * Ws[tx][kk];",
)


def fc_tile_size() -> int:
    """``FC_TILE`` as ``kernels/dense/fully_connected.cu`` defines it (the launcher's block is FC_TILE x FC_TILE)."""

    return cuda_defines(read_source("fully_connected"))["FC_TILE"]


def _positive(**sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class FcTiledBlock:
    """One block of ``fc_forward_tiled`` for Y = X W^T (X: n x k, W: m x k, Y: n x m).

    Rectangles are (row0, col0, rows, cols) in elements of the matrix named.  ``x_strip`` and ``w_strip``
    are the rows of X and of W that the block stages through shared memory over the whole ``k0`` loop,
    ``phases`` tiles wide (columns at k and beyond are loaded as zeros); ``phases[p]`` is the range of k
    of phase p that lies inside the matrices.
    """

    tile: int
    n: int
    k: int
    m: int
    block: tuple[int, int]  # (blockIdx.x, blockIdx.y): along the outputs, along the samples
    output: tuple[int, int, int, int]  # in Y: the tile x tile elements its threads compute
    written: tuple[int, int, int, int]  # the part of ``output`` inside Y (the threads that store)
    x_strip: tuple[int, int, int, int]  # in X: its samples, every k (rounded up to whole tiles)
    w_strip: tuple[int, int, int, int]  # in W: its outputs, every k (rounded up to whole tiles)
    phases: tuple[range, ...]


def fc_grid(n: int, m: int, tile: int | None = None) -> tuple[int, int]:
    """(blocks along the outputs, blocks along the samples), as ``fully_connected.forward_tiled`` launches."""
    T = tile or fc_tile_size()
    return -(-m // T), -(-n // T)


def fc_tiled_block(n: int, k: int, m: int, block: tuple[int, int] = (0, 0), tile: int | None = None) -> FcTiledBlock:
    """The regions of block ``block`` = (blockIdx.x, blockIdx.y) of ``fc_forward_tiled``; ``tile``
    defaults to the kernel's ``FC_TILE``."""
    _positive(n=n, k=k, m=m)
    T = tile or fc_tile_size()
    _positive(tile=T)
    grid_x, grid_y = fc_grid(n, m, T)
    bx, by = block
    if not (0 <= bx < grid_x and 0 <= by < grid_y):
        raise ValueError(f"block must be (blockIdx.x, blockIdx.y) inside the {grid_x} x {grid_y} grid, got {block}")
    phases = tuple(range(k0, min(k0 + T, k)) for k0 in range(0, k, T))  # for (k0 = 0; k0 < in_features; k0 += FC_TILE)
    width = len(phases) * T
    return FcTiledBlock(
        tile=T, n=n, k=k, m=m, block=(bx, by),
        output=(by * T, bx * T, T, T),  # i = blockIdx.y * FC_TILE + ty; j = blockIdx.x * FC_TILE + tx
        written=(by * T, bx * T, min(T, n - by * T), min(T, m - bx * T)),
        x_strip=(by * T, 0, T, width),  # X[i * in_features + k0 + tx]
        w_strip=(bx * T, 0, T, width),  # W[wrow * in_features + k0 + tx], wrow = blockIdx.x * FC_TILE + ty
        phases=phases,
    )


def fc_thread_loads(block: tuple[int, int], thread: tuple[int, int], k0: int, tile: int | None = None):
    """The element of X and the element of W (row, column) that thread (tx, ty) of ``block`` copies into
    Xs[ty][tx] and Ws[ty][tx] in the phase starting at ``k0`` (before the bounds check: the kernel stores
    a zero instead when the element lies outside its matrix)."""
    T = tile or fc_tile_size()
    (bx, by), (tx, ty) = block, thread
    i, wrow = by * T + ty, bx * T + ty
    return (i, k0 + tx), (wrow, k0 + tx)


def fc_thread_reads(thread: tuple[int, int], tile: int | None = None):
    """The cells (row, column) of Xs and of Ws that thread (tx, ty) reads in one phase, in the order of
    ``kk``: row ty of Xs and row tx of Ws (``acc += Xs[ty][kk] * Ws[tx][kk]``)."""
    T = tile or fc_tile_size()
    tx, ty = thread
    return [(ty, kk) for kk in range(T)], [(tx, kk) for kk in range(T)]


@dataclass(frozen=True)
class FcTraffic:
    """What the naive and the tiled forward kernels read for Y = X W^T (X: n x k, W: m x k), counted in
    floats.  Per output element is per thread: each thread computes one element of Y."""

    tile: int
    n: int
    k: int
    m: int

    @property
    def phases(self) -> int:
        """Trips of the k0 loop: tiles of k, the last one padded with zeros."""
        return -(-self.k // self.tile)

    @property
    def threads_per_block(self) -> int:
        return self.tile * self.tile

    @property
    def naive_loads_per_output(self) -> int:
        """fc_forward_naive: a row of X and a row of W, from global memory."""
        return 2 * self.k

    @property
    def tiled_loads_per_output(self) -> int:
        """fc_forward_tiled: one element of X and one of W per phase, into shared memory."""
        return 2 * self.phases

    @property
    def shared_reads_per_output(self) -> int:
        """fc_forward_tiled: a row of Xs and a row of Ws per phase."""
        return 2 * self.tile * self.phases

    syncs_per_phase = 2  # one after the loads, one after the products

    @property
    def syncs_per_block(self) -> int:
        return self.syncs_per_phase * self.phases

    @property
    def shared_floats_per_block(self) -> int:
        """Xs[FC_TILE][FC_TILE] and Ws[FC_TILE][FC_TILE + 1]."""
        return self.tile * self.tile + self.tile * (self.tile + 1)

    @property
    def naive_loads(self) -> int:
        """Every thread of the naive kernel reads 2k floats."""
        return self.n * self.m * self.naive_loads_per_output

    @property
    def tiled_loads(self) -> int:
        """Loads from global memory of the tiled kernel (zero padding is not loaded): each element of X
        once per block of its block row (blocks along the outputs), each weight once per block of its
        column (blocks along the samples)."""
        grid_x, grid_y = fc_grid(self.n, self.m, self.tile)
        return self.n * self.k * grid_x + self.m * self.k * grid_y


def fc_traffic(n: int, k: int, m: int, tile: int | None = None) -> FcTraffic:
    """:class:`FcTraffic` for the given shape; ``tile`` defaults to the kernel's ``FC_TILE``."""
    _positive(n=n, k=k, m=m)
    T = tile or fc_tile_size()
    _positive(tile=T)
    return FcTraffic(T, n, k, m)


def fc_worked_example(traffic: FcTraffic) -> str:
    """The counts of ``traffic`` as the chapter states them: a markdown list, every number computed."""
    t = traffic
    T, n, k, m, P = t.tile, t.n, t.k, t.m, t.phases
    grid_x, grid_y = fc_grid(n, m, T)
    return "\n".join([
        f"- **Phases.** The `k0` loop makes ⌈{k} / {T}⌉ = {P} trips. In each, the {t.threads_per_block} threads "
        f"of a block copy one {T} × {T} tile of X and one of W into Xs and Ws, one element each"
        + (f" (the last phase holds {k - (P - 1) * T} columns of the matrices and {P * T - k} of zeros)."
           if k % T else "."),
        f"- **Global loads per output element.** Naive: a row of X and a row of W, 2 × {k} = "
        f"{t.naive_loads_per_output:,}. Tiled: one of each per phase, 2 × {P} = {t.tiled_loads_per_output:,}, "
        f"{t.naive_loads_per_output / t.tiled_loads_per_output:.0f} times fewer.",
        f"- **Shared-memory reads per output element.** The {k:,} products still need two operands each: "
        f"2 × {T} per phase, {t.shared_reads_per_output:,} in all, now from shared memory: on the chip, and "
        f"one read of a value serves every thread of a warp that asks for it.",
        f"- **The whole product.** Naive: 2 × {n} × {m} × {k} = {t.naive_loads:,} loads. Tiled: each element "
        f"of X is loaded once by each of the {grid_x} blocks along the outputs and each weight once by each "
        f"of the {grid_y} blocks along the samples, {n} × {k} × {grid_x} + {m} × {k} × {grid_y} = "
        f"{t.tiled_loads:,}, {t.naive_loads / t.tiled_loads:.0f} times fewer.",
        f"- **Barriers.** {t.syncs_per_phase} `__syncthreads()` per phase, {t.syncs_per_block} per block; "
        f"the shared tiles take {t.shared_floats_per_block:,} floats ({4 * t.shared_floats_per_block:,} bytes) "
        f"per block.",
    ])


# --------------------------------------------------------------------------- an index-notation schedule


def schedule_owners(schedule, rows: int = 16, cols: int = 16) -> np.ndarray:
    """Which thread of its block computes each element of a ``rows`` × ``cols`` output under an index-notation
    ``schedule``'s block and register tiles: its ``threadIdx.y * blockDim.x + threadIdx.x``.  A block's tile is
    ``by * ry`` rows by ``bx * rx`` columns; thread (ty, tx) computes the rows ``ty + k * by`` and columns
    ``tx + l * bx`` of it."""
    bx, by = schedule.block
    ry, rx = schedule.regs
    owners = np.zeros((rows, cols), int)
    for i in range(rows):
        for j in range(cols):
            ty = (i % (by * ry)) % by
            tx = (j % (bx * rx)) % bx
            owners[i, j] = ty * bx + tx
    return owners
