"""Timing kernels for the book: warm-up, an L2 flush before each call, median of repeats.

Speed is measured only on a real GPU.  On the CPU emulator these helpers
raise :class:`~kernels.runtime.errors.NoGPUError`; chapters then show figures
from a committed benchmark results file instead.

Each call is timed on its own (never many calls divided by their count),
between two events recorded on the stream the launches use, after writing a
buffer twice the size of L2 so that no input is still cached from the call
before.  The primitives (events, flush, busy wait) are those of
:mod:`kernels.runtime.measurement`, which the grader's timing uses too.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from . import selection
from .errors import NoGPUError
from .measurement import measurement


@dataclass
class Timing:
    """Times of one kernel (milliseconds), one sample per call."""

    samples_ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.samples_ms)

    @property
    def stderr_ms(self) -> float:
        if len(self.samples_ms) < 2:
            return float("inf")
        return statistics.stdev(self.samples_ms) / len(self.samples_ms) ** 0.5

    @property
    def median_s(self) -> float:
        return self.median_ms / 1e3

    def __str__(self) -> str:
        return f"{self.median_ms * 1e3:.1f} µs (median of {len(self.samples_ms)})"


def require_gpu(what: str = "timing") -> None:
    if not selection.on_gpu():
        raise NoGPUError(
            f"{what} needs a real GPU; kernels are running on the CPU emulator, which checks results but "
            f"says nothing about speed"
        )


def l2_flush() -> None:
    """Evict L2 (GPU only)."""
    require_gpu("flushing L2")
    measurement().flush_l2()


def gpu_busy_wait(microseconds: float = 200.0) -> None:
    """Keep the GPU busy for ``microseconds`` (GPU only); see :meth:`GpuMeasurement.busy_wait`."""
    require_gpu()
    measurement().busy_wait(microseconds)


def time_kernel(
    launch: Callable[[], object],
    warmup: int = 3,
    repeat: int = 20,
    flush_l2: bool = True,
    max_repeat: int | None = None,
    target_stderr: float = 0.01,
) -> Timing:
    """Time ``launch()`` (which must only enqueue work, e.g. ``kernel(..., sync=False)``).

    Runs ``warmup`` untimed calls, then at least ``repeat`` timed calls, and
    more (up to ``max_repeat``) until the standard error of the mean is below
    ``target_stderr`` of the mean.
    """
    require_gpu()
    backend = selection.current_backend()
    gpu = measurement(backend)
    for _ in range(warmup):
        launch()
    backend.synchronize()
    timing = Timing()
    max_repeat = max_repeat or repeat * 5
    while True:
        if flush_l2:
            gpu.flush_l2()
        gpu.busy_wait()
        timing.samples_ms.append(gpu.elapsed_ms(launch))
        n = len(timing.samples_ms)
        if n >= repeat and (timing.stderr_ms <= target_stderr * timing.mean_ms or n >= max_repeat):
            break
    backend.synchronize()  # surfaces a failure of the timed calls, named by the runtime
    return timing


def time_torch(fn: Callable[[], object], warmup: int = 3, repeat: int = 20, flush_l2: bool = True,
               lead_us: float = 200.0) -> Timing:
    """Time a PyTorch peer (cuBLAS, cuDNN...) the same way, with torch's own events on its stream.

    ``lead_us``: how long the GPU is kept busy before each call, so that the host's work of queuing it is not
    timed (longer for a peer that spends more than 200 µs of Python and library set-up per call)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size or 64 * 2**20
    flush = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda") if flush_l2 else None
    timing = Timing()
    for _ in range(repeat):
        if flush is not None:
            flush.zero_()
        measurement().busy_wait(lead_us)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        timing.samples_ms.append(start.elapsed_time(end))
    return timing
