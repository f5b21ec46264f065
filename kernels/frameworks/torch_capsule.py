"""The capsule prediction as a PyTorch op over the book's kernels: ``torch.ops.dlk.capsule_predict(u, W)``.

``u_hat[b, i, j, :] = W[i, j] @ u[b, i, :]`` for float32 tensors ``u`` of shape (batch, in_caps,
in_dim) and ``W`` of shape (in_caps, out_caps, out_dim, in_dim), computed by the fastest kernel of
``kernels/capsules/capsule_prediction.cu`` that handles the shape, and differentiable in both: the backward
pass is a second op, ``dlk::capsule_predict_backward``, which runs the fused gradient kernel of
``kernels/capsules/capsule_prediction_backward.cu`` (the two separate ones where it does not fit).

Three registrations make the kernels a framework op, not merely a function that calls them:

* ``torch.library.custom_op`` declares the op: its name, its schema (what it takes and returns, and
  that it writes none of its inputs) and its implementation, which torch treats as opaque;
* ``register_fake`` gives the shape, dtype and device of the result without computing it: what
  ``torch.compile``, ``torch.export`` and meta tensors trace with;
* ``register_autograd`` gives the backward formula, so that autograd (and ``torch.compile``'s
  AOTAutograd) differentiates through the op.

Where the kernels run.  On the GPU backend the operands are CUDA tensors on the device the runtime
opened.  The kernels read and write torch's memory where it is (``tensor.data_ptr()``, no copies),
in the device's primary context, which PyCUDA and torch share, and they are queued on torch's
*current stream*, so that they are ordered with torch's own work like any torch op and nothing
waits for the host.  On the CPU emulator (no GPU, or ``DLK_BACKEND=cpu``) the operands are CPU
tensors and the same kernels run on the emulator: slow, but that is how the op is checked without
a GPU.

This module imports without torch (the book shows its source on machines that have none); the ops
are registered when torch 2.4 or newer is there, and :func:`capsule_predict` says what is missing
otherwise.
"""

from __future__ import annotations

import contextlib

from kernels.capsules import capsule_prediction as cp
from kernels.capsules import capsule_prediction_backward as cb
from kernels.runtime import borrow, current_backend, launching_on

try:
    import torch
except ImportError:  # the ops are registered only where torch is installed
    torch = None

OP = "dlk::capsule_predict"
BACKWARD_OP = "dlk::capsule_predict_backward"
NEEDS_TORCH = f"{OP} is a PyTorch op: it needs torch 2.4 or newer (pip install torch)"
#: What each operand holds; its rank is the number of axes named.
LAYOUTS = {"u": "(batch, in_caps, in_dim)", "W": "(in_caps, out_caps, out_dim, in_dim)",
           "grad_u_hat": "(batch, in_caps, out_caps, out_dim)"}


# --------------------------------------------------------------------------- checking the operands


