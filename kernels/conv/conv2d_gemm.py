"""Convolution layers as matrix products: the NumPy reference and the launchers of ``kernels/conv/conv2d_gemm.cu``.

``X`` is ``(N, C, H, W)``, the filters ``Wt`` are ``(M, C, K, K)`` (PyTorch's
layout; as a matrix, ``M x (C*K*K)``), ``Y`` is ``(N, M, H_out, W_out)``;
zero padding ``pad`` and stride ``stride`` as in ``torch.nn.functional.conv2d``
(no bias).

* :func:`conv2d_unroll_gemm`: unroll a chunk of samples with
  ``kernels/conv/im2col.cu``, multiply with ``conv2d_gemm_batched``; repeat.
* :func:`conv2d_implicit_gemm`: one kernel; the unrolled matrix is built tile
  by tile in shared memory and never written to global memory.
* :func:`conv2d_winograd`: 3x3 filters at stride 1 by Winograd's F(4x4, 3x3): the
  filters and the input tiles transformed, 36 matrix products, the products
  transformed back (:func:`winograd_reference` is the same in float64).
"""

from __future__ import annotations

import numpy as np

from kernels.conv import im2col
from kernels.gemm.sgemm import warptile_threads
from kernels.runtime import DeviceBuffer, blocks_for, current_backend
from kernels.runtime.loader import launch, load_topic, output_like
from kernels.runtime.module import empty, to_device
from kernels.runtime.versions import KernelVersion, LaunchConfig, kernel_table, versions

TOPIC = "conv2d_gemm"

#: Winograd's F(4x4, 3x3) (Lavin and Gray, 2016): a 4x4 output tile is A^T [(G g G^T) * (B^T d B)] A for a
#: 3x3 filter g and the 6x6 input patch d under the tile.  The kernels apply these matrices written out.
WINOGRAD_BT = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                        [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64)
WINOGRAD_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                       [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64)
WINOGRAD_AT = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
                       np.float64)
WINOGRAD_TILE = 4  # outputs per tile side
WINOGRAD_THREADS = 256  # the transforms' blocks

#: Compile-time tiles: WT_* for the SGEMM the explicit version includes, IG_* for the implicit GEMM.
DEFAULT_CONFIG = {"WT_BM": 64, "WT_BN": 128, "WT_BK": 8, "WT_MIN_BLOCKS": 2, "WT_NQ": 2,
                  "IG_BM": 64, "IG_BN": 128, "IG_BK": 16, "IG_MIN_BLOCKS": 1, "IG_NQ": 2}
IMPLICIT_MAX_TAPS = 4096  # IG_MAX_CKK in conv2d_gemm.cu
#: Floats of unrolled matrix the explicit version keeps at once (1 GiB): bounds memory, sets the chunk.
WORKSPACE_FLOATS = 2**28


def reference(X, Wt, pad: int = 0, stride: int = 1) -> np.ndarray:
    """Y in float64, through the unrolled matrix: Y[n] = Wmat U[n]."""
    X = np.asarray(X, np.float64)
    Wt = np.asarray(Wt, np.float64)
    N, C, H, W = X.shape
    M, C2, K, K2 = Wt.shape
    if C2 != C or K2 != K:
        raise ValueError(f"filters {Wt.shape} do not match an input with {C} channels (square filters only)")
    H_out, W_out = im2col.output_size(H, W, K, pad, stride)
    U = im2col.reference(X, K, pad, stride)                   # (N, C*K*K, P)
    return np.einsum("mk,nkp->nmp", Wt.reshape(M, C * K * K), U).reshape(N, M, H_out, W_out)


