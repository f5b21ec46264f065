// Gradients of the capsule prediction u_hat[b, i, j, :] = W[i, j] u[b, i].
//
// Given G = dE/du_hat [batch, in_caps, out_caps, out_dim], the two gradients
// follow from the dense layer z = W x, whose backward pass is
// dE/dx = W^T dE/dz and dE/dW = (dE/dz) x^T summed over the samples:
//
//   du[b, i, k]       = sum_{j, d} W[i, j, d, k] G[b, i, j, d]    (W[i]^T G[b, i], ROW terms)
//   dW[i, j, d, k]    = sum_b G[b, i, j, d] u[b, i, k]            (a reduction over the batch)
//
// with ROW = out_caps * out_dim: for a fixed input capsule i, W[i] is a
// ROW x in_dim matrix and G[b, i] a vector of ROW numbers.
//
// Versions, in teaching order (launchers in capsule_prediction_backward.py):
//   1. capsule_grad_input_naive       one thread per element of du, grid-stride with int64 indices: the thread
//                                     gathers over every (j, d), stepping through W[i] by in_dim (column k)
//                                     and through G[b, i] by 1.
//   2. capsule_grad_weight_naive      one thread per element of dW, looping over the batch; consecutive
//                                     threads read the same G element in_dim times (k is the fastest index).
//   3. capsule_grad_input_shared_weights  one block per input capsule i and batch tile, one thread per sample:
//                                     W[i] is staged in shared memory and every thread of the block reads the
//                                     same weight at the same time (a broadcast), keeping in_dim sums in
//                                     registers; G[b, i] is read in 8-float pieces (one 32-byte sector).
//   4. capsule_grad_weight_register_blocked  one block per input capsule: thread x owns 4 consecutive entries
//                                     of the row and their in_dim weight gradients in registers (4 x in_dim
//                                     sums), thread y a share of the batch; G is read with coalesced 16-byte
//                                     loads and the y partial sums are added in shared memory at the end, in
//                                     a fixed order (no atomics: the result does not depend on scheduling).
//   5. capsule_grad_fused             both gradients in one pass over G: versions 3 and 4 each read all of G,
//                                     the largest array, so together they move it twice.  One block per input
//                                     capsule i stages CAPS_FUSED_TILE samples' rows of G in shared memory
//                                     with coalesced loads; from there thread r accumulates dW[i, r, :] in
//                                     registers over the whole batch, and each warp computes partial sums of
//                                     du over its slice of the row for 32 samples at once (lane = sample),
//                                     which are added in shared memory.  W[i] sits in shared memory as in 3.

#ifndef CAPS_IN_DIM
#define CAPS_IN_DIM 8  // in_dim of versions 3 to 5; the launcher compiles one module per in_dim
#endif
#define CAPS_GRAD_BATCH_TILE 128  // samples per block of version 3 (its block size)
#define CAPS_FUSED_TILE 32         // samples staged at a time by version 5: one per lane of a warp

#include "cuda_helpers.cuh"  // CUDA_1D_KERNEL_LOOP_INT64

// ---------------------------------------------------------------------------
// Version 1: du, one thread per element.
__global__ void capsule_grad_input_naive(const float* __restrict__ grad_u_hat, const float* __restrict__ W,
                                         float* __restrict__ grad_u, long long batch, long long in_caps,
                                         long long in_dim, long long out_caps, long long out_dim) {
    const long long row = out_caps * out_dim;
    CUDA_1D_KERNEL_LOOP_INT64(index, batch * in_caps * in_dim) {
        const long long b = index / (in_caps * in_dim);
        const long long i = (index / in_dim) % in_caps;
        const long long k = index % in_dim;
        const float* g = grad_u_hat + (b * in_caps + i) * row;  // G[b, i, :, :], ROW contiguous floats
        const float* w = W + i * row * in_dim + k;               // W[i, 0, 0, k]; next (j, d) is in_dim further
        float sum = 0.0f;
        for (long long r = 0; r < row; ++r) {
            sum += __ldg(w + r * in_dim) * __ldg(g + r);
        }
        grad_u[index] = sum;
    }
}

