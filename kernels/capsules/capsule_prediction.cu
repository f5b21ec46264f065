// Capsule prediction vectors: u_hat[b, i, j, :] = W[i, j] u[b, i]
//
// The first step of a capsule layer (Sabour, Frosst & Hinton, 2017): every
// input capsule i predicts the pose of every output capsule j through its own
// out_dim x in_dim matrix W[i, j].  Row-major float32 arrays:
//
//   u      [batch, in_caps, in_dim]                 input capsules
//   W      [in_caps, out_caps, out_dim, in_dim]     one matrix per (i, j) pair
//   u_hat  [batch, in_caps, out_caps, out_dim]      predictions
//
// For a fixed input capsule i, W[i] is one matrix of ROW = out_caps * out_dim
// rows by in_dim columns, and u_hat[b, i, :, :] (ROW contiguous floats) is
// the matrix-vector product W[i] u[b, i].  The layer is therefore in_caps
// independent matrix products [batch x in_dim] x [in_dim x ROW], but with the
// batch axis outermost in u and u_hat: a library has to transpose into and out
// of a batched matmul, which moves the whole output twice.
//
// Versions, in teaching order (a launcher for each in capsule_prediction.py):
//   1. capsule_predict_naive            one thread per output element in a grid-stride loop with 64-bit
//                                       indices (TensorFlow's custom-op style).  Each thread turns its flat
//                                       index into (b, i, j, d) with the strides of u_hat, and into the start
//                                       of its weight row and input capsule with the strides of W and u, then
//                                       takes an in_dim dot product through the read-only cache.
//   2. capsule_predict_shared_input     one block per input capsule i and tile of CAPS_BATCH_TILE samples.
//                                       The tile's input capsules u[b, i, :] are loaded into shared memory
//                                       once, and every one of the ROW outputs that needs them reads them
//                                       from there.  Indices become 32-bit: the block knows i and b.
//   3. capsule_predict_register_blocked each thread owns CAPS_OUTS_PER_THREAD consecutive outputs of the row
//                                       of capsule i, loads their weights into registers once and loops over
//                                       the samples of the tile: W is read once per thread instead of once
//                                       per output element.  CAPS_IN_DIM is a compile-time constant so that
//                                       the register arrays are indexed only by unrolled loops.
//   4. capsule_predict_vectorized       version 3 with 16-byte loads of W and u and 16-byte streaming stores
//                                       of u_hat (__stcs: written once and not read again by this kernel,
//                                       so it should not push W out of the cache).  Needs in_dim and ROW to
//                                       be multiples of 4.
//   5. capsule_predict_streaming        a block owns a run of consecutive input capsules instead of one, so
//                                       for each sample its stores fill one contiguous stretch of u_hat and
//                                       its inputs are one contiguous stretch of u, loaded with coalesced
//                                       16-byte loads, several in flight per thread; the loop over samples
//                                       then only stores (plain 16-byte stores, pointer bumped by a fixed
//                                       stride, no division).  Pieces of 16 samples, one per block, and a
//                                       register cap (__launch_bounds__) that keeps three blocks per
//                                       multiprocessor.  Same 16-byte requirement as version 4, and rows of
//                                       at most 4 * CAPS_STREAMING_THREADS outputs.
//
// Napkin math at CapsNet's DigitCaps shape (batch 128, 1152 x 8 in, 10 x 16 out):
// u_hat is 128 * 1152 * 160 * 4 B = 94.4 MB, W 5.9 MB, u 4.7 MB: 105 MB, so the
// kernel is bound by writing u_hat (0.38 GFLOP is nothing at 60 TFLOP/s).

