"""Where a warp's accesses land in memory: the numbers behind the book's pictures of coalescing, shared-memory
banks, a warp shuffle and the perceptron's column sums.

Each function applies a kernel's own index expression, quoted beside it, with the block its record launches
(``KERNELS[...].launch``) and the tile sizes its ``.cu`` file declares; the ``*_LINES`` tuples hold the quoted
lines, which ``tests/test_memory_figures.py`` checks are still in the kernels, so that a picture cannot outlive a
change of its kernel.  :mod:`book.memory_figures` draws what these return.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from book.tile_geometry import WarpAccess, cuda_defines
from kernels.basics import vector_add
from kernels.dense import fully_connected, perceptron
from kernels.gemm import sgemm

WARP = 32
SECTOR = 32  # bytes: the unit in which global memory is read and written
BANKS = 32  # shared memory: 32 banks, each serving one 4-byte word per cycle
WORD = 4

# --------------------------------------------------------------------------- coalescing: one warp's global loads

#: (kernel, line) pairs the functions below apply.
COALESCING_LINES = (
    ("vector_add_one_thread_per_element", "int i = blockIdx.x * blockDim.x + threadIdx.x;"),
    ("vector_add_one_thread_per_element", "c[i] = a[i] + b[i];"),
    ("vector_add_float4", "const int first = blockIdx.x * blockDim.x * VA_UNROLL + threadIdx.x;"),
    ("vector_add_float4", "const int i = first + u * blockDim.x;"),
    ("vector_add_float4", "x[u] = a4[i];"),
    ("perceptron_forward_sigmoid", "int i = blockIdx.x * blockDim.x + threadIdx.x;"),
    ("perceptron_forward_sigmoid", "z += params[j] * x[i * d + j];"),
)


def _block_threads(table, kernel: str, shape: dict) -> int:
    """Threads per block of ``kernel`` as its record launches it for ``shape``."""
    block = table[kernel].launch(shape).block
    return block[0] * block[1] * block[2]


def _global_threads(threads_per_block: int, block: int, warp: int) -> np.ndarray:
    """``blockIdx.x * blockDim.x + threadIdx.x`` of the 32 lanes of warp ``warp`` of block ``block``."""
    if not 0 <= warp < threads_per_block // WARP:
        raise ValueError(f"warp must be between 0 and {threads_per_block // WARP - 1}, got {warp}")
    return block * threads_per_block + warp * WARP + np.arange(WARP)


def float_load(block: int = 0, warp: int = 0) -> WarpAccess:
    """``a[i]`` of ``vector_add_one_thread_per_element``: lane l reads the float after lane l - 1's."""
    threads = _block_threads(vector_add.KERNELS, "vector_add_one_thread_per_element", {"n": 1 << 26})
    i = _global_threads(threads, block, warp)  # int i = blockIdx.x * blockDim.x + threadIdx.x;
    return WarpAccess("a[i]", WORD * i, WORD)


def float4_load(block: int = 0, warp: int = 0, u: int = 0) -> WarpAccess:
    """The ``u``-th ``a4[i]`` of ``vector_add_float4``: 16 bytes per lane, the lanes' loads side by side."""
    if not 0 <= u < vector_add.UNROLL:
        raise ValueError(f"u must be between 0 and {vector_add.UNROLL - 1} (VA_UNROLL loads), got {u}")
    threads = _block_threads(vector_add.KERNELS, "vector_add_float4", {"n": 1 << 26})
    lanes = _global_threads(threads, block, warp) - block * threads  # threadIdx.x
    first = block * threads * vector_add.UNROLL + lanes  # first = blockIdx.x * blockDim.x * VA_UNROLL + threadIdx.x
    i = first + u * threads  # i = first + u * blockDim.x
    return WarpAccess("a4[i] (float4)", 4 * WORD * i, 4 * WORD)


