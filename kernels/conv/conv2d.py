"""The forward convolution of ``kernels/conv/conv2d.cu``: sequential references and one launcher per version.

Shapes (NCHW, as ``torch.nn.functional.conv2d``): ``X`` is ``(N, C, H, W)``,
the filter bank ``Wf`` is ``(M, C, K, K)``, the bias ``b`` is ``(M,)``, and
``Y`` is ``(N, M, H - K + 1, W - K + 1)``: no padding, stride 1.

The references come in the order the chapter builds them: the loops over one
sample (:func:`conv_layer_sequential`), the same loops over a minibatch
(:func:`conv_layer_minibatch`), and a vectorised float64 version the tests
compare against (:func:`forward_reference`).  Every launcher takes NumPy
arrays or device buffers; it returns a new NumPy array, or writes ``out``
(a device buffer or array) and returns it.
"""

from __future__ import annotations

import numpy as np

from ..runtime import DeviceBuffer, Module, blocks_for
from ..runtime.loader import float32_operand, load_topic, result_array
from ..runtime.versions import KernelVersion, as_launch, kernel_table, versions

TOPIC = "conv2d"
TILE_WIDTH = 16  # must equal the #define in conv2d.cu
CONV_MAPS = 8  # output maps per block of conv2d_forward_tiled_multimap (the #define in conv2d.cu)
REG_PIXELS = 4  # output pixels per thread of conv2d_forward_register_tiled (the #define in conv2d.cu)
CONSTANT_CAPACITY = 16384  # floats of filter bank that fit conv_filters (64 KiB of constant memory)
FUSED_BLOCK = 128  # threads per block of the fused kernel
SAMPLE_BLOCK_MAPS = 8  # output maps per block of conv2d_forward_whole_sample (the #define in conv2d.cu)
SAMPLE_MAX_THREADS = 256  # threads per block of conv2d_forward_whole_sample at most (they loop over the work)
SHARED_LIMIT = 48 * 1024  # bytes of dynamic shared memory a block may have without opting in to more
ACTIVATIONS = {"none": 0, "relu": 1, "tanh": 2, "sigmoid": 3}  # the codes of conv2d_bias_act_pool_fused


def module() -> Module:
    """``conv2d.cu`` compiled once per backend."""
    return load_topic(TOPIC)


# --------------------------------------------------------------------------- references


def output_shape(x_shape, w_shape) -> tuple[int, int, int, int]:
    """``(N, M, H_out, W_out)`` of a valid (unpadded, stride 1) convolution, with the shapes checked."""
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ValueError(f"X must be (N, C, H, W) and the filters (M, C, K, K); got {tuple(x_shape)} and {tuple(w_shape)}")
    N, C, H, W = (int(s) for s in x_shape)
    M, C_w, K, K2 = (int(s) for s in w_shape)
    if C_w != C:
        raise ValueError(f"X has {C} input maps but the filter bank expects {C_w}")
    if K != K2:
        raise ValueError(f"filters must be square, got {K} x {K2}")
    if K > H or K > W:
        raise ValueError(f"a {K} x {K} filter does not fit a {H} x {W} map")
    return N, M, H - K + 1, W - K + 1


def conv_layer_sequential(X, Wf, b=None) -> np.ndarray:
    """One sample: ``X[C, H, W]``, ``Wf[M, C, K, K]`` -> ``Y[M, H-K+1, W-K+1]``, as plain loops (slow)."""
    X, Wf = np.asarray(X, np.float64), np.asarray(Wf, np.float64)
    C, H, W = X.shape
    M, _, K, _ = Wf.shape
    H_out, W_out = H - K + 1, W - K + 1
    Y = np.zeros((M, H_out, W_out))
    for m in range(M):  # for each output feature map
        for h in range(H_out):  # for each output pixel
            for w in range(W_out):
                Y[m, h, w] = 0.0 if b is None else b[m]
                for c in range(C):  # sum over all input feature maps
                    for p in range(K):  # K x K filter
                        for q in range(K):
                            Y[m, h, w] += X[c, h + p, w + q] * Wf[m, c, p, q]
    return Y


def conv_layer_minibatch(X, Wf, b=None) -> np.ndarray:
    """A minibatch ``X[N, C, H, W]``: the loops of :func:`conv_layer_sequential` inside a loop over samples."""
    N = X.shape[0]
    _, M, H_out, W_out = output_shape(X.shape, Wf.shape)
    Y = np.zeros((N, M, H_out, W_out))
    for n in range(N):  # the samples are independent: another dimension of parallelism
        Y[n] = conv_layer_sequential(X[n], Wf, b)
    return Y


