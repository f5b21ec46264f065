// kernels/conv/conv2d_backward.cu -- the backward pass of a convolutional layer (kernels/conv/conv2d.cu).
//
// Forward: Y[n][m][h][w] = b[m] + sum_{c,p,q} X[n][c][h + p][w + q] * W[m][c][p][q], with
// X N x C x H x W, W M x C x K x K, Y N x M x H_out x W_out (H_out = H - K + 1, W_out = W - K + 1).
// Given dY = dE/dY from the layer above, the chain rule gives, summing over every place an
// input or a weight was used:
//
//   dX[n][c][h][w] = sum_{m,p,q} dY[n][m][h - p][w - q] * W[m][c][p][q]   (terms with h - p, w - q
//                                                                           inside dY only)
//   dW[m][c][p][q] = sum_{n,h,w} dY[n][m][h][w] * X[n][c][h + p][w + q]
//   db[m]          = sum_{n,h,w} dY[n][m][h][w]
//
// dX is itself a convolution: of dY, padded with K - 1 zeros on every side, with the
// *transposed* filter bank -- input and output maps swapped (W[m][c] used for output c from
// input m) and every filter rotated by 180 degrees (W[..][..][K-1-p][K-1-q]).  dW is a
// convolution of X with dY as the filter, summed over the minibatch.
//
// Versions, in teaching order:
//   1. conv2d_backward_input          one thread per element of dX, summing over the output maps
//                                     and the K x K output pixels that used it (a gather: each
//                                     thread owns its element, so no atomics).  Same grid shape as
//                                     the forward naive kernel, over input maps: grid (C, H_grid *
//                                     W_grid, N), blocks of TILE_WIDTH x TILE_WIDTH over H x W.
//   2. conv2d_backward_weight_naive   one thread per weight, summing N * H_out * W_out products on
//                                     its own: only M * C * K * K threads (150 for LeNet's C1), too
//                                     few to fill a GPU, each with a long serial loop.
//   3. conv2d_backward_weight_reduce  one block per weight: its threads share the N * H_out * W_out
//                                     products and add their partial sums in shared memory (a tree).
//   4. conv2d_backward_bias           one block per output map, the same reduction over dY.

#ifndef TILE_WIDTH
#define TILE_WIDTH 16
#endif

#define REDUCE_BLOCK 256   // threads per block of the reductions (a power of two)

// 1. dX.  Launch with block (TILE_WIDTH, TILE_WIDTH), grid (C, H_grid * W_grid, N) where
//    H_grid = ceil(H / TILE_WIDTH), W_grid = ceil(W / TILE_WIDTH).
__global__ void conv2d_backward_input(const float* dY, const float* Wf, float* dX,
                                      int N, int C, int H, int W, int M, int K, int W_grid)
{
    int H_out = H - K + 1, W_out = W - K + 1;
    int c = blockIdx.x;
    int h = (blockIdx.y / W_grid) * TILE_WIDTH + threadIdx.y;
    int w = (blockIdx.y % W_grid) * TILE_WIDTH + threadIdx.x;
    int n = blockIdx.z;
    if (h >= H || w >= W) return;

    float acc = 0.0f;
    for (int m = 0; m < M; ++m) {
        const float* dy = dY + ((size_t)n * M + m) * H_out * W_out;
        const float* f = Wf + ((size_t)m * C + c) * K * K;
        for (int p = 0; p < K; ++p) {
            int ho = h - p;                          // the output row that used X[h] with filter row p
            if (ho < 0 || ho >= H_out) continue;
            for (int q = 0; q < K; ++q) {
                int wo = w - q;
                if (wo < 0 || wo >= W_out) continue;
                acc += dy[ho * W_out + wo] * f[p * K + q];
            }
        }
    }
    dX[(((size_t)n * C + c) * H + h) * W + w] = acc;
}

// 2. dW, one thread per weight (flat index over M x C x K x K, a one-dimensional grid).
__global__ void conv2d_backward_weight_naive(const float* X, const float* dY, float* dW,
                                             int N, int C, int H, int W, int M, int K)
{
    int H_out = H - K + 1, W_out = W - K + 1;
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= M * C * K * K) return;
    int q = index % K;
    int p = (index / K) % K;
    int c = (index / (K * K)) % C;
    int m = index / (K * K * C);

    float acc = 0.0f;
    for (int n = 0; n < N; ++n) {
        const float* x = X + ((size_t)n * C + c) * H * W;
        const float* dy = dY + ((size_t)n * M + m) * H_out * W_out;
        for (int h = 0; h < H_out; ++h)
            for (int w = 0; w < W_out; ++w)
                acc += dy[h * W_out + w] * x[(h + p) * W + (w + q)];
    }
    dW[index] = acc;
}

// Sum of `value` over the REDUCE_BLOCK threads of a block, returned to thread 0: a tree in
// shared memory, halving the active threads each step.  Every thread of the block must call it.
__device__ float block_sum(float value, float* partial)
{
    int t = threadIdx.x;
    partial[t] = value;
    __syncthreads();
    for (int stride = REDUCE_BLOCK / 2; stride > 0; stride /= 2) {
        if (t < stride) partial[t] += partial[t + stride];
        __syncthreads();
    }
    return partial[0];
}

