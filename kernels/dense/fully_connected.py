"""The fully connected layer of ``kernels/dense/fully_connected.cu``: NumPy references and one launcher per version.

Shapes: ``X`` is ``(n, in_features)``, ``W`` is ``(out_features, in_features)``
(one row per output neuron, as ``torch.nn.Linear``), ``b`` is
``(out_features,)``, ``Y = X W^T + b`` is ``(n, out_features)``.

Every launcher takes NumPy arrays or device buffers; it returns a new NumPy
array, or writes ``out`` (a device buffer or array) and returns it, so a
network can keep all its activations on the device.
"""

from __future__ import annotations

import numpy as np

from ..gemm import sgemm
from ..runtime import DeviceBuffer, Module, blocks_for
from ..runtime.loader import float32_operand, load_topic, result_array
from ..runtime.module import to_device
from ..runtime.versions import KernelVersion, LaunchConfig, as_launch, kernel_table

TOPIC = "fully_connected"
BLOCK_1D = 128  # threads per block of the one-dimensional kernels
BLOCK_2D = (16, 16)  # threads per block of the naive two-dimensional kernels
FC_TILE = 16  # must equal the #define in fully_connected.cu


def module() -> Module:
    """``fully_connected.cu`` compiled once per backend."""
    return load_topic(TOPIC)


def _shapes(X, W):
    if len(X.shape) != 2 or len(W.shape) != 2:
        raise ValueError(f"X and W must be matrices, got shapes {X.shape} and {W.shape}")
    n, in_features = X.shape
    out_features, w_in = W.shape
    if w_in != in_features:
        raise ValueError(f"X has {in_features} features per sample but W expects {w_in} (W is out x in)")
    return int(n), int(in_features), int(out_features)


def _grid_2d(columns: int, rows: int, block=BLOCK_2D):
    return (blocks_for(columns, block[0]), blocks_for(rows, block[1]))


# --------------------------------------------------------------------------- NumPy references (float64)


def forward_reference(X, W, b) -> np.ndarray:
    return np.asarray(X, np.float64) @ np.asarray(W, np.float64).T + np.asarray(b, np.float64)


def matvec_reference(W, b, x) -> np.ndarray:
    """y = W x + b for one sample ``x`` (version 1's arguments, in its order)."""
    return np.asarray(W, np.float64) @ np.asarray(x, np.float64) + np.asarray(b, np.float64)


def backward_input_reference(dY, W) -> np.ndarray:
    """dE/dX = dE/dY W  (for one sample, W^T dE/dy)."""
    return np.asarray(dY, np.float64) @ np.asarray(W, np.float64)


def backward_weight_reference(dY, X) -> np.ndarray:
    """dE/dW = dE/dY^T X: the sum over samples of the outer products dE/dy x^T."""
    return np.asarray(dY, np.float64).T @ np.asarray(X, np.float64)


def backward_bias_reference(dY) -> np.ndarray:
    return np.asarray(dY, np.float64).sum(axis=0)


# --------------------------------------------------------------------------- launchers


def forward_matvec(W, b, x, out=None):
    """Version 1: ``fc_forward_matvec``; y = W x + b for one sample ``x``."""
    W, b, x = float32_operand(W), float32_operand(b), float32_operand(x)
    out_features, in_features = (int(s) for s in W.shape)
    y = result_array(out, (out_features,))
    module().function("fc_forward_matvec")(W, b, x, y, in_features, out_features,
                                           grid=blocks_for(out_features, BLOCK_1D), block=BLOCK_1D)
    return y


def _forward_operands(X, W, b, out):
    """X, W, b as float32, the Y to fill and (n, in_features, out_features): what versions 2 and 3 take."""
    X, W, b = float32_operand(X), float32_operand(W), float32_operand(b)
    n, in_features, out_features = _shapes(X, W)
    return X, W, b, result_array(out, (n, out_features)), (n, in_features, out_features)


def forward_naive(X, W, b, out=None):
    """Version 2: ``fc_forward_naive``; one thread per element of Y."""
    X, W, b, Y, (n, in_features, out_features) = _forward_operands(X, W, b, out)
    module().function("fc_forward_naive")(X, W, b, Y, n, in_features, out_features,
                                          grid=_grid_2d(out_features, n), block=BLOCK_2D)
    return Y


