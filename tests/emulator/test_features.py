"""The CUDA C features the CPU emulator runs: each test launches a small kernel and checks its result."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from kernels.runtime import KernelCompileError, KernelLaunchError, empty, to_device
from kernels.runtime.emulator import EmulatorBackend

from block_sums import BLOCK_TREE_SUM


def test_vector_add_with_partial_last_block(emu_build):
    source = r"""
    __global__ void vector_add(const float* a, const float* b, float* c, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) c[i] = a[i] + b[i];
    }
    """
    add = emu_build(source).function("vector_add")
    a = np.arange(1000, dtype=np.float32)
    b = np.full(1000, 0.5, np.float32)
    c = np.zeros(1000, np.float32)
    add(a, b, c, 1000, grid=4, block=256)
    np.testing.assert_array_equal(c, a + b)


def test_2d_indexing(emu_build):
    source = r"""
    __global__ void coords(int* out, int width, int height) {
        int x = blockIdx.x * blockDim.x + threadIdx.x;
        int y = blockIdx.y * blockDim.y + threadIdx.y;
        if (x < width && y < height) out[y * width + x] = 1000 * y + x + 1000000 * (gridDim.x * 10 + blockDim.y);
    }
    """
    out = np.zeros((7, 11), np.int32)
    emu_build(source).function("coords")(out, 11, 7, grid=(3, 2), block=(4, 5))
    y, x = np.mgrid[0:7, 0:11]
    np.testing.assert_array_equal(out, 1000 * y + x + 1000000 * 35)


def test_3d_indexing(emu_build):
    source = r"""
    __global__ void ids(int* out) {
        int tx = blockIdx.x * blockDim.x + threadIdx.x;
        int ty = blockIdx.y * blockDim.y + threadIdx.y;
        int tz = blockIdx.z * blockDim.z + threadIdx.z;
        int nx = gridDim.x * blockDim.x, ny = gridDim.y * blockDim.y;
        out[(tz * ny + ty) * nx + tx] = tx + 100 * ty + 10000 * tz;
    }
    """
    out = np.zeros((4, 6, 8), np.int32)  # z, y, x
    emu_build(source).function("ids")(out, grid=(2, 3, 2), block=(4, 2, 2))
    z, y, x = np.mgrid[0:4, 0:6, 0:8]
    np.testing.assert_array_equal(out, x + 100 * y + 10000 * z)


def test_qualifiers_and_attributes(emu_build):
    source = r"""
    __device__ __forceinline__ float square(float x) { return x * x; }
    __host__ __device__ inline int twice(int x) { return 2 * x; }
    __device__ __noinline__ float cube(float x) { return x * square(x); }

    extern "C" __global__ void __launch_bounds__(128)
    polynomial(const float* __restrict__ x, float* __restrict__ y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        float acc = 0.0f;
    #pragma unroll
        for (int k = 0; k < 4; ++k) acc += square(x[i]) * k;
        y[i] = acc + cube(x[i]) + twice(1);
    }
    """
    x = np.linspace(-2, 2, 100).astype(np.float32)
    y = np.zeros_like(x)
    emu_build(source).function("polynomial")(x, y, 100, grid=1, block=128)
    np.testing.assert_allclose(y, 6 * x**2 + x**3 + 2, rtol=1e-5, atol=1e-5)


def test_noinline_spelled_either_way_beside_standard_headers(emu_build):
    # libstdc++ 13 writes __attribute__((__noinline__)) in its headers; a reader may too.
    # A __noinline__ macro (as CUDA's own headers define it) breaks both.
    source = r"""
    #include <memory>
    #include <string>
    __device__ __noinline__ float twice(float v) { return 2.0f * v; }
    __device__ __attribute__((__noinline__)) float thrice(float v) { return 3.0f * v; }
    extern "C" __global__ void both(float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] = twice(x[i]) + thrice(1.0f);
    }
    """
    x = np.arange(5, dtype=np.float32)
    emu_build(source).function("both")(x, 5, grid=1, block=32)
    np.testing.assert_array_equal(x, 2 * np.arange(5) + 3)


def test_static_shared_2d_tile_transpose(emu_build):
    source = r"""
    #define TILE 8
    __global__ void transpose(const float* in, float* out, int rows, int cols) {
        __shared__ float tile[TILE][TILE + 1];
        int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
        if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
        __syncthreads();
        int tx = blockIdx.y * TILE + threadIdx.x, ty = blockIdx.x * TILE + threadIdx.y;
        if (tx < rows && ty < cols) out[ty * rows + tx] = tile[threadIdx.x][threadIdx.y];
    }
    """
    a = np.arange(13 * 21, dtype=np.float32).reshape(13, 21)
    out = np.zeros((21, 13), np.float32)
    emu_build(source).function("transpose")(a, out, 13, 21, grid=(3, 2), block=(8, 8))
    np.testing.assert_array_equal(out, a.T)


def test_dynamic_shared_memory_sized_at_launch(emu_build):
    source = r"""
    __global__ void reverse_block(float* x) {
        extern __shared__ float buffer[];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        buffer[threadIdx.x] = x[i];
        __syncthreads();
        x[i] = buffer[blockDim.x - 1 - threadIdx.x];
    }
    """
    kernel = emu_build(source).function("reverse_block")
    for threads in (32, 96):
        x = np.arange(2 * threads, dtype=np.float32)
        kernel(x, grid=2, block=threads, shared=threads * 4)
        expected = np.concatenate([np.arange(threads)[::-1], np.arange(threads, 2 * threads)[::-1]])
        np.testing.assert_array_equal(x, expected)


def test_file_scope_extern_shared_and_shared_reduction(emu_build):
    source = r"""
    extern __shared__ float partial[];
    __global__ void block_sums(const float* x, float* sums, int n) {""" + BLOCK_TREE_SUM + r"""
        if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
    }
    """
    x = np.random.default_rng(1).random(1000).astype(np.float32)
    sums = np.zeros(8, np.float32)
    emu_build(source).function("block_sums")(x, sums, 1000, grid=8, block=128, shared=128 * 4)
    np.testing.assert_allclose(sums, np.add.reduceat(np.pad(x, (0, 24)), np.arange(0, 1024, 128)), rtol=1e-5)


def test_constant_memory_and_device_variables(emu_build):
    source = r"""
    __constant__ float weights[5];
    __constant__ int offset;
    __device__ int launches;
    __device__ float scale = 2.0f;
    __global__ void apply(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i == 0) atomicAdd(&launches, 1);
        if (i >= n) return;
        float acc = 0.0f;
        for (int k = 0; k < 5; ++k) acc += weights[k] * x[(i + k) % n];
        y[i] = scale * acc + offset;
    }
    """
    module = emu_build(source)
    w = np.array([1, -2, 3, 0.5, 0.25], np.float32)
    module.set_constant("weights", w)
    module.set_constant("offset", np.array([7], np.int32))
    x = np.random.default_rng(2).random(50).astype(np.float32)
    y = np.zeros_like(x)
    apply = module.function("apply")
    apply(x, y, 50, grid=2, block=32)
    expected = 2 * sum(w[k] * np.roll(x, -k) for k in range(5)) + 7
    np.testing.assert_allclose(y, expected, rtol=1e-5)
    apply(x, y, 50, grid=2, block=32)
    assert module.get_global("launches", np.int32, 1)[0] == 2  # each launch counts once, checks or not
    np.testing.assert_array_equal(module.get_global("weights", np.float32, 5), w)
    with pytest.raises(Exception, match="no __constant__ or __device__ variable 'wieghts'"):
        module.set_constant("wieghts", w)


def test_atomics(emu_build):
    source = r"""
    __global__ void atomics(const int* v, int* ints, unsigned* bits, float* fsum, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        atomicAdd(&ints[0], v[i]);
        atomicMax(&ints[1], v[i]);
        atomicMin(&ints[2], v[i]);
        atomicSub(&ints[3], 1);
        atomicExch(&ints[4], 42);
        if (i == 17) ints[6] = atomicCAS(&ints[5], 0, 99) + 10 * atomicCAS(&ints[5], 0, 7);  // succeeds, then fails
        atomicOr(&bits[0], 1u << (i % 32));
        atomicAnd(&bits[1], ~(1u << (i % 16)));
        atomicAdd(fsum, 0.5f * v[i]);
        unsigned long long* wide = (unsigned long long*)&bits[2];
        atomicAdd(wide, 1ull);
    }
    """
    v = np.random.default_rng(3).integers(-100, 100, 200).astype(np.int32)
    ints = np.array([0, -(2**31), 2**31 - 1, 0, 0, 0, 0], np.int32)
    bits = np.array([0, 0xFFFFFFFF, 0, 0], np.uint32)
    fsum = np.zeros(1, np.float32)
    emu_build(source).function("atomics")(v, ints, bits, fsum, 200, grid=2, block=128)
    assert ints[0] == v.sum() and ints[1] == v.max() and ints[2] == v.min()
    assert ints[3] == -200 and ints[4] == 42 and ints[5] == 99 and ints[6] == 990
    assert bits[0] == 0xFFFFFFFF and bits[1] == 0xFFFF0000
    assert bits[2] == 200 and bits[3] == 0
    np.testing.assert_allclose(fsum[0], 0.5 * v.sum(), rtol=1e-5)


def test_warp_shuffle_reduction(emu_build):
    source = r"""
    __inline__ __device__ float warp_sum(float v) {
        for (int offset = warpSize / 2; offset > 0; offset /= 2)
            v += __shfl_down_sync(0xffffffff, v, offset);
        return v;
    }
    __global__ void block_sum(const float* x, float* out, int n) {
        __shared__ float warp_sums[32];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        float v = i < n ? x[i] : 0.0f;
        v = warp_sum(v);
        int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
        if (lane == 0) warp_sums[warp] = v;
        __syncthreads();
        if (warp == 0) {
            v = lane < blockDim.x / warpSize ? warp_sums[lane] : 0.0f;
            v = warp_sum(v);
            if (lane == 0) out[blockIdx.x] = v;
        }
    }
    """
    x = np.random.default_rng(4).random(1000).astype(np.float32)
    out = np.zeros(4, np.float32)
    emu_build(source.replace("__inline__", "inline")).function("block_sum")(x, out, 1000, grid=4, block=256)
    np.testing.assert_allclose(out, [x[k * 256 : (k + 1) * 256].sum() for k in range(4)], rtol=1e-5)


def test_each_warp_intrinsic(emu_build):
    source = r"""
    __global__ void warp_ops(const int* x, int* out) {
        int lane = threadIdx.x % 32, t = threadIdx.x;
        int v = x[t];
        out[0 * 64 + t] = __shfl_sync(0xffffffff, v, 3);              // broadcast lane 3
        out[1 * 64 + t] = __shfl_sync(0xffffffff, v, lane + 1, 8);    // rotate within groups of 8
        int s = v;                                                     // inclusive scan
        for (int d = 1; d < 32; d *= 2) {
            int up = __shfl_up_sync(0xffffffff, s, d);
            if (lane >= d) s += up;
        }
        out[2 * 64 + t] = s;
        out[3 * 64 + t] = __shfl_down_sync(0xffffffff, v, 1);
        out[4 * 64 + t] = __shfl_xor_sync(0xffffffff, v, 1);
        unsigned ballot = __ballot_sync(0xffffffff, v % 2 == 1);
        out[5 * 64 + t] = (int)ballot;
        out[6 * 64 + t] = __any_sync(0xffffffff, v == 5) + 2 * __all_sync(0xffffffff, v >= 0);
        unsigned active = __activemask();
        out[7 * 64 + t] = (int)active;
        __syncwarp();
        if (lane < 16) {
            unsigned half = __ballot_sync(0x0000ffff, lane % 4 == 0);
            out[8 * 64 + t] = (int)half;
        } else {
            out[8 * 64 + t] = 0;
        }
    }
    """
    rng = np.random.default_rng(5)
    x = rng.integers(0, 10, 64).astype(np.int32)
    out = np.zeros(9 * 64, np.int32)
    emu_build(source).function("warp_ops")(x, out, grid=1, block=64)
    r = out.reshape(9, 64)
    w = x.reshape(2, 32)
    lanes = np.arange(32)
    np.testing.assert_array_equal(r[0].reshape(2, 32), np.repeat(w[:, 3:4], 32, axis=1))
    np.testing.assert_array_equal(r[1].reshape(2, 32), w[:, (lanes // 8) * 8 + (lanes + 1) % 8])
    np.testing.assert_array_equal(r[2].reshape(2, 32), np.cumsum(w, axis=1))
    np.testing.assert_array_equal(r[3].reshape(2, 32), np.where(lanes < 31, w[:, np.minimum(lanes + 1, 31)], w))
    np.testing.assert_array_equal(r[4].reshape(2, 32), w[:, lanes ^ 1])
    ballots = [int(sum(1 << i for i in range(32) if w[k, i] % 2 == 1)) for k in range(2)]
    np.testing.assert_array_equal(r[5].reshape(2, 32).view(np.uint32), np.repeat(np.array(ballots, np.uint32)[:, None], 32, 1))
    np.testing.assert_array_equal(r[6].reshape(2, 32), np.repeat((np.any(w == 5, 1) + 2)[:, None], 32, 1))
    assert np.all(r[7].view(np.uint32) == 0xFFFFFFFF)
    assert np.all(r[8].reshape(2, 32)[:, :16] == 0x1111) and np.all(r[8].reshape(2, 32)[:, 16:] == 0)


def test_partial_warp_shuffle(emu_build):
    source = r"""
    __global__ void partial(float* x) {
        float v = x[threadIdx.x];
        unsigned mask = __ballot_sync(__activemask(), 1);
        for (int o = 16; o > 0; o /= 2) {
            float other = __shfl_down_sync(mask, v, o);
            if (threadIdx.x + o < blockDim.x) v += other;
        }
        if (threadIdx.x == 0) x[0] = v;
    }
    """
    x = np.arange(20, dtype=np.float32)
    emu_build(source).function("partial")(x, grid=1, block=20)
    assert x[0] == np.arange(20).sum()


def test_math_functions_against_numpy(emu_build):
    source = r"""
    __global__ void math(const float* x, const float* y, float* out, int* iout, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        float a = x[i], b = y[i];
        out[0 * n + i] = expf(a);
        out[1 * n + i] = __expf(a);
        out[2 * n + i] = logf(b);
        out[3 * n + i] = __logf(b);
        out[4 * n + i] = rsqrtf(b);
        out[5 * n + i] = sqrtf(b);
        out[6 * n + i] = fmaxf(a, b);
        out[7 * n + i] = fminf(a, b);
        out[8 * n + i] = fabsf(a);
        out[9 * n + i] = __fdividef(a, b);
        out[10 * n + i] = powf(b, a);
        out[11 * n + i] = tanhf(a);
        out[12 * n + i] = fmaf(a, b, 1.0f);
        out[13 * n + i] = __saturatef(a);
        out[14 * n + i] = max(a, b) - min(a, b);
        out[15 * n + i] = sinf(a) + __cosf(a);
        iout[0 * n + i] = __float2int_rn(a * 10.0f);
        iout[1 * n + i] = min(i, 7) + max(i, 3);
        iout[2 * n + i] = (int)min(4u, (unsigned)i);
        iout[3 * n + i] = (int)max((long long)i, 5ll);
    }
    """
    n = 64
    rng = np.random.default_rng(6)
    x = rng.uniform(-3, 3, n).astype(np.float32)
    y = rng.uniform(0.1, 4, n).astype(np.float32)
    out = np.zeros((16, n), np.float32)
    iout = np.zeros((4, n), np.int32)
    emu_build(source).function("math")(x, y, out, iout, n, grid=1, block=64)
    expected = [
        np.exp(x), np.exp(x), np.log(y), np.log(y), 1 / np.sqrt(y), np.sqrt(y), np.maximum(x, y), np.minimum(x, y),
        np.abs(x), x / y, y**x, np.tanh(x), x * y + 1, np.clip(x, 0, 1), np.abs(x - y), np.sin(x) + np.cos(x),
    ]
    for k, e in enumerate(expected):
        np.testing.assert_allclose(out[k], e, rtol=2e-5, atol=1e-6, err_msg=f"row {k}")
    i = np.arange(n)
    np.testing.assert_array_equal(iout[0], np.rint(x * np.float32(10)).astype(np.int32))
    np.testing.assert_array_equal(iout[1], np.minimum(i, 7) + np.maximum(i, 3))
    np.testing.assert_array_equal(iout[2], np.minimum(4, i))
    np.testing.assert_array_equal(iout[3], np.maximum(i, 5))


def test_vector_types(emu_build):
    source = r"""
    __global__ void vectors(const float4* in, float4* out, float2* f2, int2* i2, int4* i4, int n4) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n4) return;
        float4 v = __ldg(&in[i]);
        out[i] = make_float4(v.w, v.z, v.y, v.x);
        f2[i] = make_float2(v.x + v.y, v.z * v.w);
        i2[i] = make_int2(i, -i);
        uint3 t = threadIdx;
        dim3 d(4, 2);
        i4[i] = make_int4(t.x, d.x, d.y, d.z);
        float3 p = make_float3(1.0f, 2.0f, 3.0f);
        if (p.x + p.y + p.z != 6.0f) out[i].x = -1.0f;
    }
    """
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    f2 = np.zeros(16, np.float32)
    i2 = np.zeros(16, np.int32)
    i4 = np.zeros(32, np.int32)
    emu_build(source).function("vectors")(x, out, f2, i2, i4, 8, grid=2, block=4)
    np.testing.assert_array_equal(out.reshape(8, 4), x.reshape(8, 4)[:, ::-1])
    q = x.reshape(8, 4)
    np.testing.assert_array_equal(f2.reshape(8, 2), np.stack([q[:, 0] + q[:, 1], q[:, 2] * q[:, 3]], 1))
    np.testing.assert_array_equal(i2.reshape(8, 2), np.stack([np.arange(8), -np.arange(8)], 1))
    np.testing.assert_array_equal(i4.reshape(8, 4), [[k % 4, 4, 2, 1] for k in range(8)])


def test_printf_is_shown_after_the_launch(emu_build, capsys):
    source = r"""
    #include <cstdio>
    __global__ void hello(int tag) {
        printf("block %d thread %d tag %d\n", blockIdx.x, threadIdx.x, tag);
    }
    """
    emu_build(source).function("hello")(7, grid=2, block=2)
    lines = capsys.readouterr().out.splitlines()
    assert sorted(lines) == sorted(f"block {b} thread {t} tag 7" for b in range(2) for t in range(2))


def test_assert_failure_is_reported(emu_build):
    source = r"""
    #include <assert.h>
    __global__ void checked(const int* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            assert(x[i] >= 0);
        }
    }
    """
    kernel = emu_build(source).function("checked")
    kernel(np.arange(10, dtype=np.int32), 10, grid=1, block=32)
    x = np.arange(10, dtype=np.int32)
    x[6] = -1
    with pytest.raises(KernelLaunchError) as info:
        kernel(x, 10, grid=1, block=32)
    message = str(info.value)
    assert "assert(x[i] >= 0)" in message and "line 6" in message and "thread (6,0,0)" in message


def test_tensorflow_style_grid_stride_loop_with_int64(emu_build):
    source = r"""
    #include <cstdint>
    typedef int64_t int64;
    #define CUDA_1D_KERNEL_LOOP(i, n)                                    \
      for (int64 i = blockIdx.x * (int64)blockDim.x + threadIdx.x; i < (n); \
           i += (int64)blockDim.x * gridDim.x)

    __global__ void relu_forward(const int64 nthreads, const float* in, float* out) {
        CUDA_1D_KERNEL_LOOP(index, nthreads) {
            out[index] = in[index] > 0 ? in[index] : 0.0f;
        }
    }
    """
    x = np.random.default_rng(7).standard_normal(5000).astype(np.float32)
    y = np.zeros_like(x)
    emu_build(source).function("relu_forward")(5000, x, y, grid=3, block=128)
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_two_launches_in_a_row_share_device_buffers(emu_build):
    source = r"""
    __global__ void fill(float* x, float value, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] = value + i;
    }
    __global__ void scale(float* x, float factor, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= factor;
    }
    """
    module = emu_build(source)
    buf = empty(100, np.float32, backend=module.backend)
    module.function("fill")(buf, 1.0, 100, grid=1, block=128)
    module.function("scale")(buf, 3.0, 100, grid=1, block=128)
    np.testing.assert_array_equal(buf.get(), 3 * (1 + np.arange(100, dtype=np.float32)))
    same = to_device(np.ones(100, np.float32), backend=module.backend)
    module.function("scale")(same, 2.0, 100, grid=1, block=128)
    np.testing.assert_array_equal(same.get(), 2)


def test_syncthreads_count(emu_build):
    source = r"""
    __global__ void count(const int* x, int* out) {
        int c = __syncthreads_count(x[threadIdx.x] > 2);
        int any = __syncthreads_or(x[threadIdx.x] == 4);
        int all = __syncthreads_and(x[threadIdx.x] >= 0);
        if (threadIdx.x == 0) { out[0] = c; out[1] = any; out[2] = all; }
    }
    """
    x = np.arange(8, dtype=np.int32)
    out = np.zeros(3, np.int32)
    emu_build(source).function("count")(x, out, grid=1, block=8)
    assert out.tolist() == [5, 1, 1]


@pytest.mark.parametrize("name, wrong_line", [
    ("broken.cu", "x[i] = undefined_value;"),
    # the error is raised inside the emulator's atomicAdd, but shown where the reader called it
    ("builtin.cu", 'atomicAdd(x, "one");'),
], ids=["undefined name", "inside a builtin"])
def test_compile_error_names_the_readers_line(emu_build, name, wrong_line):
    source = f"__global__ void k(float* x) {{\n    int i = threadIdx.x;\n    {wrong_line}\n}}\n"
    with pytest.raises(KernelCompileError) as info:
        emu_build(source, name=name)
    message = str(info.value)
    assert f"{name}:3" in message
    assert wrong_line in message  # the line itself is quoted
    assert "prelude.h" not in message


def test_compile_cache_is_hit_the_second_time(emu_build):
    source = f"// {uuid.uuid4()}\n__global__ void k(float* x) {{ x[threadIdx.x] = 1.0f; }}\n"
    first = emu_build(source)
    second = emu_build(source)
    assert not first.compiled.from_cache
    assert second.compiled.from_cache
    x = np.zeros(4, np.float32)
    second.function("k")(x, grid=1, block=4)
    assert np.all(x == 1)


def test_backend_facts():
    backend = EmulatorBackend(checks=False)
    assert backend.name == "cpu"
    limits = backend.limits()
    assert limits.max_threads_per_block == 1024 and limits.warp_size == 32
    assert limits.max_shared_bytes_per_block == 48 * 1024 and limits.max_shared_bytes_optin == 227 * 1024
    info = backend.describe()
    assert info["cpu"] and "compiler" in info and info["checks"] is False
    backend.synchronize()


def test_backend_selected_by_environment(monkeypatch):
    from kernels.runtime import selection

    monkeypatch.setenv("DLK_BACKEND", "cpu")
    monkeypatch.setattr(selection, "_current", None)
    assert selection.current_backend().name == "cpu"
    monkeypatch.setattr(selection, "_current", None)


def test_declarations_the_rewriter_must_handle(emu_build):
    source = r"""
    #include <cuda_runtime.h>
    #include <math_constants.h>
    #define N 4
    namespace helpers {
    __device__ int hidden = 3;
    __device__ float twice(float x) { return 2 * x; }
    }
    __device__ const float table[3] = {1.0f, 2.0f, 3.0f};
    __shared__ float file_scope_shared[N];
    template <typename T> __device__ T add_one(T v) {
        __shared__ T scratch[N];
        scratch[threadIdx.x] = v + 1;
        __syncthreads();
        return scratch[threadIdx.x];
    }
    extern "C" {
    __global__ void k(float* out) {
        extern __shared__ __align__(16) unsigned char smem[];
        float* f = reinterpret_cast<float*>(smem);
        __shared__ __align__(16) float a[N], b[N];
        static __shared__ int counter;
        volatile __shared__ float vol[N];
        if (threadIdx.x == 0) counter = 0;
        a[threadIdx.x] = threadIdx.x;
        b[threadIdx.x] = table[threadIdx.x % 3];
        vol[threadIdx.x] = 1;
        f[threadIdx.x] = helpers::twice(1.0f);
        file_scope_shared[threadIdx.x] = 5;
        __syncthreads();
        atomicAdd(&counter, 1);
        __syncthreads();
        out[threadIdx.x] = a[N - 1 - threadIdx.x] + b[threadIdx.x] + counter + vol[threadIdx.x] + f[threadIdx.x]
                         + add_one(1.0f) + file_scope_shared[0] + (CUDART_INF_F > 0);
    }
    }
    """
    out = np.zeros(4, np.float32)
    emu_build(source).function("k")(out, grid=1, block=4, shared=16)
    np.testing.assert_array_equal(out, [19, 19, 19, 16])


def test_portable_ucontext_fibers(emu_build, monkeypatch):
    """The fallback for machines other than x86-64: fibers switched by the C library."""
    monkeypatch.setenv("DLK_EMULATOR_UCONTEXT", "1")
    source = r"""
    __global__ void rotate(float* x) {
        __shared__ float s[64];
        s[threadIdx.x] = x[threadIdx.x];
        __syncthreads();
        float v = s[(threadIdx.x + 1) % 64];
        v += __shfl_xor_sync(0xffffffff, v, 1) * 0.0f;
        x[threadIdx.x] = v;
    }
    """
    x = np.arange(64, dtype=np.float32)
    emu_build(source).function("rotate")(x, grid=1, block=64)
    np.testing.assert_array_equal(x, np.roll(np.arange(64), -1))


def test_device_variables_survive_when_idle_workers_are_stopped(emu_build):
    backend = EmulatorBackend(checks=False)
    backend.max_workers = 1
    source = r"""
    __device__ int counter;
    __global__ void bump(int* seen) { seen[0] = atomicAdd(&counter, 1) + 1; }
    """
    first = emu_build(source, backend=backend)
    seen = np.zeros(1, np.int32)
    first.function("bump")(seen, grid=1, block=1)
    first.function("bump")(seen, grid=1, block=1)
    second = emu_build(source.replace("bump", "bump2"), backend=backend)
    second.function("bump2")(seen, grid=1, block=1)  # starts a worker: the first module's is stopped
    assert first.compiled._worker is None
    first.function("bump")(seen, grid=1, block=1)
    assert seen[0] == 3 and first.get_global("counter", np.int32, 1)[0] == 3


def test_editing_an_included_header_rebuilds(emu_build, tmp_path):
    header = tmp_path / "constants.cuh"
    header.write_text("#define FILL 1.0f\n")
    source = f'// {uuid.uuid4()}\n#include "constants.cuh"\n__global__ void fill(float* x) {{ x[threadIdx.x] = FILL; }}\n'
    x = np.zeros(4, np.float32)
    emu_build(source, include_dirs=[str(tmp_path)]).function("fill")(x, grid=1, block=4)
    assert np.all(x == 1)
    header.write_text("#define FILL 2.0f\n")
    module = emu_build(source, include_dirs=[str(tmp_path)])
    assert not module.compiled.from_cache
    module.function("fill")(x, grid=1, block=4)
    assert np.all(x == 2)
