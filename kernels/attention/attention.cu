// kernels/attention/attention.cu -- scaled dot-product attention in float32: unfused, the one-pass softmax,
// the fused forward (FlashAttention-2's loop order) and its backward pass.
//
// For one head, Q, K and V are N x d (a row per position of the sequence), the scale is s = 1/sqrt(d), and
//     S = s Q K^T  (N x N),   P = softmax of each row of S,   O = P V  (N x d).
// With the causal mask, row i of S keeps only columns j <= i (a position sees itself and the past).
// Every tensor is (batch, heads, N, d), contiguous, float32; a launch covers all batch x heads at once.
//
// Versions, in teaching order (versions 4 and the BF16 half of 5 are in kernels/attention/attention_bf16.cu):
//   1. unfused: four launches that keep the N x N matrices in memory, made of the book's own kernels:
//        attention_keys_transposed   K^T, scaled by s (the GEMM reads its right operand row-major)
//        attention_scores_gemm       S = Q (s K^T), the GEMM chapter's warp-tiled tile, one head per blockIdx.z
//        attention_causal_mask       S[i][j] = -inf for j > i (causal only)
//        softmax_stable              P = softmax(S), the MLP chapter's kernel (kernels/softmax.cu), launched
//                                    from Python on the batch x heads x N rows of S
//        attention_output_gemm       O = P V, the same tile
//   2. attention_online_softmax      the softmax of a row in ONE pass for its statistics: a running maximum m
//                                    and a running sum l of exp(x - m), partial (m, l) pairs merged by
//                                    (m, l) + (m', l') = (M, l e^(m - M) + l' e^(m' - M)),  M = max(m, m').
//                                    A warp per row; writes P and the row's log-sum-exp m + log l.
//   3. attention_forward_float       fused: a block per 64 query rows walks the key/value tiles (64 keys each)
//                                    through shared memory, keeps its 64 x d output and each row's (m, l) in
//                                    registers, rescales them as the maximum grows (the merge rule, one tile at
//                                    a time), and writes O and the log-sum-exp L = m + log l of each row: no
//                                    N x N matrix exists anywhere.  Causal blocks stop at the diagonal tile, and
//                                    start from the last query tile (the most work) so that the short ones fill
//                                    the end of the run.
//   5. backward, from the saved log-sum-exp (P = exp(S - L) recomputed tile by tile, never stored):
//        attention_backward_preprocess   D_i = sum_c dO[i][c] O[i][c] (the row term of the softmax gradient),
//                                        and dQ set to zero
//        attention_backward_float        a block per 64 keys walks the query tiles (FlashAttention-2's order):
//                                        dV += P^T dO,  dP = dO V^T,  dS = P o (dP - D),  dK += s dS^T Q kept in
//                                        registers; dQ += s dS K added to memory with atomics, since every key
//                                        block adds to every query row.
//
// Launch (kernels/attention/attention.py): the fused kernels take ATT_D (the head dimension, a multiple of 16 up
// to 128) as a compile-time define and dynamic shared memory (attention.py's shared_bytes).

#include "gemm/sgemm.cu"   // the GEMM chapter's warp-tiled tile (version 7), compiled with kernels/attention/attention.py's WT_*

#include <math_constants.h>

#ifndef ATT_D
#define ATT_D 64
#endif
#if ATT_D % 16 != 0 || ATT_D > 128
#error "ATT_D (the head dimension) must be a multiple of 16, at most 128"
#endif

// ------------------------------------------------------------------------------------------------
// 1. Unfused.  s K^T for every head: Kt[h][c][j] = s K[h][j][c].  One thread per element of Kt, j along
//    threadIdx.x so that the stores are coalesced (the reads, d floats apart, hit the caches: K is small).
__global__ void attention_keys_transposed(const float* __restrict__ K, float* __restrict__ Kt, int N, int d,
                                          float scale)
{
    size_t head = blockIdx.z;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int c = blockIdx.y;
    if (j < N) Kt[(head * d + c) * N + j] = scale * K[(head * N + j) * d + c];
}

// S = Q (s K^T) for head blockIdx.z: one 128 x 64 tile of the N x N scores per block.
__global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
attention_scores_gemm(const float* Q, const float* Kt, float* S, int N, int d)
{
    size_t head = blockIdx.z;
    sgemm_warptile_tile(N, N, d, Q + head * N * d, Kt + head * d * N, S + head * N * N,
                        blockIdx.y * WT_BM, blockIdx.x * WT_BN);
}

