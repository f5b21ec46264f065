"""The backward pass of a convolutional layer (``kernels/conv/conv2d_backward.cu``): references and launchers.

Shapes as in :mod:`kernels.conv.conv2d`: ``X`` ``(N, C, H, W)``, filters ``Wf``
``(M, C, K, K)``, ``dY = dE/dY`` ``(N, M, H - K + 1, W - K + 1)``.
:func:`backward_input` gives ``dE/dX``, :func:`backward_weight` (two
versions) ``dE/dW`` summed over the minibatch, :func:`backward_bias` ``dE/db``
(versions 1-4, written for clarity).

Versions 5-12 do the same in few launches, each ending its split reductions in
a sum of fixed order (the same bits on every run): :func:`backward_weight_bias_split`
(dW and db in one launch, for layers whose samples fit shared memory, as LeNet's),
:func:`backward_bias_split`, :func:`backward_input_shared` (dX from shared memory),
:func:`backward_input_gemm` and :func:`backward_weight_bias_gemm` (implicit GEMM,
for large layers).  Version 11, :func:`backward_input_fixed`, is version 7 compiled
for one layer's sizes, for small layers.  Each takes its design choices (splits,
tiles) as arguments, and ``*_plan`` says what it launches for a shape.
"""

from __future__ import annotations

import numpy as np

from .conv2d import bytes_moved, flops, forward_reference, layer, output_shape, tile_grid
from .conv2d_gemm import conv2d_implicit_gemm, conv2d_winograd
from ..runtime import DeviceBuffer, Module, blocks_for
from ..runtime.loader import float32_operand, launch, load_topic, output_like, result_array
from ..runtime.scratch import kept_buffer
from ..runtime.versions import KernelVersion, LaunchConfig, kernel_table

TOPIC = "conv2d_backward"
TILE_WIDTH = 16  # must equal the #define in conv2d_backward.cu
REDUCE_BLOCK = 256  # must equal the #define in conv2d_backward.cu
BLOCK_1D = 128


def module() -> Module:
    return load_topic(TOPIC)


# --------------------------------------------------------------------------- references


def backward_input_sequential(dY, Wf, H: int, W: int) -> np.ndarray:
    """dE/dX for one sample (``dY[M, H_out, W_out]``), as loops: every output pixel scatters into its window."""
    dY, Wf = np.asarray(dY, np.float64), np.asarray(Wf, np.float64)
    M, H_out, W_out = dY.shape
    _, C, K, _ = Wf.shape
    dX = np.zeros((C, H, W))
    for m in range(M):
        for h in range(H_out):
            for w in range(W_out):
                for c in range(C):
                    for p in range(K):
                        for q in range(K):
                            dX[c, h + p, w + q] += dY[m, h, w] * Wf[m, c, p, q]
    return dX


def backward_weight_sequential(X, dY, K: int) -> np.ndarray:
    """dE/dW for a minibatch, as loops: the sum over every sample and output pixel."""
    X, dY = np.asarray(X, np.float64), np.asarray(dY, np.float64)
    N, C, H, W = X.shape
    _, M, H_out, W_out = dY.shape
    dW = np.zeros((M, C, K, K))
    for n in range(N):
        for m in range(M):
            for h in range(H_out):
                for w in range(W_out):
                    for c in range(C):
                        for p in range(K):
                            for q in range(K):
                                dW[m, c, p, q] += dY[n, m, h, w] * X[n, c, h + p, w + q]
    return dW


def transposed_filters(Wf) -> np.ndarray:
    """The filter bank of the backward convolution: maps swapped, each filter rotated by 180 degrees."""
    return np.ascontiguousarray(np.asarray(Wf)[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))


def backward_input_reference(dY, Wf) -> np.ndarray:
    """dE/dX in float64: dY padded with K - 1 zeros, convolved with the transposed filter bank."""
    dY = np.asarray(dY, np.float64)
    K = int(np.shape(Wf)[2])
    padded = np.pad(dY, ((0, 0), (0, 0), (K - 1, K - 1), (K - 1, K - 1)))
    return forward_reference(padded, transposed_filters(np.asarray(Wf, np.float64)))


def backward_weight_reference(X, dY) -> np.ndarray:
    """dE/dW in float64: sum over n, h, w of dY[n, m, h, w] X[n, c, h + p, w + q]."""
    X = np.asarray(X, np.float64)
    dY = np.asarray(dY, np.float64)
    K = X.shape[2] - dY.shape[2] + 1
    windows = np.lib.stride_tricks.sliding_window_view(X, (K, K), axis=(2, 3))  # N, C, H_out, W_out, K, K
    return np.einsum("nmhw,nchwpq->mcpq", dY, windows, optimize=True)


def backward_bias_reference(dY) -> np.ndarray:
    return np.asarray(dY, np.float64).sum(axis=(0, 2, 3))