#ifndef CAPS_IN_DIM
#define CAPS_IN_DIM 8  // in_dim of versions 3 to 5; the launcher compiles one module per in_dim
#endif
#define CAPS_BATCH_TILE 64      // samples per block in versions 2 to 4
// float4s per input capsule in versions 4 and 5.  Those run only when in_dim is a multiple of 4 (their
// launchers check), but every module compiles them: for in_dim < 4 the 1 keeps their divisors non-zero.
#define CAPS_QUADS_IN (CAPS_IN_DIM >= 4 ? CAPS_IN_DIM / 4 : 1)
#define CAPS_OUTS_PER_THREAD 4  // consecutive outputs of a row per thread in versions 3 and 4
#define CAPS_STREAMING_THREADS 320  // most threads in a block of version 5 (its launcher keeps to it)
// Blocks of version 5 per multiprocessor that the compiler must leave registers for: three of 320 threads
// caps a thread at 64 registers.  Above in_dim 8 the 4 x in_dim weights alone need more: no cap there.
#define CAPS_STREAMING_MIN_BLOCKS (CAPS_IN_DIM <= 8 ? 3 : 1)
#ifndef CAPS_LOADS_IN_FLIGHT
#define CAPS_LOADS_IN_FLIGHT 8  // 16-byte loads per thread issued together while version 5 copies its tile
#endif

// The grid-stride loops use int64 indices (CUDA_1D_KERNEL_LOOP_INT64, cuda_helpers.cuh): the product
// batch * in_caps * out_caps * out_dim can pass 2^31 for large layers.
#include "cuda_helpers.cuh"

// ---------------------------------------------------------------------------
// Version 1: one thread per output element.
__global__ void capsule_predict_naive(const float* __restrict__ u, const float* __restrict__ W,
                                      float* __restrict__ u_hat, long long batch, long long in_caps,
                                      long long in_dim, long long out_caps, long long out_dim) {
    // Strides of each array, in elements (the last axis has stride 1).
    const long long out_stride_j = out_dim;
    const long long out_stride_i = out_caps * out_dim;
    const long long out_stride_b = in_caps * out_stride_i;
    const long long w_stride_d = in_dim;
    const long long w_stride_j = out_dim * in_dim;
    const long long w_stride_i = out_caps * w_stride_j;
    const long long u_stride_i = in_dim;
    const long long u_stride_b = in_caps * in_dim;

    CUDA_1D_KERNEL_LOOP_INT64(index, batch * out_stride_b) {
        // ind2sub: the flat index of u_hat back to its coordinates.
        const long long b = index / out_stride_b;
        const long long i = (index % out_stride_b) / out_stride_i;
        const long long j = (index % out_stride_i) / out_stride_j;
        const long long d = index % out_stride_j;
        // sub2ind: the coordinates to the first element of W[i, j, d, :] and u[b, i, :].
        const float* w_row = W + i * w_stride_i + j * w_stride_j + d * w_stride_d;
        const float* u_cap = u + b * u_stride_b + i * u_stride_i;
        float sum = 0.0f;
        for (long long k = 0; k < in_dim; ++k) {
            sum += __ldg(w_row + k) * __ldg(u_cap + k);
        }
        u_hat[index] = sum;
    }
}

// ---------------------------------------------------------------------------
// Version 2: the tile's input capsules in shared memory.
// Grid (in_caps, ceil(batch / CAPS_BATCH_TILE)); any block size; dynamic shared
// memory CAPS_BATCH_TILE * in_dim floats.
__global__ void capsule_predict_shared_input(const float* __restrict__ u, const float* __restrict__ W,
                                             float* __restrict__ u_hat, int batch, int in_caps, int in_dim,
                                             int out_caps, int out_dim) {
    extern __shared__ float u_tile[];  // [CAPS_BATCH_TILE][in_dim]
    const int i = blockIdx.x;
    const int b0 = blockIdx.y * CAPS_BATCH_TILE;
    const int tile = min(CAPS_BATCH_TILE, batch - b0);
    const int row = out_caps * out_dim;

    // u[b0 + t, i, :] for t < tile: tile rows of in_dim floats, in_caps * in_dim apart.
    for (int e = threadIdx.x; e < tile * in_dim; e += blockDim.x) {
        const int t = e / in_dim, k = e % in_dim;
        u_tile[e] = __ldg(u + ((size_t)(b0 + t) * in_caps + i) * in_dim + k);
    }
    __syncthreads();

    const float* W_i = W + (size_t)i * row * in_dim;
    // Consecutive threads take consecutive outputs r of one row: the stores are coalesced.
    for (int e = threadIdx.x; e < tile * row; e += blockDim.x) {
        const int t = e / row, r = e % row;
        const float* w_row = W_i + (size_t)r * in_dim;
        const float* x = u_tile + t * in_dim;
        float sum = 0.0f;
        for (int k = 0; k < in_dim; ++k) {
            sum += __ldg(w_row + k) * x[k];
        }
        u_hat[((size_t)(b0 + t) * in_caps + i) * row + r] = sum;
    }
}

