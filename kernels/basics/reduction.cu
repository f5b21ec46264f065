// Sum of an array, out[0] = x[0] + x[1] + ... + x[n-1]: the first kernel in
// which threads must cooperate.  Each launcher zeroes *out first, because
// every version adds its partial sums into it with atomicAdd.
//
// Versions, in teaching order:
//   1. reduce_sum_atomic: every element is one atomicAdd on the single
//      output float.  Correct, but all n additions queue on one address.
//   2. reduce_sum_shared_tree: each thread first sums its elements in a
//      register (grid-stride loop); the block then adds its blockDim.x
//      partial sums pairwise in shared memory, halving the active threads
//      at each step (log2(blockDim.x) steps, a __syncthreads() after each),
//      and thread 0 issues ONE atomicAdd per block.  Launched with
//      blockDim.x * 4 bytes of dynamic shared memory; blockDim.x must be a
//      power of two.
//   3. reduce_sum_warp_shuffle: the 32 threads of a warp add their values
//      through registers with __shfl_down_sync (no shared memory, no
//      barrier inside the warp); one partial per warp goes through a
//      32-float shared array, the first warp sums those the same way, and
//      thread 0 issues one atomicAdd per block.  blockDim.x must be a
//      multiple of 32.
//   4. reduce_sum_vectorized: version 3's shuffles, fed faster.  Each thread reads
//      float4s (16 bytes per load instruction) and keeps two of them in flight per
//      loop step, summed in four independent registers, so more bytes are on their
//      way from memory per thread and fewer instructions are spent per byte.  It
//      is launched with about one wave of blocks (a grid-stride loop covers the
//      rest), not one thread per element.  x must be 16-byte aligned (every device
//      allocation is); block 0 adds the n % 4 elements past the last float4.
//
// Floating-point addition is not associative: each version adds in a
// different order, so results agree with the NumPy reference to a
// tolerance, not bit for bit.  Reference and launchers: reduction.py.
#include "cuda_helpers.cuh"

// 1. One atomicAdd per element.
__global__ void reduce_sum_atomic(const float* x, float* out, int n) {
    CUDA_1D_KERNEL_LOOP(i, n) {
        atomicAdd(out, x[i]);
    }
}

// 2. Per-thread sums in registers, a shared-memory tree, one atomic per block.
__global__ void reduce_sum_shared_tree(const float* x, float* out, int n) {
    extern __shared__ float partial[];  // blockDim.x floats, sized at launch

    float sum = 0.0f;
    CUDA_1D_KERNEL_LOOP(i, n) {
        sum += x[i];
    }
    partial[threadIdx.x] = sum;
    __syncthreads();  // every partial written before any is read

    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();  // this level finished before the next reads it
    }
    if (threadIdx.x == 0) {
        atomicAdd(out, partial[0]);
    }
}

// Sum of `value` over the 32 lanes of a warp; lane 0 ends with the total.
// Each step adds the value held `offset` lanes higher: 16, 8, 4, 2, 1.
__device__ float warp_reduce_sum(float value) {
    for (int offset = 16; offset > 0; offset /= 2) {
        value += __shfl_down_sync(0xffffffffu, value, offset);
    }
    return value;
}

// 3. Warp shuffles inside each warp, one partial per warp in shared memory.
__global__ void reduce_sum_warp_shuffle(const float* x, float* out, int n) {
    __shared__ float warp_sums[32];  // a block has at most 1024 / 32 warps

    float sum = 0.0f;
    CUDA_1D_KERNEL_LOOP(i, n) {
        sum += x[i];
    }
    sum = warp_reduce_sum(sum);

    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    if (lane == 0) {
        warp_sums[warp] = sum;
    }
    __syncthreads();

    // The whole first warp takes part, so every lane is in the shuffle mask.
    if (warp == 0) {
        const int warps = blockDim.x / 32;
        sum = lane < warps ? warp_sums[lane] : 0.0f;
        sum = warp_reduce_sum(sum);
        if (lane == 0) {
            atomicAdd(out, sum);
        }
    }
}

// 4. float4 loads, two in flight per thread, then the shuffles of version 3.
__global__ void reduce_sum_vectorized(const float* __restrict__ x, float* out, int n) {
    __shared__ float warp_sums[32];
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const int n4 = n / 4;                  // whole float4s
    const int stride = gridDim.x * blockDim.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = 0.0f, b = 0.0f, c = 0.0f, d = 0.0f;
    for (; i + stride < n4; i += 2 * stride) {   // two independent loads per step
        const float4 p = x4[i];
        const float4 q = x4[i + stride];
        a += p.x + q.x;
        b += p.y + q.y;
        c += p.z + q.z;
        d += p.w + q.w;
    }
    if (i < n4) {                          // at most one float4 left for this thread
        const float4 p = x4[i];
        a += p.x;
        b += p.y;
        c += p.z;
        d += p.w;
    }
    float sum = (a + b) + (c + d);
    if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) {
        sum += x[4 * n4 + threadIdx.x];    // the last n % 4 elements
    }
    sum = warp_reduce_sum(sum);

    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    if (lane == 0) {
        warp_sums[warp] = sum;
    }
    __syncthreads();
    if (warp == 0) {
        sum = lane < blockDim.x / 32 ? warp_sums[lane] : 0.0f;
        sum = warp_reduce_sum(sum);
        if (lane == 0) {
            atomicAdd(out, sum);
        }
    }
}
