// SAXPY, y[i] = alpha * x[i] + y[i] (Single-precision A times X Plus Y, the
// BLAS level-1 routine): a kernel that updates an array in place and takes a
// scalar argument.
//
// Versions, in teaching order:
//   1. saxpy_one_thread_per_element: one thread per element, guarded by
//      `if (i < n)`; the launch covers n.
//   2. saxpy_grid_stride: the grid-stride loop, so any grid covers any n.
//
// 12 bytes moved per element (read x, read y, write y) for one FMA (2 flops):
// bandwidth-bound like vector_add.  Parameter order follows cuBLAS's
// cublasSaxpy(n, alpha, x, y).  Reference and launchers: saxpy.py.
#include "cuda_helpers.cuh"

// 1. One thread per element.
__global__ void saxpy_one_thread_per_element(int n, float alpha, const float* x,
                                             float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = alpha * x[i] + y[i];  // nvcc contracts this into one FMA
    }
}

// 2. Grid-stride loop.
__global__ void saxpy_grid_stride(int n, float alpha, const float* x,
                                  float* y) {
    CUDA_1D_KERNEL_LOOP(i, n) {
        y[i] = alpha * x[i] + y[i];
    }
}