// The causal mask: S[h][i][j] = -inf above the diagonal (j > i), so that exp gives those weights 0.
__global__ void attention_causal_mask(float* S, int N, int heads)
{
    size_t total = (size_t)heads * N * N;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)blockDim.x * gridDim.x) {
        int j = (int)(e % N), i = (int)((e / N) % N);
        if (j > i) S[e] = -CUDART_INF_F;
    }
}

// O = P V for head blockIdx.z: one 128 x 64 tile of the N x d output per block.
__global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
attention_output_gemm(const float* P, const float* V, float* O, int N, int d)
{
    size_t head = blockIdx.z;
    sgemm_warptile_tile(N, d, N, P + head * N * N, V + head * N * d, O + head * N * d,
                        blockIdx.y * WT_BM, blockIdx.x * WT_BN);
}

// ------------------------------------------------------------------------------------------------
// 2. One pass for the statistics: each lane folds its elements into (m, l) one at a time, which is the merge
//    rule with a part of one element (m_b = x, l_b = 1), then the 32 lanes' pairs are merged by shuffles.  A
//    second read writes p = e^(x - m) / l.  A row of -inf only (everything masked) has l = 0: its p are 0 and
//    its log-sum-exp is -inf.

// The merge rule: (m, l) becomes the statistics of both parts, (m, l) + (m_b, l_b).  A part that has seen only
// -inf is (-inf, 0), the rule's identity: M = -inf would make e^(m - M) = e^(-inf + inf) = NaN, so a -inf
// maximum scales by 0 instead.
__device__ __forceinline__ void softmax_merge(float& m, float& l, float m_b, float l_b)
{
    float M = fmaxf(m, m_b);
    if (M == -CUDART_INF_F) return;   // both parts empty: (-inf, 0)
    l = l * __expf(m - M) + l_b * __expf(m_b - M);
    m = M;
}

#define ONLINE_WARPS 4
__global__ void __launch_bounds__(32 * ONLINE_WARPS)
attention_online_softmax(const float* __restrict__ S, float* __restrict__ P, float* __restrict__ lse, int rows,
                         int cols)
{
    int row = blockIdx.x * ONLINE_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;                         // the whole warp leaves together
    const float* x = S + (size_t)row * cols;
    float m = -CUDART_INF_F, l = 0.0f;
    for (int j = lane; j < cols; j += 32) {
        float v = x[j];
        if (v > m) {                                 // a new maximum: rescale what was summed so far
            l = l * __expf(m - v) + 1.0f;
            m = v;
        } else if (v != -CUDART_INF_F) {
            l += __expf(v - m);
        }
    }
    #pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
        softmax_merge(m, l, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, l, offset));
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int j = lane; j < cols; j += 32)
        P[(size_t)row * cols + j] = l > 0.0f ? __expf(x[j] - m) * inv : 0.0f;
    if (lane == 0) lse[row] = l > 0.0f ? m + __logf(l) : -CUDART_INF_F;
}

// ------------------------------------------------------------------------------------------------
// Shared by versions 3 and 5: 64-row tiles, and each thread's share of a 64 x ATT_D block of results.
#define ATT_BR 64                                    // query rows per tile
#define ATT_BC 64                                    // keys per tile
#define ATT_PAD 4                                    // transposed tiles: rows of 64 + 4 floats, still 16-byte aligned
#define ATT_VEC (ATT_D % 32 == 0 ? 4 : 2)            // columns of d a thread takes side by side
#define ATT_GROUPS (ATT_D / (8 * ATT_VEC))           // ... in this many groups, 8 * ATT_VEC columns apart
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

// Rows [row0, row0 + 64) of a (rows x ATT_D) matrix into XsT[c][r] (transposed: a thread's 4 rows of one column
// are one float4), zeros past `rows`.  Thread t takes row t % 64 and every (threads/64)-th 4-column chunk, so a
// warp stores 32 consecutive floats of XsT: no bank conflicts.
__device__ __forceinline__ void load_tile_transposed(float* XsT, const float* X, int row0, int rows, int threads)
{
    int r = threadIdx.x % ATT_BR;
    for (int c4 = threadIdx.x / ATT_BR; c4 < ATT_D / 4; c4 += threads / ATT_BR) {
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (row0 + r < rows) v = *reinterpret_cast<const float4*>(X + (size_t)(row0 + r) * ATT_D + 4 * c4);
        XsT[(4 * c4 + 0) * (ATT_BR + ATT_PAD) + r] = v.x;
        XsT[(4 * c4 + 1) * (ATT_BR + ATT_PAD) + r] = v.y;
        XsT[(4 * c4 + 2) * (ATT_BR + ATT_PAD) + r] = v.z;
        XsT[(4 * c4 + 3) * (ATT_BR + ATT_PAD) + r] = v.w;
    }
}