// ---------------------------------------------------------------------------
// Version 2: dW, one thread per element, summing over the batch.
__global__ void capsule_grad_weight_naive(const float* __restrict__ grad_u_hat, const float* __restrict__ u,
                                          float* __restrict__ grad_W, long long batch, long long in_caps,
                                          long long in_dim, long long out_caps, long long out_dim) {
    const long long row = out_caps * out_dim;
    CUDA_1D_KERNEL_LOOP_INT64(index, in_caps * row * in_dim) {
        const long long i = index / (row * in_dim);
        const long long r = (index / in_dim) % row;  // r = j * out_dim + d
        const long long k = index % in_dim;
        float sum = 0.0f;
        for (long long b = 0; b < batch; ++b) {
            sum += __ldg(grad_u_hat + (b * in_caps + i) * row + r) * __ldg(u + (b * in_caps + i) * in_dim + k);
        }
        grad_W[index] = sum;
    }
}

// ---------------------------------------------------------------------------
// Version 3: du with W[i] in shared memory.
// Grid (in_caps, ceil(batch / CAPS_GRAD_BATCH_TILE)), block CAPS_GRAD_BATCH_TILE
// threads, dynamic shared memory ROW * CAPS_IN_DIM floats.
__global__ void capsule_grad_input_shared_weights(const float* __restrict__ grad_u_hat,
                                                  const float* __restrict__ W, float* __restrict__ grad_u,
                                                  int batch, int in_caps, int out_caps, int out_dim) {
    extern __shared__ float W_i[];  // [ROW][CAPS_IN_DIM]
    const int i = blockIdx.x;
    const int row = out_caps * out_dim;
    const float* W_src = W + (size_t)i * row * CAPS_IN_DIM;
    for (int e = threadIdx.x; e < row * CAPS_IN_DIM; e += blockDim.x) W_i[e] = __ldg(W_src + e);
    __syncthreads();

    const int b = blockIdx.y * CAPS_GRAD_BATCH_TILE + threadIdx.x;
    if (b >= batch) return;  // after the barrier
    const float* g = grad_u_hat + ((size_t)b * in_caps + i) * row;
    float sum[CAPS_IN_DIM];
#pragma unroll
    for (int k = 0; k < CAPS_IN_DIM; ++k) sum[k] = 0.0f;

    int r = 0;
    if (row % 4 == 0) {
        // Two float4 loads of G per step, issued together: a whole 32-byte sector of this sample's row.
        const float4* g4 = reinterpret_cast<const float4*>(g);
#pragma unroll 2
        for (; r + 8 <= row; r += 8) {
            const float4 a = __ldg(g4 + r / 4), c = __ldg(g4 + r / 4 + 1);
            const float gv[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
#pragma unroll
            for (int s = 0; s < 8; ++s) {
#pragma unroll
                for (int k = 0; k < CAPS_IN_DIM; ++k) sum[k] += W_i[(r + s) * CAPS_IN_DIM + k] * gv[s];
            }
        }
    }
    for (; r < row; ++r) {  // the rest of the row (all of it when ROW is not a multiple of 4)
        const float gr = __ldg(g + r);
#pragma unroll
        for (int k = 0; k < CAPS_IN_DIM; ++k) sum[k] += W_i[r * CAPS_IN_DIM + k] * gr;
    }
    float* out = grad_u + ((size_t)b * in_caps + i) * CAPS_IN_DIM;
#pragma unroll
    for (int k = 0; k < CAPS_IN_DIM; ++k) out[k] = sum[k];
}

// ---------------------------------------------------------------------------
// Version 4: dW with register blocking over the batch.
// Grid in_caps, block (ceil(ROW / 4), rows_y), dynamic shared memory
// rows_y * ROW * CAPS_IN_DIM floats (the partial sums of each y).
__global__ void capsule_grad_weight_register_blocked(const float* __restrict__ grad_u_hat,
                                                     const float* __restrict__ u, float* __restrict__ grad_W,
                                                     int batch, int in_caps, int out_caps, int out_dim) {
    extern __shared__ float partial[];  // [rows_y][ROW * CAPS_IN_DIM]
    const int i = blockIdx.x;
    const int row = out_caps * out_dim;
    const int r0 = threadIdx.x * 4;
    const bool vec = (row % 4 == 0);  // rows of G start on 16-byte boundaries

    float acc[4][CAPS_IN_DIM];
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int k = 0; k < CAPS_IN_DIM; ++k) acc[s][k] = 0.0f;

    if (r0 < row) {
#pragma unroll 4
        for (int b = threadIdx.y; b < batch; b += blockDim.y) {
            const float* g = grad_u_hat + ((size_t)b * in_caps + i) * row + r0;
            float gv[4];
            if (vec) {
                const float4 v = __ldg(reinterpret_cast<const float4*>(g));
                gv[0] = v.x; gv[1] = v.y; gv[2] = v.z; gv[3] = v.w;
            } else {
#pragma unroll
                for (int s = 0; s < 4; ++s) gv[s] = (r0 + s < row) ? __ldg(g + s) : 0.0f;
            }
            const float* x = u + ((size_t)b * in_caps + i) * CAPS_IN_DIM;  // the same for the whole row: cached
            float xv[CAPS_IN_DIM];
#pragma unroll
            for (int k = 0; k < CAPS_IN_DIM; ++k) xv[k] = __ldg(x + k);
#pragma unroll
            for (int s = 0; s < 4; ++s)
#pragma unroll
                for (int k = 0; k < CAPS_IN_DIM; ++k) acc[s][k] += gv[s] * xv[k];
        }
    }

    // Add the rows_y partial sums: each y writes its own slice, then the whole
    // block sums the slices in y order and writes dW[i] with coalesced stores.
    const int n = row * CAPS_IN_DIM;
    float* mine = partial + threadIdx.y * n;
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int k = 0; k < CAPS_IN_DIM; ++k)
            if (r0 + s < row) mine[(r0 + s) * CAPS_IN_DIM + k] = acc[s][k];
    __syncthreads();
    const int threads = blockDim.x * blockDim.y;
    for (int e = threadIdx.y * blockDim.x + threadIdx.x; e < n; e += threads) {
        float sum = 0.0f;
        for (int y = 0; y < (int)blockDim.y; ++y) sum += partial[y * n + e];
        grad_W[(size_t)i * n + e] = sum;
    }
}