# --------------------------------------------------------------------------- launchers


def _dims(x_shape, dY, Wf_shape):
    N, M, H_out, W_out = output_shape(x_shape, Wf_shape)
    # dY may be any buffer of N * M * H_out * W_out elements (an N x M matrix for 1 x 1 maps).
    if int(np.prod(dY.shape)) != N * M * H_out * W_out or int(dY.shape[0]) != N:
        raise ValueError(f"dY has shape {tuple(dY.shape)}, the layer's output has shape {(N, M, H_out, W_out)}")
    _, C, H, W = (int(s) for s in x_shape)
    return N, C, H, W, M, int(Wf_shape[2])


def backward_input(dY, Wf, x_shape, out=None):
    """Version 1: ``conv2d_backward_input``; dE/dX of shape ``x_shape`` = (N, C, H, W)."""
    dY, Wf = float32_operand(dY), float32_operand(Wf)
    N, C, H, W, M, K = _dims(x_shape, dY, Wf.shape)
    dX = result_array(out, (N, C, H, W), any_layout=True)
    H_grid, W_grid = tile_grid(H, W, TILE_WIDTH)
    module().function("conv2d_backward_input")(dY, Wf, dX, N, C, H, W, M, K, W_grid,
                                               grid=(C, H_grid * W_grid, N), block=(TILE_WIDTH, TILE_WIDTH))
    return dX


def backward_weight_naive(X, dY, K: int, out=None):
    """Version 2: ``conv2d_backward_weight_naive``; one thread per weight."""
    X, dY, N, C, H, W, M = _weight_operands(X, dY, K)
    dW = result_array(out, (M, C, K, K), any_layout=True)
    module().function("conv2d_backward_weight_naive")(X, dY, dW, N, C, H, W, M, K,
                                                      grid=blocks_for(M * C * K * K, BLOCK_1D), block=BLOCK_1D)
    return dW


def backward_weight(X, dY, K: int, out=None):
    """Version 3: ``conv2d_backward_weight_reduce``; one block per weight, a shared-memory reduction."""
    X, dY, N, C, H, W, M = _weight_operands(X, dY, K)
    dW = result_array(out, (M, C, K, K), any_layout=True)
    module().function("conv2d_backward_weight_reduce")(X, dY, dW, N, C, H, W, M, K,
                                                       grid=M * C * K * K, block=REDUCE_BLOCK)
    return dW


def _bias_operand(dY):
    """dY as float32 and its (N, M, H_out, W_out), for the bias versions: (N, M) is read as maps of one pixel."""
    dY = float32_operand(dY)
    if len(dY.shape) not in (2, 4):
        raise ValueError(f"dY must be (N, M, H_out, W_out) or (N, M), got shape {tuple(dY.shape)}")
    return (dY, *(tuple(int(s) for s in dY.shape) + (1, 1))[:4])


def backward_bias(dY, out=None):
    """Version 4: ``conv2d_backward_bias``; one block per output map.

    ``dY`` is ``(N, M, H_out, W_out)``, or ``(N, M)`` for maps of one pixel.
    """
    dY, N, M, H_out, W_out = _bias_operand(dY)
    db = result_array(out, (M,), any_layout=True)
    module().function("conv2d_backward_bias")(dY, db, N, M, H_out, W_out, grid=M, block=REDUCE_BLOCK)
    return db


def backward_weight_auto(X, dY, K: int, out=None):
    """Version 2 or 3, whichever suits the layer.

    One block per weight pays off when each weight sums many products (LeNet's C1:
    150 weights of 64 x 784 products each at batch 64); when there are many
    weights with few products each (C5: 48000 weights of 64 products) one thread
    per weight already fills the GPU and a block per weight would be mostly idle.
    """
    N, C, H, W = (int(s) for s in X.shape)
    products = N * (H - K + 1) * (W - K + 1)
    if products >= AUTO_REDUCE_PRODUCTS:
        return backward_weight(X, dY, K, out=out)
    return backward_weight_naive(X, dY, K, out=out)


AUTO_REDUCE_PRODUCTS = 1024  # products per weight from which backward_weight_auto uses a block per weight

#: The dW launchers a network chooses among: version 2, version 3, or whichever suits the layer.
WEIGHT_GRADIENTS = {"naive": backward_weight_naive, "reduce": backward_weight, "auto": backward_weight_auto}


# --------------------------------------------------------------------------- versions 5-12: few launches

#: Most threads a block of version 5 may have, and most (c, p, row) tasks one thread keeps (WB_TASKS).
SPLIT_MAX_THREADS = 1024
SHARED_LIMIT = 48 * 1024  # bytes of shared memory a block may have without opting in
#: Default compile-time choices (the ``defines`` of each record); the benchmark compares others.
WEIGHT_SPLIT_DEFINES = {"WB_TASKS": 2}
INPUT_SHARED_DEFINES = {"BI_RW": 2, "BI_CB": 1}
WEIGHT_GEMM_DEFINES = {"WG_BN": 64, "WG_BK": 16}
SPLIT_SUM_THREADS = 256


