"""Queueing launches and waiting once: ``with queued():``.

By default a launch waits for its kernel before it returns, so that a failure (an illegal
address, a kernel that never ends) is reported at the line that launched it.  The wait costs
the host a round trip per launch, which is most of the time of a step made of many small
kernels (a LeNet-5 training step launches 40).  Inside ``with queued():`` launches only queue
their kernels, in order, on the same stream, and the block ends with one wait for all of them::

    with queued():
        model.gradients(X, labels)      # 30 launches, none waits
    # here every kernel has run; a failure is reported here, naming the last kernel launched

A launch that copies a result back to a NumPy array still waits, since the copy must follow
the kernel.  To find which kernel of a block failed, run it again without ``queued()``.  On the
CPU emulator every launch runs to completion before it returns, so the block changes nothing.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

from . import selection
from .backend import Backend

_queueing: ContextVar[bool] = ContextVar("dlk_queueing", default=False)


def queueing() -> bool:
    """True inside ``with queued():``: launches of this thread do not wait for their kernels."""
    return _queueing.get()


@contextlib.contextmanager
def queued(backend: Backend | None = None):
    """Launches in the block queue without waiting; the block ends with one wait for all of them."""
    backend = backend or selection.current_backend()
    token = _queueing.set(True)
    try:
        yield
    finally:
        _queueing.reset(token)
    backend.synchronize()
