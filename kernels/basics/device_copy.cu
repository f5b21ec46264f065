// Copy src to dst: the kernel that measures how fast memory can go.
//
// A copy does no arithmetic, so its time is bytes moved (read + written)
// over memory bandwidth.  The book uses the fastest version as the
// "measured peak" that every other kernel's bandwidth is compared with.
//
// Versions, in teaching order:
//   1. copy_one_thread_per_element: one float per thread, one thread per
//      element.
//   2. copy_grid_stride_float4: a grid-stride loop over float4, so each
//      thread moves 16 bytes per load and store instruction (one 128-bit
//      access instead of four 32-bit ones): fewer instructions in flight
//      for the same bytes.  n4 counts float4s; the launcher passes
//      n / 4 and needs n to be a multiple of 4 (cudaMalloc'd buffers are
//      aligned to 256 bytes, so float4 loads of them are aligned).
//   3. copy_float4_unrolled: version 2's float4s without the loop, and more
//      of them in flight.  Each thread loads CP_UNROLL float4s, blockDim.x
//      apart (a warp's loads stay contiguous), before it stores any: with
//      __restrict__ the compiler may issue every load first, so a thread has
//      CP_UNROLL * 16 bytes on their way from memory at once, where version
//      2's loop waits for each load before its store (the store might write
//      what the next load reads).  Block 0 copies the n % 4 floats past the
//      last float4, so any n works.
//
// Reference and launchers: device_copy.py.
#include "cuda_helpers.cuh"

// 1. One thread per element.
__global__ void copy_one_thread_per_element(const float* src, float* dst,
                                            int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[i];
    }
}

// 2. Grid-stride loop over 16-byte vectors.
__global__ void copy_grid_stride_float4(const float4* src, float4* dst,
                                        int n4) {
    CUDA_1D_KERNEL_LOOP(i, n4) {
        dst[i] = src[i];
    }
}

// 3. CP_UNROLL float4 loads in flight per thread, then the stores.
#ifndef CP_UNROLL
#define CP_UNROLL 4
#endif
__global__ void copy_float4_unrolled(const float* __restrict__ src, float* __restrict__ dst, int n) {
    const float4* src4 = reinterpret_cast<const float4*>(src);
    float4* dst4 = reinterpret_cast<float4*>(dst);
    const int n4 = n / 4;
    const int first = blockIdx.x * blockDim.x * CP_UNROLL + threadIdx.x;
    float4 v[CP_UNROLL];
#pragma unroll
    for (int u = 0; u < CP_UNROLL; ++u) {
        const int i = first + u * blockDim.x;
        if (i < n4) {
            v[u] = src4[i];
        }
    }
#pragma unroll
    for (int u = 0; u < CP_UNROLL; ++u) {
        const int i = first + u * blockDim.x;
        if (i < n4) {
            dst4[i] = v[u];
        }
    }
    if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) {  // the last n % 4 floats
        dst[4 * n4 + threadIdx.x] = src[4 * n4 + threadIdx.x];
    }
}