// 3. dW, one block of REDUCE_BLOCK threads per weight: grid (M * C * K * K).  The block's threads
//    stride over the N * H_out * W_out products (consecutive threads take consecutive output
//    pixels, so their reads of dY and X are coalesced) and reduce their partial sums.
__global__ void conv2d_backward_weight_reduce(const float* X, const float* dY, float* dW,
                                              int N, int C, int H, int W, int M, int K)
{
    __shared__ float partial[REDUCE_BLOCK];
    int H_out = H - K + 1, W_out = W - K + 1;
    int index = blockIdx.x;                          // the weight W[m][c][p][q] of this block
    int q = index % K;
    int p = (index / K) % K;
    int c = (index / (K * K)) % C;
    int m = index / (K * K * C);

    int pixels = H_out * W_out;
    float acc = 0.0f;
    for (int i = threadIdx.x; i < N * pixels; i += REDUCE_BLOCK) {
        int n = i / pixels, hw = i % pixels;
        int h = hw / W_out, w = hw % W_out;
        acc += dY[((size_t)n * M + m) * pixels + hw] * X[(((size_t)n * C + c) * H + h + p) * W + w + q];
    }
    float total = block_sum(acc, partial);
    if (threadIdx.x == 0) dW[index] = total;
}

// 4. db[m] = sum of dY[n][m][h][w] over n, h, w; one block of REDUCE_BLOCK threads per map: grid (M).
__global__ void conv2d_backward_bias(const float* dY, float* db, int N, int M, int H_out, int W_out)
{
    __shared__ float partial[REDUCE_BLOCK];
    int m = blockIdx.x;
    int pixels = H_out * W_out;
    float acc = 0.0f;
    for (int i = threadIdx.x; i < N * pixels; i += REDUCE_BLOCK) {
        int n = i / pixels, hw = i % pixels;
        acc += dY[((size_t)n * M + m) * pixels + hw];
    }
    float total = block_sum(acc, partial);
    if (threadIdx.x == 0) db[m] = total;
}

// ================================================================================================
// Versions 5-12: the same gradients in as few launches as the problem allows.
//
// The layers of LeNet are tiny (C3's weight gradient is 2400 sums of 6400 products, about 15 M
// multiply-adds, under a microsecond of the whole GPU's arithmetic), so what versions 1-4 pay for
// is not arithmetic: version 3 launches one 256-thread block per weight (2400 blocks, each a tree
// of eight barriers for 25 loads per thread), version 4 one block per map (6 blocks for C1, so 6
// SMs of 132 do all the work).  The versions below give every block a share of the reduction big
// enough to be worth a block, stage what it reads in shared memory once, and end in a fixed-order
// sum so that the result does not depend on which block finishes first (no floating-point atomics).
//
//   5. conv2d_backward_weight_bias_split  dW and db in one launch.  Block (m, s) owns every weight
//                                     of output map m for the samples of split s: it copies those
//                                     samples (X and dY[:, m]) to shared memory (cp.async), each
//                                     thread slides a row of K inputs along one row of dY for its
//                                     (c, p, row) tasks (K accumulators in registers, one new input
//                                     and one dY value per K multiply-adds), the block adds its rows
//                                     in shared memory and writes a partial; the last block of map m
//                                     to finish (a counter, after __threadfence) adds the S partials
//                                     in split order.
//   6. conv2d_backward_bias_split     db alone the same way: grid (M, S), last block sums in order.
//   7. conv2d_backward_input_shared   dX as a direct "full" convolution: block (channel group, row
//                                     tile, n) stages the dY rows it needs for every output map,
//                                     zero-padded by K - 1 (no bounds tests in the loop), and the
//                                     rotated filters of its channels; each thread computes BI_RW
//                                     neighbouring pixels of BI_CB channels, using each dY value it
//                                     loads for up to BI_RW pixels of each of its channels.
//   8. conv2d_backward_flip_filters   the transposed filter bank (maps swapped, filters rotated), so
//                                     that dX of a large layer is the GEMM chapter's implicit GEMM
//                                     (kernels/conv/conv2d_gemm.cu) over dY padded by K - 1.
//   9. conv2d_backward_weight_gemm    dW (and db) of a large layer as an implicit GEMM:
//                                     dW (M x CKK) = dY (M x N*P) times U^T (N*P x CKK), U the unrolled
//                                     input, gathered tile by tile from X as in the forward implicit
//                                     GEMM.  The output is small (64 x 576 for a 64-map 3x3 layer) and
//                                     the inner dimension huge (N*P = 373,248), so the inner dimension
//                                     is split S ways (grid.z) and each block writes a partial tile.
//  10. conv2d_backward_split_sum      the fixed-order sum of version 9's S partial tiles: one thread
//                                     per output, the whole GPU reading them (a partial tile is too
//                                     big for one last block to add quickly).
//  11. conv2d_backward_input_fixed    version 7 with the layer's sizes compiled in (BF_M, BF_H, BF_W)
//                                     and the whole height per block: the padded rows are zeroed with
//                                     16-byte stores and dY copied in with indices divided by constants,
//                                     where version 7 divided by run-time sizes for every float.
//  12. conv2d_backward_bias_planes    version 6 reading dY four floats per load (float4), plane by plane,
//                                     its position in the split kept as (plane, offset) and stepped
//                                     without dividing: version 6 divided and took a remainder by the
//                                     run-time plane size for every float it loaded.

