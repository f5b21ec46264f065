"""Launcher of peak.cu's FP32 throughput kernel (used by :mod:`kernels.tools.roofline`)."""

from __future__ import annotations

import numpy as np

from kernels.runtime.loader import launch, load_topic, multiprocessors
from kernels.runtime.module import empty
from kernels.runtime.versions import KernelVersion, kernel_table, launch_1d

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


def _peak_launch(shape):
    """``blocks_per_sm`` (default 8) blocks of ``block`` (default 256) threads on every SM."""
    return launch_1d(multiprocessors() * int(shape.get("blocks_per_sm", 8)), int(shape.get("block", 256)))


def _threads(shape) -> int:
    config = _peak_launch(shape)
    return config.grid[0] * config.block[0]


def fma_reference(threads: int, iterations: int, multiplier: float = 0.999999, addend: float = 1e-6) -> np.ndarray:
    """What every thread writes, in float64: the sum of its chains after ``iterations`` steps of a * m + c.

    Chain c of thread t starts at t * 1e-7 + c; n steps of a -> a m + c give a m^n + c (1 - m^n) / (1 - m).
    """
    start = np.arange(threads, dtype=np.float64)[:, None] * 1e-7 + np.arange(FMA_CHAINS, dtype=np.float64)
    mn = multiplier ** iterations
    return (start * mn + addend * (1 - mn) / (1 - multiplier)).sum(axis=1)


KERNELS = kernel_table(
    KernelVersion(TOPIC, "fma_throughput", fma_throughput, _peak_launch,
                  bytes=lambda shape: 4.0 * _threads(shape),  # one float written per thread
                  flops=lambda shape: float(fma_flops(_threads(shape), int(shape["iterations"]))),
                  reference=fma_reference, number=None,
                  title="chains of FMAs that keep every FP32 unit busy: a measure of the device, no rung"),
)
