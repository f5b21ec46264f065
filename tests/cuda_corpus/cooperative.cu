// Cooperative groups (the block and tile parts) as samples and blog posts use them.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>

namespace cg = cooperative_groups;

__global__ void cg_block_reduce(const float* x, float* out, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    float v = 0.0f;
    for (int i = blockIdx.x * block.size() + block.thread_rank(); i < n; i += block.size() * gridDim.x) v += x[i];
    v = cg::reduce(warp, v, cg::plus<float>());
    if (warp.thread_rank() == 0) atomicAdd(out, v);
}

__global__ void cg_tile16_shfl_down(const int* x, int* y) {
    auto tile = cg::tiled_partition<16>(cg::this_thread_block());
    int v = x[blockIdx.x * blockDim.x + threadIdx.x];
    for (int d = tile.size() / 2; d > 0; d /= 2) v += tile.shfl_down(v, d);
    if (tile.thread_rank() == 0) y[blockIdx.x * (blockDim.x / 16) + tile.meta_group_rank()] = v;
}

__global__ void cg_tile_scan(const int* x, int* y) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<8> tile = cg::tiled_partition<8>(block);
    y[block.thread_rank()] = cg::inclusive_scan(tile, x[block.thread_rank()]);
}

__global__ void cg_ballot_and_sync(const float* x, unsigned* counts, float* y) {
    cg::thread_block block = cg::this_thread_block();
    __shared__ float stage[64];
    stage[block.thread_rank()] = x[block.thread_rank()] * 2.0f;
    block.sync();
    y[block.thread_rank()] = stage[63 - block.thread_rank()];
    auto warp = cg::tiled_partition<32>(block);
    unsigned bits = warp.ballot(x[block.thread_rank()] > 0.0f);
    if (warp.thread_rank() == 0) counts[warp.meta_group_rank()] = __popc(bits);
}

__global__ void cg_max_reduce(const float* x, float* out) {
    auto warp = cg::tiled_partition<32>(cg::this_thread_block());
    float v = cg::reduce(warp, x[threadIdx.x], cg::greater<float>());
    if (threadIdx.x == 0) *out = v;
}

#include <cuda_pipeline.h>

// double-buffered tile loads with cp.async: load tile t + 1 while summing tile t
__global__ void pipelined_tile_sums(const float* x, float* y, int tiles) {
    __shared__ float buf[2][64];
    int t = threadIdx.x;
    __pipeline_memcpy_async(&buf[0][t], &x[t], sizeof(float));
    __pipeline_commit();
    for (int k = 0; k < tiles; ++k) {
        if (k + 1 < tiles) __pipeline_memcpy_async(&buf[(k + 1) % 2][t], &x[(k + 1) * 64 + t], sizeof(float));
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        if (t == 0) {
            float s = 0.0f;
            for (int j = 0; j < 64; ++j) s += buf[k % 2][j];
            y[k] = s;
        }
        __syncthreads();
    }
}

#include <mma.h>
using namespace nvcuda;

// one warp per 16x16 output tile, half inputs, float accumulators (M, N, K multiples of 16)
__global__ void wmma_gemm(const half* A, const half* B, float* C, int M, int N, int K) {
    int tile_row = blockIdx.y * 16, tile_col = blockIdx.x * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + tile_row * K + k, K);
        wmma::load_matrix_sync(b, B + k * N + tile_col, N);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(C + tile_row * N + tile_col, acc, N, wmma::mem_row_major);
}