// Rows [row0, row0 + 64) of a (rows x ATT_D) matrix into Xs[r][c] (row length `stride`), coalesced float4 loads.
__device__ __forceinline__ void load_tile(float* Xs, int stride, const float* X, int row0, int rows, int threads)
{
    for (int f = threadIdx.x; f < ATT_BR * ATT_D / 4; f += threads) {
        int r = f / (ATT_D / 4), c = 4 * (f % (ATT_D / 4));
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (row0 + r < rows) v = *reinterpret_cast<const float4*>(X + (size_t)(row0 + r) * ATT_D + c);
        Xs[r * stride + c + 0] = v.x;
        Xs[r * stride + c + 1] = v.y;
        Xs[r * stride + c + 2] = v.z;
        Xs[r * stride + c + 3] = v.w;
    }
}

// Column e of group g of the ATT_D columns a thread with column index tx (0..7) owns.
__device__ __forceinline__ int owned_column(int tx, int g, int e) { return g * 8 * ATT_VEC + tx * ATT_VEC + e; }

// The ATT_VEC columns of group g a thread owns, from a row of ATT_D floats in shared memory: one 16- (or 8-) byte load.
__device__ __forceinline__ void load_owned(float (&out)[ATT_VEC], const float* row, int tx, int g)
{
#if ATT_VEC == 4
    float4 v = *reinterpret_cast<const float4*>(row + owned_column(tx, g, 0));
    out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
#else
    float2 v = *reinterpret_cast<const float2*>(row + owned_column(tx, g, 0));
    out[0] = v.x; out[1] = v.y;
#endif
}

// ------------------------------------------------------------------------------------------------
// 3. Fused forward.  Block (qt, head): query rows q0 = 64 qt ... q0 + 63.  128 threads: thread t owns rows
//    4 ty .. 4 ty + 3 (ty = t / 8) of the tile, and of each 64 x 64 score tile the 8 columns 4 tx .. 4 tx + 3 and
//    32 + 4 tx .. 32 + 4 tx + 3 (tx = t % 8): the 8 threads of a row are 8 neighbouring lanes, so a row's
//    maximum and sum take three shuffles.  Scores are kept in log2 units, x = s log2(e) q.k, so that every
//    exponential is one exp2.
//    Per key tile: K^T and V into shared memory | S = Q K^T for the thread's 4 x 8 scores | the row maxima;
//    rescale l and O by 2^(m_old - m_new) | P = 2^(x - m) into shared memory (transposed) | O += P V.
#define FWD_THREADS 128

