"""Launchers of indexing.cu: which global thread handles each element, for a picture.

Both return NumPy arrays computed by the kernels themselves (so the picture
shows what really ran); :func:`reference` computes the same in NumPy.
"""

from __future__ import annotations

import numpy as np

from kernels.runtime import blocks_for
from kernels.runtime.loader import load_topic
from kernels.runtime.versions import KernelVersion, kernel_table, launch_1d

TOPIC = "indexing"


def reference(n: int, threads_per_block: int, blocks: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(thread_of, pass_of) for a grid-stride loop on ``blocks`` blocks (default: enough for one pass)."""
    blocks = blocks_for(n, threads_per_block) if blocks is None else blocks
    total = blocks * threads_per_block
    i = np.arange(n)
    return (i % total).astype(np.int32), (i // total).astype(np.int32)


def which_thread_one_per_element(n: int, threads_per_block: int) -> np.ndarray:
    """thread_of[i]: the global index of the thread that handled element i (ceil(n / block) blocks)."""
    thread_of = np.full(n, -1, np.int32)
    load_topic(TOPIC).function("which_thread_one_per_element")(
        thread_of, n, grid=blocks_for(n, threads_per_block), block=threads_per_block
    )
    return thread_of


def which_thread_grid_stride(n: int, threads_per_block: int, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """(thread_of, pass_of) of a grid-stride loop on ``blocks`` blocks of ``threads_per_block``."""
    thread_of = np.full(n, -1, np.int32)
    pass_of = np.full(n, -1, np.int32)
    load_topic(TOPIC).function("which_thread_grid_stride")(thread_of, pass_of, n, grid=blocks, block=threads_per_block)
    return thread_of, pass_of


# Shapes: n elements, ``block`` threads per block and (grid-stride) ``blocks`` blocks.  Each thread writes
# its index (and pass) into the elements it handles: no reads, no arithmetic worth counting.
KERNELS = kernel_table(
    KernelVersion(TOPIC, "which_thread_one_per_element", which_thread_one_per_element,
                  lambda shape: launch_1d(blocks_for(int(shape["n"]), int(shape["block"])), int(shape["block"])),
                  bytes=lambda shape: 4.0 * int(shape["n"]), flops=lambda shape: 0.0, reference=reference,
                  number=1, title="one thread per element"),
    KernelVersion(TOPIC, "which_thread_grid_stride", which_thread_grid_stride,
                  lambda shape: launch_1d(int(shape["blocks"]), int(shape["block"])),
                  bytes=lambda shape: 8.0 * int(shape["n"]), flops=lambda shape: 0.0, reference=reference,
                  number=2, title="a grid-stride loop, recording the pass of each element"),
)
