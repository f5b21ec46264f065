"""Launching on a stream the runtime did not create: the current stream of a framework.

PyTorch orders its work on streams, and an op built from the book's kernels has to queue its
launches on the stream PyTorch is using at that moment (``torch.cuda.current_stream().cuda_stream``,
a raw ``CUstream`` handle): a kernel on another stream could read an input before the kernel that
writes it has run, or run while the memory it writes is handed to someone else.  Inside
``with launching_on(handle):`` every launch made by the calling thread goes on that stream::

    with launching_on(torch.cuda.current_stream().cuda_stream):
        capsule_prediction.forward(u, W, out=u_hat, sync=False)

and the backend is made usable from that thread for the block (on the GPU: its CUDA context is
pushed, since a framework runs ops on threads of its own, such as PyTorch's backward threads).
The stream is kept per thread (a context variable), so two threads may launch on two streams.

On the CPU emulator every launch runs to completion before it returns, so every stream order
holds already; the handle is passed along and not used.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

from . import selection
from .backend import Backend

_stream: ContextVar[int | None] = ContextVar("dlk_launch_stream", default=None)


def current_stream() -> int | None:
    """The raw stream handle launches of this thread go on, or None (the runtime's default stream)."""
    return _stream.get()


@contextlib.contextmanager
def launching_on(stream: int, backend: Backend | None = None):
    """Queue the launches of this thread on ``stream`` (a raw ``CUstream`` handle; 0 is the legacy default stream)."""
    if isinstance(stream, bool) or not isinstance(stream, int) or stream < 0:
        raise TypeError(f"stream must be a raw stream handle (an int >= 0, such as torch.cuda.current_stream()"
                        f".cuda_stream), not {stream!r}")
    backend = backend or selection.current_backend()
    with backend.activated():
        token = _stream.set(int(stream))
        try:
            yield
        finally:
            _stream.reset(token)