__global__ void __launch_bounds__(FWD_THREADS)
attention_forward_float(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                        float* __restrict__ O, float* __restrict__ lse, int N, float scale, int causal)
{
    extern __shared__ __align__(16) float att_shared[];
    float* QsT = att_shared;                                   // [ATT_D][64 + 4]: Q^T
    float* KsT = QsT + ATT_D * (ATT_BR + ATT_PAD);            // [ATT_D][64 + 4]: K^T of the key tile
    float* Vs = KsT + ATT_D * (ATT_BC + ATT_PAD);             // [64][ATT_D]: V of the key tile
    float* PsT = Vs + ATT_BC * ATT_D;                          // [64][64 + 4]: P^T of the tile

    int t = threadIdx.x, ty = t / 8, tx = t % 8;
    int q0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * ATT_BR;   // causal: the longest rows first
    size_t head = blockIdx.y;
    Q += head * N * ATT_D;
    K += head * N * ATT_D;
    V += head * N * ATT_D;
    O += head * N * ATT_D;
    lse += head * N;
    float scale_log2 = scale * LOG2E;

    load_tile_transposed(QsT, Q, q0, N, FWD_THREADS);

    float m[4], l[4], o[4][ATT_D / 8];
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        m[i] = -CUDART_INF_F;
        l[i] = 0.0f;
        #pragma unroll
        for (int c = 0; c < ATT_D / 8; ++c) o[i][c] = 0.0f;
    }
    int tiles = (N + ATT_BC - 1) / ATT_BC;
    if (causal) tiles = min(tiles, (q0 + ATT_BR - 1) / ATT_BC + 1);   // tiles wholly above the diagonal: skipped

    for (int kt = 0; kt < tiles; ++kt) {
        int k0 = kt * ATT_BC;
        load_tile_transposed(KsT, K, k0, N, FWD_THREADS);
        load_tile(Vs, ATT_D, V, k0, N, FWD_THREADS);
        __syncthreads();                                       // Q (first time), K and V are in

        float x[4][8];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 8; ++j) x[i][j] = 0.0f;
        #pragma unroll 8
        for (int k = 0; k < ATT_D; ++k) {
            float4 a = *reinterpret_cast<const float4*>(&QsT[k * (ATT_BR + ATT_PAD) + 4 * ty]);
            float4 b0 = *reinterpret_cast<const float4*>(&KsT[k * (ATT_BC + ATT_PAD) + 4 * tx]);
            float4 b1 = *reinterpret_cast<const float4*>(&KsT[k * (ATT_BC + ATT_PAD) + 32 + 4 * tx]);
            float av[4] = {a.x, a.y, a.z, a.w}, bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 8; ++j) x[i][j] += av[i] * bv[j];
        }

        #pragma unroll
        for (int i = 0; i < 4; ++i) {
            int qi = q0 + 4 * ty + i;
            float tile_max = -CUDART_INF_F;
            #pragma unroll
            for (int j = 0; j < 8; ++j) {
                int kj = k0 + (j < 4 ? 4 * tx + j : 32 + 4 * tx + j - 4);
                bool masked = kj >= N || (causal && kj > qi);
                x[i][j] = masked ? -CUDART_INF_F : x[i][j] * scale_log2;
                tile_max = fmaxf(tile_max, x[i][j]);
            }
            #pragma unroll
            for (int offset = 1; offset < 8; offset *= 2)
                tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
            float m_new = fmaxf(m[i], tile_max);
            float base = m_new == -CUDART_INF_F ? 0.0f : m_new;   // a row with nothing unmasked yet stays (-inf, 0)
            float alpha = exp2f(m[i] - base);                      // 0 the first time (m = -inf)
            m[i] = m_new;
            float sum = 0.0f;
            #pragma unroll
            for (int j = 0; j < 8; ++j) {
                x[i][j] = exp2f(x[i][j] - base);
                sum += x[i][j];
            }
            l[i] = l[i] * alpha + sum;                             // this thread's part of the row sum
            #pragma unroll
            for (int c = 0; c < ATT_D / 8; ++c) o[i][c] *= alpha;
        }
        #pragma unroll
        for (int j = 0; j < 8; ++j) {
            int c = j < 4 ? 4 * tx + j : 32 + 4 * tx + j - 4;
            *reinterpret_cast<float4*>(&PsT[c * (ATT_BR + ATT_PAD) + 4 * ty]) = make_float4(x[0][j], x[1][j], x[2][j], x[3][j]);
        }
        __syncthreads();                                       // P is in

        #pragma unroll 4
        for (int j = 0; j < ATT_BC; ++j) {
            float4 p = *reinterpret_cast<const float4*>(&PsT[j * (ATT_BR + ATT_PAD) + 4 * ty]);
            float pv[4] = {p.x, p.y, p.z, p.w};
            #pragma unroll
            for (int g = 0; g < ATT_GROUPS; ++g) {
                float v[ATT_VEC];
                load_owned(v, Vs + j * ATT_D, tx, g);
                #pragma unroll
                for (int e = 0; e < ATT_VEC; ++e)
                    #pragma unroll
                    for (int i = 0; i < 4; ++i) o[i][g * ATT_VEC + e] += pv[i] * v[e];
            }
        }
        __syncthreads();                                       // everyone is done with K, V and P of this tile
    }

    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        #pragma unroll
        for (int offset = 1; offset < 8; offset *= 2) l[i] += __shfl_xor_sync(0xffffffffu, l[i], offset);
        int qi = q0 + 4 * ty + i;
        if (qi >= N) continue;
        float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;          // a row with every key masked gets O = 0
        #pragma unroll
        for (int g = 0; g < ATT_GROUPS; ++g)
            #pragma unroll
            for (int e = 0; e < ATT_VEC; ++e) O[(size_t)qi * ATT_D + owned_column(tx, g, e)] = o[i][g * ATT_VEC + e] * inv;
        if (tx == 0) lse[qi] = l[i] > 0.0f ? (m[i] + log2f(l[i])) * LN2 : -CUDART_INF_F;
    }
}

