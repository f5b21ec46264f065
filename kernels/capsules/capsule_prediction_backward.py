"""Gradients of the capsule prediction (``kernels/capsules/capsule_prediction_backward.cu``): references and launchers.

With ``G = dE/du_hat`` of shape ``(batch, in_caps, out_caps, out_dim)``:

* ``grad_input(G, W)`` is ``dE/du``, shape ``(batch, in_caps, in_dim)``;
* ``grad_weight(G, u)`` is ``dE/dW``, shape ``(in_caps, out_caps, out_dim, in_dim)``;
* ``grad_fused(G, W, u)`` returns both from one pass over ``G``.

With device buffers and ``sync=False`` a launcher only queues the kernel
(what the benchmarks time).
"""

from __future__ import annotations

import numpy as np

from .capsule_prediction import dims, flops, register_block_shape
from ..runtime import Module, blocks_for
from ..runtime.loader import float32_operand, load_topic, result_array
from ..runtime.versions import KernelVersion, LaunchConfig, kernel_table

TOPIC = "capsule_prediction_backward"
CAPS_GRAD_BATCH_TILE = 128  # must equal the #define in capsule_prediction_backward.cu
CAPS_FUSED_TILE = 32  # must equal the #define in capsule_prediction_backward.cu
FUSED_THREADS = 320  # block size of the fused kernel when ROW <= 320 (ROW threads, rounded up to a warp, otherwise)
NAIVE_BLOCK = 256
SHARED_LIMIT = 48 * 1024  # dynamic shared memory a block gets without opting in


def module(in_dim: int = 8) -> Module:
    """``capsule_prediction_backward.cu`` compiled once per backend and ``in_dim``."""
    return load_topic(TOPIC, defines={"CAPS_IN_DIM": int(in_dim)})


def _grad_shapes(grad_u_hat, in_dim: int):
    if len(grad_u_hat.shape) != 4:
        raise ValueError(f"grad_u_hat must be (batch, in_caps, out_caps, out_dim), got {tuple(grad_u_hat.shape)}")
    batch, in_caps, out_caps, out_dim = (int(s) for s in grad_u_hat.shape)
    return batch, in_caps, int(in_dim), out_caps, out_dim


def _check_W(W, in_caps, out_caps, out_dim) -> int:
    if len(W.shape) != 4 or tuple(int(s) for s in W.shape[:3]) != (in_caps, out_caps, out_dim):
        raise ValueError(f"W has shape {tuple(W.shape)}, expected ({in_caps}, {out_caps}, {out_dim}, in_dim)")
    return int(W.shape[3])


def _check_u(u, batch, in_caps) -> int:
    if len(u.shape) != 3 or tuple(int(s) for s in u.shape[:2]) != (batch, in_caps):
        raise ValueError(f"u has shape {tuple(u.shape)}, expected ({batch}, {in_caps}, in_dim)")
    return int(u.shape[2])


# --------------------------------------------------------------------------- NumPy references (float64)


def grad_input_reference(grad_u_hat, W) -> np.ndarray:
    """``du[b, i, k] = sum_{j, d} W[i, j, d, k] G[b, i, j, d]``: W^T dE/dz for every (b, i)."""
    return np.einsum("ijdk,bijd->bik", np.asarray(W, np.float64), np.asarray(grad_u_hat, np.float64))


def grad_weight_reference(grad_u_hat, u) -> np.ndarray:
    """``dW[i, j, d, k] = sum_b G[b, i, j, d] u[b, i, k]``: (dE/dz) x^T summed over the batch."""
    return np.einsum("bijd,bik->ijdk", np.asarray(grad_u_hat, np.float64), np.asarray(u, np.float64))


# --------------------------------------------------------------------------- launchers


def _naive_grid(elements: int) -> int:
    """Blocks of versions 1 and 2 for a grid-stride loop over ``elements``: never more than the work needs."""
    return max(1, min(blocks_for(elements, NAIVE_BLOCK), 65535))


def _launch_naive(kernel: str, grad_u_hat, operand, result, dims, elements: int, sync):
    """Versions 1 and 2 take the same arguments and launch: one thread per element of ``result``."""
    batch, in_caps, in_dim, out_caps, out_dim = dims
    module(in_dim).function(kernel)(grad_u_hat, operand, result, batch, in_caps, in_dim, out_caps, out_dim,
                                    grid=_naive_grid(elements), block=NAIVE_BLOCK, sync=sync)
    return result


def grad_input_naive(grad_u_hat, W, out=None, sync=True):
    """Version 1: ``capsule_grad_input_naive``; one thread per element of du."""
    grad_u_hat, W = float32_operand(grad_u_hat), float32_operand(W)
    batch, in_caps, _, out_caps, out_dim = _grad_shapes(grad_u_hat, 0)
    in_dim = _check_W(W, in_caps, out_caps, out_dim)
    du = result_array(out, (batch, in_caps, in_dim))
    return _launch_naive("capsule_grad_input_naive", grad_u_hat, W, du, (batch, in_caps, in_dim, out_caps, out_dim),
                         batch * in_caps * in_dim, sync)