def _workspace(like, purpose: str, shape, dtype=np.float32):
    """Scratch for split partials and arrival counters, zero before the first launch: on the device when the
    operands are there, kept between launches (every version leaves its counters zero, and writes each
    partial before it reads it), so that a training step allocates nothing and never waits on a free."""
    if isinstance(like, DeviceBuffer):
        return kept_buffer(f"conv2d_backward {purpose}", shape, dtype, zeroed=True)
    return np.zeros(shape, dtype)


def _weight_operands(X, dY, K):
    """X and dY as float32 with (N, C, H, W, M) checked: what every dW version takes (M is read off dY's size)."""
    X, dY = float32_operand(X), float32_operand(dY)
    if len(X.shape) != 4:
        raise ValueError(f"X must be (N, C, H, W), got shape {tuple(X.shape)}")
    N, C, H, W = (int(s) for s in X.shape)
    if not 1 <= K <= min(H, W):
        raise ValueError(f"K = {K} must be between 1 and the input's height and width ({H} x {W})")
    P = (H - K + 1) * (W - K + 1)
    if int(np.prod(dY.shape)) % (N * P):
        raise ValueError(f"dY has shape {tuple(dY.shape)}: not N = {N} samples of M maps of {H - K + 1} x {W - K + 1}")
    M = int(np.prod(dY.shape)) // (N * P)
    _dims(X.shape, dY, (M, C, K, K))
    return X, dY, N, C, H, W, M


