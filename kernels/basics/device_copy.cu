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