def row_per_thread_load(d: int, j: int = 0, block: int = 0, warp: int = 0) -> WarpAccess:
    """``x[i * d + j]`` of ``perceptron_forward_sigmoid``: one thread per row of a row-major n x d matrix, so the
    lanes of a warp read a column, ``d`` floats apart."""
    if d < 1 or not 0 <= j < d:
        raise ValueError(f"d must be positive and j between 0 and d - 1, got d={d}, j={j}")
    threads = _block_threads(perceptron.KERNELS, "perceptron_forward_sigmoid", {"n": 1 << 20, "d": d})
    i = _global_threads(threads, block, warp)  # int i = blockIdx.x * blockDim.x + threadIdx.x;
    return WarpAccess(f"x[i * {d} + j]", WORD * (i * d + j), WORD)


# --------------------------------------------------------------------------- shared-memory banks

#: (kernel, line) pairs: the padded tiles and the reads of a column of them.
BANK_LINES = (
    ("matrix_transpose", "__shared__ float tile[TRANSPOSE_TILE][TRANSPOSE_TILE + 1];"),
    ("matrix_transpose", "tile[dy][threadIdx.x] = (r < rows && c < cols) ? in[(size_t)r * cols + c] : 0.0f;"),
    ("matrix_transpose", "if (c < cols && r < rows) out[(size_t)c * rows + r] = tile[threadIdx.x][dy];"),
    ("fc_forward_tiled", "__shared__ float Ws[FC_TILE][FC_TILE + 1];"),
    ("fc_forward_tiled", "acc += Xs[ty][kk] * Ws[tx][kk];"),
)


def shared_tile_shape(source: str, name: str) -> tuple[int, int]:
    """(rows, floats per row) of ``__shared__ float name[R][C]`` or ``[R][C + p]`` in ``source``, with the
    ``#define`` s of ``source`` resolved."""
    m = re.search(rf"__shared__\s+float\s+{name}\[(\w+)\]\[(\w+)(?:\s*\+\s*(\d+))?\]", source)
    if m is None:
        raise ValueError(f"no declaration __shared__ float {name}[..][..] in the source")
    defines = cuda_defines(source)

    def value(token: str) -> int:
        return int(token) if token.isdigit() else defines[token]

    return value(m.group(1)), value(m.group(2)) + int(m.group(3) or 0)


@dataclass(frozen=True)
class SharedAccess:
    """One shared-memory access of a warp: lane l reads ``tile[cells[l, 0]][cells[l, 1]]`` of a tile of
    ``rows`` x ``cols`` floats stored ``pitch`` floats a row (``pitch - cols`` floats of padding)."""

    label: str
    rows: int
    cols: int
    pitch: int
    cells: np.ndarray  # (32, 2): row, column per lane

    @property
    def words(self) -> np.ndarray:
        """The 4-byte word of the tile each lane reads."""
        return self.cells[:, 0] * self.pitch + self.cells[:, 1]

    @property
    def banks(self) -> np.ndarray:
        return self.words % BANKS

    def words_per_bank(self) -> np.ndarray:
        """Distinct words each bank must deliver (lanes reading the same word share one read, a broadcast)."""
        counts = np.zeros(BANKS, int)
        for word in set(self.words.tolist()):
            counts[word % BANKS] += 1
        return counts

    @property
    def ways(self) -> int:
        """The conflict's degree: the access is served in this many passes, one per word of the busiest bank."""
        return int(self.words_per_bank().max())


def _padded(source: str, name: str, padded: bool) -> tuple[int, int, int]:
    """(rows, columns, pitch) of a square tile as declared, or as it would be without its padding."""
    rows, pitch = shared_tile_shape(source, name)
    cols = rows  # the book's padded tiles are square before their padding
    return rows, cols, pitch if padded else cols