// ---------------------------------------------------------------------------
// Version 3: weights in registers, reused across the samples of the tile.
// Block (ceil(ROW / CAPS_OUTS_PER_THREAD), rows_y): threadIdx.x picks the
// outputs, threadIdx.y the samples t = threadIdx.y, threadIdx.y + rows_y, ...
// Grid (in_caps, ceil(batch / CAPS_BATCH_TILE)); dynamic shared memory
// CAPS_BATCH_TILE * CAPS_IN_DIM floats.
__global__ void capsule_predict_register_blocked(const float* __restrict__ u, const float* __restrict__ W,
                                                 float* __restrict__ u_hat, int batch, int in_caps, int out_caps,
                                                 int out_dim) {
    extern __shared__ float u_tile[];  // [CAPS_BATCH_TILE][CAPS_IN_DIM]
    const int i = blockIdx.x;
    const int b0 = blockIdx.y * CAPS_BATCH_TILE;
    const int tile = min(CAPS_BATCH_TILE, batch - b0);
    const int row = out_caps * out_dim;
    const int threads = blockDim.x * blockDim.y;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;

    // This thread's outputs r0 .. r0 + CAPS_OUTS_PER_THREAD - 1 of the row, and their weights,
    // loaded first so that they are in flight while the tile is copied.
    const int r0 = threadIdx.x * CAPS_OUTS_PER_THREAD;
    const float* W_i = W + (size_t)i * row * CAPS_IN_DIM;
    float w[CAPS_OUTS_PER_THREAD][CAPS_IN_DIM];
#pragma unroll
    for (int s = 0; s < CAPS_OUTS_PER_THREAD; ++s) {
#pragma unroll
        for (int k = 0; k < CAPS_IN_DIM; ++k) {
            w[s][k] = (r0 + s < row) ? __ldg(W_i + (size_t)(r0 + s) * CAPS_IN_DIM + k) : 0.0f;
        }
    }

    for (int e = tid; e < tile * CAPS_IN_DIM; e += threads) {
        const int t = e / CAPS_IN_DIM, k = e % CAPS_IN_DIM;
        u_tile[e] = __ldg(u + ((size_t)(b0 + t) * in_caps + i) * CAPS_IN_DIM + k);
    }
    __syncthreads();

    for (int t = threadIdx.y; t < tile; t += blockDim.y) {
        float x[CAPS_IN_DIM];
#pragma unroll
        for (int k = 0; k < CAPS_IN_DIM; ++k) x[k] = u_tile[t * CAPS_IN_DIM + k];
        float* out = u_hat + ((size_t)(b0 + t) * in_caps + i) * row + r0;
#pragma unroll
        for (int s = 0; s < CAPS_OUTS_PER_THREAD; ++s) {
            float sum = 0.0f;
#pragma unroll
            for (int k = 0; k < CAPS_IN_DIM; ++k) sum += w[s][k] * x[k];
            if (r0 + s < row) out[s] = sum;
        }
    }
}

