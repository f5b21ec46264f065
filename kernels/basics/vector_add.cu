// Vector addition, c[i] = a[i] + b[i]: the first kernel of the book.
//
// Versions, in teaching order:
//   1. vector_add_one_thread_per_element: one thread per element.  The
//      launch must cover n (blocks = ceil(n / threads per block)), so the
//      last block has threads past the end, and the `if (i < n)` guard keeps
//      them from writing out of bounds.
//   2. vector_add_grid_stride: the same work in a grid-stride loop
//      (CUDA_1D_KERNEL_LOOP from cuda_helpers.cuh).  Each thread handles
//      every (gridDim.x * blockDim.x)-th element, so a grid sized for the
//      device, not for n, covers any n.
//   3. vector_add_float4: what a library's elementwise kernel does.  Each
//      thread loads 16 bytes per instruction (float4) and issues all of its
//      VA_UNROLL loads of a and of b before its first store, so every thread
//      has 2 * VA_UNROLL * 16 bytes on their way from memory at once instead
//      of one 4-byte pair; __restrict__ promises the compiler that c does not
//      alias a or b, which is what lets it move the loads ahead of the stores.
//      A block covers blockDim.x * VA_UNROLL float4s, the u-th load of each
//      thread blockDim.x float4s after its (u-1)-th, so a warp's loads stay
//      contiguous.  Block 0 adds the n % 4 elements past the last float4.
//      The arrays must be 16-byte aligned (every device allocation is).
//
// All move 12 bytes per element (two 4-byte reads, one 4-byte write) for
// one addition: their speed is set by memory bandwidth, never by arithmetic.
// The NumPy reference and a launcher per version are in vector_add.py.
#include "cuda_helpers.cuh"

// 1. One thread per element.
__global__ void vector_add_one_thread_per_element(const float* a, const float* b,
                                                  float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // this thread's element
    if (i < n) {                                    // the last block overhangs
        c[i] = a[i] + b[i];
    }
}

// 2. Grid-stride loop: what changed is only the loop, so the grid can be
//    smaller than n / blockDim.x.
__global__ void vector_add_grid_stride(const float* a, const float* b, float* c,
                                       int n) {
    CUDA_1D_KERNEL_LOOP(i, n) {
        c[i] = a[i] + b[i];
    }
}

// 3. float4 loads, VA_UNROLL of each operand in flight per thread.
#ifndef VA_UNROLL
#define VA_UNROLL 4
#endif
__global__ void vector_add_float4(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, int n) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    const int n4 = n / 4;  // whole float4s
    const int first = blockIdx.x * blockDim.x * VA_UNROLL + threadIdx.x;
    float4 x[VA_UNROLL], y[VA_UNROLL];
#pragma unroll
    for (int u = 0; u < VA_UNROLL; ++u) {  // every load first...
        const int i = first + u * blockDim.x;
        if (i < n4) {
            x[u] = a4[i];
            y[u] = b4[i];
        }
    }
#pragma unroll
    for (int u = 0; u < VA_UNROLL; ++u) {  // ...then every store
        const int i = first + u * blockDim.x;
        if (i < n4) {
            c4[i] = make_float4(x[u].x + y[u].x, x[u].y + y[u].y, x[u].z + y[u].z, x[u].w + y[u].w);
        }
    }
    if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) {  // the last n % 4 elements
        const int i = 4 * n4 + threadIdx.x;
        c[i] = a[i] + b[i];
    }
}