// ------------------------------------------------------------------------------------------------
// 5. Backward.  First D_i = dO_i . O_i for every row (a warp per row), and dQ = 0 for the atomics that follow.
#define PRE_WARPS 4
__global__ void __launch_bounds__(32 * PRE_WARPS)
attention_backward_preprocess(const float* __restrict__ O, const float* __restrict__ dO, float* __restrict__ Dvec,
                              float* __restrict__ dQ, int rows)
{
    int row = blockIdx.x * PRE_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    float sum = 0.0f;
    for (int c = lane; c < ATT_D; c += 32) {
        sum += O[(size_t)row * ATT_D + c] * dO[(size_t)row * ATT_D + c];
        dQ[(size_t)row * ATT_D + c] = 0.0f;
    }
    #pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) Dvec[row] = sum;
}

// Block (kt, head): keys k0 = 64 kt ... k0 + 63, walking the query tiles (from the diagonal on, if causal).
// 256 threads as 16 x 16: thread (ty, tx) owns keys ty + 16 i and queries tx + 16 j (i, j < 4) of each 64 x 64
// score tile, rows ty + 16 i and columns tx + 16 g of dK and dV (and of the tile's dQ, rows being queries
// there).  Tiles in shared memory are row-major with rows padded by one float, so that a warp reading down a
// column hits 32 banks.  Per query tile:
//   Q, dO, L, D in | S^T = K Q^T, P^T = 2^(x - L) -> shared | dV += P^T dO;  dP^T = V dO^T;  dS^T = P^T o (dP^T - D)
//   -> shared | dK += dS^T Q;  dQ += s dS K (atomics) | barrier before the next tile overwrites Q, dO, P, dS.
#define BWD_THREADS 256
#define BWD_LD (ATT_D + 1)                           // row length of the d-wide tiles
#define BWD_LDS (ATT_BR + 1)                         // row length of the 64 x 64 tiles

