"""Fused attention as a PyTorch op over the book's kernels: ``torch.ops.dlk.attention(q, k, v, causal, scale)``.

``q``, ``k``, ``v`` are ``(batch, heads, N, d)`` tensors, all BF16 (version 4 of ``kernels/attention/``, the
tensor cores) or all float32 (version 3); the op returns ``(out, lse)``: the attention output, in the inputs'
dtype, and the float32 log-sum-exp of each row of scores, which the backward pass recomputes the softmax from.
It is differentiable in ``q``, ``k`` and ``v``: the backward pass is a second op, ``dlk::attention_backward``,
over version 5 (BF16 or float).  :func:`attention` returns the output alone, as
``torch.nn.functional.scaled_dot_product_attention`` does.

As the capsule op (``torch_capsule.py``) does, ``torch.library.custom_op`` declares each op (its schema says it
writes none of its inputs), ``register_fake`` gives the shapes for tracing (``torch.compile``, meta tensors), and
``register_autograd`` the backward formula.  On the GPU the kernels read and write torch's memory where it is
(``data_ptr()``, no copies, scratch allocated by torch) and are queued on torch's current stream; on the CPU
emulator (no GPU, or ``DLK_BACKEND=cpu``) the operands are CPU tensors and the same kernels run there, slowly.

This module imports without torch; the ops are registered when torch 2.4 or newer is there.
"""

from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np

from kernels.attention import attention as fp32
from kernels.attention import attention_bf16 as bf16
from kernels.runtime import borrow, current_backend, launching_on

try:
    import torch
except ImportError:  # the ops are registered only where torch is installed
    torch = None

OP = "dlk::attention"
BACKWARD_OP = "dlk::attention_backward"
NEEDS_TORCH = f"{OP} is a PyTorch op: it needs torch 2.4 or newer (pip install torch)"


# --------------------------------------------------------------------------- checking the operands


def _kernels(dtype):
    """The kernel module for tensors of ``dtype``: BF16 -> version 4 and the BF16 backward, float32 -> 3 and 5."""
    if dtype == torch.bfloat16:
        return bf16
    if dtype == torch.float32:
        return fp32
    raise TypeError(f"{OP}: q, k and v must be bfloat16 (the tensor-core kernels) or float32, not {dtype}; "
                    f"convert them with .to(torch.bfloat16)")