// The last of `count` blocks to reach this point (per `counter`) gets true, after every block's
// earlier global writes are visible to it; it also resets the counter for the next launch.  Every
// thread of the block must call it (it has barriers).
__device__ bool arrive_last(unsigned int* counter, unsigned int count)
{
    __shared__ bool last;
    __threadfence();                       // this thread's partials are visible before the count
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int ticket = atomicAdd(counter, 1u);
        last = (ticket == count - 1);
        if (last) atomicExch(counter, 0u);
    }
    __syncthreads();
    return last;
}

// Sum of `value` over the block (any blockDim.x up to 1024), returned to thread 0: a butterfly in
// each warp, then thread 0 adds the warps' sums in warp order -- a fixed order, so a fixed result.
__device__ float block_sum_fixed(float value, float* warp_sums)
{
    for (int offset = 16; offset > 0; offset /= 2)
        value += __shfl_down_sync(0xffffffffu, value, offset);
    int warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
    __syncthreads();                       // warp_sums may still be read from a previous call
    if (threadIdx.x % 32 == 0) warp_sums[warp] = value;
    __syncthreads();
    float total = 0.0f;
    if (threadIdx.x == 0)
        for (int w = 0; w < warps; ++w) total += warp_sums[w];
    return total;
}

#ifndef WB_K
#define WB_K 5                             // filter size K, compile-time: the sliding row lives in registers
#endif
#include <cuda_pipeline.h>

// How versions 5 and 7 copy their inputs into shared memory.  STAGE_ASYNC 1: with cp.async
// (__pipeline_memcpy_async), global to shared memory without passing through registers, every copy
// of a thread in flight at once and one wait for all of them.  STAGE_ASYNC 0: through registers,
// STAGE_BATCH loads issued before the first store, so a thread waits for memory once per batch.
#ifndef STAGE_ASYNC
#define STAGE_ASYNC 1
#endif
#ifndef STAGE_BATCH
#define STAGE_BATCH 8
#endif
#ifndef WB_TASKS
#define WB_TASKS 2                         // most (c, p, row) tasks one thread keeps accumulators for
#endif