__global__ void __launch_bounds__(BWD_THREADS)
attention_backward_float(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                         const float* __restrict__ dO, const float* __restrict__ lse, const float* __restrict__ Dvec,
                         float* __restrict__ dQ, float* __restrict__ dK, float* __restrict__ dV, int N, float scale,
                         int causal)
{
    extern __shared__ __align__(16) float att_shared[];
    float* Ks = att_shared;                          // [64][ATT_D + 1]
    float* Vs = Ks + ATT_BC * BWD_LD;
    float* Qs = Vs + ATT_BC * BWD_LD;
    float* dOs = Qs + ATT_BR * BWD_LD;
    float* Ps = dOs + ATT_BR * BWD_LD;               // [64 keys][64 + 1 queries]: P^T
    float* dSs = Ps + ATT_BC * BWD_LDS;              // [64 keys][64 + 1 queries]: dS^T
    float* Ls = dSs + ATT_BC * BWD_LDS;              // [64]: L of the tile's queries, in log2 units
    float* Ds = Ls + ATT_BR;                         // [64]: D of the tile's queries

    int t = threadIdx.x, ty = t / 16, tx = t % 16;
    int k0 = blockIdx.x * ATT_BC;
    size_t head = blockIdx.y;
    size_t offset = head * N * ATT_D;
    Q += offset; K += offset; V += offset; dO += offset; dQ += offset; dK += offset; dV += offset;
    lse += head * N;
    Dvec += head * N;
    float scale_log2 = scale * LOG2E;

    load_tile(Ks, BWD_LD, K, k0, N, BWD_THREADS);
    load_tile(Vs, BWD_LD, V, k0, N, BWD_THREADS);

    float dk[4][ATT_D / 16], dv[4][ATT_D / 16];
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int g = 0; g < ATT_D / 16; ++g) dk[i][g] = dv[i][g] = 0.0f;

    int first = causal ? k0 / ATT_BR : 0;            // query tiles wholly before the keys see none of them
    int tiles = (N + ATT_BR - 1) / ATT_BR;
    for (int qt = first; qt < tiles; ++qt) {
        int q0 = qt * ATT_BR;
        load_tile(Qs, BWD_LD, Q, q0, N, BWD_THREADS);
        load_tile(dOs, BWD_LD, dO, q0, N, BWD_THREADS);
        if (t < ATT_BR) {
            bool inside = q0 + t < N;
            Ls[t] = inside ? lse[q0 + t] * LOG2E : 0.0f;
            Ds[t] = inside ? Dvec[q0 + t] : 0.0f;
        }
        __syncthreads();                             // Q, dO, L, D in (and K, V the first time)

        float p[4][4];                               // P^T[key ty + 16 i][query tx + 16 j]
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j) p[i][j] = 0.0f;
        for (int c = 0; c < ATT_D; ++c) {
            float kv[4], qv[4];
            #pragma unroll
            for (int i = 0; i < 4; ++i) kv[i] = Ks[(ty + 16 * i) * BWD_LD + c];
            #pragma unroll
            for (int j = 0; j < 4; ++j) qv[j] = Qs[(tx + 16 * j) * BWD_LD + c];
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j) p[i][j] += kv[i] * qv[j];
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                int key = k0 + ty + 16 * i, query = q0 + tx + 16 * j;
                bool masked = key >= N || query >= N || (causal && key > query);
                p[i][j] = masked ? 0.0f : exp2f(p[i][j] * scale_log2 - Ls[tx + 16 * j]);
                Ps[(ty + 16 * i) * BWD_LDS + tx + 16 * j] = p[i][j];
            }
        __syncthreads();                             // P^T is in

        float dp[4][4];                              // dP^T = V dO^T, then dS^T
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j) dp[i][j] = 0.0f;
        for (int c = 0; c < ATT_D; ++c) {
            float vv[4], ov[4];
            #pragma unroll
            for (int i = 0; i < 4; ++i) vv[i] = Vs[(ty + 16 * i) * BWD_LD + c];
            #pragma unroll
            for (int j = 0; j < 4; ++j) ov[j] = dOs[(tx + 16 * j) * BWD_LD + c];
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j) dp[i][j] += vv[i] * ov[j];
        }
        for (int q = 0; q < ATT_BR; ++q) {           // dV += P^T dO
            float dov[ATT_D / 16];
            #pragma unroll
            for (int g = 0; g < ATT_D / 16; ++g) dov[g] = dOs[q * BWD_LD + tx + 16 * g];
            #pragma unroll
            for (int i = 0; i < 4; ++i) {
                float pi = Ps[(ty + 16 * i) * BWD_LDS + q];
                #pragma unroll
                for (int g = 0; g < ATT_D / 16; ++g) dv[i][g] += pi * dov[g];
            }
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                dSs[(ty + 16 * i) * BWD_LDS + tx + 16 * j] = p[i][j] * (dp[i][j] - Ds[tx + 16 * j]);
        __syncthreads();                             // dS^T is in

        for (int q = 0; q < ATT_BR; ++q) {           // dK += dS^T Q (the scale s is applied at the end)
            float qv[ATT_D / 16];
            #pragma unroll
            for (int g = 0; g < ATT_D / 16; ++g) qv[g] = Qs[q * BWD_LD + tx + 16 * g];
            #pragma unroll
            for (int i = 0; i < 4; ++i) {
                float ds = dSs[(ty + 16 * i) * BWD_LDS + q];
                #pragma unroll
                for (int g = 0; g < ATT_D / 16; ++g) dk[i][g] += ds * qv[g];
            }
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) {                // dQ[query ty + 16 i] += s dS K, added to memory
            int query = q0 + ty + 16 * i;
            float dq[ATT_D / 16];
            #pragma unroll
            for (int g = 0; g < ATT_D / 16; ++g) dq[g] = 0.0f;
            for (int key = 0; key < ATT_BC; ++key) {
                float ds = dSs[key * BWD_LDS + ty + 16 * i];
                #pragma unroll
                for (int g = 0; g < ATT_D / 16; ++g) dq[g] += ds * Ks[key * BWD_LD + tx + 16 * g];
            }
            if (query < N) {
                #pragma unroll
                for (int g = 0; g < ATT_D / 16; ++g) atomicAdd(&dQ[(size_t)query * ATT_D + tx + 16 * g], scale * dq[g]);
            }
        }
        __syncthreads();                             // done with Q, dO, P^T and dS^T of this tile
    }

    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        int key = k0 + ty + 16 * i;
        if (key >= N) continue;
        #pragma unroll
        for (int g = 0; g < ATT_D / 16; ++g) {
            dK[(size_t)key * ATT_D + tx + 16 * g] = scale * dk[i][g];
            dV[(size_t)key * ATT_D + tx + 16 * g] = dv[i][g];
        }
    }
}