def grad_weight_naive(grad_u_hat, u, out=None, sync=True):
    """Version 2: ``capsule_grad_weight_naive``; one thread per element of dW, a loop over the batch."""
    grad_u_hat, u = float32_operand(grad_u_hat), float32_operand(u)
    batch, in_caps, _, out_caps, out_dim = _grad_shapes(grad_u_hat, 0)
    in_dim = _check_u(u, batch, in_caps)
    dW = result_array(out, (in_caps, out_caps, out_dim, in_dim))
    return _launch_naive("capsule_grad_weight_naive", grad_u_hat, u, dW, (batch, in_caps, in_dim, out_caps, out_dim),
                         in_caps * out_caps * out_dim * in_dim, sync)


def grad_input_shared_weights(grad_u_hat, W, out=None, sync=True):
    """Version 3: ``capsule_grad_input_shared_weights``; W[i] in shared memory, one thread per sample."""
    grad_u_hat, W = float32_operand(grad_u_hat), float32_operand(W)
    batch, in_caps, _, out_caps, out_dim = _grad_shapes(grad_u_hat, 0)
    in_dim = _check_W(W, in_caps, out_caps, out_dim)
    shared = out_caps * out_dim * in_dim * 4
    if shared > SHARED_LIMIT:
        raise ValueError(f"W[i] takes {shared} bytes, more than {SHARED_LIMIT} of shared memory; use grad_input_naive")
    du = result_array(out, (batch, in_caps, in_dim))
    module(in_dim).function("capsule_grad_input_shared_weights")(
        grad_u_hat, W, du, batch, in_caps, out_caps, out_dim,
        grid=(in_caps, blocks_for(batch, CAPS_GRAD_BATCH_TILE)), block=CAPS_GRAD_BATCH_TILE, shared=shared, sync=sync)
    return du