// 5. Launch: grid (M, S), blockDim.x a multiple of 32 with blockDim.x * WB_TASKS >= C * K * H_out,
//    dynamic shared memory wb_shared_floats() * 4 bytes (kernels/conv/conv2d_backward.py).  Samples
//    [s * chunk, min(N, (s + 1) * chunk)) belong to split s.  `partial` holds S * M * (C*K*K + 1)
//    floats, `counters` M unsigned ints, zero before the first launch (the last block leaves them 0).
//    Shared rows have odd strides (xs = W | 1, ys = W_out | 1) so that the threads of a warp, on
//    neighbouring rows, read distinct banks.
__global__ void __launch_bounds__(1024)
conv2d_backward_weight_bias_split(const float* X, const float* dY, float* dW, float* db, float* partial,
                                  unsigned int* counters, int N, int C, int H, int W, int M, int chunk)
{
    extern __shared__ float shared[];
    const int K = WB_K;
    int H_out = H - K + 1, W_out = W - K + 1, P = H_out * W_out;
    int xs = W | 1, ys = W_out | 1;                       // row strides in shared memory
    int x_floats = C * H * xs, y_floats = H_out * ys;     // one staged sample
    int m = blockIdx.x, s = blockIdx.y, S = gridDim.y;
    int n0 = s * chunk, count = min(N, n0 + chunk) - n0;  // samples of this split (count >= 1)
    int CKK = C * K * K, tasks = C * K * H_out;

    // Stage the split's samples: X[n] (all channels) and dY[n][m] (see STAGE_ASYNC).
    float* Xs = shared;
    float* Ys = shared + chunk * x_floats;
    int x_count = count * C * H * W, y_count = count * P;
    float bias = 0.0f;                                    // this thread's share of db[m]
#if STAGE_ASYNC
    for (int i = threadIdx.x; i < x_count; i += blockDim.x) {
        int n = i / (C * H * W), r = i % (C * H * W);     // r = (c * H + h) * W + w
        __pipeline_memcpy_async(&Xs[n * x_floats + (r / W) * xs + r % W], &X[(size_t)n0 * C * H * W + i], sizeof(float));
    }
    for (int i = threadIdx.x; i < y_count; i += blockDim.x) {
        int n = i / P, r = i % P;
        __pipeline_memcpy_async(&Ys[n * y_floats + (r / W_out) * ys + r % W_out],
                                &dY[((size_t)(n0 + n) * M + m) * P + r], sizeof(float));
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);
    for (int i = threadIdx.x; i < y_count; i += blockDim.x) {   // the thread's own copies: no barrier needed
        int n = i / P, r = i % P;
        bias += Ys[n * y_floats + (r / W_out) * ys + r % W_out];
    }
#else
    for (int base = threadIdx.x; base < x_count; base += STAGE_BATCH * blockDim.x) {
        float v[STAGE_BATCH];
        #pragma unroll
        for (int u = 0; u < STAGE_BATCH; ++u) {
            int i = base + u * blockDim.x;
            v[u] = i < x_count ? X[(size_t)n0 * C * H * W + i] : 0.0f;
        }
        #pragma unroll
        for (int u = 0; u < STAGE_BATCH; ++u) {
            int i = base + u * blockDim.x, n = i / (C * H * W), r = i % (C * H * W);
            if (i < x_count) Xs[n * x_floats + (r / W) * xs + r % W] = v[u];
        }
    }
    for (int base = threadIdx.x; base < y_count; base += STAGE_BATCH * blockDim.x) {
        float v[STAGE_BATCH];
        #pragma unroll
        for (int u = 0; u < STAGE_BATCH; ++u) {
            int i = base + u * blockDim.x;
            v[u] = i < y_count ? dY[((size_t)(n0 + i / P) * M + m) * P + i % P] : 0.0f;
        }
        #pragma unroll
        for (int u = 0; u < STAGE_BATCH; ++u) {
            int i = base + u * blockDim.x, n = i / P, r = i % P;
            if (i < y_count) Ys[n * y_floats + (r / W_out) * ys + r % W_out] = v[u];
            bias += v[u];
        }
    }
#endif
    __syncthreads();

    // Task j = (c * K + p) * H_out + h: dW[m][c][p][0..K-1] summed over row h of every staged sample.
    float acc[WB_TASKS][WB_K];
    #pragma unroll
    for (int k = 0; k < WB_TASKS; ++k)
        #pragma unroll
        for (int q = 0; q < K; ++q) acc[k][q] = 0.0f;
    #pragma unroll
    for (int k = 0; k < WB_TASKS; ++k) {
        int j = threadIdx.x + k * blockDim.x;
        if (j >= tasks) break;
        int h = j % H_out, cp = j / H_out, c = cp / K, p = cp % K;
        for (int n = 0; n < count; ++n) {
            const float* x = Xs + n * x_floats + (c * H + h + p) * xs;
            const float* y = Ys + n * y_floats + h * ys;
            float window[WB_K];                           // x[w .. w + K - 1]
            #pragma unroll
            for (int q = 0; q < K - 1; ++q) window[q] = x[q];
            for (int w = 0; w < W_out; ++w) {
                window[K - 1] = x[w + K - 1];
                float d = y[w];
                #pragma unroll
                for (int q = 0; q < K; ++q) acc[k][q] += d * window[q];
                #pragma unroll
                for (int q = 0; q < K - 1; ++q) window[q] = window[q + 1];
            }
        }
    }
    __syncthreads();                                      // done with the staged samples

    // Add the rows: rows[(cp * K + q) * H_out + h], then one thread per weight sums its H_out rows in order.
    float* rows = shared;
    #pragma unroll
    for (int k = 0; k < WB_TASKS; ++k) {
        int j = threadIdx.x + k * blockDim.x;
        if (j >= tasks) break;
        int h = j % H_out, cp = j / H_out;
        #pragma unroll
        for (int q = 0; q < K; ++q) rows[(cp * K + q) * H_out + h] = acc[k][q];
    }
    __syncthreads();
    float* mine = partial + ((size_t)s * M + m) * (CKK + 1);
    for (int i = threadIdx.x; i < CKK; i += blockDim.x) {
        float sum = 0.0f;
        for (int h = 0; h < H_out; ++h) sum += rows[i * H_out + h];
        mine[i] = sum;
    }
    float bias_total = block_sum_fixed(bias, shared + CKK * H_out);
    if (threadIdx.x == 0) mine[CKK] = bias_total;

    // The last block of map m adds the S partials, split 0 first.
    if (!arrive_last(&counters[m], S)) return;
    for (int i = threadIdx.x; i <= CKK; i += blockDim.x) {
        float sum = 0.0f;
        #pragma unroll 8
        for (int t = 0; t < S; ++t) sum += __ldcg(&partial[((size_t)t * M + m) * (CKK + 1) + i]);   // L2, not a stale L1 line
        if (i < CKK) dW[(size_t)m * CKK + i] = sum;
        else db[m] = sum;
    }
}

// The end of versions 6 and 12: the block's sum of `acc` is split s's partial of db[m]; the last of map m's
// S blocks to finish adds the S partials, split 0 first, into db[m].  Every thread of the block must call it.
__device__ __forceinline__ void finish_bias_split(float acc, float* db, float* partial, unsigned int* counters,
                                                  int m, int s, int S, int M)
{
    __shared__ float warp_sums[32];
    float total = block_sum_fixed(acc, warp_sums);
    if (threadIdx.x == 0) partial[(size_t)s * M + m] = total;
    if (!arrive_last(&counters[m], S)) return;
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        #pragma unroll 8
        for (int t = 0; t < S; ++t) sum += __ldcg(&partial[(size_t)t * M + m]);
        db[m] = sum;
    }
}