def transpose_column_read(padded: bool = True, dy: int = 0) -> SharedAccess:
    """``tile[threadIdx.x][dy]`` of ``matrix_transpose`` by the warp whose ``threadIdx.y`` is ``dy``: a column of
    the tile (what it stored as rows, read back transposed); ``padded=False``: the tile without its + 1."""
    rows, cols, pitch = _padded(sgemm.KERNELS["matrix_transpose"].source, "tile", padded)
    block = sgemm.KERNELS["matrix_transpose"].launch({"rows": rows, "cols": cols}).block
    if block[0] != WARP:
        raise ValueError(f"matrix_transpose's block is {block[0]} threads wide, not a warp: the picture assumes one")
    lane = np.arange(WARP)  # threadIdx.x of the warp
    cells = np.stack([lane, np.full(WARP, dy)], axis=1)
    return SharedAccess(f"tile[threadIdx.x][{dy}]", rows, cols, pitch, cells)


def fc_weight_read(padded: bool = True, kk: int = 0, warp: int = 0) -> SharedAccess:
    """``Ws[tx][kk]`` of ``fc_forward_tiled`` by warp ``warp`` of its FC_TILE x FC_TILE block (threads numbered
    ``ty * FC_TILE + tx``); ``padded=False``: the tile without its + 1."""
    rows, cols, pitch = _padded(fully_connected.KERNELS["fc_forward_tiled"].source, "Ws", padded)
    bx, by, _ = fully_connected.KERNELS["fc_forward_tiled"].launch({"n": rows, "in": rows, "out": rows}).block
    tid = warp * WARP + np.arange(WARP)
    if tid[-1] >= bx * by:
        raise ValueError(f"warp must be between 0 and {bx * by // WARP - 1}, got {warp}")
    tx = tid % bx  # acc += Xs[ty][kk] * Ws[tx][kk];
    cells = np.stack([tx, np.full(WARP, kk)], axis=1)
    return SharedAccess(f"Ws[tx][{kk}]", rows, cols, pitch, cells)


# --------------------------------------------------------------------------- a warp shuffle

#: The loop of ``warp_reduce_sum`` (kernels/basics/reduction.cu) that :func:`shuffle_down_steps` replays.
SHUFFLE_LINES = (
    "for (int offset = 16; offset > 0; offset /= 2) {",
    "value += __shfl_down_sync(0xffffffffu, value, offset);",
)


def shuffle_offsets() -> list[int]:
    """The offsets of ``warp_reduce_sum``'s loop: 16, 8, 4, 2, 1."""
    offsets, offset = [], WARP // 2
    while offset > 0:  # for (int offset = 16; offset > 0; offset /= 2)
        offsets.append(offset)
        offset //= 2
    return offsets


def shuffle_down_steps() -> list[tuple[int, np.ndarray]]:
    """What each lane holds after each step of ``warp_reduce_sum``, as ``(offset, terms)`` with ``terms[l, s]``
    the number of times lane s's starting value is in lane l's (offset 0: the start, each lane its own).

    ``__shfl_down_sync(mask, value, offset)`` returns lane l + offset's value, or lane l's own where l + offset
    is past the warp; every lane adds what it receives.  Only lanes below ``offset`` hold a partial sum
    afterwards (each value once); the others have added values twice or out of order, and are not read again.
    """
    terms = np.eye(WARP, dtype=int)
    steps = [(0, terms.copy())]
    lane = np.arange(WARP)
    for offset in shuffle_offsets():
        source = np.where(lane + offset < WARP, lane + offset, lane)
        terms = terms + terms[source]  # value += __shfl_down_sync(0xffffffffu, value, offset);
        steps.append((offset, terms.copy()))
    return steps


# --------------------------------------------------------------------------- the perceptron's column sums

