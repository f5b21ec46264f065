"""C = A B in single precision: the NumPy reference and one launcher per version of ``kernels/gemm/sgemm.cu``.

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

import math

from kernels.runtime import DeviceBuffer, blocks_for
from kernels.runtime.loader import grid_stride_blocks, launch, load_topic, multiprocessors, output_like
from kernels.runtime.module import to_device
from kernels.runtime.scratch import kept_buffer
from kernels.runtime.versions import KernelVersion, as_launch, kernel_table

TOPIC = "sgemm"

TILE = 32  # sgemm.cu: TILE (versions 1-3 use TILE x TILE threads)
BT1 = (64, 64, 512)  # BT1_BM, BT1_BN, threads
BT2 = (128, 128, 256)  # BT2_BM, BT2_BN, threads (and VEC_*)

#: Default tile configuration of version 7 (the benchmark also tries others).
WARPTILE_DEFAULT = {"WT_BM": 128, "WT_BN": 128, "WT_BK": 16, "WT_MIN_BLOCKS": 2, "WT_GROUP": 0, "WT_NQ": 4}


def reference(A, B) -> np.ndarray:
    """C = A B in float64."""
    return np.asarray(A, np.float64) @ np.asarray(B, np.float64)


def tf32(x) -> np.ndarray:
    """``x`` rounded to TF32 (10 mantissa bits; to nearest, ties away from zero), as float32: the NumPy
    model of CUDA's ``__float_to_tf32`` and PTX's ``cvt.rna.tf32.f32`` (finite inputs)."""
    bits = np.array(x, dtype=np.float32).view(np.uint32)  # a copy, contiguous, of the same shape
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def tf32x3_reference(A, B) -> np.ndarray:
    """The 3xTF32 product in float64: A_small B_big + A_big B_small + A_big B_big, big = tf32(x) and
    small = tf32(x - big) (what versions 9 and 10 compute, before their float rounding)."""
    A, B = np.asarray(A, np.float32), np.asarray(B, np.float32)
    a_big, b_big = tf32(A), tf32(B)
    a_small, b_small = tf32(A - a_big), tf32(B - b_big)
    f = lambda x: x.astype(np.float64)  # noqa: E731
    return f(a_small) @ f(b_big) + f(a_big) @ f(b_small) + f(a_big) @ f(b_big)


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


#: Version 8's tile configurations (WT_* defines of version 7's tile), the largest first.  "128x16" is for
#: products with at most 16 columns (a 4096 x 10 logit matrix fills 10 of its 16 columns, not 10 of 128);
#: "64x64" for products whose 128 x 128 tiles are fewer than the GPU has multiprocessors.
SPLITK_CONFIGS = {
    "128x128": WARPTILE_DEFAULT,
    "64x64": {"WT_BM": 64, "WT_BN": 64, "WT_BK": 16, "WT_MIN_BLOCKS": 6, "WT_GROUP": 0, "WT_NQ": 2},
    "128x16": {"WT_BM": 128, "WT_BN": 16, "WT_BK": 16, "WT_MIN_BLOCKS": 8, "WT_GROUP": 0, "WT_NQ": 1},
}
MIN_KTILES_PER_SPLIT = 4  # a K-slice of fewer k-tiles costs more in partial sums than it gains (the H100 search)
MAX_SPLITS = 128
LONG_K = 2048  # from here on a product with few 128 x 128 tiles splits K rather than shrinking the tile


def sgemm_plan(M: int, N: int, K: int, sms: int | None = None) -> dict:
    """Version 8's schedule for an M x N x K product: ``{"config", "tiles", "splits", "tiles_per_split"}``.

    The tile: 128 x 16 when N <= 16, else 128 x 128 when that gives at least one tile per
    multiprocessor or K is long (LONG_K), else 64 x 64.  Then, if the tiles cannot keep every resident block slot
    busy, K is split into as many slices as fill the slots (never fewer than
    MIN_KTILES_PER_SPLIT k-tiles a slice, never more than MAX_SPLITS slices).
    """
    sms = multiprocessors() if sms is None else int(sms)
    if N <= 16:
        name = "128x16"
    elif blocks_for(M, 128) * blocks_for(N, 128) >= sms or K >= LONG_K:
        name = "128x128"  # enough tiles, or a K long enough to split among the few there are
    else:
        name = "64x64"
    c = SPLITK_CONFIGS[name]
    tiles = blocks_for(M, c["WT_BM"]) * blocks_for(N, c["WT_BN"])
    k_tiles = blocks_for(K, c["WT_BK"])
    slots = sms * c["WT_MIN_BLOCKS"]  # blocks resident at once (the register budget allows this many)
    splits = 1
    if tiles < sms:
        splits = max(1, min(slots // tiles, k_tiles // MIN_KTILES_PER_SPLIT, MAX_SPLITS))
    per = math.ceil(k_tiles / splits)
    return {"config": name, "tiles": tiles, "splits": math.ceil(k_tiles / per), "tiles_per_split": per}


def _workspace(shape, purpose: str = "sgemm split products") -> DeviceBuffer:
    """A device buffer for the split products, kept between launches (:func:`kernels.runtime.scratch.kept_buffer`):
    consecutive products share it, and a training step allocates nothing."""
    return kept_buffer(purpose, shape)


class _Shape:
    """Something with a ``shape``, for checking the shapes of a product whose A is given transposed."""

    def __init__(self, shape):
        self.shape = shape


def _placeholder(like):
    """A one-float argument the kernel never touches (a pointer must still be passed): kept on the device, so
    that a launch allocates nothing."""
    return _workspace((1,), "sgemm placeholder") if isinstance(like, DeviceBuffer) else np.zeros(1, np.float32)


def _defines(config: str, a_transposed: bool) -> dict:
    """The WT_* defines of a version-8 tile; with A given transposed, WT_A_KM = 1 and a register budget of at
    most 6 blocks per multiprocessor (at 8, the 128 x 16 tile's transposed loads spill)."""
    c = SPLITK_CONFIGS[config]
    if not a_transposed:
        return c
    return {**c, "WT_A_KM": 1, "WT_MIN_BLOCKS": min(c["WT_MIN_BLOCKS"], 6)}


SPLITK_SUM_THREADS = 256  # threads per block of sgemm_splitk_sum


def sgemm_splitk(A, B, out=None, *, bias=None, plan: dict | None = None, partial=None, a_transposed: bool = False,
                 sync=True, prepare_only=False):
    """Version 8: C = A B (+ ``bias`` on every row) with the tile and the K-split of :func:`sgemm_plan`.

    ``plan`` overrides the schedule (keys as sgemm_plan returns; ``splits`` and ``config`` suffice);
    ``partial`` is the workspace of the split products (``(splits, M, N)``; allocated when not given).
    ``a_transposed``: ``A`` is given as A^T, of shape (K, M) (dY of a weight gradient dY^T X): read as it
    is, with no transpose kernel.
    """
    A, B = _f32(A), _f32(B)
    if a_transposed:
        if len(A.shape) != 2:
            raise ValueError(f"A^T must be a matrix, got shape {tuple(A.shape)}")
        M, N, K = _shapes(_Shape((int(A.shape[1]), int(A.shape[0]))), B)
    else:
        M, N, K = _shapes(A, B)
    p = dict(plan) if plan is not None else sgemm_plan(M, N, K)
    if p.get("config") not in SPLITK_CONFIGS:
        raise ValueError(f"plan['config'] must be one of {', '.join(SPLITK_CONFIGS)}, got {p.get('config')!r}")
    c = _defines(p["config"], a_transposed)
    k_tiles = blocks_for(K, c["WT_BK"])
    splits = int(p.get("splits", 1))
    if not 1 <= splits <= k_tiles:
        raise ValueError(f"plan['splits'] must be between 1 and {k_tiles} (the k-tiles of K = {K}), got {splits}")
    per = math.ceil(k_tiles / splits)
    splits = math.ceil(k_tiles / per)  # no empty slice
    C = output_like(A, (M, N)) if out is None else out
    if tuple(C.shape) != (M, N):
        raise ValueError(f"out has shape {tuple(C.shape)}, C is {M}x{N}")
    if bias is not None:
        bias = _f32(bias)
        if tuple(bias.shape) != (N,):
            raise ValueError(f"bias must hold one value per column of C ({N}), got shape {tuple(bias.shape)}")
    if splits > 1:
        if partial is None:
            partial = _workspace((splits, M, N)) if isinstance(A, DeviceBuffer) else output_like(A, (splits, M, N))
        elif int(partial.size) < splits * M * N:
            raise ValueError(f"partial holds {int(partial.size)} floats, the {splits} slices need {splits * M * N}")
    else:
        partial = _placeholder(A)  # not touched: one slice writes C
    bias_arg = bias if bias is not None else _placeholder(A)  # not read when has_bias is 0
    module = load_topic(TOPIC, c)
    grid = (blocks_for(N, c["WT_BN"]), blocks_for(M, c["WT_BM"]), splits)
    first = launch(module.function("sgemm_splitk"), (M, N, K, A, B, C, partial, per, bias_arg, int(bias is not None)),
                   grid=grid, block=warptile_threads(c), sync=sync and splits == 1, prepare_only=prepare_only)
    second = None
    if splits > 1:
        second = launch(module.function("sgemm_splitk_sum"), (partial, splits, M, N, bias_arg, int(bias is not None), C),
                        grid=grid_stride_blocks(M * N, SPLITK_SUM_THREADS), block=SPLITK_SUM_THREADS, sync=sync,
                        prepare_only=prepare_only)
    if prepare_only:
        return first if second is None else (lambda: (first(), second()))
    return C


TC = (128, 128, 256)  # sgemm.cu: TC_BM, TC_BN, TC_THREADS


def sgemm_tf32x3_wmma(A, B, out=None, *, sync=True, prepare_only=False):
    """Version 9: 3xTF32 on the tensor cores through WMMA, a 128x128 tile per block of 8 warps."""
    return _run("sgemm_tf32x3_wmma", A, B, out, lambda M, N: (blocks_for(N, TC[1]), blocks_for(M, TC[0])),
                TC[2], sync, prepare_only)


def fastest_plan(M: int, N: int, K: int) -> tuple[str, dict | None]:
    """Which launcher :func:`sgemm` uses: version 7 where its 128 x 128 tiles fill the GPU, version 8 elsewhere."""
    p = sgemm_plan(M, N, K)
    if p["config"] == "128x128" and p["splits"] == 1:
        return "warptile", None
    return "splitk", p


def _mnk(shape) -> tuple[int, int, int]:
    return int(shape["M"]), int(shape["N"]), int(shape["K"])


def _facts(kernel: str, launcher, tile_m: int, tile_n: int, threads, **rung) -> KernelVersion:
    """C's tiles of tile_m x tile_n, one block each: grid (ceil(N / tile_n), ceil(M / tile_m))."""

    def launch_for(shape):
        M, N, _ = _mnk(shape)
        return as_launch((blocks_for(N, tile_n), blocks_for(M, tile_m)), threads)

    return KernelVersion(TOPIC, kernel, launcher, launch_for,
                         bytes=lambda shape: min_bytes(*_mnk(shape)), flops=lambda shape: flops(*_mnk(shape)),
                         reference=reference, defines=WARPTILE_DEFAULT, **rung)


def _splitk_launch(shape):
    M, N, K = _mnk(shape)
    p = sgemm_plan(M, N, K)
    if p["config"] != "128x16":
        raise ValueError(f"the sgemm_splitk record describes products of at most 16 columns (its 128x16 tile); "
                         f"{M}x{N}x{K} is planned with the {p['config']} tile: ask sgemm_plan")
    c = SPLITK_CONFIGS[p["config"]]
    return as_launch((blocks_for(N, c["WT_BN"]), blocks_for(M, c["WT_BM"]), p["splits"]), warptile_threads(c))


def _splitk_sum_launch(shape):
    """The second kernel of version 8: the K slices' partial tiles added up, one thread per element of C."""
    M, N, K = _mnk(shape)
    _splitk_launch(shape)  # the same products the record of the first kernel describes
    if sgemm_plan(M, N, K)["splits"] == 1:
        raise ValueError(f"{M}x{N}x{K} is planned without splitting K: sgemm_splitk_sum is not launched")
    return as_launch(grid_stride_blocks(M * N, SPLITK_SUM_THREADS), SPLITK_SUM_THREADS)


def _splits(shape) -> int:
    return int(sgemm_plan(*_mnk(shape))["splits"])


def sgemm(A, B, out=None, *, sync=True, prepare_only=False):
    """The fastest version for the shape (what the convolution, MLP and L-Softmax chapters call):
    version 7 where its 128 x 128 tiles fill the GPU, version 8 (small tiles, split-K) elsewhere."""
    A, B = _f32(A), _f32(B)
    M, N, K = _shapes(A, B)
    name, p = fastest_plan(M, N, K)
    if name == "warptile":
        return sgemm_warptile(A, B, out, sync=sync, prepare_only=prepare_only)
    return sgemm_splitk(A, B, out, plan=p, sync=sync, prepare_only=prepare_only)


# --------------------------------------------------------------------------- products with transposed operands

TRANSPOSE_TILE, TRANSPOSE_ROWS = 32, 8  # sgemm.cu: TRANSPOSE_TILE x TRANSPOSE_ROWS threads per block


def transpose(A, out=None, *, sync=False, prepare_only=False):
    """``A^T`` (rows x cols -> cols x rows) by ``matrix_transpose``: a device buffer for a device buffer
    (``out`` if given), a NumPy array for a NumPy array; with ``prepare_only``, a function that enqueues it."""
    if len(A.shape) != 2:
        raise ValueError(f"A must be a matrix, got shape {tuple(A.shape)}")
    rows, cols = (int(s) for s in A.shape)
    A = _f32(A)
    out = output_like(A, (cols, rows)) if out is None else out
    if tuple(out.shape) != (cols, rows):
        raise ValueError(f"out has shape {tuple(out.shape)}, A^T is {cols}x{rows}")
    enqueue = launch(load_topic(TOPIC, WARPTILE_DEFAULT).function("matrix_transpose"), (A, out, rows, cols),
                     grid=(blocks_for(cols, TRANSPOSE_TILE), blocks_for(rows, TRANSPOSE_TILE)),
                     block=(TRANSPOSE_TILE, TRANSPOSE_ROWS), sync=sync or isinstance(A, np.ndarray),
                     prepare_only=prepare_only)
    return enqueue if prepare_only else out


def _transpose_launch(shape):
    return as_launch((blocks_for(int(shape["cols"]), TRANSPOSE_TILE), blocks_for(int(shape["rows"]), TRANSPOSE_TILE)),
                     (TRANSPOSE_TILE, TRANSPOSE_ROWS))


KERNELS = kernel_table(
    _facts("sgemm_naive", sgemm_naive, TILE, TILE, (TILE, TILE), number=1, key="naive",
           title="one thread per element of C, threadIdx.x down a column (uncoalesced)"),
    _facts("sgemm_coalesced", sgemm_coalesced, TILE, TILE, (TILE, TILE), number=2, key="coalesced",
           title="threadIdx.x along a row of C: coalesced reads of B and writes of C"),
    _facts("sgemm_shared_tiled", sgemm_shared_tiled, TILE, TILE, (TILE, TILE), number=3, key="shared_tiled",
           title="32x32 tiles of A and B in shared memory"),
    _facts("sgemm_blocktile_1d", sgemm_blocktile_1d, BT1[0], BT1[1], BT1[2], number=4, key="blocktile_1d",
           title="64x64 tile per block, 8 results per thread (1-D register blocking)"),
    _facts("sgemm_blocktile_2d", sgemm_blocktile_2d, BT2[0], BT2[1], BT2[2], number=5, key="blocktile_2d",
           title="128x128 tile per block, 8x8 results per thread (2-D register blocking)"),
    _facts("sgemm_vectorized", sgemm_vectorized, BT2[0], BT2[1], BT2[2], number=6, key="vectorized",
           title="float4 loads from global and shared memory, A transposed in shared memory"),
    _facts("sgemm_warptile", sgemm_warptile, WARPTILE_DEFAULT["WT_BM"], WARPTILE_DEFAULT["WT_BN"], warptile_threads(),
           number=7, key="warptile", title="warp tiling, conflict-free fragments, double-buffered k-tiles"),
    # Version 8's records are for the skinny products it exists for (N <= 16: the 128 x 16 tile, whose defines
    # they carry): the slices' products, and the partial sum that follows when K is split.  Wider products take
    # other tiles (other defines and block sizes), which sgemm_plan names.
    KernelVersion(TOPIC, "sgemm_splitk", sgemm_splitk, _splitk_launch,
                  bytes=lambda shape: min_bytes(*_mnk(shape)), flops=lambda shape: flops(*_mnk(shape)),
                  reference=reference, defines=SPLITK_CONFIGS["128x16"], number=8, key="splitk",
                  title="tiles sized for the shape and K split across blocks, for skinny and small products"),
    KernelVersion(TOPIC, "sgemm_splitk_sum", sgemm_splitk, _splitk_sum_launch,
                  bytes=lambda shape: 4.0 * (_splits(shape) + 1) * shape["M"] * shape["N"],
                  flops=lambda shape: 1.0 * _splits(shape) * shape["M"] * shape["N"],
                  reference=reference, defines=SPLITK_CONFIGS["128x16"], number=None,
                  title="version 8's sum of the K slices' partial tiles, in a fixed order"),
    # No key: version 9 belongs with the tensor-core versions (kernels/gemm/sgemm_hopper.py) and their
    # benchmark, not with the loops over the FP32 ladder's keys.
    _facts("sgemm_tf32x3_wmma", sgemm_tf32x3_wmma, TC[0], TC[1], TC[2], number=9,
           title="float32 accuracy on the tensor cores: 3xTF32 through WMMA"),
    KernelVersion(TOPIC, "matrix_transpose", transpose, _transpose_launch,
                  bytes=lambda shape: 8.0 * shape["rows"] * shape["cols"], flops=lambda shape: 0.0,
                  reference=lambda A: np.asarray(A).T.copy(), defines=WARPTILE_DEFAULT, number=None,
                  title="A^T through shared-memory tiles, for products with a transposed operand"),
)


def _device(a):
    return a if isinstance(a, DeviceBuffer) else to_device(np.ascontiguousarray(a, dtype=np.float32))


def fc_forward(X, W, b=None, *, Wt=None, out=None, sync=False):
    """``Y = X W^T (+ b)``, W of shape (out features, in features) as ``torch.nn.Linear``: W transposed
    (our GEMMs take row-major operands), then :func:`sgemm` (the bias added in its store).  Device buffers
    in, a device buffer out; ``Wt`` is a (in, out) buffer to transpose into (allocated when not given)."""
    X, W = _device(X), _device(W)
    if len(X.shape) != 2 or len(W.shape) != 2 or int(X.shape[1]) != int(W.shape[1]):
        raise ValueError(f"X must be (n, in) and W (out, in) with the same in, got {tuple(X.shape)} and {tuple(W.shape)}")
    Wt = transpose(W, Wt)
    if b is None:
        return sgemm(X, Wt, out=out, sync=sync)
    M, N, K = int(X.shape[0]), int(W.shape[0]), int(X.shape[1])
    return sgemm_splitk(X, Wt, out, bias=_device(b), plan=sgemm_plan(M, N, K), sync=sync)


def fc_backward_input(dY, W, *, out=None, sync=False):
    """``dX = dY W``: both operands row-major as they are."""
    return sgemm(_device(dY), _device(W), out=out, sync=sync)


def fc_backward_weight(dY, X, *, out=None, sync=False):
    """``dW = dY^T X`` by version 8 with A given transposed (dY read as it is, no transpose kernel), split-K
    when the n samples are the long side, which is how a weight gradient usually is."""
    dY, X = _device(dY), _device(X)
    if len(dY.shape) != 2 or len(X.shape) != 2 or int(dY.shape[0]) != int(X.shape[0]):
        raise ValueError(f"dY must be (n, out) and X (n, in) with the same n, got {tuple(dY.shape)} and {tuple(X.shape)}")
    return sgemm_splitk(dY, X, out, a_transposed=True, sync=sync)
