"""Device buffers a launcher keeps between launches: split partials, arrival counters, placeholders.

A training step that allocated its scratch on every launch would pay for it twice: the allocation, and
freeing the last one, which waits for the device and so undoes queued launches
(:func:`~kernels.runtime.queued`).  A buffer here is allocated the first time it is asked for, per
purpose, shape and dtype, per backend and per stream: the launches of one stream run in order, so
consecutive launches can share it; two streams never do, and neither do two purposes (a launch that
reads one buffer while writing another of the same shape gets two).
"""

from __future__ import annotations

import numpy as np

from . import selection, streams
from .backend import Backend, DeviceBuffer
from .module import empty, zeros

# (id(backend), stream, purpose, shape, dtype, zeroed) -> (backend, buffer); the backend is kept so its id
# is not reused.
_kept: dict[tuple, tuple[Backend, DeviceBuffer]] = {}


def kept_buffer(purpose: str, shape, dtype=np.float32, *, zeroed: bool = False,
                backend: Backend | None = None) -> DeviceBuffer:
    """The device buffer of ``purpose`` (a name: "winograd U") of ``shape`` and ``dtype``, kept for the
    calling stream.

    ``zeroed``: filled with zeros when it is made, and never again; a kernel given one must leave it
    zero (as the split kernels leave their arrival counters: the last block resets each one).
    """
    backend = backend or selection.current_backend()
    shape = tuple(int(s) for s in shape)
    key = (id(backend), streams.current_stream(), purpose, shape, np.dtype(dtype).str, zeroed)
    hit = _kept.get(key)
    if hit is None or hit[0] is not backend:
        buffer = zeros(shape, dtype, backend) if zeroed else empty(shape, dtype, backend)
        hit = _kept[key] = (backend, buffer)
    return hit[1]
