"""Which tiles the attention kernels compute, and which lane holds which element of a tensor-core fragment.

The numbers behind the attention chapter's pictures (``book/attention_figures.py`` draws them):

* :func:`forward_tiles` and :func:`backward_tiles` apply the kernels' own loop bounds and mask tests (the lines of
  ``kernels/attention/attention.cu`` and ``attention_bf16.cu`` are quoted beside them) with the tile sizes of
  their launchers, and say for every (query tile, key tile) pair whether it is skipped, computed whole, or
  computed with the mask applied;
* :func:`fragment_map` runs a probe kernel built on ``kernels/warp_mma.cuh``, the header version 4
  multiplies with: it loads matrices whose elements are their own indices by ``ldmatrix_x4`` and multiplies an
  identity by ``mma_m16n8k16``, and writes down which lane and register each element landed in.  On a GPU that
  is the hardware's layout; on the CPU emulator, the layout the header's shuffles reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from kernels import KERNEL_DIR
from kernels.attention import attention as fp32
from kernels.runtime import compile_source

SKIPPED, FULL, MASKED = 0, 1, 2
KINDS = {SKIPPED: "skipped", FULL: "computed whole", MASKED: "computed, mask applied"}


def _blocks(n: int, size: int) -> int:
    return -(-n // size)


def forward_tiles(n: int, causal: bool, rows: int = fp32.TILE, keys: int = fp32.TILE) -> np.ndarray:
    """``kinds[qt, kt]`` of a fused forward kernel with ``rows`` query rows per block and ``keys`` keys per tile.

    The block of query tile qt walks key tiles 0, 1, ... up to
        tiles = min(ceil(N / keys), (q0 + rows - 1) / keys + 1)  with the causal mask   (attention_forward_*)
    and masks a tile whose last key is past N or, causal, above its first row: k0 + keys > N or k0 + keys - 1 > q0
    (version 4 tests this per warp of 16 rows; here per block, the tiles where any warp masks).
    """
    kinds = np.full((_blocks(n, rows), _blocks(n, keys)), SKIPPED)
    for qt in range(kinds.shape[0]):
        q0 = qt * rows
        tiles = kinds.shape[1] if not causal else min(kinds.shape[1], (q0 + rows - 1) // keys + 1)
        for kt in range(tiles):
            k0 = kt * keys
            kinds[qt, kt] = MASKED if k0 + keys > n or (causal and k0 + keys - 1 > q0) else FULL
    return kinds


def backward_tiles(n: int, causal: bool, size: int = fp32.TILE) -> np.ndarray:
    """``kinds[qt, kt]`` of a backward kernel: the block of key tile kt walks query tiles
        first = causal ? k0 / size : 0,  ... ceil(N / size) - 1                    (attention_backward_*)
    masking a tile that crosses the diagonal or the end of the sequence."""
    tiles = _blocks(n, size)
    kinds = np.full((tiles, tiles), SKIPPED)
    for kt in range(tiles):
        k0 = kt * size
        for qt in range(k0 // size if causal else 0, tiles):
            q0 = qt * size
            edge = q0 + size > n or k0 + size > n or (causal and k0 + size - 1 > q0)
            kinds[qt, kt] = MASKED if edge else FULL
    return kinds


def computed_fraction(kinds: np.ndarray) -> float:
    """The share of the tile pairs a kernel computes."""
    return float((kinds != SKIPPED).mean())


def forward_float_grid(n: int, heads: int = 1) -> tuple[int, int, int]:
    """The grid attention_forward_float is launched with: one block per query tile and head (its record)."""
    return fp32.KERNELS["attention_forward_float"].launch(
        {"batch": 1, "heads": heads, "seq": n, "head_dim": fp32.RECORDED_HEAD_DIM}).grid


# --------------------------------------------------------------------------- the fragments of mma.m16n8k16

PROBE = r"""
#include "warp_mma.cuh"

// Where each element of the A (16 x 16), B (16 x 8) and C (16 x 8) fragments of mma.m16n8k16 lands: owner[e] =
// 8 lane + 2 register + half.  A and B are loaded by ldmatrix_x4 as kernels/attention/attention_bf16.cu loads Q
// and K (load_a, load_b_nk, without the permuted chunks); C is read off an identity times B.
__global__ void fragment_probe(int* a_owner, int* b_owner, int* c_owner)
{
    __shared__ __align__(16) unsigned short index[16 * 16];
    __shared__ __align__(16) __nv_bfloat16 identity[16 * 16];
    __shared__ __align__(16) __nv_bfloat16 values[16 * 16];
    int lane = threadIdx.x, i = lane / 8;
    for (int e = lane; e < 256; e += 32) {
        index[e] = (unsigned short)e;
        identity[e] = __float2bfloat16(e / 16 == e % 16 ? 1.0f : 0.0f);
        values[e] = __float2bfloat16((float)((e % 16) * 8 + e / 16));   // stored n-major: [n][k] = 8 k + n
    }
    __syncwarp();
    unsigned a[4], b[4], ia[4], vb[4];
    ldmatrix_x4(a, index + (8 * (i % 2) + lane % 8) * 16 + 8 * (i / 2));     // load_a's addresses
    ldmatrix_x4(b, index + (8 * (i / 2) + lane % 8) * 16 + 8 * (i % 2));     // load_b_nk's: [n][k] rows
    for (int r = 0; r < 4; ++r)
        for (int h = 0; h < 2; ++h) {
            a_owner[(a[r] >> (16 * h)) & 0xffff] = 8 * lane + 2 * r + h;
            int e = (b[r] >> (16 * h)) & 0xffff;                             // e = 16 n + k, n < 16
            if (r < 2) b_owner[(e % 16) * 8 + e / 16] = 8 * lane + 2 * r + h;  // n-tile 0: B[k][n]
        }
    ldmatrix_x4(ia, identity + (8 * (i % 2) + lane % 8) * 16 + 8 * (i / 2));
    ldmatrix_x4(vb, values + (8 * (i / 2) + lane % 8) * 16 + 8 * (i % 2));
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_m16n8k16(d, ia, vb[0], vb[1]);                                       // D = I B: D[k][n] = 8 k + n
    for (int e = 0; e < 4; ++e) c_owner[(int)d[e]] = 8 * lane + e;
}
"""


@dataclass(frozen=True)
class FragmentMap:
    """``lane[op]`` and ``register[op]`` for op in "A" (16 x 16), "B" (16 x 8, k x n) and "C" (16 x 8): which lane
    holds each element and in which of its registers (A and B: 32-bit registers of two BF16 values; C: floats)."""

    lane: dict
    register: dict


@lru_cache(maxsize=1)
def fragment_map() -> FragmentMap:
    module = compile_source(PROBE, name="fragment_probe.cu", include_dirs=(str(KERNEL_DIR),))
    owners = {"A": np.full(256, -1, np.int32), "B": np.full(128, -1, np.int32), "C": np.full(128, -1, np.int32)}
    module.function("fragment_probe")(owners["A"], owners["B"], owners["C"], grid=1, block=32)
    shapes = {"A": (16, 16), "B": (16, 8), "C": (16, 8)}
    lane = {op: (owners[op] // 8).reshape(shapes[op]) for op in owners}
    register = {op: ((owners[op] % 8) // (2 if op != "C" else 1)).reshape(shapes[op]) for op in owners}
    return FragmentMap(lane, register)
