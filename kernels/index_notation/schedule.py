"""Schedules: how the statements of a comprehension map onto CUDA threads.

A schedule changes how the generated kernel runs, never what it computes.
The chapter introduces its parameters one at a time:

``naive``
    one thread per output element on a 1-D grid of ``threads`` threads per
    block, reductions as sequential loops, one kernel per statement;
``block`` (bx, by)
    2-D blocks: threadIdx.x runs along the last output index (consecutive
    threads touch consecutive addresses), threadIdx.y along the one before,
    the remaining output indices along blockIdx.z;
``fuse``
    consecutive statements that write the same tensor element by element go
    into one kernel, the value staying in a register in between;
``tile_k``
    the outermost reduction loop runs in tiles of ``tile_k``: every access
    that depends only on the block's two output indices and that reduction
    index is first copied into shared memory by the whole block;
``regs`` (ry, rx)
    register blocking: every thread computes ry x rx outputs, strided by the
    block size so that neighbouring threads stay on neighbouring elements;
``split`` (r)
    a reduction across threads, for outputs too few to fill the GPU (a
    matrix-vector product with few rows): r threads (a multiple of 32) share
    the reduction of one output and combine their partial results with warp
    shuffles and shared memory; a block holds ``block[1]`` outputs;
``unroll``
    ``#pragma unroll`` factor of the innermost reduction loop (1: none).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class Schedule:
    naive: bool = False
    threads: int = 256
    block: tuple = (32, 8)
    fuse: bool = True
    tile_k: int = 0
    regs: tuple = (1, 1)
    split: int = 0
    unroll: int = 1

    def __post_init__(self):
        def positive(name, value, most=1024):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise ValueError(f"schedule: {name} must be an integer from 1 to {most}, not {value!r}")

        positive("threads", self.threads)
        if len(self.block) != 2:
            raise ValueError(f"schedule: block must be (bx, by), not {self.block!r}")
        for v in self.block:
            positive("block", v)
        if self.block[0] * self.block[1] > 1024:
            raise ValueError(f"schedule: block {self.block} has {self.block[0] * self.block[1]} threads; at most 1024")
        if len(self.regs) != 2:
            raise ValueError(f"schedule: regs must be (ry, rx), not {self.regs!r}")
        for v in self.regs:
            positive("regs", v, 16)
        if self.tile_k:
            positive("tile_k", self.tile_k, 256)
        if self.split:
            if self.split % 32 or not 32 <= self.split <= 1024:
                raise ValueError(f"schedule: split must be a multiple of 32 from 32 to 1024, not {self.split!r}")
            if self.split * self.block[1] > 1024:
                raise ValueError(f"schedule: split {self.split} x block[1] {self.block[1]} is over 1024 threads")
        positive("unroll", self.unroll, 64)

    def with_(self, **changes) -> "Schedule":
        return replace(self, **changes)

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        if self.naive:
            return f"naive ({self.threads} threads per block)"
        parts = [f"block {self.block[0]}x{self.block[1]}"]
        if self.split:
            parts.append(f"split reduction over {self.split} threads")
        if self.tile_k:
            parts.append(f"tile_k {self.tile_k}")
        if self.regs != (1, 1):
            parts.append(f"regs {self.regs[0]}x{self.regs[1]}")
        if self.unroll > 1:
            parts.append(f"unroll {self.unroll}")
        parts.append("fused" if self.fuse else "unfused")
        return ", ".join(parts)


#: The first generated kernel of the chapter: one thread per output element, nothing else.
NAIVE = Schedule(naive=True, fuse=False)
