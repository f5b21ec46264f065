"""How fast the CPU emulator runs two typical teaching kernels, with its checks on.

Cases (each kernel here is a plain shared-memory tiled version, as a chapter
would write it):

* LeNet-5 C1 convolution forward: a batch of 8 images of 1x32x32, 6 filters
  of 5x5, output 8x6x28x28; each block computes one 16x16 output tile of one
  image and channel from a 20x20 input tile in shared memory.
* GEMM 256x256x256 with 16x16 tiles in shared memory.

The time is the wall-clock time of one launch (the emulator's launches are
synchronous), and the CPU time of the worker process that ran it, with the race and uninitialised-memory checks on (each launch
runs twice) and AddressSanitizer in the build; the first launch, which starts
the worker, is not counted.  Results go to benchmarks/results/emulator_speed.json.

Usage: python3 -m benchmarks.emulator_speed [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS_DIR, now_utc
from kernels.runtime import compile_source
from kernels.runtime.emulator import EmulatorBackend

CONV_SOURCE = r"""
#define TILE 16
#define K 5
#define IN_TILE (TILE + K - 1)

// One block: a TILE x TILE tile of output channel blockIdx.z % C_OUT of image blockIdx.z / C_OUT.
__global__ void conv2d_forward_tiled(const float* __restrict__ x, const float* __restrict__ w,
                                     const float* __restrict__ bias, float* __restrict__ y,
                                     int c_out, int h, int w_in, int h_out, int w_out) {
    __shared__ float tile[IN_TILE][IN_TILE];
    __shared__ float filt[K][K];
    int image = blockIdx.z / c_out, oc = blockIdx.z % c_out;
    int ox0 = blockIdx.x * TILE, oy0 = blockIdx.y * TILE;
    int tx = threadIdx.x, ty = threadIdx.y;
    const float* img = x + (size_t)image * h * w_in;
    // load the input tile with its halo (zeros past the edge)
    for (int yy = ty; yy < IN_TILE; yy += TILE)
        for (int xx = tx; xx < IN_TILE; xx += TILE) {
            int iy = oy0 + yy, ix = ox0 + xx;
            tile[yy][xx] = (iy < h && ix < w_in) ? img[iy * w_in + ix] : 0.0f;
        }
    if (ty < K && tx < K) filt[ty][tx] = w[(oc * K + ty) * K + tx];
    __syncthreads();
    int oy = oy0 + ty, ox = ox0 + tx;
    if (oy < h_out && ox < w_out) {
        float acc = bias[oc];
#pragma unroll
        for (int ky = 0; ky < K; ++ky)
#pragma unroll
            for (int kx = 0; kx < K; ++kx) acc += tile[ty + ky][tx + kx] * filt[ky][kx];
        y[(((size_t)image * c_out + oc) * h_out + oy) * w_out + ox] = acc;
    }
}
"""

GEMM_SOURCE = r"""
#define TILE 16

__global__ void gemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                           int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        int ak = t * TILE + threadIdx.x, bk = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[row * K + ak] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (bk < K && col < N) ? B[bk * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
"""


def conv_reference(x, w, b):
    n, _, h, wi = x.shape
    c_out, _, k, _ = w.shape
    out = np.zeros((n, c_out, h - k + 1, wi - k + 1), np.float64)
    for ky in range(k):
        for kx in range(k):
            out += x[:, :, ky : ky + h - k + 1, kx : kx + wi - k + 1].astype(np.float64) * w[None, :, 0, ky, kx, None, None]
    return out + b[None, :, None, None]


def worker_cpu_seconds(kernel) -> float:
    """CPU time (user + system) the kernel's worker process has used so far (Linux)."""
    pid = kernel.module.compiled._worker.process.pid
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def time_case(kernel, launch, check, repeats: int) -> dict:
    launch()  # starts the worker
    check()
    times, cpu = [], []
    for _ in range(repeats):
        cpu0 = worker_cpu_seconds(kernel)
        start = time.perf_counter()
        launch()
        times.append(time.perf_counter() - start)
        cpu.append(worker_cpu_seconds(kernel) - cpu0)
    check()
    return {"seconds": statistics.median(times), "worker_cpu_seconds": statistics.median(cpu)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS_DIR / "emulator_speed.json"))
    args = parser.parse_args()

    backend = EmulatorBackend(checks=True)
    rng = np.random.default_rng(0)
    cases = {}

    # LeNet-5 C1
    x = rng.standard_normal((8, 1, 32, 32)).astype(np.float32)
    w = rng.standard_normal((6, 1, 5, 5)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    y = np.zeros((8, 6, 28, 28), np.float32)
    conv = compile_source(CONV_SOURCE, "conv2d_bench.cu", backend=backend).function("conv2d_forward_tiled")

    def conv_launch():
        conv(x, w, b, y, 6, 32, 32, 28, 28, grid=(2, 2, 8 * 6), block=(16, 16))

    def conv_check():
        np.testing.assert_allclose(y, conv_reference(x, w, b), rtol=1e-4, atol=1e-4)

    cases["lenet5_c1_conv_forward_batch8"] = {
        "shape": "x 8x1x32x32, w 6x1x5x5 -> y 8x6x28x28",
        "grid": [2, 2, 48],
        "block": [16, 16, 1],
        **time_case(conv, conv_launch, conv_check, args.repeats),
    }

    # GEMM
    n = 256
    A = rng.standard_normal((n, n)).astype(np.float32)
    B = rng.standard_normal((n, n)).astype(np.float32)
    C = np.zeros((n, n), np.float32)
    gemm = compile_source(GEMM_SOURCE, "gemm_bench.cu", backend=backend).function("gemm_tiled")

    def gemm_launch():
        gemm(A, B, C, n, n, n, grid=(n // 16, n // 16), block=(16, 16))

    def gemm_check():
        np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-3, atol=1e-3)

    cases["gemm_256x256x256_tile16"] = {
        "shape": "256x256 @ 256x256",
        "grid": [16, 16, 1],
        "block": [16, 16, 1],
        **time_case(gemm, gemm_launch, gemm_check, args.repeats),
    }

    info = backend.describe()
    result = {
        "benchmark": "emulator_speed",
        "date": now_utc(),
        "device": info["name"],
        "cpu_model": info["cpu"],
        "machine": platform.machine(),
        "cores_used": 1,
        "python": platform.python_version(),
        "compiler": info.get("compiler"),
        "sanitizer": info.get("sanitizer"),
        "checks": backend.checks,
        # the machine may be shared: its load when the run ended, for reading the times
        "load_average_1min": round(os.getloadavg()[0], 2),
        "target_seconds": 2.0,
        "repeats": args.repeats,
        "cases": cases,
        "note": "median wall-clock seconds per launch on the CPU emulator, and the CPU time of its worker process "
        "(less affected by other load on the machine); no GPU peer in this benchmark",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for name, case in cases.items():
        print(f"{name}: {case['seconds']:.3f} s per launch, worker CPU {case['worker_cpu_seconds']:.2f} s (checks on)")
    print(f"wrote {out}")


if __name__ == "__main__":
    os.environ.setdefault("DLK_EMULATOR_CHECKS", "1")
    main()
