"""Sum of an array: NumPy reference and a launcher per kernel of reduction.cu.

Every kernel adds into ``out[0]`` with ``atomicAdd``, so the launchers zero
``out`` before the launch.  They return the sum as a Python float; with
``prepare_only=True`` and ``out=`` (a one-element device buffer) they
return a function that enqueues the launch without zeroing ``out``, which is
what timing needs (the timed launches keep adding into ``out``).
"""

from __future__ import annotations

import numpy as np

from kernels.runtime import blocks_for
from kernels.runtime.backend import DeviceBuffer
from kernels.runtime.loader import grid_stride_blocks, launch, load_topic
from kernels.runtime.module import zeros
from kernels.runtime.versions import KernelVersion, kernel_table, launch_1d, rung

TOPIC = "reduction"
VECTORIZED_BLOCK = 512  # reduce_sum_vectorized's default block (a multiple of 32)


def reference(x: np.ndarray) -> float:
    """The sum in float64, the yardstick the float32 kernels are compared with."""
    return float(np.sum(x, dtype=np.float64))


def tolerance(x: np.ndarray) -> float:
    """How far a float32 sum of ``x`` may be from the float64 sum.

    Rounding errors of a sum in float32 grow like sqrt(n) * eps * sum(|x|)
    when they are independent, as they are while partial sums stay small
    enough to represent every addend well (a per-thread register sum, a
    tree).  The bound allows twice that plus 1e-5 of sum(|x|): a sum kept
    in float16, or one that drops elements, is far outside it.  One running
    total of many elements (``reduce_sum_atomic`` at large n) is not: once
    the total is large, each small addend is rounded away (in float32,
    2**24 + 1 == 2**24).
    """
    n = max(1, int(x.size))
    scale = float(np.sum(np.abs(x), dtype=np.float64))
    return scale * (1e-5 + 2 * float(np.finfo(np.float32).eps) * np.sqrt(n))


def bytes_moved(n: int) -> int:
    """Every float read once (the single output is negligible)."""
    return 4 * n


def _run(kernel_name: str, x, out, zero_out: bool, grid: int, block: int, shared: int, sync: bool, prepare_only: bool):
    n = int(x.size)
    kernel = load_topic(TOPIC).function(kernel_name)
    if prepare_only:
        if not isinstance(out, DeviceBuffer):
            raise ValueError("prepare_only needs out=, a one-element device buffer the timed launches add into")
        return launch(kernel, (x, out, n), grid=grid, block=block, shared=shared, prepare_only=True)
    if out is None:
        out = zeros(1, np.float32)
    elif zero_out:
        if isinstance(out, DeviceBuffer):
            out.set(np.zeros(out.shape, np.float32))
        else:
            out[...] = 0
    launch(kernel, (x, out, n), grid=grid, block=block, shared=shared, sync=sync)
    if not sync:
        return out
    return float((out.get() if isinstance(out, DeviceBuffer) else out).reshape(-1)[0])


def _power_of_two(kernel: str, block: int) -> str:
    """'' or why ``block`` does not suit a kernel that halves the block at each step."""
    if block < 1 or block & (block - 1):
        return f"{kernel} halves the block at each step: block ({block}) must be a power of two"
    return ""


def _whole_warps(kernel: str, block: int) -> str:
    """'' or why ``block`` does not suit a kernel that works in whole warps."""
    return f"{kernel} works in whole warps: block ({block}) must be a multiple of 32" if block % 32 else ""


def _launcher(kernel: str, blocks, *, doc: str, default_block: int = 256, shared_per_thread: int = 0,
              block_rule=None):
    """The launcher of one kernel of reduction.cu: ``blocks(n, block)`` blocks by default (a grid-stride
    loop covers the rest), ``shared_per_thread * block`` bytes of shared memory, and ``block_rule`` (which
    says what is wrong with a block size) checked first."""

    def launcher(x, *, out=None, zero_out: bool = True, block: int = default_block, grid: int | None = None,
                 sync: bool = True, prepare_only: bool = False):
        problem = block_rule(kernel, block) if block_rule else ""
        if problem:
            raise ValueError(problem)
        grid = blocks(int(x.size), block) if grid is None else grid
        return _run(kernel, x, out, zero_out, grid, block, shared_per_thread * block, sync, prepare_only)

    launcher.__name__ = launcher.__qualname__ = kernel
    launcher.__doc__ = doc
    return launcher


def vectorized_blocks(n: int, block: int = VECTORIZED_BLOCK) -> int:
    """One wave of blocks for ``reduce_sum_vectorized``: each thread covers float4s, so n / 4 items."""
    return grid_stride_blocks(max(1, -(-n // 4)), block)


def _reduction_version(kernel: str, blocks, *, number: int, title: str, key: str, note: str = "",
                       default_block: int = 256, shared_per_thread: int = 0, block_rule=None) -> KernelVersion:
    """The record of one kernel of reduction.cu with its launcher (:func:`_launcher`; ``note``: what its
    docstring adds to the title), launched by default with ``default_block`` threads."""

    def launch_for(shape):
        n = int(shape["n"])
        return launch_1d(blocks(n, default_block), default_block, shared_per_thread * default_block)

    launcher = _launcher(kernel, blocks, doc=f"Version {number}: {title}{'; ' + note if note else ''}.",
                         default_block=default_block, shared_per_thread=shared_per_thread, block_rule=block_rule)
    return KernelVersion(
        topic=TOPIC, kernel=kernel, launcher=launcher, launch=launch_for,
        bytes=lambda shape: float(bytes_moved(int(shape["n"]))),
        flops=lambda shape: float(int(shape["n"])),  # one add per element
        reference=reference, number=number, title=title, key=key,
    )


KERNELS = kernel_table(
    _reduction_version("reduce_sum_atomic", blocks_for, number=1, title="one atomicAdd per element",
                       key="atomic", note="a grid-stride loop, by default one thread per element"),
    _reduction_version("reduce_sum_shared_tree", grid_stride_blocks, number=2,
                       title="a shared-memory tree per block, one atomicAdd per block", key="shared_tree",
                       note="``block`` a power of two", shared_per_thread=4, block_rule=_power_of_two),
    _reduction_version("reduce_sum_warp_shuffle", grid_stride_blocks, number=3,
                       title="warp shuffles, one atomicAdd per block", key="warp_shuffle",
                       note="``block`` a multiple of 32", block_rule=_whole_warps),
    _reduction_version("reduce_sum_vectorized", vectorized_blocks, number=4,
                       title="float4 loads, two in flight per thread, warp shuffles", key="vectorized",
                       note="``block`` a multiple of 32", default_block=VECTORIZED_BLOCK, block_rule=_whole_warps),
)

# The launchers by name, as the tests and chapters call them.
reduce_sum_atomic = KERNELS["reduce_sum_atomic"].launcher
reduce_sum_shared_tree = KERNELS["reduce_sum_shared_tree"].launcher
reduce_sum_warp_shuffle = KERNELS["reduce_sum_warp_shuffle"].launcher
reduce_sum_vectorized = KERNELS["reduce_sum_vectorized"].launcher


def reduce_sum(x, version: str = "warp_shuffle", **options):
    """Run one version by its key (``versions(KERNELS)``)."""
    return rung(KERNELS, version).launcher(x, **options)