def _check_operand(name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{OP}: {name} must be a torch.Tensor {LAYOUTS[name]}, not {type(t).__name__}")
    if t.dtype != torch.float32:
        raise TypeError(f"{OP}: {name} must be float32 (the kernels compute in float32), not {t.dtype}; "
                        f"convert it with {name}.float()")
    rank = LAYOUTS[name].count(",") + 1
    if t.dim() != rank:
        raise ValueError(f"{OP}: {name} must be {LAYOUTS[name]}, {rank} axes; got shape {tuple(t.shape)}")
    if not t.is_contiguous():
        raise ValueError(f"{OP}: {name} is not contiguous (shape {tuple(t.shape)}, strides {t.stride()}: a "
                         f"transposed, expanded or sliced view); the kernels read it as a dense row-major array: "
                         f"pass {name}.contiguous()")


def check_operands(u, W, grad_u_hat=None) -> tuple[int, int, int, int, int]:
    """``(batch, in_caps, in_dim, out_caps, out_dim)``, or a TypeError or ValueError naming the argument."""
    _check_operand("u", u)
    _check_operand("W", W)
    batch, in_caps, in_dim = u.shape
    w_caps, out_caps, out_dim, w_dim = W.shape
    if w_caps != in_caps or w_dim != in_dim:
        raise ValueError(f"{OP}: W has shape {tuple(W.shape)}, but u {tuple(u.shape)} holds {in_caps} capsules of "
                         f"{in_dim}: W must be ({in_caps}, out_caps, out_dim, {in_dim})")
    if W.device != u.device:
        raise ValueError(f"{OP}: u is on {u.device} and W on {W.device}; both must be on one device")
    if grad_u_hat is not None:
        _check_operand("grad_u_hat", grad_u_hat)
        if tuple(grad_u_hat.shape) != (batch, in_caps, out_caps, out_dim):
            raise ValueError(f"{OP}: grad_u_hat has shape {tuple(grad_u_hat.shape)}; u_hat of u {tuple(u.shape)} "
                             f"and W {tuple(W.shape)} is ({batch}, {in_caps}, {out_caps}, {out_dim})")
        if grad_u_hat.device != u.device:
            raise ValueError(f"{OP}: grad_u_hat is on {grad_u_hat.device} and u on {u.device}")
    return batch, in_caps, in_dim, out_caps, out_dim


def kernel_device():
    """The torch device the book's kernels work on: the runtime's GPU, or the CPU for the emulator."""
    backend = current_backend()
    return torch.device("cuda", backend.ordinal) if backend.name == "gpu" else torch.device("cpu")


def _check_device(tensors: dict) -> None:
    device = kernel_device()
    for name, t in tensors.items():
        if t.device != device:
            where = (f"the GPU backend runs them on {device}" if device.type == "cuda" else
                     "they run on the CPU emulator here (no GPU, or DLK_BACKEND=cpu), which takes CPU tensors")
            raise ValueError(f"{OP}: {name} is on {t.device}, but the book's kernels cannot read it there: {where}; "
                             f"move it with {name}.to('{device}')")


@contextlib.contextmanager
def _kernel_operands(device):
    """Yields ``view(tensor)``: the tensor as the kernels' launchers take it, launched where torch expects.

    On the GPU, a buffer borrowing the tensor's memory, and every launch of the block queued on torch's
    current stream of the device; on the emulator, the tensor's memory as a NumPy array (the launcher
    copies the results back into it before it returns).
    """
    if device.type == "cuda":
        with launching_on(torch.cuda.current_stream(device).cuda_stream):
            yield lambda t: borrow(t.data_ptr(), tuple(t.shape))
    else:
        yield lambda t: t.detach().numpy()


# --------------------------------------------------------------------------- the op and its gradient


def predict(u, W):
    """The op's implementation: ``u_hat`` from the fastest forward kernel for the shape."""
    batch, in_caps, in_dim, out_caps, out_dim = check_operands(u, W)
    _check_device({"u": u, "W": W})
    u_hat = u.new_empty((batch, in_caps, out_caps, out_dim))
    if u_hat.numel() == 0 or in_dim == 0:  # nothing to compute, or sums of no terms
        return u_hat.zero_()
    with _kernel_operands(u.device) as view:
        cp.forward(view(u), view(W), out=view(u_hat), sync=False)
    return u_hat


def predict_fake(u, W):
    """What tracing sees: the shape, dtype and device of ``u_hat``, from the operands' alone."""
    batch, in_caps, _, out_caps, out_dim = check_operands(u, W)
    return u.new_empty((batch, in_caps, out_caps, out_dim))


def predict_backward(grad_u_hat, u, W):
    """The backward op's implementation: ``(du, dW)`` from one pass over ``grad_u_hat`` (the fused kernel)."""
    _, _, in_dim, _, _ = check_operands(u, W, grad_u_hat)
    _check_device({"grad_u_hat": grad_u_hat, "u": u, "W": W})
    du, dW = torch.empty_like(u), torch.empty_like(W)
    if grad_u_hat.numel() == 0 or in_dim == 0:  # every sum is over no terms
        return du.zero_(), dW.zero_()
    with _kernel_operands(u.device) as view:
        cb.gradients(view(grad_u_hat), view(W), view(u), out_u=view(du), out_W=view(dW), sync=False)
    return du, dW


def predict_backward_fake(grad_u_hat, u, W):
    check_operands(u, W, grad_u_hat)
    return torch.empty_like(u), torch.empty_like(W)


def setup_context(ctx, inputs, output):
    """Keep what the backward pass needs: the two operands (u_hat itself is not needed)."""
    u, W = inputs
    ctx.save_for_backward(u, W)


def backward(ctx, grad_u_hat):
    """``dE/du`` and ``dE/dW`` from ``dE/du_hat``, through the backward op (which torch.compile can trace)."""
    u, W = ctx.saved_tensors
    # The incoming gradient may be any view (sum().backward() hands down an expanded tensor of stride 0).
    du, dW = torch.ops.dlk.capsule_predict_backward(grad_u_hat.contiguous(), u, W)
    return (du if ctx.needs_input_grad[0] else None), (dW if ctx.needs_input_grad[1] else None)


def register():
    """Register both ops with torch: their schemas, implementations, fake implementations and the gradient."""
    if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
        raise ImportError(f"{NEEDS_TORCH}; torch {torch.__version__} has no torch.library.custom_op")
    forward_op = torch.library.custom_op(OP, predict, mutates_args=(), schema="(Tensor u, Tensor W) -> Tensor")
    forward_op.register_fake(predict_fake)
    backward_op = torch.library.custom_op(BACKWARD_OP, predict_backward, mutates_args=(),
                                          schema="(Tensor grad_u_hat, Tensor u, Tensor W) -> (Tensor, Tensor)")
    backward_op.register_fake(predict_backward_fake)
    forward_op.register_autograd(backward, setup_context=setup_context)
    return forward_op, backward_op


def capsule_predict(u, W):
    """``u_hat = W u`` for every sample and capsule pair, by the book's kernels: ``torch.ops.dlk.capsule_predict``."""
    if torch is None:
        raise ImportError(NEEDS_TORCH)
    check_operands(u, W)  # here too: the dispatcher's own message for a non-tensor is a page of repr
    return torch.ops.dlk.capsule_predict(u, W)


if torch is not None:
    capsule_predict_op, capsule_predict_backward_op = register()
