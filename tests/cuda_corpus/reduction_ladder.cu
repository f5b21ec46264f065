// Sum reductions the way SDK samples and kernel collections write them: template kernels on
// the element type (and the block size), dynamic shared memory reached through a typed
// helper, cooperative groups for the block and its warps, and explicit instantiations at the
// end of the file that make the template kernels concrete for the types the host code uses.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

// extern __shared__ arrays of a template type would clash between instantiations: one
// untyped array, handed out as the type asked for
template <class T>
struct DynamicShared {
  __device__ inline T *get() {
    extern __shared__ unsigned char dynamic_smem[];
    return reinterpret_cast<T *>(dynamic_smem);
  }
};

// Interleaved addressing with a tree of halving strides: blockDim.x * sizeof(T) bytes of
// dynamic shared memory; out gets one partial sum per block.
template <class T>
__global__ void reduce_interleaved(const T *g_in, T *g_out, unsigned int n) {
  cg::thread_block cta = cg::this_thread_block();
  T *partial = DynamicShared<T>().get();
  const unsigned int tid = threadIdx.x;
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[tid] = (i < n) ? g_in[i] : T(0);
  cg::sync(cta);
  for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    cg::sync(cta);
  }
  if (tid == 0) g_out[blockIdx.x] = partial[0];
}

// Each thread first adds a grid-stride run of elements; warps then reduce with tile shuffles
// and one value per warp goes through shared memory.  BLOCK threads per block.
template <class T, unsigned int BLOCK>
__global__ void reduce_warp_tiles(const T *__restrict__ g_in, T *__restrict__ g_out, unsigned int n) {
  cg::thread_block cta = cg::this_thread_block();
  cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta);
  __shared__ T warp_sums[BLOCK / 32];
  T sum = T(0);
  for (unsigned int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += BLOCK * gridDim.x) sum += g_in[i];
  for (int offset = tile32.size() / 2; offset > 0; offset /= 2) sum += tile32.shfl_down(sum, offset);
  if (tile32.thread_rank() == 0) warp_sums[tile32.meta_group_rank()] = sum;
  cg::sync(cta);
  if (tile32.meta_group_rank() == 0) {
    sum = (tile32.thread_rank() < BLOCK / 32) ? warp_sums[tile32.thread_rank()] : T(0);
    for (int offset = tile32.size() / 2; offset > 0; offset /= 2) sum += tile32.shfl_down(sum, offset);
    if (tile32.thread_rank() == 0) g_out[blockIdx.x] = sum;
  }
}

// Vectorised: four floats per thread through one float4 load; the last, partial group of
// four (n not a multiple of 4) is read element by element, so nothing past n is touched.
// NUM_THREADS threads per block, 4 * NUM_THREADS elements per block; out[0] gets the sum.
template <const int NUM_THREADS = 128>
__global__ void block_sum_f32x4(const float *x, float *out, int n) {
  constexpr int NUM_WARPS = NUM_THREADS / 32;
  __shared__ float warp_sums[NUM_WARPS];
  const int idx = 4 * (blockIdx.x * NUM_THREADS + threadIdx.x);
  float sum = 0.0f;
  if (idx + 3 < n) {
    float4 v = reinterpret_cast<const float4 *>(x + idx)[0];
    sum = (v.x + v.y) + (v.z + v.w);
  } else {
    for (int k = idx; k < n; ++k) sum += x[k];
  }
#pragma unroll
  for (int mask = 16; mask >= 1; mask >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, mask);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  sum = (lane < NUM_WARPS) ? warp_sums[lane] : 0.0f;
  if (warp == 0) {
#pragma unroll
    for (int mask = 16; mask >= 1; mask >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, mask);
  }
  if (threadIdx.x == 0) atomicAdd(out, sum);
}

// element-wise scaling, instantiated below with its template argument deduced
template <typename T>
__global__ void scale_inplace(T *x, T factor, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) x[i] *= factor;
}

// the instantiations the host code launches
template __global__ void reduce_interleaved<float>(const float *g_in, float *g_out, unsigned int n);
template __global__ void reduce_interleaved<int>(const int *, int *, unsigned int);
template __global__ void reduce_warp_tiles<float, 128>(const float *, float *, unsigned int);
template __global__ void reduce_warp_tiles<double, 64>(const double *, double *, unsigned int);
template __global__ void block_sum_f32x4<128>(const float *, float *, int);
template __global__ void scale_inplace(double *, double, int);