// ---------------------------------------------------------------------------
// Version 4: version 3 with 16-byte accesses.  ROW and CAPS_IN_DIM must be
// multiples of 4 (the launcher checks), so every row of u, W and u_hat starts
// on a 16-byte boundary.  Same grid, block and shared memory as version 3.
__global__ void capsule_predict_vectorized(const float* __restrict__ u, const float* __restrict__ W,
                                           float* __restrict__ u_hat, int batch, int in_caps, int out_caps,
                                           int out_dim) {
    extern __shared__ float u_tile[];  // [CAPS_BATCH_TILE][CAPS_IN_DIM], 16-byte aligned rows
    const int i = blockIdx.x;
    const int b0 = blockIdx.y * CAPS_BATCH_TILE;
    const int tile = min(CAPS_BATCH_TILE, batch - b0);
    const int row = out_caps * out_dim;
    const int threads = blockDim.x * blockDim.y;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    constexpr int QUADS_IN = CAPS_QUADS_IN;

    const int r0 = threadIdx.x * 4;  // CAPS_OUTS_PER_THREAD == 4: one float4 of u_hat per sample
    const bool active = r0 < row;

    // This thread's weights first: their loads are in flight while the tile below is copied,
    // so the block waits for memory once, not twice.
    const float4* W4 = reinterpret_cast<const float4*>(W + (size_t)i * row * CAPS_IN_DIM);
    float w[4][CAPS_IN_DIM];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
#pragma unroll
        for (int q = 0; q < QUADS_IN; ++q) {
            const float4 v = active ? __ldg(W4 + (size_t)(r0 + s) * QUADS_IN + q) : make_float4(0.f, 0.f, 0.f, 0.f);
            w[s][4 * q + 0] = v.x;
            w[s][4 * q + 1] = v.y;
            w[s][4 * q + 2] = v.z;
            w[s][4 * q + 3] = v.w;
        }
    }

    float4* u_tile4 = reinterpret_cast<float4*>(u_tile);
    const float4* u4 = reinterpret_cast<const float4*>(u);
    for (int e = tid; e < tile * QUADS_IN; e += threads) {
        const int t = e / QUADS_IN, q = e % QUADS_IN;
        u_tile4[e] = __ldg(u4 + ((size_t)(b0 + t) * in_caps + i) * QUADS_IN + q);
    }
    __syncthreads();
    if (!active) return;  // after the barrier: every thread helped load the tile

#pragma unroll 2
    for (int t = threadIdx.y; t < tile; t += blockDim.y) {
        float x[CAPS_IN_DIM];
#pragma unroll
        for (int q = 0; q < QUADS_IN; ++q) {
            const float4 v = u_tile4[t * QUADS_IN + q];  // same address across the row: a broadcast
            x[4 * q + 0] = v.x;
            x[4 * q + 1] = v.y;
            x[4 * q + 2] = v.z;
            x[4 * q + 3] = v.w;
        }
        float sum[4];
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            sum[s] = 0.0f;
#pragma unroll
            for (int k = 0; k < CAPS_IN_DIM; ++k) sum[s] += w[s][k] * x[k];
        }
        float4* out = reinterpret_cast<float4*>(u_hat + ((size_t)(b0 + t) * in_caps + i) * row + r0);
        __stcs(out, make_float4(sum[0], sum[1], sum[2], sum[3]));
    }
}

