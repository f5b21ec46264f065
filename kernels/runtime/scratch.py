"""Device buffers a launcher keeps between launches: split partials, arrival counters, placeholders.

A training step that allocated its scratch on every launch would pay for it twice: the allocation, and
freeing the last one, which waits for the device and so undoes queued launches
(:func:`~kernels.runtime.queued`).  A buffer here is allocated the first time a (shape, dtype) is asked
for, per backend and per stream: the launches of one stream run in order, so consecutive launches can
share it; two streams never do.
"""

from __future__ import annotations

import numpy as np

from . import selection, streams
from .backend import Backend, DeviceBuffer
from .module import empty, zeros

# (id(backend), stream, shape, dtype, zeroed) -> (backend, buffer); the backend is kept so its id is not reused.
_kept: dict[tuple, tuple[Backend, DeviceBuffer]] = {}


def kept_buffer(shape, dtype=np.float32, *, zeroed: bool = False, backend: Backend | None = None) -> DeviceBuffer:
    """A device buffer of ``shape`` and ``dtype`` kept for the calling stream.

    ``zeroed``: filled with zeros when it is made, and never again; a kernel given one must leave it
    zero (as the split kernels leave their arrival counters: the last block resets each one).
    """
    backend = backend or selection.current_backend()
    key = (id(backend), streams.current_stream(), tuple(int(s) for s in shape), np.dtype(dtype).str, zeroed)
    hit = _kept.get(key)
    if hit is None or hit[0] is not backend:
        buffer = zeros(key[2], dtype, backend) if zeroed else empty(key[2], dtype, backend)
        hit = _kept[key] = (backend, buffer)
    return hit[1]
