"""Which thread of a profiled launch read and wrote which element of which argument, and of which shared array.

The profiling build (``profiler.h``) records every access of the sampled blocks' threads to the launch's
argument buffers and shared arrays, with its address, the thread and the block; given where each buffer
and each shared array starts (the worker sends that with the events), an access is an element of one of
them.  A profiled launch gives each buffer a margin on either side (``profiler.h``'s ``kBufferMargin``), so
that a kernel running past the end of an array (a missing bounds check) is seen there: its accesses are
elements below 0 or past the last.  A shared array is the same memory in every block (a static one has one
address), so its elements are told apart by the block column.  A thread map
(:mod:`kernels.tools.thread_maps`) is drawn from these.

Blocks are numbered in the order they ran, which for the sample of a launch (its first blocks) is the
linear block index: ``blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .diagnose import BufferInfo
from .profiling import ATOMIC, GLOBAL, LOAD, SHARED, STORE

#: ``profiler.h``'s ``kBufferMargin``: bytes of margin before and after each buffer of a profiled launch.
BUFFER_MARGIN = 4096

#: One distinct access: the argument or shared array (its index in :attr:`ElementAccesses.arguments`), the
#: element (may be negative, or past the last, in a buffer's margins), the block (linear index), the thread
#: (linear index in its block), the barriers the thread had passed (two threads of a block with the same count
#: are between the same two barriers, unordered) and what it did (the profiler's kinds: LOAD, STORE or ATOMIC,
#: a read-modify-write).
ACCESS_DTYPE = np.dtype([("argument", "<u4"), ("element", "<i8"), ("block", "<u4"), ("thread", "<u4"),
                         ("epoch", "<u4"), ("kind", "u1")])
MEMORY_KINDS = (LOAD, STORE, ATOMIC)


@dataclass(frozen=True)
class SharedArray:
    """A shared array a profiled block declared, as the worker reports it."""

    address: int
    bytes: int
    elem_bytes: int  # 1 for dynamic shared memory, whose type the emulator does not know
    name: str


@dataclass(frozen=True)
class Argument:
    """An argument buffer (the parameter name(s) it was passed as) or a shared array of the launch, its shape and
    element size."""

    name: str
    shape: tuple[int, ...]
    itemsize: int
    space: str = "global"  # or "shared": one array per block

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class ElementAccesses:
    """The distinct (argument, element, block, thread, kind) accesses of a profiled launch's sample."""

    arguments: list[Argument]
    table: np.ndarray  # ACCESS_DTYPE, sorted, each row once


def _accesses(memory: np.ndarray, index: int, start: int, argument: Argument, margin: int) -> np.ndarray | None:
    """The rows of ``memory`` (events of one space) that fall in ``argument`` (at ``start``, with ``margin`` bytes
    either side), one per element each touches (a float4 covers 4 floats)."""
    address = memory["address"].astype(np.int64)
    inside = (address >= start - margin) & (address < start + argument.size * argument.itemsize + margin)
    if not inside.any():
        return None
    offset = address[inside] - start
    width = np.maximum(memory["size"][inside].astype(np.int64), 1)
    first = np.floor_divide(offset, argument.itemsize)
    count = np.floor_divide(offset + width - 1, argument.itemsize) - first + 1
    rows = np.repeat(np.arange(len(first)), count)
    step = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    chosen = memory[inside]
    part = np.empty(len(rows), ACCESS_DTYPE)
    part["argument"] = index
    part["element"] = first[rows] + step
    part["block"] = chosen["block"][rows]
    part["thread"] = chosen["thread"][rows]
    part["epoch"] = chosen["epoch"][rows]
    part["kind"] = chosen["kind"][rows]
    return part


def element_accesses(events: np.ndarray, bases: list[int], buffers: list[BufferInfo],
                     shared: list[SharedArray] = ()) -> ElementAccesses:
    """The accesses among ``events`` (the profiling build's) to the buffers that start at ``bases`` and to the
    ``shared`` arrays."""
    arguments = [Argument("/".join(b.names), tuple(int(d) for d in b.shape), int(np.dtype(b.dtype).itemsize))
                 for b in buffers]
    memory = events[np.isin(events["kind"], MEMORY_KINDS)]
    in_global, in_shared = memory[memory["space"] == GLOBAL], memory[memory["space"] == SHARED]
    parts = [_accesses(in_global, i, int(base), argument, BUFFER_MARGIN)
             for i, (base, argument) in enumerate(zip(bases, arguments))]
    for array in shared:
        itemsize = array.elem_bytes if array.elem_bytes > 1 else 4  # dynamic shared memory: read as words
        argument = Argument(array.name, (array.bytes // itemsize,), itemsize, "shared")
        arguments.append(argument)
        parts.append(_accesses(in_shared, len(arguments) - 1, array.address, argument, 0))
    parts = [p for p in parts if p is not None]
    table = np.unique(np.concatenate(parts)) if parts else np.empty(0, ACCESS_DTYPE)
    return ElementAccesses(arguments, table)