// 6. db alone.  Launch: grid (M, S), any blockDim.x that is a multiple of 32; `partial` S * M floats,
//    `counters` M unsigned ints (zero before the first launch).  Block (m, s) sums dY[n][m] for the
//    samples of split s, read as one run of values (consecutive threads, consecutive pixels: coalesced),
//    STAGE_BATCH loads of each thread in flight at once.
__global__ void conv2d_backward_bias_split(const float* dY, float* db, float* partial, unsigned int* counters,
                                           int N, int M, int P, int chunk)
{
    int m = blockIdx.x, s = blockIdx.y, S = gridDim.y;
    int n0 = s * chunk, values = (min(N, n0 + chunk) - n0) * P;   // the split's samples, as one run of values
    float acc = 0.0f;
    for (int base = threadIdx.x; base < values; base += STAGE_BATCH * blockDim.x) {
        float v[STAGE_BATCH];                             // STAGE_BATCH loads in flight, then the adds
        #pragma unroll
        for (int u = 0; u < STAGE_BATCH; ++u) {
            int i = base + u * blockDim.x;
            v[u] = i < values ? dY[((size_t)(n0 + i / P) * M + m) * P + i % P] : 0.0f;
        }
        #pragma unroll
        for (int u = 0; u < STAGE_BATCH; ++u) acc += v[u];
    }
    finish_bias_split(acc, db, partial, counters, m, s, S, M);
}

#ifndef BI_K
#define BI_K 5                             // filter size K, compile-time
#endif
#ifndef BI_RW
#define BI_RW 2                            // neighbouring output pixels (along a row) per thread
#endif
#ifndef BI_CB
#define BI_CB 1                            // input channels per block (each thread computes all of them)
#endif

// The filters of channels c0 .. c0 + BI_CB - 1, rotated by 180 degrees, as Fs[cb][m][p][q] (zeros past C):
// thread t of `threads` copies every threads-th value.
__device__ __forceinline__ void stage_rotated_filters(float* Fs, const float* Wf, int c0, int C, int M, int t,
                                                      int threads)
{
    const int K = BI_K;
    for (int i = t; i < BI_CB * M * K * K; i += threads) {
        int cb = i / (M * K * K), m = (i / (K * K)) % M, pq = i % (K * K);
        Fs[i] = (c0 + cb < C) ? Wf[((size_t)m * C + c0 + cb) * K * K + (K * K - 1 - pq)] : 0.0f;
    }
}

// The multiply-adds of versions 7 and 11, once the block's rows of dY (zero-padded by K - 1, hp rows
// of wp floats per output map) and its rotated filters are in shared memory: thread (x, y) adds up
// dX[n][c0 + cb][h0 + y][x * BI_RW + r] for cb < BI_CB, r < BI_RW, and writes the ones inside dX.
// Inlined, so that version 11's compile-time sizes reach the loops.
__device__ __forceinline__ void input_shared_products(const float* Ys, const float* Fs, float* dX, int n, int c0,
                                                      int h0, int C, int H, int W, int M, int hp, int wp)
{
    const int K = BI_K;
    float acc[BI_CB][BI_RW];
    #pragma unroll
    for (int cb = 0; cb < BI_CB; ++cb)
        #pragma unroll
        for (int r = 0; r < BI_RW; ++r) acc[cb][r] = 0.0f;
    int w0 = threadIdx.x * BI_RW;
    for (int m = 0; m < M; ++m) {
        #pragma unroll
        for (int p = 0; p < K; ++p) {
            const float* y = Ys + (m * hp + threadIdx.y + p) * wp + w0;
            float seg[BI_RW + BI_K - 1];
            #pragma unroll
            for (int i = 0; i < BI_RW + K - 1; ++i) seg[i] = y[i];
            #pragma unroll
            for (int cb = 0; cb < BI_CB; ++cb) {
                const float* f = Fs + ((cb * M + m) * K + p) * K;
                #pragma unroll
                for (int q = 0; q < K; ++q) {
                    float wq = f[q];
                    #pragma unroll
                    for (int r = 0; r < BI_RW; ++r) acc[cb][r] += seg[r + q] * wq;
                }
            }
        }
    }
    int h = h0 + threadIdx.y;
    if (h >= H) return;
    #pragma unroll
    for (int cb = 0; cb < BI_CB; ++cb) {
        if (c0 + cb >= C) break;
        float* x = dX + (((size_t)n * C + c0 + cb) * H + h) * W;
        #pragma unroll
        for (int r = 0; r < BI_RW; ++r)
            if (w0 + r < W) x[w0 + r] = acc[cb][r];
    }
}


