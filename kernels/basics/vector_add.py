"""Vector addition, ``c = a + b``: NumPy reference and a launcher per kernel of vector_add.cu.

Each launcher takes NumPy arrays (copied to the device and back) or device
buffers from :func:`kernels.runtime.to_device` (no copies), and returns ``c``
of the same kind::

    from kernels.basics import vector_add
    c = vector_add.vector_add_grid_stride(a, b)
"""

from __future__ import annotations

import numpy as np

from kernels.runtime import blocks_for
from kernels.runtime.loader import element_count, grid_stride_blocks, launch, load_topic, output_like
from kernels.runtime.versions import KernelVersion, kernel_table, launch_1d, rung

TOPIC = "vector_add"
#: float4s each thread of version 3 loads of each operand before it stores (VA_UNROLL, the .cu's default).
UNROLL = 4


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a + b


def bytes_moved(n: int) -> int:
    """Bytes each version reads and writes: a and b read, c written, 4 bytes each."""
    return 3 * 4 * n


def vector_add_one_thread_per_element(
    a, b, c=None, *,
    block: int = 256, sync: bool = True, prepare_only: bool = False,
):
    """Version 1: ``ceil(n / block)`` blocks, one thread per element."""
    n = element_count(a, b)
    c = output_like(a) if c is None else c
    kernel = load_topic(TOPIC).function("vector_add_one_thread_per_element")
    enqueue = launch(kernel, (a, b, c, n), grid=blocks_for(n, block), block=block,
                     sync=sync, prepare_only=prepare_only)
    return enqueue if prepare_only else c


def vector_add_grid_stride(
    a, b, c=None, *,
    block: int = 256, grid: int | None = None,
    sync: bool = True, prepare_only: bool = False,
):
    """Version 2: a grid-stride loop on ``grid`` blocks (default: a full wave of the device)."""
    n = element_count(a, b)
    c = output_like(a) if c is None else c
    grid = grid_stride_blocks(n, block) if grid is None else grid
    kernel = load_topic(TOPIC).function("vector_add_grid_stride")
    enqueue = launch(kernel, (a, b, c, n), grid=grid, block=block,
                     sync=sync, prepare_only=prepare_only)
    return enqueue if prepare_only else c


def float4_blocks(n: int, block: int = 256) -> int:
    """Version 3's grid: a block covers ``block * UNROLL`` float4s; at least one block, which adds the tail."""
    return max(1, blocks_for(n // 4, block * UNROLL))


def vector_add_float4(
    a, b, c=None, *,
    block: int = 256, sync: bool = True, prepare_only: bool = False,
):
    """Version 3: float4 loads, ``UNROLL`` of each operand in flight per thread; any ``n``."""
    n = element_count(a, b)
    c = output_like(a) if c is None else c
    kernel = load_topic(TOPIC).function("vector_add_float4")
    enqueue = launch(kernel, (a, b, c, n), grid=float4_blocks(n, block), block=block,
                     sync=sync, prepare_only=prepare_only)
    return enqueue if prepare_only else c


def _facts(kernel: str, launcher, blocks, **rung) -> KernelVersion:
    return KernelVersion(TOPIC, kernel, launcher, lambda shape: launch_1d(blocks(int(shape["n"]), 256), 256),
                         bytes=lambda shape: float(bytes_moved(int(shape["n"]))),
                         flops=lambda shape: float(int(shape["n"])), reference=reference, **rung)


KERNELS = kernel_table(
    _facts("vector_add_one_thread_per_element", vector_add_one_thread_per_element, blocks_for,
           number=1, title="one thread per element", key="one_thread_per_element"),
    _facts("vector_add_grid_stride", vector_add_grid_stride, grid_stride_blocks,
           number=2, title="a grid-stride loop", key="grid_stride"),
    _facts("vector_add_float4", vector_add_float4, float4_blocks,
           number=3, title="float4 loads, several in flight per thread", key="float4"),
)


def vector_add(a, b, version: str = "grid_stride", **options):
    """Run one version by its key (``versions(KERNELS)``)."""
    return rung(KERNELS, version).launcher(a, b, **options)
