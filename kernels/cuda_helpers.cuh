// Small helpers shared by the book's kernels.
//
// CUDA_1D_KERNEL_LOOP(i, n) is the grid-stride loop as TensorFlow and Caffe
// spell it: thread t of a grid of T threads handles elements t, t + T,
// t + 2T, ... up to n.  Any grid size then covers any n, so the launch
// configuration can be chosen for the device (enough blocks to fill every
// multiprocessor) rather than for the data.
//
// The index is an int, as in those libraries: arrays of up to 2^31 - 1
// elements.  The stride is computed in unsigned arithmetic and added to a
// signed int, which is safe while i + stride stays below 2^31.
#pragma once

#define CUDA_1D_KERNEL_LOOP(i, n)                                   \
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n);    \
         i += blockDim.x * gridDim.x)

// The same loop with a 64-bit index, as TensorFlow writes it for kernels whose element count can pass
// 2^31 (the capsule layers: batch * in_caps * out_caps * out_dim).
#define CUDA_1D_KERNEL_LOOP_INT64(index, n)                                           \
    for (long long index = (long long)blockIdx.x * blockDim.x + threadIdx.x; index < (n); \
         index += (long long)blockDim.x * gridDim.x)
