"""The backward pass of a convolutional layer (``kernels/conv2d_backward.cu``): references and launchers.

Shapes as in :mod:`kernels.conv2d`: ``X`` ``(N, C, H, W)``, filters ``Wf``
``(M, C, K, K)``, ``dY = dE/dY`` ``(N, M, H - K + 1, W - K + 1)``.
:func:`backward_input` gives ``dE/dX``, :func:`backward_weight` (two
versions) ``dE/dW`` summed over the minibatch, :func:`backward_bias` ``dE/db``.
"""

from __future__ import annotations

import numpy as np

from .conv2d import bytes_moved, flops, layer, output_shape, tile_grid
from .runtime import Module, blocks_for
from .runtime.loader import float32_operand, load_topic, result_array
from .runtime.versions import KernelVersion, LaunchConfig, kernel_table

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
    from .conv2d import forward_reference

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
    X, dY = float32_operand(X), float32_operand(dY)
    N, C, H, W = (int(s) for s in X.shape)
    M = int(np.prod(dY.shape)) // (N * (H - K + 1) * (W - K + 1))
    _dims(X.shape, dY, (M, C, K, K))
    dW = result_array(out, (M, C, K, K), any_layout=True)
    module().function("conv2d_backward_weight_naive")(X, dY, dW, N, C, H, W, M, K,
                                                      grid=blocks_for(M * C * K * K, BLOCK_1D), block=BLOCK_1D)
    return dW


def backward_weight(X, dY, K: int, out=None):
    """Version 3: ``conv2d_backward_weight_reduce``; one block per weight, a shared-memory reduction."""
    X, dY = float32_operand(X), float32_operand(dY)
    N, C, H, W = (int(s) for s in X.shape)
    M = int(np.prod(dY.shape)) // (N * (H - K + 1) * (W - K + 1))
    _dims(X.shape, dY, (M, C, K, K))
    dW = result_array(out, (M, C, K, K), any_layout=True)
    module().function("conv2d_backward_weight_reduce")(X, dY, dW, N, C, H, W, M, K,
                                                       grid=M * C * K * K, block=REDUCE_BLOCK)
    return dW


def backward_bias(dY, out=None):
    """Version 4: ``conv2d_backward_bias``; one block per output map.

    ``dY`` is ``(N, M, H_out, W_out)``, or ``(N, M)`` for maps of one pixel.
    """
    dY = float32_operand(dY)
    if len(dY.shape) not in (2, 4):
        raise ValueError(f"dY must be (N, M, H_out, W_out) or (N, M), got shape {tuple(dY.shape)}")
    N, M, H_out, W_out = (tuple(int(s) for s in dY.shape) + (1, 1))[:4]
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

WEIGHT_VERSIONS = {"naive": backward_weight_naive, "reduce": backward_weight, "auto": backward_weight_auto}


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


# The gradients do the multiply-adds of the forward convolution and move the same least traffic
# (dY in place of Y, dX or dW in place of X or the filters).
KERNELS = kernel_table(
    KernelVersion(TOPIC, "conv2d_backward_input", backward_input, _input_launch, _conv_bytes, _conv_flops,
                  backward_input_reference),
    KernelVersion(TOPIC, "conv2d_backward_weight_naive", backward_weight_naive,
                  lambda shape: LaunchConfig((blocks_for(_weights(shape), BLOCK_1D), 1, 1), (BLOCK_1D, 1, 1), 0),
                  _conv_bytes, _conv_flops, backward_weight_reference),
    KernelVersion(TOPIC, "conv2d_backward_weight_reduce", backward_weight,
                  lambda shape: LaunchConfig((_weights(shape), 1, 1), (REDUCE_BLOCK, 1, 1), 0),
                  _conv_bytes, _conv_flops, backward_weight_reference),
    KernelVersion(TOPIC, "conv2d_backward_bias", backward_bias,
                  lambda shape: LaunchConfig((layer(shape)[4], 1, 1), (REDUCE_BLOCK, 1, 1), 0),
                  bytes=lambda shape: 4.0 * _bias_flops(shape), flops=_bias_flops, reference=backward_bias_reference),
)