def check_operands(q, k, v, **more) -> tuple[int, int, int, int]:
    """``(batch, heads, N, d)``, or a TypeError or ValueError naming the argument and the fix."""
    named = {"q": q, "k": k, "v": v, **more}
    for name, t in named.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{OP}: {name} must be a torch.Tensor (batch, heads, N, d), not {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{OP}: {name} must be (batch, heads, N, d), 4 axes; got shape {tuple(t.shape)}")
        if t.dtype != q.dtype:
            raise TypeError(f"{OP}: {name} is {t.dtype} and q is {q.dtype}: every operand must have one dtype")
        if tuple(t.shape) != tuple(q.shape):
            raise ValueError(f"{OP}: {name} has shape {tuple(t.shape)} and q {tuple(q.shape)}: they must agree "
                             f"(self-attention, one length for queries and keys)")
        if t.device != q.device:
            raise ValueError(f"{OP}: {name} is on {t.device} and q on {q.device}; all must be on one device")
        if not t.is_contiguous():
            raise ValueError(f"{OP}: {name} is not contiguous (strides {t.stride()}: a transposed or sliced view, "
                             f"such as heads split off a (batch, N, heads, d) tensor); pass {name}.contiguous()")
    kernels = _kernels(q.dtype)
    d = int(q.shape[-1])
    if d not in kernels.HEAD_DIMS:
        raise ValueError(f"{OP}: head dimension {d} is not one the kernels are built for "
                         f"({', '.join(map(str, kernels.HEAD_DIMS))}); pad the heads to the next of them")
    return tuple(int(s) for s in q.shape)


def kernel_device():
    """The torch device the book's kernels work on: the runtime's GPU, or the CPU for the emulator."""
    backend = current_backend()
    return torch.device("cuda", backend.ordinal) if backend.name == "gpu" else torch.device("cpu")


def _check_device(t) -> None:
    device = kernel_device()
    if t.device != device:
        where = (f"the GPU backend runs them on {device}" if device.type == "cuda" else
                 "they run on the CPU emulator here (no GPU, or DLK_BACKEND=cpu), which takes CPU tensors")
        raise ValueError(f"{OP}: the operands are on {t.device}, but the book's kernels cannot read them there: "
                         f"{where}; move them with .to('{device}')")


def _numpy_dtype(t):
    return np.dtype(ml_dtypes.bfloat16) if t.dtype == torch.bfloat16 else np.dtype(np.float32)


@contextlib.contextmanager
def _kernel_operands(device):
    """Yields ``view(tensor)``: the tensor as the launchers take it.  On the GPU, a buffer borrowing its memory,
    every launch of the block queued on torch's current stream; on the emulator, a NumPy array of its values."""
    if device.type == "cuda":
        with launching_on(torch.cuda.current_stream(device).cuda_stream):
            yield lambda t: borrow(t.data_ptr(), tuple(t.shape), _numpy_dtype(t))
    else:
        def host(t):
            t = t.detach()
            if t.dtype == torch.bfloat16:
                return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
            return t.numpy()

        yield host


def _store(results, tensors) -> None:
    """The emulator's launchers return new NumPy arrays: copy them into the op's tensors (the GPU's wrote there)."""
    for result, t in zip(results, tensors):
        if isinstance(result, np.ndarray):
            array = np.ascontiguousarray(result)
            source = (torch.from_numpy(array.view(np.int16)).view(torch.bfloat16) if t.dtype == torch.bfloat16
                      else torch.from_numpy(array))
            t.copy_(source.reshape(t.shape))


# --------------------------------------------------------------------------- the ops


def _scale(q, scale: float) -> float:
    return fp32.default_scale(int(q.shape[-1])) if scale <= 0 else scale


def forward(q, k, v, causal: bool, scale: float):
    """The op: ``(out, lse)`` from the fused forward kernel for the dtype.  ``scale <= 0`` means 1/sqrt(d)."""
    batch, heads, n, _ = check_operands(q, k, v)
    _check_device(q)
    out = torch.empty_like(q)
    lse = torch.empty((batch, heads, n), dtype=torch.float32, device=q.device)
    if n == 0 or batch * heads == 0:
        return out, lse
    with _kernel_operands(q.device) as view:
        if q.device.type == "cuda":
            _kernels(q.dtype).attention_forward(view(q), view(k), view(v), causal, _scale(q, scale),
                                                out=view(out), lse=view(lse), sync=False)
        else:
            _store(_kernels(q.dtype).attention_forward(view(q), view(k), view(v), causal, _scale(q, scale)), (out, lse))
    return out, lse


def forward_fake(q, k, v, causal: bool, scale: float):
    batch, heads, n, _ = check_operands(q, k, v)
    return torch.empty_like(q), q.new_empty((batch, heads, n), dtype=torch.float32)


def backward_op(grad_out, q, k, v, out, lse, causal: bool, scale: float):
    """The backward op: ``(dq, dk, dv)`` from the saved output and log-sum-exp (version 5 for the dtype)."""
    batch, heads, n, d = check_operands(q, k, v, out=out, grad_out=grad_out)
    _check_device(q)
    grads = tuple(torch.empty_like(q) for _ in range(3))
    if n == 0 or batch * heads == 0:
        return grads
    kernels = _kernels(q.dtype)
    with _kernel_operands(q.device) as view:
        operands = (view(q), view(k), view(v), view(out), view(lse), view(grad_out), causal, _scale(q, scale))
        if q.device.type != "cuda":
            _store(kernels.attention_backward(*operands), grads)
        else:   # the scratch (D, and BF16's float dQ accumulator) from torch's allocator too, held here until the
            # launches are queued: a tensor dropped sooner gives its memory to the next allocation, the other scratch
            scratch = (lse.new_empty((batch * heads, n)),)
            if kernels is bf16:
                scratch += (lse.new_empty((batch * heads, n, d)),)
            workspace = tuple(view(t) for t in scratch) if kernels is bf16 else view(scratch[0])
            kernels.attention_backward(*operands, out=tuple(view(g) for g in grads), workspace=workspace, sync=False)
    return grads


def backward_fake(grad_out, q, k, v, out, lse, causal: bool, scale: float):
    check_operands(q, k, v, out=out, grad_out=grad_out)
    return tuple(torch.empty_like(q) for _ in range(3))


def setup_context(ctx, inputs, output):
    q, k, v, causal, scale = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.causal, ctx.scale = causal, scale


def backward(ctx, grad_out, grad_lse):
    """dq, dk, dv from d(loss)/d(out); the log-sum-exp is an output for the backward pass, not differentiated."""
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.dlk.attention_backward(grad_out.contiguous(), q, k, v, out, lse, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None


def register():
    if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
        raise ImportError(f"{NEEDS_TORCH}; torch {torch.__version__} has no torch.library.custom_op")
    forward_op = torch.library.custom_op(OP, forward, mutates_args=(),
                                         schema="(Tensor q, Tensor k, Tensor v, bool causal, float scale) -> (Tensor, Tensor)")
    forward_op.register_fake(forward_fake)
    grad_op = torch.library.custom_op(BACKWARD_OP, backward_op, mutates_args=(),
                                      schema="(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
                                             "bool causal, float scale) -> (Tensor, Tensor, Tensor)")
    grad_op.register_fake(backward_fake)
    forward_op.register_autograd(backward, setup_context=setup_context)
    return forward_op, grad_op


def attention(q, k, v, causal: bool = False, scale: float | None = None):
    """softmax(scale q k^T) v (masked if causal) by the book's fused kernels; scale defaults to 1/sqrt(d)."""
    if torch is None:
        raise ImportError(NEEDS_TORCH)
    check_operands(q, k, v)
    return torch.ops.dlk.attention(q, k, v, bool(causal), 0.0 if scale is None else float(scale))[0]


if torch is not None:
    attention_op, attention_backward_op = register()