// 7. Launch: block (ceil(W / BI_RW), rows), grid (ceil(C / BI_CB), ceil(H / rows), N), dynamic shared
//    memory (M * (rows + K - 1) * wp + BI_CB * M * K * K) * 4 bytes with wp = ceil(W / BI_RW) * BI_RW + K - 1.
//    dX[n][c][h][w] = sum_{m, p, q} dYpad[m][h + p][w + q] * W[m][c][K-1-p][K-1-q], dYpad being dY with
//    K - 1 zeros on every side.
__global__ void conv2d_backward_input_shared(const float* dY, const float* Wf, float* dX,
                                             int N, int C, int H, int W, int M)
{
    extern __shared__ float shared[];
    const int K = BI_K;
    int H_out = H - K + 1, W_out = W - K + 1;
    int rows = blockDim.y, wp = blockDim.x * BI_RW + K - 1, hp = rows + K - 1;
    int c0 = blockIdx.x * BI_CB, h0 = blockIdx.y * rows, n = blockIdx.z;
    float* Ys = shared;                                   // M x hp x wp: padded rows h0 - (K-1) .. h0 + rows - 1
    float* Fs = shared + M * hp * wp;                     // BI_CB x M x K x K, rotated
    int t = threadIdx.y * blockDim.x + threadIdx.x, threads = blockDim.x * blockDim.y;
    int staged = M * hp * wp;
#if STAGE_ASYNC
    for (int i = t; i < staged; i += threads) {
        int m = i / (hp * wp), r = (i / wp) % hp, col = i % wp;
        int ho = h0 + r - (K - 1), wo = col - (K - 1);
        if (ho >= 0 && ho < H_out && wo >= 0 && wo < W_out)
            __pipeline_memcpy_async(&Ys[i], &dY[(((size_t)n * M + m) * H_out + ho) * W_out + wo], sizeof(float));
        else
            Ys[i] = 0.0f;
    }
    __pipeline_commit();
#else
    for (int base = t; base < staged; base += STAGE_BATCH * threads) {
        float v[STAGE_BATCH];                             // STAGE_BATCH loads in flight, then the stores
        #pragma unroll
        for (int u = 0; u < STAGE_BATCH; ++u) {
            int i = base + u * threads;
            int m = i / (hp * wp), r = (i / wp) % hp, col = i % wp;
            int ho = h0 + r - (K - 1), wo = col - (K - 1);
            bool inside = i < staged && ho >= 0 && ho < H_out && wo >= 0 && wo < W_out;
            v[u] = inside ? dY[(((size_t)n * M + m) * H_out + ho) * W_out + wo] : 0.0f;
        }
        #pragma unroll
        for (int u = 0; u < STAGE_BATCH; ++u)
            if (base + u * threads < staged) Ys[base + u * threads] = v[u];
    }
#endif
    stage_rotated_filters(Fs, Wf, c0, C, M, t, threads);
#if STAGE_ASYNC
    __pipeline_wait_prior(0);                             // the filters' loads overlapped the copies
#endif
    __syncthreads();

    input_shared_products(Ys, Fs, dX, n, c0, h0, C, H, W, M, hp, wp);
}

#ifndef BF_M
#define BF_M 16                            // version 11's layer: output maps, input height and width
#endif                                     // (LeNet's C3 by default; the launcher sets the layer's)
#ifndef BF_H
#define BF_H 14
#endif
#ifndef BF_W
#define BF_W 14
#endif

// 11. Version 7 for one layer shape, compiled in (BF_M output maps of BF_H x BF_W inputs, BI_K x BI_K
//     filters): a block holds the whole height, and its staging no longer divides by run-time sizes.
//     On LeNet's C3 version 7 spent more instructions copying dY into its padded rows (a division
//     and two remainders per float, by sizes known only at run time) than multiplying; here the
//     block zeroes the padded rows with 16-byte stores, then copies dY[n] (contiguous) into their
//     middle, its indices divided by constants.  Launch: block (ceil(BF_W / BI_RW), BF_H), grid
//     (ceil(C / BI_CB), 1, N), dynamic shared memory (BF_M * hp * wp + BI_CB * BF_M * K * K) * 4
//     bytes with hp = BF_H + K - 1, wp = ceil(BF_W / BI_RW) * BI_RW + K - 1.
__global__ void conv2d_backward_input_fixed(const float* dY, const float* Wf, float* dX, int N, int C)
{
    extern __shared__ __align__(16) float shared[];
    constexpr int K = BI_K, M = BF_M, H = BF_H, W = BF_W;
    constexpr int H_out = H - K + 1, W_out = W - K + 1, P = H_out * W_out;
    constexpr int wp = (W + BI_RW - 1) / BI_RW * BI_RW + K - 1, hp = H + K - 1, staged = M * hp * wp;
    float* Ys = shared;                                   // M x hp x wp: rows -(K-1) .. H-1 of dY, padded
    float* Fs = shared + staged;                          // BI_CB x M x K x K, rotated
    int c0 = blockIdx.x * BI_CB, n = blockIdx.z;
    int t = threadIdx.y * blockDim.x + threadIdx.x, threads = blockDim.x * blockDim.y;

    for (int i = t; i < staged / 4; i += threads)
        reinterpret_cast<float4*>(Ys)[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int i = staged / 4 * 4 + t; i < staged; i += threads) Ys[i] = 0.0f;
    stage_rotated_filters(Fs, Wf, c0, C, M, t, threads);
    __syncthreads();                                      // the zeros are down before the values go in
    const float* y = dY + (size_t)n * M * P;
    for (int i = t; i < M * P; i += threads) {
        int m = i / P, ho = (i / W_out) % H_out, wo = i % W_out;
        Ys[(m * hp + ho + K - 1) * wp + wo + K - 1] = y[i];
    }
    __syncthreads();
    input_shared_products(Ys, Fs, dX, n, c0, 0, C, H, W, M, hp, wp);
}

// 8. Wt[c][m][p][q] = W[m][c][K-1-p][K-1-q]: one thread per weight, grid-stride.
__global__ void conv2d_backward_flip_filters(const float* Wf, float* Wt, int M, int C, int K)
{
    int total = M * C * K * K;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int pq = i % (K * K), c = (i / (K * K)) % C, m = i / (K * K * C);
        Wt[((size_t)c * M + m) * K * K + (K * K - 1 - pq)] = Wf[i];
    }
}