def grad_weight_block_shape(out_caps: int, out_dim: int, in_dim: int) -> tuple[int, int]:
    quads, rows_y = register_block_shape(out_caps, out_dim)
    per_y = out_caps * out_dim * in_dim * 4
    if per_y > SHARED_LIMIT:
        raise ValueError(f"dW[i] takes {per_y} bytes, more than {SHARED_LIMIT} of shared memory; use grad_weight_naive")
    return quads, max(1, min(rows_y, 8, SHARED_LIMIT // per_y))


def grad_weight_register_blocked(grad_u_hat, u, out=None, sync=True):
    """Version 4: ``capsule_grad_weight_register_blocked``; 4 x in_dim sums per thread, y partial sums in shared memory."""
    grad_u_hat, u = float32_operand(grad_u_hat), float32_operand(u)
    batch, in_caps, _, out_caps, out_dim = _grad_shapes(grad_u_hat, 0)
    in_dim = _check_u(u, batch, in_caps)
    block = grad_weight_block_shape(out_caps, out_dim, in_dim)
    dW = result_array(out, (in_caps, out_caps, out_dim, in_dim))
    module(in_dim).function("capsule_grad_weight_register_blocked")(
        grad_u_hat, u, dW, batch, in_caps, out_caps, out_dim,
        grid=in_caps, block=block, shared=block[1] * out_caps * out_dim * in_dim * 4, sync=sync)
    return dW


def fused_launch(out_caps: int, out_dim: int, in_dim: int) -> tuple[int, int]:
    """``(threads, shared bytes)`` of ``capsule_grad_fused``; ValueError when ROW or shared memory is too large."""
    row = out_caps * out_dim
    threads = max(FUSED_THREADS, 32 * blocks_for(row, 32))
    if threads > 1024:
        raise ValueError(f"out_caps * out_dim = {row}: the fused kernel needs one thread per entry of the row (<= 1024)")
    floats = CAPS_FUSED_TILE * (row + 1) + row * in_dim + CAPS_FUSED_TILE * in_dim + (threads // 32) * CAPS_FUSED_TILE * in_dim
    if 4 * floats > SHARED_LIMIT:
        raise ValueError(f"the fused kernel needs {4 * floats} bytes of shared memory, more than {SHARED_LIMIT}")
    return threads, 4 * floats


def grad_fused(grad_u_hat, W, u, out_u=None, out_W=None, sync=True):
    """Version 5: ``capsule_grad_fused``; both gradients from one pass over G.  Returns ``(du, dW)``."""
    grad_u_hat, W, u = float32_operand(grad_u_hat), float32_operand(W), float32_operand(u)
    batch, in_caps, _, out_caps, out_dim = _grad_shapes(grad_u_hat, 0)
    in_dim = _check_W(W, in_caps, out_caps, out_dim)
    if _check_u(u, batch, in_caps) != in_dim:
        raise ValueError(f"u has in_dim {u.shape[2]} but W has {in_dim}")
    threads, shared = fused_launch(out_caps, out_dim, in_dim)
    du = result_array(out_u, (batch, in_caps, in_dim))
    dW = result_array(out_W, (in_caps, out_caps, out_dim, in_dim))
    module(in_dim).function("capsule_grad_fused")(
        grad_u_hat, W, u, du, dW, batch, in_caps, out_caps, out_dim,
        grid=in_caps, block=threads, shared=shared, sync=sync)
    return du, dW


def grad_input(grad_u_hat, W, out=None, sync=True):
    """The fastest input-gradient version that handles the shape."""
    try:
        return grad_input_shared_weights(grad_u_hat, W, out, sync=sync)
    except ValueError:
        return grad_input_naive(grad_u_hat, W, out, sync=sync)


def grad_weight(grad_u_hat, u, out=None, sync=True):
    """The fastest weight-gradient version that handles the shape."""
    try:
        return grad_weight_register_blocked(grad_u_hat, u, out, sync=sync)
    except ValueError:
        return grad_weight_naive(grad_u_hat, u, out, sync=sync)


def gradients(grad_u_hat, W, u, out_u=None, out_W=None, sync=True):
    """``(du, dW)`` by the fastest route for the shape: the fused kernel, else the two separate ones."""
    try:
        return grad_fused(grad_u_hat, W, u, out_u, out_W, sync=sync)
    except ValueError:
        return grad_input(grad_u_hat, W, out_u, sync=sync), grad_weight(grad_u_hat, u, out_W, sync=sync)


# --------------------------------------------------------------------------- the versions' facts


def _grad_bytes(shape) -> float:
    """G, the weights (or inputs) read once, the gradient written once."""
    b, ic, idim, oc, od = dims(shape)
    return 4.0 * (b * ic * oc * od + ic * oc * od * idim + b * ic * idim)


def _grad_input_launch(shape) -> LaunchConfig:
    b, ic, idim, oc, od = dims(shape)
    return LaunchConfig((ic, blocks_for(b, CAPS_GRAD_BATCH_TILE), 1), (CAPS_GRAD_BATCH_TILE, 1, 1), oc * od * idim * 4)


def _grad_weight_launch(shape) -> LaunchConfig:
    b, ic, idim, oc, od = dims(shape)
    block = grad_weight_block_shape(oc, od, idim)
    return LaunchConfig((ic, 1, 1), (*block, 1), block[1] * oc * od * idim * 4)


def _flops(shape) -> float:
    return float(flops(*dims(shape)))


def _naive_launch(shape, elements) -> LaunchConfig:
    """Versions 1 and 2: one thread per element of the gradient, a grid-stride loop over them."""
    return LaunchConfig((_naive_grid(elements), 1, 1), (NAIVE_BLOCK, 1, 1), 0)


def _fused_launch(shape) -> LaunchConfig:
    b, ic, idim, oc, od = dims(shape)
    threads, shared = fused_launch(oc, od, idim)
    return LaunchConfig((ic, 1, 1), (threads, 1, 1), shared)


def _fused_bytes(shape) -> float:
    """G, W and u read once, du and dW written once."""
    b, ic, idim, oc, od = dims(shape)
    return 4.0 * (b * ic * oc * od + 2 * ic * oc * od * idim + 2 * b * ic * idim)


def _fused_reference(grad_u_hat, W, u):
    return grad_input_reference(grad_u_hat, W), grad_weight_reference(grad_u_hat, u)


KERNELS = kernel_table(
    KernelVersion(TOPIC, "capsule_grad_input_naive", grad_input_naive,
                  lambda shape: _naive_launch(shape, shape["batch"] * shape["in_caps"] * shape["in_dim"]),
                  _grad_bytes, _flops, grad_input_reference, defines={"CAPS_IN_DIM": 8},
                  number=1, title="du, one thread per element"),
    KernelVersion(TOPIC, "capsule_grad_weight_naive", grad_weight_naive,
                  lambda shape: _naive_launch(shape, shape["in_caps"] * shape["out_caps"] * shape["out_dim"]
                                              * shape["in_dim"]),
                  _grad_bytes, _flops, grad_weight_reference, defines={"CAPS_IN_DIM": 8},
                  number=2, title="dW, one thread per element, a loop over the batch"),
    KernelVersion(TOPIC, "capsule_grad_input_shared_weights", grad_input_shared_weights, _grad_input_launch,
                  _grad_bytes, _flops, grad_input_reference, defines={"CAPS_IN_DIM": 8},
                  number=3, title="du with the capsule's weights in shared memory"),
    KernelVersion(TOPIC, "capsule_grad_weight_register_blocked", grad_weight_register_blocked, _grad_weight_launch,
                  _grad_bytes, _flops, grad_weight_reference, defines={"CAPS_IN_DIM": 8},
                  number=4, title="dW with four outputs per thread"),
    # Both gradients in one kernel: twice the arithmetic of either.
    KernelVersion(TOPIC, "capsule_grad_fused", grad_fused, _fused_launch, _fused_bytes,
                  lambda shape: 2 * _flops(shape), _fused_reference, defines={"CAPS_IN_DIM": 8},
                  number=5, title="both gradients in one pass over G"),
)
