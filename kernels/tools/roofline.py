"""Speeds against the device's limits: measured peaks, achieved figures, the roofline plot.

A kernel's time is bounded below by two floors: the bytes it moves over the
memory bandwidth, and the flops it does over the arithmetic throughput.  The
roofline model draws both: attainable GFLOP/s = min(peak GFLOP/s,
arithmetic intensity * peak GB/s), where the arithmetic intensity is flops
per byte moved.  The peaks here are *measured* on the device (a float4 copy
for bandwidth, a chain of fused multiply-adds for FP32), not read from a
data sheet, so "% of peak" says how close a kernel is to what this card
actually does.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kernels.basics import device_copy as copy_kernels, peak
from kernels.runtime import selection
from kernels.runtime.module import empty
from kernels.runtime.timing import require_gpu, time_kernel


@dataclass(frozen=True)
class Peaks:
    """Measured limits of one device."""

    bandwidth_gbs: float  # bytes read + written per second / 1e9 (device-to-device copy)
    fp32_gflops: float  # FP32 flops per second / 1e9 (an FMA counts as 2)
    device: str = "unknown device"
    measured: str = ""  # ISO date
    source: str = "measured"  # "measured" or the results file they came from

    @property
    def ridge_intensity(self) -> float:
        """Flops per byte where the two roofs meet: below it a kernel is memory-bound."""
        return self.fp32_gflops / self.bandwidth_gbs


@dataclass(frozen=True)
class Achieved:
    """What one kernel run achieved, next to the limit that applies to it."""

    seconds: float
    gbs: float
    gflops: float
    intensity: float  # flops per byte
    limit_gflops: float  # roofline at this intensity
    bound: str  # "memory" or "compute"
    percent_of_bandwidth: float
    percent_of_compute: float
    percent_of_limit: float  # of the roof that applies: bandwidth when memory-bound, compute otherwise

    def __str__(self) -> str:
        return (
            f"{self.seconds * 1e6:.1f} µs, {self.gbs:.0f} GB/s, {self.gflops:.1f} GFLOP/s, "
            f"{self.intensity:.3g} flop/B, {self.percent_of_limit:.0f} % of the {self.bound} roof"
        )


def achieved(nbytes: float, flops: float, seconds: float, peaks: Peaks) -> Achieved:
    """GB/s, GFLOP/s, arithmetic intensity and % of the applicable roof of a run."""
    if seconds <= 0:
        raise ValueError(f"a run takes a positive time, not {seconds} s")
    gbs = nbytes / seconds / 1e9
    gflops = flops / seconds / 1e9
    intensity = flops / nbytes if nbytes else float("inf")
    memory_roof = intensity * peaks.bandwidth_gbs
    limit = min(peaks.fp32_gflops, memory_roof)
    bound = "memory" if memory_roof < peaks.fp32_gflops else "compute"
    pct_bw = 100 * gbs / peaks.bandwidth_gbs
    pct_fl = 100 * gflops / peaks.fp32_gflops
    return Achieved(
        seconds=seconds, gbs=gbs, gflops=gflops, intensity=intensity, limit_gflops=limit, bound=bound,
        percent_of_bandwidth=pct_bw, percent_of_compute=pct_fl,
        percent_of_limit=pct_bw if bound == "memory" else pct_fl,
    )


def measure_bandwidth_gbs(nbytes: int = 1 << 30, block: int = 256) -> float:
    """Device-to-device copy bandwidth (bytes read + written per second / 1e9), GPU only."""
    require_gpu("measuring bandwidth")
    n = nbytes // 2 // 4 // 4 * 4  # half read, half written; a multiple of 4 floats
    src, dst = empty(n, np.float32), empty(n, np.float32)
    src.set(np.ones(n, np.float32))
    timing = time_kernel(copy_kernels.copy_grid_stride_float4(src, dst, block=block, prepare_only=True))
    return copy_kernels.bytes_moved(n) / timing.median_s / 1e9


def measure_fp32_gflops(iterations: int = 1024) -> float:
    """FP32 fused multiply-add throughput (flops per second / 1e9), GPU only."""
    require_gpu("measuring FP32 throughput")
    enqueue, flops = peak.fma_throughput(iterations, prepare_only=True)
    timing = time_kernel(enqueue, flush_l2=False)
    return flops / timing.median_s / 1e9


def measure_peaks() -> Peaks:
    """Both peaks of the current GPU, measured now."""
    info = selection.current_backend().describe()
    return Peaks(
        bandwidth_gbs=measure_bandwidth_gbs(),
        fp32_gflops=measure_fp32_gflops(),
        device=str(info.get("name", "GPU")),
        measured=_dt.date.today().isoformat(),
    )


def peaks_from_results(path: str | Path) -> Peaks:
    """Peaks recorded in a benchmark results file (its ``"peaks"`` entry)."""
    data = json.loads(Path(path).read_text())
    p = data["peaks"]
    return Peaks(
        bandwidth_gbs=float(p["bandwidth_gbs"]),
        fp32_gflops=float(p["fp32_gflops"]),
        device=str(data.get("device", {}).get("name", "unknown device")),
        measured=str(data.get("date", "")),
        source=str(path),
    )


def peaks_as_dict(peaks: Peaks) -> dict:
    return asdict(peaks)