def forward_reference(X, Wf, b=None) -> np.ndarray:
    """Y in float64, vectorised: every K x K window of X against every filter."""
    X = np.asarray(X, np.float64)
    Wf = np.asarray(Wf, np.float64)
    output_shape(X.shape, Wf.shape)
    K = Wf.shape[2]
    windows = np.lib.stride_tricks.sliding_window_view(X, (K, K), axis=(2, 3))  # N, C, H_out, W_out, K, K
    Y = np.einsum("nchwpq,mcpq->nmhw", windows, Wf, optimize=True)
    if b is not None:
        Y += np.asarray(b, np.float64)[None, :, None, None]
    return Y


def activation_reference(name: str, Z) -> np.ndarray:
    Z = np.asarray(Z, np.float64)
    if name == "none":
        return Z
    if name == "relu":
        return np.maximum(Z, 0.0)
    if name == "tanh":
        return np.tanh(Z)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-Z))
    raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")


def fused_reference(X, Wf, b, activation: str = "relu") -> np.ndarray:
    """Convolution + bias, activation, 2 x 2 max pooling (floor), in float64."""
    A = activation_reference(activation, forward_reference(X, Wf, b))
    N, M, H_out, W_out = A.shape
    Hp, Wp = H_out // 2, W_out // 2
    return A[:, :, : 2 * Hp, : 2 * Wp].reshape(N, M, Hp, 2, Wp, 2).max(axis=(3, 5))


def flops(N, C, H, W, M, K) -> float:
    """Multiply-adds of the convolution, counted as 2 flops each."""
    return 2.0 * N * M * (H - K + 1) * (W - K + 1) * C * K * K


def bytes_moved(N, C, H, W, M, K) -> float:
    """The least the convolution must move: read X and the filters once, write Y once (float32)."""
    return 4.0 * (N * C * H * W + M * C * K * K + M + N * M * (H - K + 1) * (W - K + 1))


# --------------------------------------------------------------------------- launchers


def _host(a) -> np.ndarray:
    return a.get() if isinstance(a, DeviceBuffer) else np.ascontiguousarray(a, dtype=np.float32)


def tile_grid(H_out: int, W_out: int, tile: int = TILE_WIDTH) -> tuple[int, int]:
    """``(H_grid, W_grid)``: the tiles of ``tile`` x ``tile`` pixels that cover an output map."""
    return blocks_for(H_out, tile), blocks_for(W_out, tile)


def _prepare(X, Wf, b):
    X, Wf = float32_operand(X), float32_operand(Wf)
    N, M, H_out, W_out = output_shape(X.shape, Wf.shape)
    b = np.zeros(M, np.float32) if b is None else float32_operand(b)
    if tuple(b.shape) != (M,):
        raise ValueError(f"the bias has shape {tuple(b.shape)}, expected ({M},)")
    _, C, H, W = (int(s) for s in X.shape)
    K = int(Wf.shape[2])
    return X, Wf, b, (N, C, H, W, M, K), (N, M, H_out, W_out)


def grid_width(version: str, W_out: int) -> int:
    """``W_grid``, the tiles across an output map, as a version's kernel expects it."""
    columns = TILE_WIDTH * REG_PIXELS if version == "register_tiled" else TILE_WIDTH
    return blocks_for(W_out, columns)