// ---------------------------------------------------------------------------
// Version 5: both gradients, reading G once.
// Grid in_caps; block of at least ROW threads, a multiple of 32 (the launcher
// picks it); dynamic shared memory, in floats:
//   G tile  CAPS_FUSED_TILE * (ROW + 1)   (+1: lanes reading a column hit 32 different banks)
//   W[i]    ROW * CAPS_IN_DIM
//   u tile  CAPS_FUSED_TILE * CAPS_IN_DIM
//   du partial sums  (blockDim.x / 32) * CAPS_FUSED_TILE * CAPS_IN_DIM
__global__ void capsule_grad_fused(const float* __restrict__ grad_u_hat, const float* __restrict__ W,
                                   const float* __restrict__ u, float* __restrict__ grad_u,
                                   float* __restrict__ grad_W, int batch, int in_caps, int out_caps, int out_dim) {
    extern __shared__ float smem[];
    const int i = blockIdx.x;
    const int row = out_caps * out_dim;
    const int pitch = row + 1;
    const int warps = blockDim.x / 32;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float* G_tile = smem;                                    // [CAPS_FUSED_TILE][pitch]
    float* W_i = G_tile + CAPS_FUSED_TILE * pitch;           // [ROW][CAPS_IN_DIM]
    float* u_tile = W_i + row * CAPS_IN_DIM;                 // [CAPS_FUSED_TILE][CAPS_IN_DIM]
    float* du_part = u_tile + CAPS_FUSED_TILE * CAPS_IN_DIM; // [warps][CAPS_FUSED_TILE][CAPS_IN_DIM]

    const float* W_src = W + (size_t)i * row * CAPS_IN_DIM;
    for (int e = threadIdx.x; e < row * CAPS_IN_DIM; e += blockDim.x) W_i[e] = __ldg(W_src + e);

    // Thread r < ROW owns dW[i, r, :]; warp w owns the slice [r_begin, r_end) of the row for du.
    const int r = threadIdx.x;
    float dW_acc[CAPS_IN_DIM];
#pragma unroll
    for (int k = 0; k < CAPS_IN_DIM; ++k) dW_acc[k] = 0.0f;
    const int slice = (row + warps - 1) / warps;
    const int r_begin = min(row, warp * slice), r_end = min(row, r_begin + slice);

    for (int b0 = 0; b0 < batch; b0 += CAPS_FUSED_TILE) {
        const int tile = min(CAPS_FUSED_TILE, batch - b0);
        // Stage G[b0 .. b0 + tile, i, :] (tile rows of ROW contiguous floats) and u[b0 .. b0 + tile, i, :].
        if (row % 4 == 0) {
            const int quads = row / 4;
            for (int e = threadIdx.x; e < tile * quads; e += blockDim.x) {
                const int t = e / quads, q = e % quads;
                const float4 v = __ldg(reinterpret_cast<const float4*>(grad_u_hat + ((size_t)(b0 + t) * in_caps + i) * row) + q);
                float* dst = G_tile + t * pitch + 4 * q;
                dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
            }
        } else {
            for (int e = threadIdx.x; e < tile * row; e += blockDim.x) {
                const int t = e / row, c = e % row;
                G_tile[t * pitch + c] = __ldg(grad_u_hat + ((size_t)(b0 + t) * in_caps + i) * row + c);
            }
        }
        for (int e = threadIdx.x; e < tile * CAPS_IN_DIM; e += blockDim.x) {
            const int t = e / CAPS_IN_DIM, k = e % CAPS_IN_DIM;
            u_tile[e] = __ldg(u + ((size_t)(b0 + t) * in_caps + i) * CAPS_IN_DIM + k);
        }
        __syncthreads();

        // dW[i, r, :] += sum over the tile of G[b, i, r] u[b, i, :]  (consecutive r: no bank conflicts).
        if (r < row) {
            for (int t = 0; t < tile; ++t) {
                const float g = G_tile[t * pitch + r];
#pragma unroll
                for (int k = 0; k < CAPS_IN_DIM; ++k) dW_acc[k] += g * u_tile[t * CAPS_IN_DIM + k];
            }
        }
        // du[b, i, :] partial sums over this warp's slice of the row, lane = sample b0 + lane.
        {
            float part[CAPS_IN_DIM];
#pragma unroll
            for (int k = 0; k < CAPS_IN_DIM; ++k) part[k] = 0.0f;
            if (lane < tile) {
                for (int c = r_begin; c < r_end; ++c) {
                    const float g = G_tile[lane * pitch + c];  // pitch is odd: 32 lanes, 32 banks
#pragma unroll
                    for (int k = 0; k < CAPS_IN_DIM; ++k) part[k] += W_i[c * CAPS_IN_DIM + k] * g;  // broadcast
                }
            }
#pragma unroll
            for (int k = 0; k < CAPS_IN_DIM; ++k) du_part[(warp * CAPS_FUSED_TILE + lane) * CAPS_IN_DIM + k] = part[k];
        }
        __syncthreads();

        // Add the warps' partial sums in warp order and write du for the tile.
        for (int e = threadIdx.x; e < tile * CAPS_IN_DIM; e += blockDim.x) {
            float sum = 0.0f;
            for (int w = 0; w < warps; ++w) sum += du_part[w * CAPS_FUSED_TILE * CAPS_IN_DIM + e];
            const int t = e / CAPS_IN_DIM, k = e % CAPS_IN_DIM;
            grad_u[((size_t)(b0 + t) * in_caps + i) * CAPS_IN_DIM + k] = sum;
        }
        // The next tile overwrites G_tile and du_part only after the barrier that follows its staging,
        // which every thread reaches after finishing the reads above.
    }

    if (r < row) {
        float* out = grad_W + ((size_t)i * row + r) * CAPS_IN_DIM;
#pragma unroll
        for (int k = 0; k < CAPS_IN_DIM; ++k) out[k] = dW_acc[k];
    }
}
