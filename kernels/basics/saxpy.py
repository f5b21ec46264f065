"""SAXPY, ``y = alpha * x + y``: NumPy reference and a launcher per kernel of saxpy.cu.

The kernels update ``y`` in place.  The launchers do not: they return a new
result (a NumPy array or a device buffer, like ``y``) and leave the caller's
``y`` as it was, unless ``in_place=True`` (or ``prepare_only=True``, for timing).
"""

from __future__ import annotations

import numpy as np

from kernels.runtime import blocks_for
from kernels.runtime.backend import DeviceBuffer
from kernels.runtime.loader import element_count, grid_stride_blocks, launch, load_topic
from kernels.runtime.module import empty
from kernels.runtime.versions import KernelVersion, kernel_table, launch_1d, rung

TOPIC = "saxpy"


def reference(alpha: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (np.float32(alpha) * x + y).astype(np.float32)


def bytes_moved(n: int) -> int:
    """x and y read, y written."""
    return 3 * 4 * n


def flops(n: int) -> int:
    """One multiply and one add per element."""
    return 2 * n


def _target(y, in_place: bool):
    if in_place:
        return y
    if isinstance(y, DeviceBuffer):
        out = empty(y.shape, y.dtype)
        out.set(y.get())  # a device-to-host-to-device copy: fine for a launcher, use in_place when timing
        return out
    return np.array(y, copy=True)


def saxpy_one_thread_per_element(
    alpha: float, x, y, *, in_place: bool = False, block: int = 256, sync: bool = True, prepare_only: bool = False,
):
    """Version 1: one thread per element."""
    n = element_count(x, y)
    y = _target(y, in_place or prepare_only)  # a prepared launch updates y in place
    kernel = load_topic(TOPIC).function("saxpy_one_thread_per_element")
    enqueue = launch(
        kernel, (n, alpha, x, y), grid=blocks_for(n, block), block=block, sync=sync, prepare_only=prepare_only,
    )
    return enqueue if prepare_only else y


def saxpy_grid_stride(
    alpha: float, x, y,
    *,
    in_place: bool = False,
    block: int = 256,
    grid: int | None = None,
    sync: bool = True,
    prepare_only: bool = False,
):
    """Version 2: grid-stride loop on ``grid`` blocks (default: one full wave of the device)."""
    n = element_count(x, y)
    y = _target(y, in_place or prepare_only)  # a prepared launch updates y in place
    grid = grid_stride_blocks(n, block) if grid is None else grid
    kernel = load_topic(TOPIC).function("saxpy_grid_stride")
    enqueue = launch(
        kernel, (n, alpha, x, y), grid=grid, block=block, sync=sync, prepare_only=prepare_only,
    )
    return enqueue if prepare_only else y


def _n(shape) -> int:
    return int(shape["n"])


def _saxpy_version(kernel: str, launcher, blocks, **rung) -> KernelVersion:
    return KernelVersion(
        topic=TOPIC, kernel=kernel, launcher=launcher,
        launch=lambda shape: launch_1d(blocks(_n(shape), 256), 256),
        bytes=lambda shape: float(bytes_moved(_n(shape))), flops=lambda shape: float(flops(_n(shape))),
        reference=reference, **rung,
    )


KERNELS = kernel_table(
    _saxpy_version("saxpy_one_thread_per_element", saxpy_one_thread_per_element, blocks_for,
                   number=1, title="one thread per element", key="one_thread_per_element"),
    _saxpy_version("saxpy_grid_stride", saxpy_grid_stride, grid_stride_blocks,
                   number=2, title="a grid-stride loop", key="grid_stride"),
)


def saxpy(alpha: float, x, y, version: str = "grid_stride", **options):
    """Run one version by its key (``versions(KERNELS)``)."""
    return rung(KERNELS, version).launcher(alpha, x, y, **options)