def launch_config(version: str, N, C, H, W, M, K):
    """``(grid, block, shared_bytes)`` of a version for a layer."""
    H_grid, W_grid = tile_grid(H - K + 1, W - K + 1)
    block = (TILE_WIDTH, TILE_WIDTH)
    halo = (TILE_WIDTH + K - 1) ** 2
    if version == "register_tiled":
        W_grid = grid_width(version, W - K + 1)
        tile = (TILE_WIDTH + K - 1) * (TILE_WIDTH * REG_PIXELS + K - 1)
        return (blocks_for(M, CONV_MAPS), H_grid * W_grid, N), block, 4 * (tile + CONV_MAPS * K * K)
    if version in ("naive", "constant"):
        return (M, H_grid * W_grid, N), block, 0
    if version == "tiled":
        return (M, H_grid * W_grid, N), block, 4 * (halo + K * K)
    if version == "tiled_multimap":
        return (blocks_for(M, CONV_MAPS), H_grid * W_grid, N), block, 4 * (halo + CONV_MAPS * K * K)
    if version == "fused":
        count = N * M * ((H - K + 1) // 2) * ((W - K + 1) // 2)
        return blocks_for(count, FUSED_BLOCK), FUSED_BLOCK, 0
    if version == "whole_sample":
        # One work item per pair of maps and 2 x 2 quad of outputs; as many threads as the items of a
        # block (a whole number of warps), at most SAMPLE_MAX_THREADS (the threads then loop).
        items = blocks_for(min(M, SAMPLE_BLOCK_MAPS), 2) * blocks_for(H - K + 1, 2) * blocks_for(W - K + 1, 2)
        threads = min(SAMPLE_MAX_THREADS, 32 * blocks_for(items, 32))
        return (blocks_for(M, SAMPLE_BLOCK_MAPS), N), threads, whole_sample_shared_bytes(C, H, W, K)
    raise ValueError(f"unknown version {version!r}")


def whole_sample_shared_bytes(C, H, W, K) -> int:
    """Dynamic shared memory of ``conv2d_forward_whole_sample``: a sample (+ W + 2 zeros) and 8 maps' filters."""
    sample = -(-(C * H * W + W + 2) // 4) * 4
    return 4 * (sample + SAMPLE_BLOCK_MAPS * C * K * K)


def whole_sample_fits(C, H, W, K) -> bool:
    """Whether a layer's sample and a block's filters fit the shared memory of one block (version 7)."""
    return whole_sample_shared_bytes(C, H, W, K) <= SHARED_LIMIT


def set_constant_filters(Wf) -> None:
    """Copy a filter bank into ``conv_filters`` (constant memory) for versions 2 and 5."""
    host = _host(Wf)
    if host.size > CONSTANT_CAPACITY:
        raise ValueError(
            f"the filter bank has {host.size} floats; constant memory holds {CONSTANT_CAPACITY} (64 KiB). "
            f"Use a version that reads the filters from global memory."
        )
    module().set_constant("conv_filters", host)


def _launch(version: str, kernel: str, X, Wf, b, out, with_filters: bool = True):
    X, Wf, b, dims, y_shape = _prepare(X, Wf, b)
    N, C, H, W, M, K = dims
    Y = result_array(out, y_shape, any_layout=True)
    grid, block, shared = launch_config(version, *dims)
    W_grid = grid_width(version, W - K + 1)
    args = (X, Wf, b, Y) if with_filters else (X, b, Y)
    module().function(kernel)(*args, N, C, H, W, M, K, W_grid, grid=grid, block=block, shared=shared)
    return Y


def forward_naive(X, Wf, b=None, out=None):
    """Version 1: ``conv2d_forward_naive``; one thread per output pixel."""
    return _launch("naive", "conv2d_forward_naive", X, Wf, b, out)


def forward_constant(X, Wf, b=None, out=None):
    """Version 2: ``conv2d_forward_constant``; the filter bank in constant memory (at most 16384 floats)."""
    set_constant_filters(Wf)
    return _launch("constant", "conv2d_forward_constant", X, Wf, b, out, with_filters=False)


def forward_tiled(X, Wf, b=None, out=None):
    """Version 3: ``conv2d_forward_tiled``; input tile and filter in shared memory."""
    return _launch("tiled", "conv2d_forward_tiled", X, Wf, b, out)


def forward_tiled_multimap(X, Wf, b=None, out=None):
    """Version 4: ``conv2d_forward_tiled_multimap``; CONV_MAPS output maps per block."""
    return _launch("tiled_multimap", "conv2d_forward_tiled_multimap", X, Wf, b, out)


def forward_register_tiled(X, Wf, b=None, out=None):
    """Version 5: ``conv2d_forward_register_tiled``; CONV_MAPS maps x REG_PIXELS pixels per thread."""
    return _launch("register_tiled", "conv2d_forward_register_tiled", X, Wf, b, out)


def forward_fused(X, Wf, b=None, activation: str = "relu", out=None):
    """Version 6: ``conv2d_bias_act_pool_fused``; convolution + bias, activation and 2 x 2 max pooling."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTIVATIONS)}")
    X, Wf, b, dims, (N, M, H_out, W_out) = _prepare(X, Wf, b)
    N, C, H, W, M, K = dims
    if H_out < 2 or W_out < 2:
        raise ValueError(f"a {H_out} x {W_out} output is too small for 2 x 2 pooling")
    set_constant_filters(Wf)
    P = result_array(out, (N, M, H_out // 2, W_out // 2), any_layout=True)
    grid, block, _ = launch_config("fused", *dims)
    module().function("conv2d_bias_act_pool_fused")(X, b, P, N, C, H, W, M, K, ACTIVATIONS[activation],
                                                    grid=grid, block=block)
    return P


def _launch_whole_sample(X, Wf, b, activation: str, pool: bool, out):
    X, Wf, b, dims, (N, M, H_out, W_out) = _prepare(X, Wf, b)
    N, C, H, W, M, K = dims
    if not whole_sample_fits(C, H, W, K):
        raise ValueError(
            f"a sample of {C} x {H} x {W} and {SAMPLE_BLOCK_MAPS} maps of {C} x {K} x {K} filters need "
            f"{whole_sample_shared_bytes(C, H, W, K)} bytes of shared memory; a block has {SHARED_LIMIT}. "
            f"Use a tiled version for layers this large."
        )
    if pool and (H_out < 2 or W_out < 2):
        raise ValueError(f"a {H_out} x {W_out} output is too small for 2 x 2 pooling")
    Y = result_array(out, (N, M, H_out // 2, W_out // 2) if pool else (N, M, H_out, W_out), any_layout=True)
    grid, block, shared = launch_config("whole_sample", *dims)
    module().function("conv2d_forward_whole_sample")(X, Wf, b, Y, N, C, H, W, M, K, ACTIVATIONS[activation],
                                                     int(pool), grid=grid, block=block, shared=shared)
    return Y


def forward_whole_sample(X, Wf, b=None, out=None):
    """Version 7: ``conv2d_forward_whole_sample``; a block per (sample, 8 maps), 2 x 2 outputs of 2 maps per thread.

    For small layers: the sample and 8 maps' filters must fit 48 KiB of shared memory (ValueError otherwise).
    """
    return _launch_whole_sample(X, Wf, b, "none", False, out)


def forward_whole_sample_fused(X, Wf, b=None, activation: str = "relu", out=None):
    """Version 7 with bias, activation and 2 x 2 max pooling fused (the same kernel, ``pool`` = 1)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTIVATIONS)}")
    return _launch_whole_sample(X, Wf, b, activation, True, out)


