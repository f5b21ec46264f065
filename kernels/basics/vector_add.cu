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
//
// Both move 12 bytes per element (two 4-byte reads, one 4-byte write) for
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
