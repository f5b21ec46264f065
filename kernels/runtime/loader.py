"""Compile a topic's ``kernels/<part>/<topic>.cu`` once per process and backend.

Launchers call :func:`load_topic` on every launch; the first call compiles
the file (about half a second with nvcc, longer on the emulator) and later
calls return the same :class:`~kernels.runtime.module.Module`.  Switching
backend (:func:`~kernels.runtime.selection.use_backend`) compiles again for the
new one.
"""

from __future__ import annotations

import numpy as np

from . import selection
from .backend import Backend, DeviceBuffer
from .module import Module, blocks_for, compile_source, empty
from .sources import KERNEL_DIR, source_path


# (id(backend), topic, defines) -> (backend, module); the backend is kept so its id is not reused.
_modules: dict[tuple, tuple[Backend, Module]] = {}


def load_topic(topic: str, defines: dict[str, object] | None = None, backend: Backend | None = None) -> Module:
    """The compiled ``kernels/<part>/<topic>.cu`` (with ``kernels/`` on the include path)."""
    backend = backend or selection.current_backend()
    frozen = tuple(sorted((k, str(v)) for k, v in defines.items())) if defines else ()
    key = (id(backend), topic, frozen)
    hit = _modules.get(key)
    if hit is not None and hit[0] is backend:
        return hit[1]
    path = source_path(topic)
    module = compile_source(
        path.read_text(), name=path.name, include_dirs=(str(KERNEL_DIR),), defines=dict(frozen), backend=backend
    )
    _modules[key] = (backend, module)
    return module


# id(backend) -> (backend, SM count): asked once per backend.  describe() queries the driver for a dozen
# facts (about a millisecond on a GPU); launchers ask for the SM count on every launch, and a millisecond
# of Python per launch is far longer than the kernels of a small layer.
_multiprocessors: dict[int, tuple[Backend, int]] = {}


def multiprocessors(backend: Backend | None = None) -> int:
    """Number of streaming multiprocessors (SMs) of the device; 4 on the CPU emulator."""
    backend = backend or selection.current_backend()
    hit = _multiprocessors.get(id(backend))
    if hit is not None and hit[0] is backend:
        return hit[1]
    try:
        count = backend.describe().get("multiprocessors")
    except Exception:
        count = None
    count = int(count) if count else 4
    _multiprocessors[id(backend)] = (backend, count)
    return count


def grid_stride_blocks(n: int, threads_per_block: int, blocks_per_sm: int | None = None, backend: Backend | None = None) -> int:
    """Blocks for a grid-stride kernel: enough to fill every SM, never more than ``n`` needs.

    By default as many blocks as can be resident at once (2048 threads per SM
    on recent GPUs): one "wave" of the whole device.
    """
    if blocks_per_sm is None:
        blocks_per_sm = max(1, 2048 // threads_per_block)
    return max(1, min(blocks_for(n, threads_per_block), multiprocessors(backend) * blocks_per_sm))


def output_like(template, shape=None, dtype=None):
    """A new output for a launcher: a NumPy array if ``template`` is one, else a device buffer.

    NumPy outputs are filled with NaN, so that an element a kernel forgot to
    write shows up in a comparison instead of passing by luck.
    """
    shape = template.shape if shape is None else shape
    dtype = template.dtype if dtype is None else np.dtype(dtype)
    if isinstance(template, DeviceBuffer):
        return empty(shape, dtype)
    return np.full(shape, np.nan, dtype=dtype)


def float32_operand(a):
    """A launcher's input: NumPy data as a contiguous float32 array, a device buffer as it is."""
    return a if isinstance(a, DeviceBuffer) else np.ascontiguousarray(a, dtype=np.float32)


def result_array(out, shape, any_layout: bool = False):
    """A launcher's output: ``out`` if it holds a result of ``shape``, else a new float32 array of that shape.

    With ``any_layout``, any buffer of as many elements will do (read as ``shape``: a
    network may keep an N x M x 1 x 1 result as an N x M matrix for the next layer).
    """
    if out is None:
        return np.empty(shape, np.float32)
    fits = int(np.prod(out.shape)) == int(np.prod(shape)) if any_layout else tuple(out.shape) == tuple(shape)
    if not fits:
        raise ValueError(f"out has shape {tuple(out.shape)}, the result has shape {tuple(shape)}")
    return out


def element_count(*arrays) -> int:
    """The common size of NumPy arrays or device buffers; ValueError if they differ."""
    sizes = {int(a.size) for a in arrays}
    if len(sizes) != 1:
        raise ValueError(f"arrays of different sizes: {[int(a.size) for a in arrays]}")
    return sizes.pop()


def launch(kernel, args, *, grid, block, shared: int = 0, sync: bool = True, prepare_only: bool = False):
    """Launch ``kernel(*args)``, or with ``prepare_only`` return a function that enqueues it.

    The prepared function skips argument checks and conversions on each call
    (they were done once), so that timing measures the kernel and not the
    Python that launches it: ``time_kernel(vector_add_grid_stride(a, b, c, prepare_only=True))``.
    """
    prepared = kernel.prepare(args, grid, block, shared)
    if prepare_only:
        return lambda: kernel.launch_prepared(prepared, sync=False)
    kernel.launch_prepared(prepared, sync=sync)
    return None