# --------------------------------------------------------------------------- the versions' facts

LAYER_AXES = ("N", "C", "H", "W", "M", "K")  # a layer's sizes: samples, input maps, map height and width, output maps, filter


def layer(shape) -> tuple[int, int, int, int, int, int]:
    """``(N, C, H, W, M, K)`` of a shape dict."""
    return tuple(int(shape[a]) for a in LAYER_AXES)


def _forward_facts(version: str, kernel: str, launcher, number: int, title: str) -> KernelVersion:
    """The record of a version that computes the convolution + bias (``version``, its key, names its launch)."""
    return KernelVersion(
        TOPIC, kernel, launcher,
        launch=lambda shape: as_launch(*launch_config(version, *layer(shape))),
        bytes=lambda shape: bytes_moved(*layer(shape)), flops=lambda shape: flops(*layer(shape)),
        reference=forward_reference, number=number, title=title, key=version,
    )


def fused_bytes_moved(shape) -> float:
    """Least traffic of version 6: X and the filters and bias in, the pooled output (a quarter of Y) out."""
    N, C, H, W, M, K = layer(shape)
    return 4.0 * (N * C * H * W + M * C * K * K + M + N * M * ((H - K + 1) // 2) * ((W - K + 1) // 2))


def _fused_facts() -> KernelVersion:
    """Version 6 with ReLU, the activation its launcher uses by default (and LeNet's)."""
    return KernelVersion(
        TOPIC, "conv2d_bias_act_pool_fused", forward_fused,
        launch=lambda shape: as_launch(*launch_config("fused", *layer(shape))),
        bytes=fused_bytes_moved, flops=lambda shape: flops(*layer(shape)),
        reference=lambda X, Wf, b: fused_reference(X, Wf, b, "relu"),
        number=6, title="convolution, bias, activation and 2 x 2 max pooling in one launch", key="fused",
    )


KERNELS = kernel_table(
    _forward_facts("naive", "conv2d_forward_naive", forward_naive, 1, "one thread per output pixel"),
    _forward_facts("constant", "conv2d_forward_constant", forward_constant, 2, "the filter bank in constant memory"),
    _forward_facts("tiled", "conv2d_forward_tiled", forward_tiled, 3, "input tiles in shared memory"),
    _forward_facts("tiled_multimap", "conv2d_forward_tiled_multimap", forward_tiled_multimap, 4,
                   "CONV_MAPS output maps per block"),
    _forward_facts("register_tiled", "conv2d_forward_register_tiled", forward_register_tiled, 5,
                   "register tiling: REG_PIXELS pixels of CONV_MAPS maps per thread"),
    _fused_facts(),
    _forward_facts("whole_sample", "conv2d_forward_whole_sample", forward_whole_sample, 7,
                   "whole samples in shared memory, a 2 x 2 quad of outputs of 2 maps per thread"),
)

#: The versions that compute the convolution + bias (all but the fused one), by key, in teaching order.
FORWARDS = {key: v.launcher for key, v in versions(KERNELS).items() if v.reference is forward_reference}
#: The kernel of every version, by key.
KERNEL_NAMES = {key: v.kernel for key, v in versions(KERNELS).items()}