def forward_tiled(X, W, b, out=None):
    """Version 3: ``fc_forward_tiled``; FC_TILE x FC_TILE tiles in shared memory."""
    X, W, b, Y, (n, in_features, out_features) = _forward_operands(X, W, b, out)
    module().function("fc_forward_tiled")(X, W, b, Y, n, in_features, out_features,
                                          grid=_grid_2d(out_features, n, (FC_TILE, FC_TILE)), block=(FC_TILE, FC_TILE))
    return Y


def backward_input(dY, W, out=None):
    """Version 4: ``fc_backward_input``; dX = dY W."""
    dY, W = float32_operand(dY), float32_operand(W)
    out_features, in_features = (int(s) for s in W.shape)
    n = int(dY.shape[0])
    if tuple(dY.shape) != (n, out_features):
        raise ValueError(f"dY has shape {tuple(dY.shape)}, expected (n, {out_features})")
    dX = result_array(out, (n, in_features))
    module().function("fc_backward_input")(dY, W, dX, n, in_features, out_features,
                                           grid=_grid_2d(in_features, n), block=BLOCK_2D)
    return dX


def backward_weight(dY, X, out=None):
    """Version 5: ``fc_backward_weight``; dW = dY^T X."""
    dY, X = float32_operand(dY), float32_operand(X)
    n, in_features = (int(s) for s in X.shape)
    out_features = int(dY.shape[1])
    if int(dY.shape[0]) != n:
        raise ValueError(f"dY has {dY.shape[0]} rows but X has {n} samples")
    dW = result_array(out, (out_features, in_features))
    module().function("fc_backward_weight")(dY, X, dW, n, in_features, out_features,
                                            grid=_grid_2d(in_features, out_features), block=BLOCK_2D)
    return dW


def backward_bias(dY, out=None):
    """Version 6: ``fc_backward_bias``; db = column sums of dY."""
    dY = float32_operand(dY)
    n, out_features = (int(s) for s in dY.shape)
    db = result_array(out, (out_features,))
    module().function("fc_backward_bias")(dY, db, n, out_features,
                                          grid=blocks_for(out_features, BLOCK_1D), block=BLOCK_1D)
    return db


# --------------------------------------------------------------------------- on the GEMM chapter's kernels


def _on_device(a):
    return a if isinstance(a, DeviceBuffer) else to_device(np.ascontiguousarray(a, dtype=np.float32))


def _returned(result, out, *inputs):
    """A NumPy array when every input was one and no ``out`` was given, else the device buffer."""
    if out is None and not any(isinstance(a, DeviceBuffer) for a in inputs):
        return result.get()
    if out is not None and not isinstance(out, DeviceBuffer):
        out[...] = result.get()
        return out
    return result


def _device_out(out, shape):
    if out is not None and tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)}, the result has shape {tuple(shape)}")
    return out if isinstance(out, DeviceBuffer) else None


def forward_gemm(X, W, b, out=None, *, Wt=None):
    """Version 7: Y = X W^T + b by the GEMM chapter's kernels (:func:`kernels.gemm.sgemm.fc_forward`: W transposed,
    the fastest SGEMM for the shape, the bias added in the GEMM's store).  ``Wt``: an (in, out) device buffer
    to transpose W into (allocated when not given)."""
    n, in_features, out_features = _shapes(X, W)
    if tuple(b.shape) != (out_features,):
        raise ValueError(f"b must hold one bias per output feature ({out_features}), got shape {tuple(b.shape)}")
    Y = sgemm.fc_forward(_on_device(X), _on_device(W), _on_device(b), Wt=Wt,
                         out=_device_out(out, (n, out_features)))
    return _returned(Y, out, X, W, b)


