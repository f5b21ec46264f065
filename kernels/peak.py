"""Launcher of peak.cu's FP32 throughput kernel (used by :mod:`kernels.runtime.roofline`)."""

from __future__ import annotations

import numpy as np

from kernels.runtime.loader import launch, load_topic, multiprocessors
from kernels.runtime.module import empty

TOPIC = "peak"
FMA_CHAINS = 8  # as FMA_CHAINS in peak.cu


def fma_flops(threads: int, iterations: int) -> int:
    """Floating-point operations of one fma_throughput launch (an FMA counts as 2)."""
    return threads * iterations * FMA_CHAINS * 2


def fma_throughput(
    iterations: int = 4096,
    *,
    block: int = 256,
    blocks_per_sm: int = 8,
    out=None,
    sync: bool = True,
    prepare_only: bool = False,
):
    """Launch fma_throughput on ``blocks_per_sm`` blocks per SM; returns (out, flops), or (a function that enqueues it, flops) with ``prepare_only``."""
    grid = multiprocessors() * blocks_per_sm
    threads = grid * block
    out = empty(threads, np.float32) if out is None else out
    kernel = load_topic(TOPIC).function("fma_throughput")
    enqueue = launch(
        kernel, (out, iterations, 0.999999, 1e-6), grid=grid, block=block, sync=sync, prepare_only=prepare_only,
    )
    return (enqueue if prepare_only else out), fma_flops(threads, iterations)