#ifndef WG_BN
#define WG_BN 64                           // filter taps per tile (columns of dW); WG_BN threads per block
#endif
#ifndef WG_BK
#define WG_BK 16                           // pixels per step of the inner dimension
#endif
#ifndef WG_MIN_BLOCKS
#define WG_MIN_BLOCKS (384 / WG_BN)        // blocks per SM the registers must allow: 12 warps (6 of 64 threads)
#endif
#define WG_BM 64                           // output maps per tile (rows of dW)
#define WG_TX (WG_BN / 8)                  // threads across a tile row: 8 x 8 results each
#if WG_BN % 32 || WG_BK % 4 || (WG_BM * WG_BK) % WG_BN || WG_BN % WG_BK
#error "WG_BN must be a multiple of 32 and of WG_BK, WG_BK a multiple of 4"
#endif

// 9. Launch: WG_BN threads, grid (ceil(CKK / WG_BN), ceil(M / WG_BM), S).  Split s of the inner
//    dimension covers columns [s * span, (s + 1) * span) of the N * P pixels of the batch (span a
//    multiple of WG_BK); the block writes its WG_BM x WG_BN piece of the split's partial dW into
//    partial[s][m][k], and blocks of the first column of tiles also write the split's partial db
//    into partial[s][M * CKK + m].  Version 10 adds the S partials.  No padding: every tap of a
//    valid pixel is inside X.
//
//    Thread (ty, tx) = (t / WG_TX, t % WG_TX) owns maps ty*4 .. +3 and 32 + ty*4 .. +3 and taps
//    tx*4 .. +3 and WG_BN/2 + tx*4 .. +3 (4 x 4 pieces spread as in sgemm_warptile).  Loads: thread t
//    fetches pixel t % WG_BK of the step (consecutive threads, consecutive pixels) for maps or taps
//    t / WG_BK + (WG_BN / WG_BK) * r; the next step is fetched into registers while this one is
//    multiplied, and stored to the other of two shared buffers (one barrier per step).
__global__ void __launch_bounds__(WG_BN, WG_MIN_BLOCKS)
conv2d_backward_weight_gemm(const float* X, const float* dY, float* partial, int N, int C, int H, int W,
                            int M, int K, int span)
{
    __shared__ __align__(16) float As[2][WG_BK][WG_BM + 4];   // dY: [pixel][map]
    __shared__ __align__(16) float Bs[2][WG_BK][WG_BN + 4];   // U^T: [pixel][tap]
    __shared__ int tap_offset[WG_BN];                         // offset of tap k in a sample of X (-1: none)
    int H_out = H - K + 1, W_out = W - K + 1, P = H_out * W_out, KK = K * K, CKK = C * KK;
    int NP = N * P;                                           // < 2^31: the launcher checks it
    int t = threadIdx.x, ty = t / WG_TX, tx = t % WG_TX;
    int tile_m = blockIdx.y * WG_BM, tile_k = blockIdx.x * WG_BN;
    int j_begin = blockIdx.z * span, j_end = min(NP, j_begin + span);
    bool bias_block = blockIdx.x == 0;

    for (int k = t; k < WG_BN; k += WG_BN) {
        int tap = tile_k + k;
        tap_offset[k] = tap < CKK ? ((tap / KK) * H + (tap % KK) / K) * W + tap % K : -1;
    }
    __syncthreads();

    const int PER = WG_BN / WG_BK;                            // maps or taps apart, per load of a thread
    const int A_LOADS = WG_BM * WG_BK / WG_BN, B_LOADS = WG_BK;
    int kk_load = t % WG_BK, row_load = t / WG_BK;
    float a_next[A_LOADS], b_next[B_LOADS];
    float acc[8][8];
    #pragma unroll
    for (int r = 0; r < 8; ++r)
        #pragma unroll
        for (int c = 0; c < 8; ++c) acc[r][c] = 0.0f;
    float bias = 0.0f;                                        // thread t < WG_BM: map tile_m + t

    int steps = (j_end - j_begin + WG_BK - 1) / WG_BK;
    for (int step = 0; step <= steps; ++step) {
        int cur = step & 1;
        if (step < steps) {
            // Fetch step `step`: this thread's pixel j of the batch is sample n, pixel p = (h, w).
            int j = j_begin + step * WG_BK + kk_load;         // 32-bit: a 64-bit division costs ~10x more
            bool valid = j < j_end;
            int n = valid ? j / P : 0, p = valid ? j % P : 0;
            const float* y = dY + ((size_t)n * M + tile_m) * P + p;
            #pragma unroll
            for (int l = 0; l < A_LOADS; ++l) {
                int m = row_load + PER * l;
                a_next[l] = (valid && tile_m + m < M) ? y[(size_t)m * P] : 0.0f;
            }
            const float* x = X + (size_t)n * C * H * W + (p / W_out) * W + p % W_out;
            #pragma unroll
            for (int l = 0; l < B_LOADS; ++l) {
                int off = tap_offset[row_load + PER * l];
                b_next[l] = (valid && off >= 0) ? x[off] : 0.0f;
            }
        }
        if (step > 0) {
            // Multiply step - 1 (buffer cur ^ 1) while step's loads are in flight.
            const int prev = cur ^ 1;
            #pragma unroll
            for (int kk = 0; kk < WG_BK; ++kk) {
                float4 a0 = *reinterpret_cast<const float4*>(&As[prev][kk][ty * 4]);
                float4 a1 = *reinterpret_cast<const float4*>(&As[prev][kk][32 + ty * 4]);
                float4 b0 = *reinterpret_cast<const float4*>(&Bs[prev][kk][tx * 4]);
                float4 b1 = *reinterpret_cast<const float4*>(&Bs[prev][kk][WG_BN / 2 + tx * 4]);
                float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
                #pragma unroll
                for (int r = 0; r < 8; ++r)
                    #pragma unroll
                    for (int c = 0; c < 8; ++c) acc[r][c] += a[r] * b[c];
                if (bias_block && t < WG_BM) bias += As[prev][kk][t];
            }
        }
        if (step < steps) {
            // Stash step `step` in buffer cur: the multiply of step - 2 read it last, before the
            // barrier of the previous iteration.
            #pragma unroll
            for (int l = 0; l < A_LOADS; ++l) As[cur][kk_load][row_load + PER * l] = a_next[l];
            #pragma unroll
            for (int l = 0; l < B_LOADS; ++l) Bs[cur][kk_load][row_load + PER * l] = b_next[l];
            __syncthreads();
        }
    }

    float* out = partial + (size_t)blockIdx.z * ((size_t)M * CKK + M);
    #pragma unroll
    for (int r = 0; r < 8; ++r) {
        int m = tile_m + (r < 4 ? ty * 4 + r : 32 + ty * 4 + r - 4);
        if (m >= M) continue;
        #pragma unroll
        for (int c = 0; c < 8; ++c) {
            int k = tile_k + (c < 4 ? tx * 4 + c : WG_BN / 2 + tx * 4 + c - 4);
            if (k < CKK) out[(size_t)m * CKK + k] = acc[r][c];
        }
    }
    if (bias_block && t < WG_BM && tile_m + t < M) out[(size_t)M * CKK + tile_m + t] = bias;
}

