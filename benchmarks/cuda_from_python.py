"""Chapter 1 benchmark: vector add, SAXPY, copy and sums against the measured peak and torch.

Run on a GPU machine with ``make bench`` (or ``DLK_BACKEND=gpu python3 -m
benchmarks.cuda_from_python``).  Every version is first checked against
NumPy at the benchmark size, then timed with CUDA events (warm-up, L2
flushed before each call, median of at least 20 calls).  Writes
``benchmarks/results/cuda_from_python.json``, which the book shows when it
is built without a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from benchmarks.common import Contract, print_table, require_gpu_backend, row, write_results
from kernels.basics import device_copy, reduction, saxpy, vector_add
from kernels.runtime import empty, to_device, zeros
from kernels.runtime.loader import multiprocessors
from kernels.runtime.timing import Timing, time_kernel, time_torch
from kernels.tools.roofline import Peaks, measure_bandwidth_gbs, measure_fp32_gflops

N = 1 << 26  # 64 Mi floats, 256 MiB per array: far larger than L2, so every access goes to HBM

# --- the results file and what the book reads in it ------------------------------------------
NAME = "cuda_from_python"
#: The groups of rows: one per job, each kernel version of it and the libraries doing the same job.
VECTOR_ADD, SAXPY, COPY, REDUCE_SUM = "vector_add", "saxpy", "copy", "reduce_sum"
ELEMENTWISE = (VECTOR_ADD, SAXPY, COPY)
#: Rows the chapter looks up (each a kernel's name, as its record calls it).
GRID_STRIDE_ADD, GRID_STRIDE_SAXPY = "vector_add_grid_stride", "saxpy_grid_stride"
#: The copy whose bandwidth is the 100 % line (the measured peak, see ``peaks`` in the file).
PEAK_COPY = "copy_grid_stride_float4"
SUM_ATOMIC, SUM_SHARED_TREE, SUM_WARP_SHUFFLE = "reduce_sum_atomic", "reduce_sum_shared_tree", "reduce_sum_warp_shuffle"
#: Parts of the file besides the rows: the size, and the launch-configuration and transfer measurements.
SIZE, BLOCK_SWEEP, GRID_SWEEP, TRANSFERS = "n", "block_sweep", "grid_sweep", "transfers"

CONTRACT = Contract(
    NAME, groups=(*ELEMENTWISE, REDUCE_SUM),
    rows={VECTOR_ADD: (GRID_STRIDE_ADD,), SAXPY: (GRID_STRIDE_SAXPY,), COPY: (PEAK_COPY,),
          REDUCE_SUM: (SUM_ATOMIC, SUM_SHARED_TREE, SUM_WARP_SHUFFLE)},
    sections=(SIZE, "peaks", BLOCK_SWEEP, GRID_SWEEP, TRANSFERS),
)


def measure(n: int = N, verbose: bool = False) -> dict:
    """Validate, then time every version and peer; returns the results (without device and date)."""
    n = n - n % 4
    log = print if verbose else (lambda *args, **kwargs: None)
    backend = require_gpu_backend()
    info = backend.describe()
    log(f"device: {info.get('name')}  driver {info.get('driver_version')}  n = {n:,}")

    # Peaks first: everything else is reported as a fraction of them.
    peaks = Peaks(bandwidth_gbs=measure_bandwidth_gbs(nbytes=2 * 4 * n), fp32_gflops=measure_fp32_gflops(), device=str(info.get("name")))
    log(f"measured peaks: {peaks.bandwidth_gbs:,.0f} GB/s copy, {peaks.fp32_gflops / 1e3:,.1f} TFLOP/s FP32 FMA")

    rng = np.random.default_rng(0)
    a_host = (rng.standard_normal(n) + 1).astype(np.float32)
    b_host = (rng.standard_normal(n) + 1).astype(np.float32)
    a, b, c = to_device(a_host), to_device(b_host), empty(n)
    alpha = np.float32(2.5)
    rows: list[dict] = []

    # --- vector add ---------------------------------------------------------------------------
    shape = {"n": n}  # the shape every record below is asked about
    for version in vector_add.KERNELS.values():
        version.launcher(a, b, c)
        np.testing.assert_allclose(c.get(), version.reference(a_host, b_host), rtol=1e-6)
        timing = time_kernel(version.launcher(a, b, c, prepare_only=True))
        rows.append(row(version.kernel, VECTOR_ADD, "kernel", timing, version.bytes(shape), version.flops(shape), peaks))

    # --- SAXPY (in place: y changes from call to call, which costs the same) --------------------
    y = to_device(b_host)
    for version in saxpy.KERNELS.values():
        y.set(b_host)
        version.launcher(alpha, a, y, in_place=True)
        np.testing.assert_allclose(y.get(), version.reference(alpha, a_host, b_host), rtol=1e-5, atol=1e-5)
        timing = time_kernel(version.launcher(alpha, a, y, prepare_only=True))
        rows.append(row(version.kernel, SAXPY, "kernel", timing, version.bytes(shape), version.flops(shape), peaks))

    # --- copy -----------------------------------------------------------------------------------
    for version in device_copy.KERNELS.values():
        version.launcher(a, c)
        np.testing.assert_array_equal(c.get(), version.reference(a_host))
        timing = time_kernel(version.launcher(a, c, prepare_only=True))
        rows.append(row(version.kernel, COPY, "kernel", timing, version.bytes(shape), version.flops(shape), peaks))

    # --- sums -------------------------------------------------------------------------------------
    expected = reduction.reference(a_host)
    out = zeros(1)
    for version in reduction.KERNELS.values():
        launcher = version.launcher
        got = launcher(a, out=out)
        error = abs(got - expected)
        within = error <= reduction.tolerance(a_host)
        # One float32 running total of 2^26 values near 1 cannot be accurate (2^24 + 1 == 2^24 in
        # float32): the atomic version's error is recorded, and shown in the book, not asserted.
        if not within and version.kernel != SUM_ATOMIC:
            raise AssertionError(f"{version.kernel}: {got} vs {expected} (tolerance {reduction.tolerance(a_host)})")
        if not within:
            log(f"{version.kernel}: {got:.6g} vs {expected:.6g}, relative error {error / abs(expected):.2g}")
        timing = time_kernel(launcher(a, out=out, prepare_only=True))
        rows.append(row(version.kernel, REDUCE_SUM, "kernel", timing, version.bytes(shape), version.flops(shape), peaks,
                        result=got, expected=expected, relative_error=error / abs(expected), within_tolerance=bool(within)))

    # --- the library peer, same data, same run ----------------------------------------------------
    rows += torch_peers(a_host, b_host, alpha, peaks, log)
    rows += cupy_peers(a_host, b_host, peaks, log)

    # --- launch configurations: block size, and grid size of a grid-stride loop -------------------
    sms = multiprocessors()
    block_sweep = []
    for block in (32, 64, 128, 256, 512, 1024):
        timing = time_kernel(vector_add.vector_add_one_thread_per_element(a, b, c, block=block, prepare_only=True))
        block_sweep.append({"block": block, "blocks": -(-n // block), "median_ms": timing.median_ms,
                            "gbs": vector_add.bytes_moved(n) / timing.median_s / 1e9})
    grid_sweep = []
    for blocks in sorted({1, max(1, sms // 4), max(1, sms // 2), sms, 2 * sms, 4 * sms, 8 * sms, 32 * sms}):
        timing = time_kernel(vector_add.vector_add_grid_stride(a, b, c, block=256, grid=blocks, prepare_only=True))
        grid_sweep.append({"block": 256, "blocks": blocks, "blocks_per_sm": blocks / sms, "median_ms": timing.median_ms,
                           "gbs": vector_add.bytes_moved(n) / timing.median_s / 1e9})

    # --- host <-> device copies through the runtime (pageable NumPy memory) ------------------------
    transfers = measure_transfers(a_host, log)
    return {
        SIZE: n,
        "peaks": {
            "bandwidth_gbs": peaks.bandwidth_gbs,
            "fp32_gflops": peaks.fp32_gflops,
            "how": "bandwidth: copy_grid_stride_float4 (kernels/basics/device_copy.cu), bytes read + written; "
                   "FP32: fma_throughput (kernels/basics/peak.cu), an FMA counted as 2 flops",
        },
        "results": rows,
        BLOCK_SWEEP: block_sweep,
        GRID_SWEEP: grid_sweep,
        TRANSFERS: transfers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=N, help="elements per array (default 2^26)")
    args = parser.parse_args()
    results = measure(args.n, verbose=True)
    path = write_results(NAME, results)
    print_table(results["results"], f"\nn = {results[SIZE]:,}, measured peak {results['peaks']['bandwidth_gbs']:,.0f} GB/s")
    print("\ntransfers:", ", ".join(f"{t['what']} {t['gbs']:.1f} GB/s" for t in results[TRANSFERS]))
    print(f"\nwrote {path}")


def torch_peers(a_host, b_host, alpha, peaks, log=print) -> list[dict]:
    try:
        import torch
    except ImportError:
        log("torch not installed: no torch peer")
        return []
    if not torch.cuda.is_available():
        log("torch sees no GPU: no torch peer")
        return []
    n = a_host.size
    a = torch.from_numpy(a_host).cuda()
    b = torch.from_numpy(b_host).cuda()
    c = torch.empty_like(a)
    y = b.clone()
    rows = [
        row("torch a + b", VECTOR_ADD, "peer", time_torch(lambda: a + b), 12 * n, n, peaks),
        row("torch.add(a, b, out=c)", VECTOR_ADD, "peer", time_torch(lambda: torch.add(a, b, out=c)), 12 * n, n, peaks),
        row("torch y.add_(x, alpha=alpha)", SAXPY, "peer", time_torch(lambda: y.add_(a, alpha=float(alpha))), 12 * n, 2 * n, peaks),
        row("torch c.copy_(a)", COPY, "peer", time_torch(lambda: c.copy_(a)), 8 * n, 0, peaks),
        row("torch a.sum()", REDUCE_SUM, "peer", time_torch(lambda: a.sum()), 4 * n, n, peaks),
    ]
    torch.cuda.synchronize()
    return rows


def cupy_peers(a_host, b_host, peaks, log=print) -> list[dict]:
    """CuPy, timed with the runtime's own events (CuPy shares the device's primary context)."""
    try:
        import cupy
    except ImportError:
        return []
    n = a_host.size
    try:
        a, b = cupy.asarray(a_host), cupy.asarray(b_host)
        c = cupy.empty_like(a)
        flush = cupy.empty(64 * 2**20 // 2, dtype=cupy.float32)
    except Exception as exc:  # noqa: BLE001
        log(f"cupy unusable here ({exc}): no cupy peer")
        return []

    def time_cupy(fn, warmup=3, repeat=20):
        for _ in range(warmup):
            fn()
        cupy.cuda.Device().synchronize()
        timing = Timing()
        for _ in range(repeat):
            flush.fill(0)
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            timing.samples_ms.append(cupy.cuda.get_elapsed_time(start, end))
        return timing

    return [
        row("cupy.add(a, b, out=c)", VECTOR_ADD, "peer", time_cupy(lambda: cupy.add(a, b, out=c)), 12 * n, n, peaks),
        row("cupy a.sum()", REDUCE_SUM, "peer", time_cupy(lambda: a.sum()), 4 * n, n, peaks),
    ]


def measure_transfers(host: np.ndarray, log=print, repeat: int = 5) -> list[dict]:
    """Host-to-device and back through the runtime, timed on the host (the copies are synchronous)."""
    results = []
    buf = to_device(host)
    for what, fn in (("host to device (to_device)", lambda: to_device(host)), ("device to host (.get())", buf.get)):
        samples = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        seconds = statistics.median(samples)
        results.append({"what": what, "bytes": int(host.nbytes), "median_ms": seconds * 1e3, "gbs": host.nbytes / seconds / 1e9})
    try:
        import torch

        pinned = torch.from_numpy(host).pin_memory()
        device = torch.empty(host.size, dtype=torch.float32, device="cuda")
        samples = []
        for _ in range(repeat):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            device.copy_(pinned)
            torch.cuda.synchronize()
            samples.append(time.perf_counter() - t0)
        seconds = statistics.median(samples)
        results.append({"what": "host to device, pinned memory (torch)", "bytes": int(host.nbytes), "median_ms": seconds * 1e3,
                        "gbs": host.nbytes / seconds / 1e9})
    except Exception as exc:  # noqa: BLE001
        log(f"pinned-memory transfer not measured ({exc})")
    return results


if __name__ == "__main__":
    main()