// ---------------------------------------------------------------------------
// Version 5: a run of consecutive input capsules per block.
// For one sample b, the rows u_hat[b, i0 .. i0 + capsules - 1, :, :] are one contiguous stretch of
// memory, so a block that owns `capsules` consecutive input capsules writes capsules * ROW consecutive
// floats per sample: thread (q, c) of block (ROW / 4, capsules) owns outputs 4q .. 4q + 3 of the row
// of capsule i0 + c, keeps their weights in registers for the whole batch tile, and its warp's 16-byte
// stores fill whole 128-byte lines.  The inputs u[b, i0 .. i0 + capsules - 1, :] are contiguous too: the
// tile is copied into shared memory with coalesced 16-byte loads, CAPS_LOADS_IN_FLIGHT of them issued
// per thread before the first is used.  After that the loop over samples touches global memory only to
// store, and moves its output pointer by a fixed stride: no division, no load to wait for.  The stores
// are plain: measured, the streaming hint of version 4 (__stcs) changed the time by less than the
// spread between runs.
// The work is ceil(in_caps / capsules) runs x ceil(batch / batch_tile) tiles, the pieces; block k takes
// pieces k, k + gridDim.x, ...  The launcher gives each piece its own block (the hardware then hands a
// piece to whichever multiprocessor frees up first); a smaller grid makes the blocks loop.  Dynamic
// shared memory batch_tile * capsules * CAPS_IN_DIM floats.  ROW and CAPS_IN_DIM multiples of 4, as
// in version 4, and at most CAPS_STREAMING_THREADS threads per block.
__global__ void __launch_bounds__(CAPS_STREAMING_THREADS, CAPS_STREAMING_MIN_BLOCKS) capsule_predict_streaming(
    const float* __restrict__ u, const float* __restrict__ W, float* __restrict__ u_hat, int batch, int in_caps,
    int out_caps, int out_dim, int batch_tile) {
    extern __shared__ float4 u_run[];  // [batch_tile][capsules][QUADS_IN]
    constexpr int QUADS_IN = CAPS_QUADS_IN;
    const int quads_row = out_caps * out_dim / 4;  // == blockDim.x
    const int capsules = blockDim.y;
    const int q = threadIdx.x, c = threadIdx.y;
    const int threads = quads_row * capsules;
    const int tid = c * quads_row + q;
    const int runs = (in_caps + capsules - 1) / capsules;
    const int pieces = runs * ((batch + batch_tile - 1) / batch_tile);
    const size_t out_step = (size_t)in_caps * quads_row;  // float4s from one sample to the next

    for (int piece = blockIdx.x; piece < pieces; piece += gridDim.x) {
        const int i0 = (piece % runs) * capsules;
        const int b0 = (piece / runs) * batch_tile;
        const int run = min(capsules, in_caps - i0);  // capsules of this piece: fewer in the last run
        const int tile = min(batch_tile, batch - b0);
        const bool active = c < run;

        // This thread's 4 x CAPS_IN_DIM weights: 4 * QUADS_IN consecutive float4s of W.
        const float4* W4 = reinterpret_cast<const float4*>(W) + ((size_t)(i0 + c) * quads_row + q) * 4 * QUADS_IN;
        float w[4][CAPS_IN_DIM];
#pragma unroll
        for (int s = 0; s < 4; ++s) {
#pragma unroll
            for (int k4 = 0; k4 < QUADS_IN; ++k4) {
                const float4 v = active ? __ldg(W4 + s * QUADS_IN + k4) : make_float4(0.f, 0.f, 0.f, 0.f);
                w[s][4 * k4 + 0] = v.x;
                w[s][4 * k4 + 1] = v.y;
                w[s][4 * k4 + 2] = v.z;
                w[s][4 * k4 + 3] = v.w;
            }
        }

        // The tile of inputs: for each sample, run * QUADS_IN consecutive float4s of u.  A thread issues
        // CAPS_LOADS_IN_FLIGHT loads before it stores the first to shared memory, so it waits for memory
        // once per group of loads, not once per load.
        const float4* u4 = reinterpret_cast<const float4*>(u) + ((size_t)b0 * in_caps + i0) * QUADS_IN;
        const int per_sample = run * QUADS_IN;
        const int n4 = tile * per_sample;
        __syncthreads();  // the previous piece is done with u_run
        for (int k0 = tid; k0 < n4; k0 += CAPS_LOADS_IN_FLIGHT * threads) {
            float4 v[CAPS_LOADS_IN_FLIGHT];
#pragma unroll
            for (int l = 0; l < CAPS_LOADS_IN_FLIGHT; ++l) {
                const int k = k0 + l * threads;
                const int t = k / per_sample, e = k - t * per_sample;
                v[l] = k < n4 ? __ldg(u4 + (size_t)t * in_caps * QUADS_IN + e) : make_float4(0.f, 0.f, 0.f, 0.f);
            }
#pragma unroll
            for (int l = 0; l < CAPS_LOADS_IN_FLIGHT; ++l) {
                const int k = k0 + l * threads;
                const int t = k / per_sample, e = k - t * per_sample;
                if (k < n4) u_run[t * capsules * QUADS_IN + e] = v[l];
            }
        }
        __syncthreads();
        if (!active) continue;  // after the barrier: every thread helped load the tile

        const float4* x4 = u_run + c * QUADS_IN;
        float4* out = reinterpret_cast<float4*>(u_hat) + ((size_t)b0 * in_caps + i0 + c) * quads_row + q;
#pragma unroll 4
        for (int t = 0; t < tile; ++t) {
            float x[CAPS_IN_DIM];
#pragma unroll
            for (int k4 = 0; k4 < QUADS_IN; ++k4) {
                const float4 v = x4[t * capsules * QUADS_IN + k4];  // one address per capsule: a broadcast
                x[4 * k4 + 0] = v.x;
                x[4 * k4 + 1] = v.y;
                x[4 * k4 + 2] = v.z;
                x[4 * k4 + 3] = v.w;
            }
            float sum[4];
#pragma unroll
            for (int s = 0; s < 4; ++s) {
                sum[s] = 0.0f;
#pragma unroll
                for (int k = 0; k < CAPS_IN_DIM; ++k) sum[s] += w[s][k] * x[k];
            }
            *out = make_float4(sum[0], sum[1], sum[2], sum[3]);
            out += out_step;
        }
    }
}