// 10. Row i of the partials summed over s = 0 .. S-1 in that order: dW[i] for i < weights, db[i - weights]
//     after.  One thread per output, grid-stride; neighbouring threads read neighbouring partials.
__global__ void conv2d_backward_split_sum(const float* partial, float* dW, float* db, int weights, int M, int S)
{
    int count = weights + M;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        float sum = 0.0f;
        for (int s0 = 0; s0 < S; s0 += STAGE_BATCH) {
            float v[STAGE_BATCH];                         // STAGE_BATCH loads in flight, then the adds in order
            #pragma unroll
            for (int u = 0; u < STAGE_BATCH; ++u) v[u] = s0 + u < S ? partial[(size_t)(s0 + u) * count + i] : 0.0f;
            #pragma unroll
            for (int u = 0; u < STAGE_BATCH; ++u) sum += v[u];
        }
        if (i < weights) dW[i] = sum;
        else db[i - weights] = sum;
    }
}

// 12. db as version 6, read BP_VEC floats per load.  Launch: grid (M, S), blockDim.x a multiple of 32, `partial`
//     S * M floats, `counters` M unsigned ints (zero before the first launch).  Build with BP_VEC 4 when P is a
//     multiple of 4 and dY starts on a 16-byte boundary (every plane dY[n][m] then does too), else 1.
//     Block (m, s) reads the planes dY[n][m] of split s's samples as vectors numbered plane by plane; each thread
//     keeps its place as (plane, offset) and moves it blockDim.x vectors on by whole planes plus a rest, so that
//     no load waits for a division.
#ifndef BP_VEC
#define BP_VEC 4
#endif
#if BP_VEC == 4
typedef float4 bias_vector;
__device__ __forceinline__ bias_vector bias_vector_zero() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
__device__ __forceinline__ float bias_vector_sum(bias_vector v) { return (v.x + v.y) + (v.z + v.w); }
#elif BP_VEC == 1
typedef float bias_vector;
__device__ __forceinline__ bias_vector bias_vector_zero() { return 0.0f; }
__device__ __forceinline__ float bias_vector_sum(bias_vector v) { return v; }
#else
#error "BP_VEC must be 4 or 1"
#endif

__global__ void conv2d_backward_bias_planes(const float* dY, float* db, float* partial, unsigned int* counters,
                                            int N, int M, int P, int chunk)
{
    int m = blockIdx.x, s = blockIdx.y, S = gridDim.y;
    int n0 = s * chunk, planes = min(N, n0 + chunk) - n0;
    int width = P / BP_VEC;                               // vectors per plane
    const bias_vector* first = reinterpret_cast<const bias_vector*>(dY) + ((size_t)n0 * M + m) * width;
    size_t plane_stride = (size_t)M * width;              // vectors from plane (n, m) to plane (n + 1, m)
    int plane = threadIdx.x / width, offset = threadIdx.x % width;
    int step_planes = blockDim.x / width, step_rest = blockDim.x % width;
    float acc = 0.0f;
    while (plane < planes) {
        bias_vector v[STAGE_BATCH];                       // STAGE_BATCH loads in flight, then the adds
        #pragma unroll
        for (int u = 0; u < STAGE_BATCH; ++u) {
            v[u] = plane < planes ? first[plane * plane_stride + offset] : bias_vector_zero();
            plane += step_planes;
            offset += step_rest;
            if (offset >= width) { offset -= width; ++plane; }
        }
        #pragma unroll
        for (int u = 0; u < STAGE_BATCH; ++u) acc += bias_vector_sum(v[u]);
    }
    finish_bias_split(acc, db, partial, counters, m, s, S, M);
}