def direct_reference(X, Wt, pad: int = 0, stride: int = 1) -> np.ndarray:
    """Y in float64 by the definition (a sum over c, i, j of shifted inputs): checks :func:`reference`."""
    X = np.asarray(X, np.float64)
    Wt = np.asarray(Wt, np.float64)
    N, C, H, W = X.shape
    M, _, K, _ = Wt.shape
    H_out, W_out = im2col.output_size(H, W, K, pad, stride)
    Xp = np.pad(X, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    Y = np.zeros((N, M, H_out, W_out))
    for i in range(K):
        for j in range(K):
            patch = Xp[:, :, i : i + stride * (H_out - 1) + 1 : stride, j : j + stride * (W_out - 1) + 1 : stride]
            Y += np.einsum("mc,nchw->nmhw", Wt[:, :, i, j], patch)
    return Y


def flops(N, C, H, W, M, K, pad=0, stride=1) -> float:
    H_out, W_out = im2col.output_size(H, W, K, pad, stride)
    return 2.0 * N * M * H_out * W_out * C * K * K


def min_bytes(N, C, H, W, M, K, pad=0, stride=1) -> float:
    """Input and filters read once, output written once."""
    H_out, W_out = im2col.output_size(H, W, K, pad, stride)
    return 4.0 * (N * C * H * W + M * C * K * K + N * M * H_out * W_out)


def _module(config):
    return load_topic(TOPIC, {**DEFAULT_CONFIG, **(config or {})})


def _check(X, Wt, shape, wshape):
    N, C, H, W = (int(s) for s in (shape or X.shape))
    M, C2, K, K2 = (int(s) for s in (wshape or Wt.shape))
    if C2 != C or K2 != K:
        raise ValueError(f"filters {(M, C2, K, K2)} do not match an input with {C} channels (square filters only)")
    return N, C, H, W, M, K


def _f32(a):
    return np.ascontiguousarray(a, dtype=np.float32) if isinstance(a, np.ndarray) else a


def chunk_for(N, C, K, P, workspace_floats=WORKSPACE_FLOATS) -> int:
    """Samples unrolled per launch: as many as fit the workspace (at least one)."""
    per_sample = C * K * K * P
    return max(1, min(N, workspace_floats // per_sample, (2**31 - 1) // (C * P)))


def conv2d_unroll_gemm(X, Wt, pad: int = 0, stride: int = 1, *, chunk: int | None = None, out=None,
                       workspace=None, shape=None, wshape=None, config=None, sync=True, prepare_only=False):
    """Version 1: unroll ``chunk`` samples at a time into ``workspace``, then Y[n] = Wmat U[n] for each.

    ``shape``/``wshape`` give the shapes of ``X``/``Wt`` when they are flat device buffers.
    """
    X, Wt = _f32(X), _f32(Wt)
    N, C, H, W, M, K = _check(X, Wt, shape, wshape)
    H_out, W_out = im2col.output_size(H, W, K, pad, stride)
    P, CKK = H_out * W_out, C * K * K
    chunk = chunk or chunk_for(N, C, K, P)
    Y = output_like(X, (N, M, H_out, W_out), np.float32) if out is None else out
    if workspace is None:
        workspace = empty((chunk, CKK, P))
    elif workspace.size < chunk * CKK * P:
        raise ValueError(f"the workspace holds {workspace.size} floats; {chunk} unrolled samples need {chunk * CKK * P}")
    c = {**DEFAULT_CONFIG, **(config or {})}
    gemm = _module(config).function("conv2d_gemm_batched")
    Y_dev = Y if isinstance(Y, DeviceBuffer) else empty(Y.shape)
    X_dev = X if isinstance(X, DeviceBuffer) else to_device(X)
    W_dev = Wt if isinstance(Wt, DeviceBuffer) else to_device(Wt)
    steps = []
    threads = warptile_threads(c)
    for n0 in range(0, N, chunk):
        count = min(chunk, N - n0)
        steps.append(im2col.im2col_unroll_vec4(X_dev, K, pad, stride, n0=n0, count=count, out=workspace,
                                          shape=(N, C, H, W), prepare_only=True))
        steps.append(launch(gemm, (W_dev, workspace, Y_dev, n0, M, CKK, P),
                            grid=(blocks_for(P, c["WT_BN"]), blocks_for(M, c["WT_BM"]), count),
                            block=threads, prepare_only=True))

    return _run_steps(steps, Y, Y_dev, sync, prepare_only)


def _run_steps(steps, Y, Y_dev, sync: bool, prepare_only: bool):
    """Enqueue the prepared launches of a version made of several, in order; with ``prepare_only`` return the
    function that does.  A NumPy ``Y`` gets the result copied back; a device ``Y`` is waited for if ``sync``."""
    def enqueue():
        for step in steps:
            step()

    if prepare_only:
        return enqueue
    enqueue()
    if isinstance(Y, np.ndarray):
        Y[...] = Y_dev.get().reshape(Y.shape)
    elif sync:
        current_backend().synchronize()
    return Y


def conv2d_implicit_gemm(X, Wt, pad: int = 0, stride: int = 1, *, out=None, shape=None, wshape=None,
                         config=None, sync=True, prepare_only=False):
    """Version 2: one launch; the unrolled matrix exists only as tiles in shared memory.

    Filters up to 7x7, C*K*K up to 4096 taps, inputs of fewer than 2^31 elements (2^25 per sample).
    """
    X, Wt = _f32(X), _f32(Wt)
    N, C, H, W, M, K = _check(X, Wt, shape, wshape)
    H_out, W_out = im2col.output_size(H, W, K, pad, stride)
    if K > 7:
        raise ValueError(f"conv2d_implicit_gemm keeps one bit per filter tap in a 64-bit mask: {K}x{K} filters are too large")
    if N * C * H * W >= 2**31 or C * H * W >= 2**25:
        raise ValueError(f"X has {N * C * H * W} elements ({C * H * W} per sample); conv2d_implicit_gemm indexes it "
                         f"with 32-bit offsets (fewer than 2^31 in all, 2^25 per sample): split the batch")
    if C * K * K > IMPLICIT_MAX_TAPS:
        raise ValueError(f"C*K*K = {C * K * K} filter taps; the tap table of conv2d_implicit_gemm holds "
                         f"{IMPLICIT_MAX_TAPS}: use conv2d_unroll_gemm")
    config = {**(config or {}), "IG_WIDE_MASK": int(K > 5)}
    Y = output_like(X, (N, M, H_out, W_out), np.float32) if out is None else out
    kernel = _module(config).function("conv2d_implicit_gemm")
    grid, threads = implicit_launch(N, M, H_out, W_out, {**DEFAULT_CONFIG, **config})
    enqueue = launch(kernel, (X, Wt, Y, N, C, H, W, M, K, pad, stride, H_out, W_out),
                     grid=grid, block=threads, sync=sync, prepare_only=prepare_only)
    return enqueue if prepare_only else Y


def implicit_launch(N: int, M: int, H_out: int, W_out: int, config: dict) -> tuple[tuple[int, int], int]:
    """Version 2's grid and threads: an IG_BM x IG_BN tile of output maps x output pixels per block."""
    threads = (config["IG_BM"] // 64) * (config["IG_BN"] // (16 * config["IG_NQ"])) * 32
    return (blocks_for(N * H_out * W_out, config["IG_BN"]), blocks_for(M, config["IG_BM"])), threads


def winograd_tiles(H_out: int, W_out: int) -> tuple[int, int]:
    """4x4 output tiles per map: (rows, columns); the last ones may stick out of the map."""
    return -(-H_out // WINOGRAD_TILE), -(-W_out // WINOGRAD_TILE)


def winograd_reference(X, Wt, pad: int = 0) -> np.ndarray:
    """Y in float64 by F(4x4, 3x3), step by step as the kernels do it: V, U, the 36 products Z, then Y."""
    X, Wt = np.asarray(X, np.float64), np.asarray(Wt, np.float64)
    N, C, H, W = X.shape
    M = Wt.shape[0]
    H_out, W_out = H + 2 * pad - 2, W + 2 * pad - 2
    th, tw = winograd_tiles(H_out, W_out)
    # zero padding around the map, and past its end for tiles that stick out
    Xp = np.zeros((N, C, 4 * th + 2, 4 * tw + 2))
    Xp[:, :, pad:pad + H, pad:pad + W] = X
    V = np.einsum("ai,mcij,bj->abmc", WINOGRAD_G, Wt, WINOGRAD_G)                    # 6 x 6 x M x C
    patches = np.stack([np.stack([Xp[:, :, 4 * i:4 * i + 6, 4 * j:4 * j + 6] for j in range(tw)], 2)
                        for i in range(th)], 2)                                         # N x C x th x tw x 6 x 6
    U = np.einsum("ak,ncxykl,bl->abncxy", WINOGRAD_BT, patches, WINOGRAD_BT)            # 6 x 6 x N x C x th x tw
    Z = np.einsum("abmc,abncxy->abnmxy", V, U)                                          # the 36 products
    tiles = np.einsum("ia,abnmxy,jb->nmxiyj", WINOGRAD_AT, Z, WINOGRAD_AT)              # N x M x th x 4 x tw x 4
    return tiles.reshape(N, M, 4 * th, 4 * tw)[:, :, :H_out, :W_out]


def winograd_workspace_floats(N, C, H, W, M, pad) -> int:
    """Floats of the three transformed operands: V (36 M C), U (36 C T) and Z (36 M T), T tiles in the batch."""
    th, tw = winograd_tiles(H + 2 * pad - 2, W + 2 * pad - 2)
    T = N * th * tw
    return 36 * (M * C + C * T + M * T)


def conv2d_winograd(X, Wt, pad: int = 0, stride: int = 1, *, out=None, shape=None, wshape=None, config=None,
                    sync=True, prepare_only=False):
    """Version 3: 3x3 filters at stride 1 by F(4x4, 3x3), in four launches (filters, inputs, the 36 products,
    outputs), through device buffers for the transformed operands (:func:`winograd_workspace_floats`)."""
    X, Wt = _f32(X), _f32(Wt)
    N, C, H, W, M, K = _check(X, Wt, shape, wshape)
    if K != 3 or stride != 1:
        raise ValueError(f"conv2d_winograd computes F(4x4, 3x3): 3x3 filters at stride 1, not {K}x{K} at stride {stride}")
    H_out, W_out = im2col.output_size(H, W, K, pad, stride)
    th, tw = winograd_tiles(H_out, W_out)
    T = N * th * tw
    if 36 * max(C, M) * T >= 2**31:
        raise ValueError(f"{T} tiles of {max(C, M)} maps: the transformed operands would have 2^31 floats or more; "
                         f"split the batch")
    module = _module(config)
    Y = output_like(X, (N, M, H_out, W_out), np.float32) if out is None else out
    Y_dev = Y if isinstance(Y, DeviceBuffer) else empty(Y.shape)
    X_dev = X if isinstance(X, DeviceBuffer) else to_device(X)
    W_dev = Wt if isinstance(Wt, DeviceBuffer) else to_device(Wt)
    # Hundreds of megabytes on a large layer: allocated per call (a prepared call keeps them), never kept.
    V, U, Z = empty((36, M, C)), empty((36, C, T)), empty((36, M, T))
    gemm = _winograd_gemm_launch({"N": N, "C": C, "H": H, "W": W, "M": M, "pad": pad}, config)
    steps = [
        launch(module.function("conv2d_winograd_filters"), (W_dev, V, M, C),
               grid=blocks_for(M * C, WINOGRAD_THREADS), block=WINOGRAD_THREADS, prepare_only=True),
        launch(module.function("conv2d_winograd_inputs"), (X_dev, U, N, C, H, W, pad, th, tw),
               grid=blocks_for(C * T, WINOGRAD_THREADS), block=WINOGRAD_THREADS, prepare_only=True),
        launch(module.function("conv2d_winograd_gemm"), (V, U, Z, M, C, T),
               grid=gemm.grid, block=gemm.block, prepare_only=True),
        launch(module.function("conv2d_winograd_outputs"), (Z, Y_dev, N, M, H_out, W_out, th, tw),
               grid=blocks_for(M * T, WINOGRAD_THREADS), block=WINOGRAD_THREADS, prepare_only=True),
    ]

    return _run_steps(steps, Y, Y_dev, sync, prepare_only)


GEMM_STEP_AXES = ("N", "n0", "count", "C", "H", "W", "M", "K", "pad")


def gemm_step_dims(shape) -> tuple[int, ...]:
    """The GEMM step of samples n0 .. n0 + count - 1 of N: ``(N, n0, count, C, H, W, M, K, pad)`` (stride 1)."""
    return tuple(int(shape[key]) for key in GEMM_STEP_AXES)


def gemm_step_sizes(shape) -> tuple[int, int, int, int]:
    """``(count, M, P, CKK)``: Y[n0 + s] (M x P) = Wmat (M x CKK) U[s] (CKK x P) for s < count."""
    N, n0, count, C, H, W, M, K, pad = gemm_step_dims(shape)
    H_out, W_out = im2col.output_size(H, W, K, pad, 1)
    return count, M, H_out * W_out, C * K * K


def _gemm_step_launch(shape) -> LaunchConfig:
    c = DEFAULT_CONFIG
    count, M, P, _ = gemm_step_sizes(shape)
    threads = warptile_threads(c)
    return LaunchConfig((blocks_for(P, c["WT_BN"]), blocks_for(M, c["WT_BM"]), count), (threads, 1, 1), 0)


def _gemm_step_bytes(shape) -> float:
    """Wmat read once, each U[s] read once, each Y[n0 + s] written once."""
    count, M, P, CKK = gemm_step_sizes(shape)
    return 4.0 * (M * CKK + count * P * (CKK + M))


def _gemm_step_flops(shape) -> float:
    count, M, P, CKK = gemm_step_sizes(shape)
    return 2.0 * count * M * P * CKK


# Version 3's four kernels.  A shape is a 3x3 layer at stride 1: N, C, H, W, M, K (3) and pad.  The flop counts
# are those of the transforms as dense matrix products (the kernels write them out and skip the zeros).

def _winograd_sizes(shape) -> dict:
    """N, C, M, the T tiles of 4x4 in the batch, P outputs and HW inputs per map."""
    N, C, H, W, M, pad = (int(shape[k]) for k in ("N", "C", "H", "W", "M", "pad"))
    H_out, W_out = H + 2 * pad - 2, W + 2 * pad - 2
    th, tw = winograd_tiles(H_out, W_out)
    return {"N": N, "C": C, "M": M, "T": N * th * tw, "P": H_out * W_out, "HW": H * W}


def _winograd_gemm_launch(shape, config: dict | None = None) -> LaunchConfig:
    """The 36 products' launch: the SGEMM tile of ``config`` (default DEFAULT_CONFIG) over M x T, grid.z = 36."""
    c, d = {**DEFAULT_CONFIG, **(config or {})}, _winograd_sizes(shape)
    threads = warptile_threads(c)
    return LaunchConfig((blocks_for(d["T"], c["WT_BN"]), blocks_for(d["M"], c["WT_BM"]), 36), (threads, 1, 1), 0)


def winograd_filters_reference(Wt) -> np.ndarray:
    """V (36 x M x C) in float64: G g G^T of every 3x3 filter, its 6x6 positions flattened."""
    V = np.einsum("ai,mcij,bj->abmc", WINOGRAD_G, np.asarray(Wt, np.float64), WINOGRAD_G)
    return V.reshape(36, *V.shape[2:])


#: Version 2's record describes filters up to 5 x 5 (IG_WIDE_MASK 0); larger ones are compiled with IG_WIDE_MASK 1.
IMPLICIT_DEFINES = {**DEFAULT_CONFIG, "IG_WIDE_MASK": 0}


def _layer(shape) -> tuple[int, ...]:
    """``(N, C, H, W, M, K, pad, stride)`` of a shape (pad 0 and stride 1 unless given)."""
    return (*(int(shape[k]) for k in "NCHWMK"), int(shape.get("pad", 0)), int(shape.get("stride", 1)))


def _implicit_launch(shape) -> LaunchConfig:
    N, C, H, W, M, K, pad, stride = _layer(shape)
    if K > 5:
        raise ValueError(f"the conv2d_implicit_gemm record describes filters up to 5 x 5 (IG_WIDE_MASK 0); "
                         f"{K} x {K} filters are compiled with IG_WIDE_MASK 1")
    grid, threads = implicit_launch(N, M, *im2col.output_size(H, W, K, pad, stride), IMPLICIT_DEFINES)
    return LaunchConfig((*grid, 1), (threads, 1, 1), 0)


def _winograd_record(kernel, threads, floats_moved, flops, reference, **rung) -> KernelVersion:
    """The record of one of version 3's kernels; ``threads`` (None: the GEMM's launch), ``floats_moved`` and
    ``flops`` take the sizes of :func:`_winograd_sizes`."""
    def launch(shape):
        if threads is None:
            return _winograd_gemm_launch(shape)
        return LaunchConfig((blocks_for(threads(_winograd_sizes(shape)), WINOGRAD_THREADS), 1, 1),
                            (WINOGRAD_THREADS, 1, 1), 0)

    return KernelVersion(TOPIC, kernel, conv2d_winograd, launch,
                         lambda shape: 4.0 * floats_moved(_winograd_sizes(shape)),
                         lambda shape: float(flops(_winograd_sizes(shape))), reference, defines=DEFAULT_CONFIG, **rung)


KERNELS = kernel_table(
    # Launched by conv2d_unroll_gemm once per chunk of unrolled samples (the facts are those of one chunk).
    KernelVersion(TOPIC, "conv2d_gemm_batched", conv2d_unroll_gemm, _gemm_step_launch, _gemm_step_bytes,
                  _gemm_step_flops, reference, defines=DEFAULT_CONFIG, number=1,
                  title="im2col into global memory, then the warp-tiled SGEMM per sample", key="unroll_gemm"),
    KernelVersion(TOPIC, "conv2d_implicit_gemm", conv2d_implicit_gemm, _implicit_launch,
                  lambda shape: min_bytes(*_layer(shape)), lambda shape: flops(*_layer(shape)), reference,
                  defines=IMPLICIT_DEFINES, number=2,
                  title="the unrolled tiles gathered straight into shared memory (no unrolled matrix)",
                  key="implicit_gemm"),
    _winograd_record("conv2d_winograd_filters", lambda d: d["M"] * d["C"], lambda d: 45 * d["M"] * d["C"],
                     lambda d: 2 * (6 * 3 * 3 + 6 * 3 * 6) * d["M"] * d["C"], winograd_filters_reference,
                     number=3, title="3x3 filters, stride 1: Winograd's F(4x4, 3x3), 36 products of transformed tiles",
                     key="winograd"),
    _winograd_record("conv2d_winograd_inputs", lambda d: d["C"] * d["T"],
                     lambda d: d["N"] * d["C"] * d["HW"] + 36 * d["C"] * d["T"],
                     lambda d: 2 * 2 * 6 * 6 * 6 * d["C"] * d["T"], winograd_reference,
                     number=3, title="the input tiles transformed"),
    _winograd_record("conv2d_winograd_gemm", None, lambda d: 36 * (d["M"] * d["C"] + d["C"] * d["T"] + d["M"] * d["T"]),
                     lambda d: 2 * 36 * d["M"] * d["C"] * d["T"], winograd_reference,
                     number=3, title="the 36 products"),
    _winograd_record("conv2d_winograd_outputs", lambda d: d["M"] * d["T"],
                     lambda d: 36 * d["M"] * d["T"] + d["N"] * d["M"] * d["P"],
                     lambda d: 2 * (4 * 6 * 6 + 4 * 6 * 4) * d["M"] * d["T"], winograd_reference,
                     number=3, title="the products transformed back into output tiles"),
)

#: The versions that take any filter and stride, by key (Winograd's takes 3x3 filters at stride 1 only).
ANY_FILTER = {key: version for key, version in versions(KERNELS).items() if key != "winograd"}