def backward_input_gemm(dY, W, out=None):
    """Version 8: dX = dY W by the GEMM chapter's kernels (both operands row-major as they are)."""
    out_features, in_features = (int(s) for s in W.shape)
    n = int(dY.shape[0])
    if tuple(dY.shape) != (n, out_features):
        raise ValueError(f"dY has shape {tuple(dY.shape)}, expected (n, {out_features})")
    dX = sgemm.fc_backward_input(_on_device(dY), _on_device(W), out=_device_out(out, (n, in_features)))
    return _returned(dX, out, dY, W)


def backward_weight_gemm(dY, X, out=None):
    """Version 9: dW = dY^T X by the GEMM chapter's kernels: version 8 reads dY as it is (as the transposed
    operand), and splits the long K = n among blocks when the tiles alone are too few."""
    n, in_features = (int(s) for s in X.shape)
    out_features = int(dY.shape[1])
    if int(dY.shape[0]) != n:
        raise ValueError(f"dY has {dY.shape[0]} rows but X has {n} samples")
    dW = sgemm.fc_backward_weight(_on_device(dY), _on_device(X), out=_device_out(out, (out_features, in_features)))
    return _returned(dW, out, dY, X)


FORWARDS = {"naive": forward_naive, "tiled": forward_tiled, "gemm": forward_gemm}


# --------------------------------------------------------------------------- the versions' facts


def layer(shape) -> tuple[int, int, int]:
    """``(n, in, out)``: samples, input features, output features of a shape dict."""
    return int(shape["n"]), int(shape["in"]), int(shape["out"])


def _matmul_flops(shape) -> float:
    return 2.0 * float(np.prod(layer(shape)))


def _matmul_bytes(shape) -> float:
    """Two matrices read once, one written once (the bias is negligible)."""
    n, k, m = layer(shape)
    return 4.0 * (n * (k + m) + k * m)


def _per_output(shape) -> LaunchConfig:
    """Versions 1 and 6: one thread per output neuron."""
    return as_launch(blocks_for(layer(shape)[2], BLOCK_1D), BLOCK_1D)


def _matvec_bytes(shape) -> float:
    """W, x and b read once, y written once."""
    _, k, m = layer(shape)
    return 4.0 * (k * m + k + 2 * m)


def _naive_2d(columns, rows):
    return lambda shape: as_launch(_grid_2d(columns(*layer(shape)), rows(*layer(shape))), BLOCK_2D)


KERNELS = kernel_table(
    # version 1 is one sample's product: n is 1
    KernelVersion(TOPIC, "fc_forward_matvec", forward_matvec, _per_output, _matvec_bytes,
                  lambda shape: 2.0 * layer(shape)[1] * layer(shape)[2], matvec_reference,
                  number=1, title="one sample: y = W x + b, one thread per output"),
    KernelVersion(TOPIC, "fc_forward_naive", forward_naive, _naive_2d(lambda n, k, m: m, lambda n, k, m: n),
                  _matmul_bytes, _matmul_flops, forward_reference,
                  number=2, title="a minibatch: one thread per element of Y"),
    KernelVersion(TOPIC, "fc_forward_tiled", forward_tiled,
                  lambda shape: as_launch(_grid_2d(layer(shape)[2], layer(shape)[0], (FC_TILE, FC_TILE)), (FC_TILE, FC_TILE)),
                  _matmul_bytes, _matmul_flops, forward_reference,
                  number=3, title="the same product through shared-memory tiles"),
    KernelVersion(TOPIC, "fc_backward_input", backward_input, _naive_2d(lambda n, k, m: k, lambda n, k, m: n),
                  _matmul_bytes, _matmul_flops, backward_input_reference, number=4, title="dX = dY W"),
    KernelVersion(TOPIC, "fc_backward_weight", backward_weight, _naive_2d(lambda n, k, m: k, lambda n, k, m: m),
                  _matmul_bytes, _matmul_flops, backward_weight_reference, number=5, title="dW = dY^T X"),
    KernelVersion(TOPIC, "fc_backward_bias", backward_bias, _per_output,
                  lambda shape: 4.0 * (layer(shape)[0] + 1) * layer(shape)[2],  # dY read once, db written
                  lambda shape: float(layer(shape)[0] * layer(shape)[2]), backward_bias_reference,
                  number=6, title="db, the sum of dY over the minibatch"),
)
