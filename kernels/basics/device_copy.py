"""Copy ``src`` to a new array: NumPy reference and a launcher per kernel of device_copy.cu.

``copy_grid_stride_float4`` moves 16 bytes per thread and instruction; the
book measures the device's memory bandwidth with it
(:mod:`kernels.tools.roofline`).
"""

from __future__ import annotations

import numpy as np

from kernels.runtime import blocks_for
from kernels.runtime.loader import element_count, grid_stride_blocks, launch, load_topic, output_like
from kernels.runtime.versions import KernelVersion, kernel_table, launch_1d, rung

TOPIC = "device_copy"
#: float4s each thread of version 3 loads before it stores (CP_UNROLL, the .cu's default).
UNROLL = 4


def reference(src: np.ndarray) -> np.ndarray:
    return src.copy()


def bytes_moved(n: int) -> int:
    """Every float read once and written once."""
    return 2 * 4 * n


def copy_one_thread_per_element(
    src, dst=None, *, block: int = 256, sync: bool = True, prepare_only: bool = False,
):
    """Version 1: one thread per float."""
    n = int(src.size)
    dst = output_like(src) if dst is None else dst
    element_count(src, dst)
    kernel = load_topic(TOPIC).function("copy_one_thread_per_element")
    enqueue = launch(
        kernel, (src, dst, n), grid=blocks_for(n, block), block=block, sync=sync, prepare_only=prepare_only,
    )
    return enqueue if prepare_only else dst


def copy_grid_stride_float4(
    src, dst=None, *, block: int = 256, grid: int | None = None, sync: bool = True, prepare_only: bool = False,
):
    """Version 2: grid-stride loop over float4; ``src.size`` must be a multiple of 4."""
    n = int(src.size)
    if n % 4:
        raise ValueError(f"copy_grid_stride_float4 moves float4s: the size ({n}) must be a multiple of 4")
    dst = output_like(src) if dst is None else dst
    element_count(src, dst)
    n4 = n // 4
    grid = grid_stride_blocks(n4, block) if grid is None else grid
    kernel = load_topic(TOPIC).function("copy_grid_stride_float4")
    enqueue = launch(
        kernel, (src, dst, n4), grid=grid, block=block, sync=sync, prepare_only=prepare_only,
    )
    return enqueue if prepare_only else dst


def float4_blocks(n: int, block: int = 256) -> int:
    """Version 3's grid: a block covers ``block * UNROLL`` float4s; at least one block, which copies the tail."""
    return max(1, blocks_for(n // 4, block * UNROLL))


def copy_float4_unrolled(
    src, dst=None, *, block: int = 256, sync: bool = True, prepare_only: bool = False,
):
    """Version 3: ``UNROLL`` float4 loads in flight per thread, then the stores; any size."""
    n = int(src.size)
    dst = output_like(src) if dst is None else dst
    element_count(src, dst)
    kernel = load_topic(TOPIC).function("copy_float4_unrolled")
    enqueue = launch(kernel, (src, dst, n), grid=float4_blocks(n, block), block=block, sync=sync,
                     prepare_only=prepare_only)
    return enqueue if prepare_only else dst


KERNELS = kernel_table(
    KernelVersion(TOPIC, "copy_one_thread_per_element", copy_one_thread_per_element,
                  lambda shape: launch_1d(blocks_for(int(shape["n"]), 256), 256),
                  bytes=lambda shape: float(bytes_moved(int(shape["n"]))), flops=lambda shape: 0.0, reference=reference,
                  number=1, title="one thread per element", key="one_thread_per_element"),
    KernelVersion(TOPIC, "copy_grid_stride_float4", copy_grid_stride_float4,
                  lambda shape: launch_1d(grid_stride_blocks(int(shape["n"]) // 4, 256), 256),
                  bytes=lambda shape: float(bytes_moved(int(shape["n"]))), flops=lambda shape: 0.0, reference=reference,
                  number=2, title="a grid-stride loop over float4", key="grid_stride_float4"),
    KernelVersion(TOPIC, "copy_float4_unrolled", copy_float4_unrolled,
                  lambda shape: launch_1d(float4_blocks(int(shape["n"]), 256), 256),
                  bytes=lambda shape: float(bytes_moved(int(shape["n"]))), flops=lambda shape: 0.0, reference=reference,
                  number=3, title="float4 loads, several in flight per thread", key="float4_unrolled"),
)


def copy(src, version: str = "grid_stride_float4", **options):
    """Run one version by its key (``versions(KERNELS)``)."""
    return rung(KERNELS, version).launcher(src, **options)
