"""Races on global memory: the emulator must name them, and must not see races where there are none.

Every racy kernel here gives the right answer on the emulator (blocks run one
after another, so `*out += v` adds up correctly) and a wrong one on a GPU: the
comparison of outputs cannot find these, the access tracking must.  Each has an
honest twin that must run without complaint.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from kernels.runtime import to_device
from kernels.runtime.errors import KernelRaceError

from block_sums import BLOCK_TREE_SUM
from emulator_reports import reported


TREE = r"""
    __shared__ float partial[128];""" + BLOCK_TREE_SUM

BLOCK_SUM_PLAIN = r"""
__global__ void reduce_sum(const float* x, float* out, int n) {""" + TREE + r"""
    if (threadIdx.x == 0) *out += partial[0];
}
"""

EVERY_THREAD_PLAIN = r"""
__global__ void reduce_sum(const float* x, float* out, int n) {
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += x[i];
    *out += s;
}
"""


def _ones(n=1000):
    return np.ones(n, np.float32)


def race_message(kernel, *args, **launch) -> str:
    return reported(KernelRaceError, kernel, *args, **launch)


def test_thread_zero_of_every_block_adds_without_atomic(emu_build):
    out = np.zeros(1, np.float32)
    text = race_message(emu_build(BLOCK_SUM_PLAIN).function("reduce_sum"), _ones(), out, 1000, grid=8, block=128)
    assert "global memory" in text and "argument 'out'" in text and "element 0" in text
    assert re.search(r"block \(0,0,0\) thread \(0,0,0\)", text) and re.search(r"block \(1,0,0\) thread \(0,0,0\)", text)
    assert "line 12" in text and "*out += partial[0];" in text
    assert "different blocks" in text and "atomicAdd" in text


def test_every_thread_adds_without_atomic(emu_build):
    text = race_message(emu_build(EVERY_THREAD_PLAIN).function("reduce_sum"), _ones(), np.zeros(1, np.float32), 1000,
                        grid=4, block=64)
    assert "argument 'out'" in text and "line 5" in text
    assert "same block" in text and "__syncthreads()" in text


def test_block_sum_with_atomic_add_is_no_race(emu_build):
    out = np.zeros(1, np.float32)
    emu_build(BLOCK_SUM_PLAIN.replace("*out += partial[0];", "atomicAdd(out, partial[0]);")).function("reduce_sum")(
        _ones(), out, 1000, grid=8, block=128)
    assert out[0] == 1000


def test_per_block_partial_sums_are_no_race(emu_build):
    source = BLOCK_SUM_PLAIN.replace("*out += partial[0];", "out[blockIdx.x] = partial[0];")
    out = np.zeros(8, np.float32)
    emu_build(source).function("reduce_sum")(_ones(), out, 1000, grid=8, block=128)
    assert out.sum() == 1000


def test_counter_read_modify_write(emu_build):
    source = r"""
    __global__ void keep_positive(const float* x, float* kept, int* count, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n && x[i] > 0.0f) {
            int slot = *count;          // BUG: read, then write back: two threads get the same slot
            kept[slot] = x[i];
            *count = slot + 1;
        }
    }
    """
    x = np.linspace(-1, 1, 256).astype(np.float32)
    text = race_message(emu_build(source).function("keep_positive"), x, np.zeros(256, np.float32),
                        np.zeros(1, np.int32), 256, grid=4, block=64)
    assert "argument 'count'" in text
    # the honest twin counts with an atomic (where the kept values land then depends on the thread
    # order, which the emulator's two runs would rightly call a race: so it only counts)
    fixed = source.replace("int slot = *count;", "atomicAdd(count, 1);").replace("kept[slot] = x[i];", "")
    fixed = fixed.replace("*count = slot + 1;", "")
    kept, count = np.zeros(256, np.float32), np.zeros(1, np.int32)
    emu_build(fixed).function("keep_positive")(x, kept, count, 256, grid=4, block=64)
    assert count[0] == (x > 0).sum()


def test_overlapping_output_tiles(emu_build):
    source = r"""
    #define TILE 8
    __global__ void scale(const float* x, float* y, int rows, int cols) {
        // BUG: each block covers blockDim (10x10) elements but steps by TILE (8): the tiles overlap
        int r = blockIdx.y * TILE + threadIdx.y, c = blockIdx.x * TILE + threadIdx.x;
        if (r < rows && c < cols) y[r * cols + c] = 2.0f * x[r * cols + c];
    }
    """
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    text = race_message(emu_build(source).function("scale"), x, np.zeros_like(x), 16, 16, grid=(2, 2), block=(10, 10))
    assert "argument 'y'" in text and re.search(r"element \[\d+, \d+\]", text)
    assert "written by" in text and "overlap" in text
    y = np.zeros_like(x)
    emu_build(source).function("scale")(x, y, 16, 16, grid=(2, 2), block=(8, 8))
    np.testing.assert_array_equal(y, 2 * x)


HISTOGRAM = r"""
__global__ void histogram(const int* values, int* counts, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        counts[values[i]] += 1;
}
"""


def test_histogram_without_atomic_add(emu_build):
    values = (np.arange(512) % 10).astype(np.int32)
    text = race_message(emu_build(HISTOGRAM).function("histogram"), values, np.zeros(10, np.int32), 512,
                        grid=4, block=32)
    assert "argument 'counts'" in text and "counts[values[i]] += 1;" in text


def test_histogram_with_atomic_add(emu_build):
    values = (np.arange(512) % 10).astype(np.int32)
    counts = np.zeros(10, np.int32)
    emu_build(HISTOGRAM.replace("counts[values[i]] += 1;", "atomicAdd(&counts[values[i]], 1);")).function(
        "histogram")(values, counts, 512, grid=4, block=32)
    np.testing.assert_array_equal(counts, np.bincount(values, minlength=10))


def test_plain_store_then_atomics_in_one_launch(emu_build):
    source = r"""
    __global__ void total(const float* x, float* out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i == 0) *out = 0.0f;        // BUG: other threads may already have added
        if (i < n) atomicAdd(out, x[i]);
    }
    """
    text = race_message(emu_build(source).function("total"), _ones(256), np.zeros(1, np.float32), 256,
                        grid=2, block=128)
    assert "updated atomically" in text and "written by" in text


def test_grid_stride_loop_writing_its_own_elements(emu_build):
    source = r"""
    __global__ void axpy(int n, float a, const float* x, float* y) {
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
            y[i] += a * x[i];
    }
    """
    x, y = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
    emu_build(source).function("axpy")(1000, 2.0, x, y, grid=3, block=64)
    np.testing.assert_allclose(y, 1 + 2 * np.arange(1000))


def test_block_scratch_with_and_without_barrier(emu_build):
    source = r"""
    __global__ void shift(const float* x, float* scratch, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (threadIdx.x == 0) scratch[blockIdx.x] = x[blockIdx.x * blockDim.x];
        __syncthreads();
        if (i < n) y[i] = x[i] - scratch[blockIdx.x];
    }
    """
    x = np.arange(128, dtype=np.float32)
    scratch, y = np.zeros(4, np.float32), np.zeros(128, np.float32)
    emu_build(source).function("shift")(x, scratch, y, 128, grid=4, block=32)
    np.testing.assert_array_equal(y, x % 32)
    text = race_message(emu_build(source.replace("__syncthreads();", "")).function("shift"), x, scratch, y, 128,
                        grid=4, block=32)
    assert "argument 'scratch'" in text and "same block" in text


def test_reading_what_another_block_wrote_in_an_earlier_launch(emu_build, emu_backend):
    source = r"""
    __global__ void fill(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = x[i] * 2.0f;
    }
    __global__ void rotate(float* y, float* z, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) z[i] = y[(i + 40) % n];   // an element another block wrote, in the launch before
    }
    """
    module = emu_build(source)
    x = np.arange(128, dtype=np.float32)
    y = to_device(np.zeros(128, np.float32), backend=emu_backend)
    z = np.zeros(128, np.float32)
    module.function("fill")(x, y, 128, grid=4, block=32)
    module.function("rotate")(y, z, 128, grid=4, block=32)
    np.testing.assert_array_equal(z, np.roll(2 * x, -40))


def test_last_block_reduction_with_threadfence(emu_build):
    """The CUDA samples' pattern: partial sums, __threadfence(), a counter; the last block adds them up."""
    source = r"""
    __global__ void sum_last_block(const float* x, float* partial_sums, unsigned int* retired, float* out, int n) {
        __shared__ bool last;""" + TREE + r"""
        if (threadIdx.x == 0) {
            partial_sums[blockIdx.x] = partial[0];
            __threadfence();
            unsigned int ticket = atomicInc(retired, gridDim.x);
            last = ticket == gridDim.x - 1;
        }
        __syncthreads();
        if (last && threadIdx.x == 0) {
            float total = 0.0f;
            for (int b = 0; b < gridDim.x; ++b) total += partial_sums[b];
            *out = total;
            *retired = 0;
        }
    }
    """
    out, retired = np.zeros(1, np.float32), np.zeros(1, np.uint32)
    emu_build(source).function("sum_last_block")(_ones(), np.zeros(8, np.float32), retired, out, 1000,
                                                 grid=8, block=128)
    assert out[0] == 1000 and retired[0] == 0
    # without the fence nothing orders the partial sums before the last block reads them
    text = race_message(emu_build(source.replace("__threadfence();", "")).function("sum_last_block"), _ones(),
                        np.zeros(8, np.float32), retired, out, 1000, grid=8, block=128)
    assert "argument 'partial_sums'" in text or "argument 'retired'" in text


def test_device_array_updated_without_atomic(emu_build):
    """A __device__ array indexed by the data (a direct access to a __device__ scalar is not checked
    by AddressSanitizer, and so not tracked)."""
    source = r"""
    __device__ int counts[4];
    __global__ void count(const int* labels, int* out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) counts[labels[i]] += 1;     // BUG: threads with the same label add into one element
        if (i == 0) out[0] = 1;
    }
    """
    labels = (np.arange(64) % 4).astype(np.int32)
    text = race_message(emu_build(source).function("count"), labels, np.zeros(1, np.int32), 64, grid=2, block=32)
    assert "__device__ variable 'counts'" in text and "counts[labels[i]] += 1;" in text
    fixed = emu_build(source.replace("counts[labels[i]] += 1;", "atomicAdd(&counts[labels[i]], 1);"))
    fixed.function("count")(labels, np.zeros(1, np.int32), 64, grid=2, block=32)
    np.testing.assert_array_equal(fixed.get_global("counts", np.int32, 4), [16, 16, 16, 16])