#: (kernel, line) pairs of the two sums of the per-sample gradients (an n x k row-major matrix).
COLUMN_SUM_LINES = (
    ("gradient_sum_tree", "int j = blockIdx.y;"),
    ("gradient_sum_tree", "int i = blockIdx.x * blockDim.x + threadIdx.x;"),
    ("gradient_sum_tree", "partial[threadIdx.x] = (i < n) ? grads[i * k + j] : 0.0f;"),
    ("gradient_sum_columns", "const int active = gridDim.x * blockDim.x / k * k;"),
    ("gradient_sum_columns", "const int t = blockIdx.x * blockDim.x + threadIdx.x;"),
    ("gradient_sum_columns", "const long long stride = 4LL * active;"),
    ("gradient_sum_columns", "long long e = 4LL * t;"),
    ("gradient_sum_columns", "atomicAdd(&column_sums[(4 * t + j) % k], acc[j]);"),
)


@dataclass(frozen=True)
class TreeOwners:
    """``gradient_sum_tree`` on an n x k matrix: for each element (flat index e = i k + j), the block
    (blockIdx.x, blockIdx.y) and the thread (threadIdx.x) that load it."""

    n: int
    k: int
    block_x: np.ndarray
    block_y: np.ndarray
    thread: np.ndarray
    grid: tuple[int, int]
    threads_per_block: int

    def warp_load(self, column: int = 0, block_x: int = 0, warp: int = 0) -> WarpAccess:
        """The bytes warp ``warp`` of block (block_x, column) reads from the matrix."""
        rows = block_x * self.threads_per_block + warp * WARP + np.arange(WARP)
        return WarpAccess(f"grads[i * {self.k} + {column}]", WORD * (rows * self.k + column), WORD)


def tree_owners(n: int, k: int) -> TreeOwners:
    launch = perceptron.KERNELS["gradient_sum_tree"].launch({"n": n, "k": k})
    threads = launch.block[0]
    e = np.arange(n * k)
    i, j = e // k, e % k  # grads[i * k + j]
    # int j = blockIdx.y;  int i = blockIdx.x * blockDim.x + threadIdx.x;
    return TreeOwners(n, k, i // threads, j, i % threads, launch.grid[:2], threads)


@dataclass(frozen=True)
class ColumnsOwners:
    """``gradient_sum_columns`` on an n x k matrix read as one flat array: for each element e, the thread t
    that loads it, the register sum ``acc[slot]`` it goes into, and the pass of the loop (e // stride)."""

    n: int
    k: int
    blocks: int
    threads_per_block: int
    active: int
    stride: int
    thread: np.ndarray
    slot: np.ndarray
    pass_: np.ndarray

    @property
    def column_added_to(self) -> np.ndarray:
        """The column the kernel adds each element into: ``column_sums[(4 * t + j) % k]``."""
        return (4 * self.thread + self.slot) % self.k

    def warp_load(self, warp: int = 0) -> WarpAccess:
        """The first float4 load of warp ``warp`` (16 bytes a lane, ``e = 4t``)."""
        t = warp * WARP + np.arange(WARP)
        return WarpAccess("float4 at grads + 4t", 4 * WORD * t, 4 * WORD)


def columns_owners(n: int, k: int, blocks: int | None = None) -> ColumnsOwners:
    """``blocks``: the grid; by default what the record launches for (n, k) on this machine."""
    launch = perceptron.KERNELS["gradient_sum_columns"].launch({"n": n, "k": k})
    threads = launch.block[0]
    blocks = launch.grid[0] if blocks is None else blocks
    active = blocks * threads // k * k  # const int active = gridDim.x * blockDim.x / k * k;
    if active < 1:
        raise ValueError(f"a grid of {blocks} blocks of {threads} threads has fewer threads than k = {k}")
    stride = 4 * active  # const long long stride = 4LL * active;
    e = np.arange(n * k)
    # e = 4t, then + stride, + 2 stride, ...; the last n k % 4 elements go to the thread whose e lands on them
    return ColumnsOwners(n, k, blocks, threads, active, stride, (e % stride) // 4, e % 4, e // stride)