def _split_count(splits, N, name="splits"):
    if not 1 <= int(splits) <= N:
        raise ValueError(f"{name} must be between 1 and the batch size N = {N}, got {splits}")
    chunk = -(-N // int(splits))
    return -(-N // chunk), chunk  # no empty split


def weight_split_plan(shape, splits: int | None = None, defines: dict | None = None) -> dict:
    """Version 5's launch for a shape: splits S, samples per split, threads and shared bytes.

    The default splits the batch so that the grid (M x S) has about two blocks per SM of an H100 SXM
    or an H200 (264 blocks), with at least one sample per split.
    """
    N, C, H, W, M, K = layer(shape)
    if splits is None:
        splits = max(1, min(N, -(-264 // M)))
    S, chunk = _split_count(splits, N)
    H_out, W_out = H - K + 1, W - K + 1
    tasks = C * K * H_out
    d = {**WEIGHT_SPLIT_DEFINES, **(defines or {})}
    tasks_per_thread = d["WB_TASKS"]
    threads = 32 * -(-tasks // (32 * tasks_per_thread))
    staged = chunk * (C * H * (W | 1) + H_out * (W_out | 1))
    floats = max(staged, C * K * K * H_out + 32)
    return {"splits": S, "chunk": chunk, "threads": threads, "shared": 4 * floats, "tasks": tasks,
            "defines": {**d, "WB_K": K}}


def backward_weight_bias_split(X, dY, K: int, *, splits: int | None = None, defines: dict | None = None, out=None,
                               out_bias=None, prepare_only=False):
    """Version 5: ``conv2d_backward_weight_bias_split``; (dE/dW, dE/db) in one launch, deterministic.

    ``splits`` (S) divides the batch among blocks: grid (M, S).  The K x K filter size is compiled in
    (``WB_K``), so each K has its own build; ``defines`` may set WB_TASKS (tasks per thread, so the
    block has about C * K * H_out / WB_TASKS threads) and STAGE_ASYNC (1: samples copied to shared memory
    with cp.async; 0: through registers, STAGE_BATCH loads in flight).
    """
    X, dY, N, C, H, W, M = _weight_operands(X, dY, K)
    plan = weight_split_plan({"N": N, "C": C, "H": H, "W": W, "M": M, "K": K}, splits, defines)
    if plan["threads"] > SPLIT_MAX_THREADS:
        raise ValueError(f"conv2d_backward_weight_bias_split gives each of at most {SPLIT_MAX_THREADS} threads "
                         f"{plan['defines']['WB_TASKS']} (c, p, row) tasks; this layer has {plan['tasks']}")
    if plan["shared"] > SHARED_LIMIT:
        raise ValueError(f"splits = {plan['splits']} stages {plan['chunk']} samples per block, "
                         f"{plan['shared']} bytes of shared memory > {SHARED_LIMIT}: use more splits")
    dW = result_array(out, (M, C, K, K), any_layout=True) if out is not None else output_like(X, (M, C, K, K))
    db = result_array(out_bias, (M,), any_layout=True) if out_bias is not None else output_like(X, (M,))
    S = plan["splits"]
    partial = _workspace(X, "partials", (S * M * (C * K * K + 1),))
    counters = _workspace(X, "counters", (M,), np.uint32)
    kernel = load_topic(TOPIC, plan["defines"]).function("conv2d_backward_weight_bias_split")
    enqueue = launch(kernel, (X, dY, dW, db, partial, counters, N, C, H, W, M, plan["chunk"]), grid=(M, S, 1),
                     block=(plan["threads"], 1, 1), shared=plan["shared"], prepare_only=prepare_only)
    return enqueue if prepare_only else (dW, db)


#: Blocks of 256 threads an H100 SXM or an H200 holds at once (132 SMs x 8): version 6's grid stays within
#: one wave, so no multiprocessor is left with a second round of blocks while the others idle.
BIAS_ONE_WAVE = 132 * 8
#: Values of dY a block of version 6 should sum at least (8 per thread): fewer, and a block is mostly its
#: launch and its last barrier.
BIAS_VALUES_PER_BLOCK = 2048


def bias_split_plan(shape, splits: int | None = None) -> dict:
    """Version 6's launch: grid (M, S).  By default S is as large as one wave of blocks allows, but no
    larger than gives each block BIAS_VALUES_PER_BLOCK values of dY."""
    N, C, H, W, M, K = layer(shape)
    if splits is None:
        values = N * (H - K + 1) * (W - K + 1)  # per output map
        splits = max(1, min(N, BIAS_ONE_WAVE // M, -(-values // BIAS_VALUES_PER_BLOCK)))
    S, chunk = _split_count(splits, N)
    return {"splits": S, "chunk": chunk, "threads": REDUCE_BLOCK}


def backward_bias_split(dY, *, splits: int | None = None, out=None, prepare_only=False):
    """Version 6: ``conv2d_backward_bias_split``; dE/db in one launch of M x S blocks, deterministic."""
    dY, N, M, H_out, W_out = _bias_operand(dY)
    plan = bias_split_plan({"N": N, "C": 1, "H": H_out, "W": W_out, "M": M, "K": 1}, splits)
    return _launch_bias_split(module().function("conv2d_backward_bias_split"), dY, plan, out, prepare_only)


def _launch_bias_split(kernel, dY, plan: dict, out, prepare_only: bool):
    """Versions 6 and 12 take the same arguments and grid (M, S): ``plan`` from :func:`bias_split_plan`."""
    N, M, H_out, W_out = (tuple(int(s) for s in dY.shape) + (1, 1))[:4]
    db = result_array(out, (M,), any_layout=True) if out is not None else output_like(dY, (M,))
    S = plan["splits"]
    partial, counters = _workspace(dY, "partials", (S * M,)), _workspace(dY, "counters", (M,), np.uint32)
    enqueue = launch(kernel, (dY, db, partial, counters, N, M, H_out * W_out, plan["chunk"]),
                     grid=(M, S, 1), block=(plan["threads"], 1, 1), prepare_only=prepare_only)
    return enqueue if prepare_only else db


def bias_planes_plan(shape, splits: int | None = None, aligned: bool = True) -> dict:
    """Version 12's launch: version 6's grid and blocks, built with BP_VEC 4 (float4 loads) when a plane of dY
    holds a multiple of 4 floats and dY starts on a 16-byte boundary (``aligned``), else 1."""
    N, C, H, W, M, K = layer(shape)
    plane = (H - K + 1) * (W - K + 1)
    return {**bias_split_plan(shape, splits), "defines": {"BP_VEC": 4 if plane % 4 == 0 and aligned else 1}}


def backward_bias_planes(dY, *, splits: int | None = None, out=None, prepare_only=False):
    """Version 12: ``conv2d_backward_bias_planes``; version 6 with 16-byte loads and no division per load."""
    dY, N, M, H_out, W_out = _bias_operand(dY)
    # A buffer of the runtime starts on a 256-byte boundary; a view into one (as the grader passes) may not.
    aligned = getattr(dY, "ptr", 0) % 16 == 0
    plan = bias_planes_plan({"N": N, "C": 1, "H": H_out, "W": W_out, "M": M, "K": 1}, splits, aligned)
    kernel = load_topic(TOPIC, plan["defines"]).function("conv2d_backward_bias_planes")
    return _launch_bias_split(kernel, dY, plan, out, prepare_only)


def _input_rows_launch(shape, rows: int, defines: dict | None) -> dict:
    """The launch of versions 7 and 11 for blocks of ``rows`` rows: block (ceil(W / RW), rows), grid
    (ceil(C / CB), ceil(H / rows), N), shared bytes (M maps of rows + K - 1 padded rows, and the filters)."""
    N, C, H, W, M, K = layer(shape)
    d = {**INPUT_SHARED_DEFINES, **(defines or {})}
    cols = -(-W // d["BI_RW"])
    wp = cols * d["BI_RW"] + K - 1
    shared = 4 * (M * (rows + K - 1) * wp + d["BI_CB"] * M * K * K)
    return {"rows": rows, "block": (cols, rows, 1), "grid": (-(-C // d["BI_CB"]), -(-H // rows), N),
            "shared": shared, "defines": {**d, "BI_K": K}}


def input_shared_plan(shape, rows: int | None = None, defines: dict | None = None) -> dict:
    """Version 7's launch (:func:`_input_rows_launch`).

    ``rows`` defaults to the whole height when a block of it stays within 256 threads, else to as many
    rows as 256 threads cover.
    """
    H, W = layer(shape)[2:4]
    cols = -(-W // {**INPUT_SHARED_DEFINES, **(defines or {})}["BI_RW"])
    if rows is None:
        rows = min(H, max(1, 256 // cols))
    if not 1 <= rows <= H or rows * cols > 1024:
        raise ValueError(f"rows must be between 1 and H = {H} with rows x {cols} threads <= 1024, got {rows}")
    return _input_rows_launch(shape, rows, defines)


def backward_input_shared(dY, Wf, x_shape, *, rows: int | None = None, defines: dict | None = None, out=None,
                          prepare_only=False):
    """Version 7: ``conv2d_backward_input_shared``; dE/dX as a full convolution from shared memory.

    ``defines`` may set BI_RW (pixels per thread along a row), BI_CB (channels per block) and STAGE_ASYNC
    (1: dY copied to shared memory with cp.async; 0: through registers).
    """
    dY, Wf = float32_operand(dY), float32_operand(Wf)
    N, C, H, W, M, K = _dims(x_shape, dY, Wf.shape)
    plan = input_shared_plan({"N": N, "C": C, "H": H, "W": W, "M": M, "K": K}, rows, defines)
    if plan["shared"] > SHARED_LIMIT:
        raise ValueError(f"conv2d_backward_input_shared stages {M} maps of {plan['rows'] + K - 1} padded rows: "
                         f"{plan['shared']} bytes of shared memory > {SHARED_LIMIT}; pass fewer rows")
    dX = result_array(out, (N, C, H, W), any_layout=True) if out is not None else output_like(dY, (N, C, H, W))
    kernel = load_topic(TOPIC, plan["defines"]).function("conv2d_backward_input_shared")
    enqueue = launch(kernel, (dY, Wf, dX, N, C, H, W, M), grid=plan["grid"], block=plan["block"],
                     shared=plan["shared"], prepare_only=prepare_only)
    return enqueue if prepare_only else dX


def input_fixed_plan(shape, defines: dict | None = None) -> dict:
    """Version 11's launch: version 7's with blocks of the whole height (block (ceil(W / RW), H), grid
    (ceil(C / CB), 1, N)), and the defines that compile the layer's sizes in."""
    N, C, H, W, M, K = layer(shape)
    plan = _input_rows_launch(shape, H, defines)
    return {**plan, "defines": {**plan["defines"], "BF_M": M, "BF_H": H, "BF_W": W}}


def input_fixed_fits(plan: dict) -> bool:
    """Whether version 11's launch ``plan`` (:func:`input_fixed_plan`) fits one block: at most 1024 threads and
    SHARED_LIMIT bytes of shared memory."""
    return plan["block"][0] * plan["block"][1] <= 1024 and plan["shared"] <= SHARED_LIMIT


def backward_input_fixed(dY, Wf, x_shape, *, defines: dict | None = None, out=None, prepare_only=False):
    """Version 11: ``conv2d_backward_input_fixed``, version 7 compiled for this layer's sizes (a module per
    shape), a block per channel group and sample holding the whole height.  For small layers: a block of
    ceil(W / BI_RW) x H threads must stay within 1024, and all M maps of a sample within shared memory.
    """
    dY, Wf = float32_operand(dY), float32_operand(Wf)
    N, C, H, W, M, K = _dims(x_shape, dY, Wf.shape)
    plan = input_fixed_plan({"N": N, "C": C, "H": H, "W": W, "M": M, "K": K}, defines)
    if not input_fixed_fits(plan):
        threads = plan["block"][0] * plan["block"][1]
        raise ValueError(f"conv2d_backward_input_fixed holds a whole sample per block: {threads} threads and "
                         f"{plan['shared']} bytes of shared memory for {M} maps of {H} x {W} (at most 1024 threads "
                         f"and {SHARED_LIMIT} bytes); use backward_input_shared or backward_input_gemm")
    dX = result_array(out, (N, C, H, W), any_layout=True) if out is not None else output_like(dY, (N, C, H, W))
    kernel = load_topic(TOPIC, plan["defines"]).function("conv2d_backward_input_fixed")
    enqueue = launch(kernel, (dY, Wf, dX, N, C), grid=plan["grid"], block=plan["block"], shared=plan["shared"],
                     prepare_only=prepare_only)
    return enqueue if prepare_only else dX


def backward_input_gemm(dY, Wf, x_shape, *, config: dict | None = None, out=None, prepare_only=False):
    """Versions 8 + the GEMM chapter's implicit GEMM: dE/dX = dY padded by K - 1, convolved with the
    transposed filter bank (``conv2d_backward_flip_filters``) by ``conv2d_implicit_gemm``.

    ``config`` overrides the implicit GEMM's IG_* tile (kernels/conv/conv2d_gemm.py).
    """
    return _input_by_convolution(conv2d_implicit_gemm, dY, Wf, x_shape, config, out, prepare_only)


def backward_input_winograd(dY, Wf, x_shape, *, config: dict | None = None, out=None, prepare_only=False):
    """Version 8 + the GEMM chapter's Winograd (3x3 filters): dE/dX = dY padded by 2, convolved with the
    transposed filter bank (``conv2d_backward_flip_filters``) by ``conv2d_winograd``.

    ``config`` overrides the tile of Winograd's 36 products (the WT_* defines, kernels/conv/conv2d_gemm.py).
    """
    if int(Wf.shape[-1]) != 3:
        raise ValueError(f"backward_input_winograd computes F(4x4, 3x3): 3x3 filters, not {Wf.shape[-2]}x{Wf.shape[-1]}")
    return _input_by_convolution(conv2d_winograd, dY, Wf, x_shape, config, out, prepare_only)


def _input_by_convolution(convolution, dY, Wf, x_shape, config, out, prepare_only):
    """dE/dX as a forward convolution (a launcher of kernels/conv/conv2d_gemm.py) of dY, padded by K - 1, with the
    filter bank version 8 transposes and flips."""
    dY, Wf = float32_operand(dY), float32_operand(Wf)
    N, C, H, W, M, K = _dims(x_shape, dY, Wf.shape)
    Wt = output_like(Wf, (C, M, K, K))
    flip = launch(module().function("conv2d_backward_flip_filters"), (Wf, Wt, M, C, K),
                  grid=(_flip_blocks(M * C * K * K), 1, 1), block=(BLOCK_1D, 1, 1), prepare_only=prepare_only)
    dX = result_array(out, (N, C, H, W), any_layout=True) if out is not None else output_like(dY, (N, C, H, W))
    dY4 = dY if len(dY.shape) == 4 else dY.reshape(N, M, H - K + 1, W - K + 1)
    rest = convolution(dY4, Wt, pad=K - 1, out=dX, config=config, sync=not prepare_only, prepare_only=prepare_only,
                       shape=(N, M, H - K + 1, W - K + 1), wshape=(C, M, K, K))
    if prepare_only:
        return lambda: (flip(), rest())
    return dX


def _flip_blocks(weights: int) -> int:
    return max(1, min(blocks_for(weights, BLOCK_1D), 1024))


#: Version 9's default grid: one full wave on an H100 SXM or H200 (132 SMs), 6 blocks each, as many as
#: its registers let a multiprocessor hold (``__launch_bounds__(64, 6)``: at most 168 per thread, 6 x 64 x 168
#: of 65,536): no block waits for a second round while other multiprocessors idle.
GEMM_TARGET_BLOCKS = 132 * 6


def weight_gemm_plan(shape, splits: int | None = None, defines: dict | None = None) -> dict:
    """Version 9's launch: grid (ceil(CKK / WG_BN), ceil(M / 64), S), WG_BN threads, and the span of each split.

    The default S makes GEMM_TARGET_BLOCKS blocks in all (one wave); each split is a multiple of WG_BK pixels.
    """
    N, C, H, W, M, K = layer(shape)
    d = {**WEIGHT_GEMM_DEFINES, **(defines or {})}
    CKK, NP = C * K * K, N * (H - K + 1) * (W - K + 1)
    tiles = blocks_for(CKK, d["WG_BN"]) * blocks_for(M, 64)
    steps = blocks_for(NP, d["WG_BK"])
    if splits is None:
        splits = max(1, min(steps, GEMM_TARGET_BLOCKS // tiles))
    if not 1 <= splits <= steps:
        raise ValueError(f"splits must be between 1 and {steps} (steps of {d['WG_BK']} of the {NP} pixels), got {splits}")
    span = -(-steps // splits) * d["WG_BK"]
    S = -(-NP // span)
    return {"splits": S, "span": span, "grid": (blocks_for(CKK, d["WG_BN"]), blocks_for(M, 64), S),
            "threads": d["WG_BN"], "defines": d}


def backward_weight_bias_gemm(X, dY, K: int, *, splits: int | None = None, defines: dict | None = None, out=None,
                              out_bias=None, prepare_only=False):
    """Versions 9 and 10: ``conv2d_backward_weight_gemm`` (partial dW and db of S splits of the pixels),
    then ``conv2d_backward_split_sum`` (their fixed-order sum); returns (dE/dW, dE/db), deterministic.

    ``defines`` may set WG_BN (taps per tile and threads per block) and WG_BK (pixels per step).
    """
    X, dY, N, C, H, W, M = _weight_operands(X, dY, K)
    plan = weight_gemm_plan({"N": N, "C": C, "H": H, "W": W, "M": M, "K": K}, splits, defines)
    CKK, S = C * K * K, plan["splits"]
    if N * C * H * W >= 2**31 or (N * M * (H - K + 1) * (W - K + 1)) >= 2**31:
        raise ValueError("X or dY has 2^31 elements or more: conv2d_backward_weight_gemm indexes them with int")
    dW = result_array(out, (M, C, K, K), any_layout=True) if out is not None else output_like(X, (M, C, K, K))
    db = result_array(out_bias, (M,), any_layout=True) if out_bias is not None else output_like(X, (M,))
    partial = _workspace(X, "partials", (S, M * CKK + M))
    gemm_kernel = load_topic(TOPIC, plan["defines"]).function("conv2d_backward_weight_gemm")
    first = launch(gemm_kernel, (X, dY, partial, N, C, H, W, M, K, plan["span"]), grid=plan["grid"],
                   block=(plan["threads"], 1, 1), prepare_only=prepare_only)
    count = M * CKK + M
    second = launch(module().function("conv2d_backward_split_sum"), (partial, dW, db, M * CKK, M, S),
                    grid=(_sum_blocks(count), 1, 1), block=(SPLIT_SUM_THREADS, 1, 1), prepare_only=prepare_only)
    if prepare_only:
        return lambda: (first(), second())
    return dW, db


def _sum_blocks(count: int) -> int:
    return max(1, min(blocks_for(count, SPLIT_SUM_THREADS), 4096))


# --------------------------------------------------------------------------- the versions' facts


def _input_launch(shape) -> LaunchConfig:
    """One thread per input pixel, in tiles of TILE_WIDTH x TILE_WIDTH; grid (C, tiles, N)."""
    N, C, H, W, M, K = layer(shape)
    H_grid, W_grid = tile_grid(H, W, TILE_WIDTH)
    return LaunchConfig((C, H_grid * W_grid, N), (TILE_WIDTH, TILE_WIDTH, 1), 0)


def _conv_bytes(shape) -> float:
    return bytes_moved(*layer(shape))


def _conv_flops(shape) -> float:
    return flops(*layer(shape))


def _bias_flops(shape) -> float:
    """One add per element of dY."""
    N, C, H, W, M, K = layer(shape)
    return float(N * M * (H - K + 1) * (W - K + 1))


def _weights(shape) -> int:
    N, C, H, W, M, K = layer(shape)
    return M * C * K * K


def backward_weight_bias_reference(X, dY) -> tuple[np.ndarray, np.ndarray]:
    """(dE/dW, dE/db) in float64: what versions 5 and 9 (+10) return together."""
    return backward_weight_reference(X, dY), backward_bias_reference(dY)


def flip_filters_reference(Wf) -> np.ndarray:
    """What conv2d_backward_flip_filters writes: the transposed filter bank, in float64."""
    return transposed_filters(np.asarray(Wf, np.float64))


def _weight_bias_flops(shape) -> float:
    return _conv_flops(shape) + _bias_flops(shape)


def _weight_split_launch(shape) -> LaunchConfig:
    plan = weight_split_plan(shape)
    return LaunchConfig((layer(shape)[4], plan["splits"], 1), (plan["threads"], 1, 1), plan["shared"])


def _bias_split_launch(shape) -> LaunchConfig:
    return LaunchConfig((layer(shape)[4], bias_split_plan(shape)["splits"], 1), (REDUCE_BLOCK, 1, 1), 0)


def _input_shared_launch(shape) -> LaunchConfig:
    plan = input_shared_plan(shape)
    return LaunchConfig(plan["grid"], plan["block"], plan["shared"])


def _input_fixed_launch(shape) -> LaunchConfig:
    plan = input_fixed_plan(shape)
    return LaunchConfig(plan["grid"], plan["block"], plan["shared"])


def _weight_gemm_launch(shape) -> LaunchConfig:
    plan = weight_gemm_plan(shape)
    return LaunchConfig(plan["grid"], (plan["threads"], 1, 1), 0)


def _split_outputs(shape) -> int:
    return _weights(shape) + layer(shape)[4]


def _split_sum_launch(shape) -> LaunchConfig:
    return LaunchConfig((_sum_blocks(_split_outputs(shape)), 1, 1), (SPLIT_SUM_THREADS, 1, 1), 0)


def _split_sum_bytes(shape) -> float:
    """Read every split's partial dW and db once, write dW and db."""
    return 4.0 * (weight_gemm_plan(shape)["splits"] + 1) * _split_outputs(shape)


def _split_sum_flops(shape) -> float:
    return float(weight_gemm_plan(shape)["splits"] * _split_outputs(shape))


# The gradients do the multiply-adds of the forward convolution and move the same least traffic
# (dY in place of Y, dX or dW in place of X or the filters).
KERNELS = kernel_table(
    KernelVersion(TOPIC, "conv2d_backward_input", backward_input, _input_launch, _conv_bytes, _conv_flops,
                  backward_input_reference, number=1, title="dX, one thread per input pixel"),
    KernelVersion(TOPIC, "conv2d_backward_weight_naive", backward_weight_naive,
                  lambda shape: LaunchConfig((blocks_for(_weights(shape), BLOCK_1D), 1, 1), (BLOCK_1D, 1, 1), 0),
                  _conv_bytes, _conv_flops, backward_weight_reference, number=2, title="dW, one thread per weight"),
    KernelVersion(TOPIC, "conv2d_backward_weight_reduce", backward_weight,
                  lambda shape: LaunchConfig((_weights(shape), 1, 1), (REDUCE_BLOCK, 1, 1), 0),
                  _conv_bytes, _conv_flops, backward_weight_reference, number=3, title="dW, one block per weight"),
    KernelVersion(TOPIC, "conv2d_backward_bias", backward_bias,
                  lambda shape: LaunchConfig((layer(shape)[4], 1, 1), (REDUCE_BLOCK, 1, 1), 0),
                  bytes=lambda shape: 4.0 * _bias_flops(shape), flops=_bias_flops, reference=backward_bias_reference,
                  number=4, title="db, one block per output map"),
    # Versions 5 and 7 compile the filter size in (WB_K, BI_K; 5 by default): their launchers add it per layer.
    KernelVersion(TOPIC, "conv2d_backward_weight_bias_split", backward_weight_bias_split, _weight_split_launch,
                  _conv_bytes, _weight_bias_flops, backward_weight_bias_reference, defines=WEIGHT_SPLIT_DEFINES,
                  number=5, title="dW and db in one launch, the batch split among blocks"),
    KernelVersion(TOPIC, "conv2d_backward_bias_split", backward_bias_split, _bias_split_launch,
                  bytes=lambda shape: 4.0 * _bias_flops(shape), flops=_bias_flops, reference=backward_bias_reference,
                  number=6, title="db alone, the batch split among blocks"),
    KernelVersion(TOPIC, "conv2d_backward_input_shared", backward_input_shared, _input_shared_launch,
                  _conv_bytes, _conv_flops, backward_input_reference, defines=INPUT_SHARED_DEFINES,
                  number=7, title="dX as a full convolution through shared memory"),
    KernelVersion(TOPIC, "conv2d_backward_flip_filters", backward_input_gemm,
                  lambda shape: LaunchConfig((_flip_blocks(_weights(shape)), 1, 1), (BLOCK_1D, 1, 1), 0),
                  bytes=lambda shape: 8.0 * _weights(shape), flops=lambda shape: 0.0, reference=flip_filters_reference,
                  number=8, title="the filter bank transposed and rotated for dX by a forward convolution"),
    KernelVersion(TOPIC, "conv2d_backward_weight_gemm", backward_weight_bias_gemm, _weight_gemm_launch,
                  _conv_bytes, _weight_bias_flops, backward_weight_bias_reference, defines=WEIGHT_GEMM_DEFINES,
                  number=9, title="dW and db of a large layer as an implicit GEMM"),
    KernelVersion(TOPIC, "conv2d_backward_split_sum", backward_weight_bias_gemm, _split_sum_launch,
                  _split_sum_bytes, _split_sum_flops, backward_weight_bias_reference,
                  number=10, title="the fixed-order sum of version 9's partial tiles"),
    # Version 11 compiles the layer's sizes in: its launcher adds BF_M, BF_H, BF_W (LeNet C3's by default).
    KernelVersion(TOPIC, "conv2d_backward_input_fixed", backward_input_fixed, _input_fixed_launch,
                  _conv_bytes, _conv_flops, backward_input_reference, defines=INPUT_SHARED_DEFINES,
                  number=11, title="version 7 with the layer's sizes compiled in"),
    # Version 12 is built per plane size (BP_VEC 4 or 1): the record shows the float4 build.
    KernelVersion(TOPIC, "conv2d_backward_bias_planes", backward_bias_planes, _bias_split_launch,
                  bytes=lambda shape: 4.0 * _bias_flops(shape), flops=_bias_flops, reference=backward_bias_reference,
                  defines={"BP_VEC": 4}, number=12, title="version 6 reading dY four floats per load"),
)
