// Which thread handles which element: kernels that write their own index
// instead of doing arithmetic, so that a picture can show the mapping that
// vector_add.cu's kernels use.
//
// Versions, in teaching order (the same two as in vector_add.cu):
//   1. which_thread_one_per_element: element i is handled by global thread
//      i = blockIdx.x * blockDim.x + threadIdx.x; threads with i >= n idle.
//   2. which_thread_grid_stride: thread t handles t, t + T, t + 2T, ... where
//      T = gridDim.x * blockDim.x is the number of threads in the grid;
//      pass_of[i] records which trip through the loop reached element i.
//
// Launchers: indexing.py.
#include "cuda_helpers.cuh"

// 1. One thread per element.
__global__ void which_thread_one_per_element(int* thread_of, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        thread_of[i] = i;
    }
}

// 2. Grid-stride loop: also records the pass (0, 1, 2, ...) of each element.
__global__ void which_thread_grid_stride(int* thread_of, int* pass_of, int n) {
    const int thread = blockIdx.x * blockDim.x + threadIdx.x;
    int pass = 0;
    CUDA_1D_KERNEL_LOOP(i, n) {
        thread_of[i] = thread;
        pass_of[i] = pass++;
    }
}
