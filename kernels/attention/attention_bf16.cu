// kernels/attention/attention_bf16.cu -- attention with BF16 inputs on the tensor cores: version 4 (the fused
// forward) and the BF16 half of version 5 (the backward pass), FlashAttention-2's loop orders.
//
// Q, K, V, O, dO, dK, dV are (batch, heads, N, d) BF16; the log-sum-exp, D and the dQ accumulator are float.
// Every product is mma.sync m16n8k16 (BF16 in, float sums) with operands brought from shared memory by ldmatrix
// (kernels/attention/warp_mma.cuh, which spells out the fragment layouts); the softmax statistics (m, l) and every
// accumulator are float.  Tiles arrive by cp.async (cuda_pipeline.h), the next key/value (or query) tile copied
// while the current one is multiplied.  Shared tiles are row-major with their 16-byte chunks permuted: chunk c of
// row r is stored at chunk c ^ (r % 8), so that the eight rows one ldmatrix reads lie in eight different banks.
//
//   4. attention_forward_bf16          a block of BF_WARPS warps per 16 BF_WARPS BF_M_TILES query rows, a warp per
//                                      16 BF_M_TILES rows (its Q fragments in registers when BF_M_TILES = 1); per key tile S = Q K^T (16 x BF_BN per
//                                      warp), the online softmax on S's accumulators (a row's 4 threads are one
//                                      quad: 2 shuffles per maximum), and P, converted to BF16 in registers, is
//                                      the A operand of O += P V: the accumulator layout of two n8 tiles is the
//                                      A layout of one k16 step, so P never goes to shared memory.  Scores are in
//                                      log2 units (x = s log2(e) q.k): one exp2 per element.  Causal: the key
//                                      tiles above the diagonal are skipped, the mask is applied only on tiles
//                                      that cross it, and blocks start from the last query tile (the most work).
//   5. attention_bf16_backward_preprocess  D_i = dO_i . O_i in float, and the float dQ accumulator zeroed
//      attention_backward_bf16        a block per 16 BF_BWD_WARPS keys walks the query tiles: per tile, per warp (16
//                                      keys) S^T = K Q^T and dP^T = V dO^T, P^T = 2^(x - L), dS^T = P^T o (dP^T - D);
//                                      dV += P^T dO and dK += dS^T Q with P^T and dS^T as A operands straight
//                                      from registers; dS^T goes to shared memory (BF16) for dQ += s dS K, which
//                                      each warp adds for 16 query rows to the float accumulator with atomics.
//      attention_bf16_dq_convert      dQ = BF16(the accumulator).
//
// ATT_D (the head dimension: a multiple of 16, at most 128), BF_WARPS (4 or 8), BF_BN (keys per forward tile:
// 32, 64 or 128), BF_M_TILES (1 or 2) and BF_BWD_WARPS (4) are compile-time defines (kernels/attention/attention_bf16.py); N need not be a multiple of any
// tile.  On the CPU emulator the warp-level operations run as shuffles (warp_mma.cuh), so that everything but the
// instructions themselves is checked there too.

#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <math_constants.h>

#include "attention/warp_mma.cuh"

#ifndef ATT_D
#define ATT_D 64
#endif
#ifndef BF_WARPS
#define BF_WARPS 4
#endif
#ifndef BF_BN
#define BF_BN 64
#endif
#ifndef BF_M_TILES
#define BF_M_TILES 1                                 // 16-row tiles of queries per warp in the forward pass (1 or 2)
#endif
#ifndef BF_Q_IN_REGISTERS
#define BF_Q_IN_REGISTERS (BF_M_TILES == 1)          // 0: Q's fragments read from shared memory at every tile
#endif
#if ATT_D % 16 != 0 || ATT_D > 128
#error "ATT_D (the head dimension) must be a multiple of 16, at most 128"
#endif
#if BF_BN % 16 != 0
#error "BF_BN (keys per tile) must be a multiple of 16"
#endif
#ifndef BF_BWD_WARPS
#define BF_BWD_WARPS 4                               // warps per backward block, 16 keys each
#endif
#define BF_BM (16 * BF_BWD_WARPS)                    // keys and queries per backward tile
#define BF_BWD_THREADS (32 * BF_BWD_WARPS)
#define BF_ROWS (16 * BF_WARPS * BF_M_TILES)         // query rows per forward block
#define BF_THREADS (32 * BF_WARPS)
#define BF_CHUNKS (ATT_D / 8)                        // 16-byte chunks per row of a d-wide tile
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

typedef __nv_bfloat16 bf16;

// Element (r, c) of a row-major tile of `cols` BF16 columns, its 16-byte chunks permuted: chunk c / 8 of row r
// is stored at chunk (c / 8) ^ (r % 8) (^ (r % chunks) when a row has fewer than 8 chunks).
__device__ __forceinline__ int swizzled(int r, int c, int cols)
{
    int mask = cols / 8 >= 8 ? 7 : cols / 8 - 1;
    return r * cols + ((((c >> 3) ^ (r & mask))) << 3) + (c & 7);
}

// Rows [row0, row0 + rows) of an (N x ATT_D) matrix into a swizzled tile by 16-byte cp.async copies of the block's
// `threads` threads; rows past N are filled with zeros (a copy of 0 bytes from a valid address).  Not waited for.
__device__ __forceinline__ void copy_tile_async(bf16* tile, const bf16* X, int row0, int rows, int N, int threads)
{
    for (int e = threadIdx.x; e < rows * BF_CHUNKS; e += threads) {
        int r = e / BF_CHUNKS, c = (e % BF_CHUNKS) * 8;
        bool inside = row0 + r < N;
        __pipeline_memcpy_async(tile + swizzled(r, c, ATT_D), inside ? X + (size_t)(row0 + r) * ATT_D + c : X, 16,
                                inside ? 0 : 16);
    }
}

// The A fragments of rows [row0, row0 + 16) x columns [c0, c0 + 16) of a swizzled d-wide tile (ldmatrix, lane
// l giving the address of row row0 + 8 (i % 2) + l % 8, column c0 + 8 (i / 2) of matrix i = l / 8).
__device__ __forceinline__ void load_a(unsigned (&a)[4], const bf16* tile, int row0, int c0)
{
    int lane = threadIdx.x % 32, i = lane / 8;
    ldmatrix_x4(a, tile + swizzled(row0 + 8 * (i % 2) + lane % 8, c0 + 8 * (i / 2), ATT_D));
}

// B fragments of two n8 tiles from a tile stored n-major ([n][k], as K is for Q K^T): rows [n0, n0 + 16) x
// columns [k0, k0 + 16).  b[0], b[1] are n-tile n0, b[2], b[3] n-tile n0 + 8.
__device__ __forceinline__ void load_b_nk(unsigned (&b)[4], const bf16* tile, int n0, int k0)
{
    int lane = threadIdx.x % 32, i = lane / 8;
    ldmatrix_x4(b, tile + swizzled(n0 + 8 * (i / 2) + lane % 8, k0 + 8 * (i % 2), ATT_D));
}

// B fragments of two n8 tiles from a tile stored k-major ([k][n], as V is for P V): rows (k) [k0, k0 + 16) x
// columns (n) [n0, n0 + 16), transposed by ldmatrix.  b[0], b[1] are n-tile n0, b[2], b[3] n-tile n0 + 8.
__device__ __forceinline__ void load_b_kn(unsigned (&b)[4], const bf16* tile, int k0, int n0, int cols)
{
    int lane = threadIdx.x % 32, i = lane / 8;
    ldmatrix_x4_trans(b, tile + swizzled(k0 + 8 * (i % 2) + lane % 8, n0 + 8 * (i / 2), cols));
}

// The accumulators of n8 tiles 2k and 2k + 1 (16 x 16 floats) as the BF16 A fragment of one k16 step.
template <int TILES>
__device__ __forceinline__ void accumulators_as_a(unsigned (&a)[4], const float (&acc)[TILES][4], int k)
{
    a[0] = pack_bf16(acc[2 * k][0], acc[2 * k][1]);
    a[1] = pack_bf16(acc[2 * k][2], acc[2 * k][3]);
    a[2] = pack_bf16(acc[2 * k + 1][0], acc[2 * k + 1][1]);
    a[3] = pack_bf16(acc[2 * k + 1][2], acc[2 * k + 1][3]);
}

// ------------------------------------------------------------------------------------------------
// 4. The fused forward on the tensor cores.  Shared memory: Q (BF_ROWS x d), two stages of K and of V (BF_BN x d).
//    Warp w owns query rows 16 BF_M_TILES w ... of the block's: BF_M_TILES tiles of 16 rows, which share every
//    fragment of K and V the warp loads (2 tiles: half the shared-memory reads per product, twice the registers).
__global__ void __launch_bounds__(BF_THREADS)
attention_forward_bf16(const bf16* __restrict__ Q, const bf16* __restrict__ K, const bf16* __restrict__ V,
                       bf16* __restrict__ O, float* __restrict__ lse, int N, float scale, int causal)
{
    extern __shared__ __align__(16) unsigned char bf_shared[];
    bf16* Qs = reinterpret_cast<bf16*>(bf_shared);
    bf16* Ks = Qs + BF_ROWS * ATT_D;                 // [2][BF_BN][ATT_D]
    bf16* Vs = Ks + 2 * BF_BN * ATT_D;               // [2][BF_BN][ATT_D]

    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    int qt = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;   // causal: the longest rows first
    int q0 = qt * BF_ROWS, row0 = q0 + 16 * BF_M_TILES * warp;  // the block's and this warp's first query row
    size_t head = blockIdx.y;
    Q += head * N * ATT_D;
    K += head * N * ATT_D;
    V += head * N * ATT_D;
    O += head * N * ATT_D;
    lse += head * N;
    float scale_log2 = scale * LOG2E;
    int tiles = (N + BF_BN - 1) / BF_BN;
    if (causal) tiles = min(tiles, (q0 + BF_ROWS - 1) / BF_BN + 1);

    copy_tile_async(Qs, Q, q0, BF_ROWS, N, BF_THREADS);
    __pipeline_commit();
    copy_tile_async(Ks, K, 0, BF_BN, N, BF_THREADS);
    copy_tile_async(Vs, V, 0, BF_BN, N, BF_THREADS);
    __pipeline_commit();
    __pipeline_wait_prior(1);                        // Q is in (the first key tile may still be on its way)
    __syncthreads();
#if BF_Q_IN_REGISTERS
    unsigned qf[BF_M_TILES][ATT_D / 16][4];
    #pragma unroll
    for (int mt = 0; mt < BF_M_TILES; ++mt)
        #pragma unroll
        for (int ks = 0; ks < ATT_D / 16; ++ks) load_a(qf[mt][ks], Qs, row0 - q0 + 16 * mt, 16 * ks);
#endif

    float o[BF_M_TILES][ATT_D / 8][4], m[BF_M_TILES][2], l[BF_M_TILES][2];
    #pragma unroll
    for (int mt = 0; mt < BF_M_TILES; ++mt) {
        m[mt][0] = m[mt][1] = -CUDART_INF_F;
        l[mt][0] = l[mt][1] = 0.0f;
        #pragma unroll
        for (int dt = 0; dt < ATT_D / 8; ++dt)
            #pragma unroll
            for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.0f;
    }

    for (int kt = 0; kt < tiles; ++kt) {
        int stage = kt & 1;
        if (kt + 1 < tiles) {                        // the next tile into the other stage (free since the barrier
            copy_tile_async(Ks + (stage ^ 1) * BF_BN * ATT_D, K, (kt + 1) * BF_BN, BF_BN, N, BF_THREADS);   // ending kt - 1)
            copy_tile_async(Vs + (stage ^ 1) * BF_BN * ATT_D, V, (kt + 1) * BF_BN, BF_BN, N, BF_THREADS);
        }
        __pipeline_commit();                         // (an empty group on the last tile keeps the count)
        __pipeline_wait_prior(1);                    // this tile's copies are done ...
        __syncthreads();                             // ... everyone's
        const bf16* Kt = Ks + stage * BF_BN * ATT_D;
        const bf16* Vt = Vs + stage * BF_BN * ATT_D;
        int k0 = kt * BF_BN;

        float s[BF_M_TILES][BF_BN / 8][4];
        #pragma unroll
        for (int mt = 0; mt < BF_M_TILES; ++mt)
            #pragma unroll
            for (int nt = 0; nt < BF_BN / 8; ++nt)
                #pragma unroll
                for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
        #pragma unroll
        for (int ks = 0; ks < ATT_D / 16; ++ks) {
#if !BF_Q_IN_REGISTERS
            unsigned qk[BF_M_TILES][4];
            #pragma unroll
            for (int mt = 0; mt < BF_M_TILES; ++mt) load_a(qk[mt], Qs, row0 - q0 + 16 * mt, 16 * ks);
#endif
            #pragma unroll
            for (int np = 0; np < BF_BN / 16; ++np) {
                unsigned b[4];
                load_b_nk(b, Kt, 16 * np, 16 * ks);
                #pragma unroll
                for (int mt = 0; mt < BF_M_TILES; ++mt) {
#if BF_Q_IN_REGISTERS
                    const unsigned (&a)[4] = qf[mt][ks];
#else
                    const unsigned (&a)[4] = qk[mt];
#endif
                    mma_m16n8k16(s[mt][2 * np], a, b[0], b[1]);
                    mma_m16n8k16(s[mt][2 * np + 1], a, b[2], b[3]);
                }
            }
        }

        #pragma unroll
        for (int mt = 0; mt < BF_M_TILES; ++mt) {
            int first_row = row0 + 16 * mt;
            // The mask, only where these 16 rows meet a key past N or above the diagonal.
            if (k0 + BF_BN > N || (causal && k0 + BF_BN - 1 > first_row)) {
                #pragma unroll
                for (int nt = 0; nt < BF_BN / 8; ++nt)
                    #pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        int key = k0 + 8 * nt + 2 * q + (e & 1), query = first_row + g + 8 * (e >> 1);
                        if (key >= N || (causal && key > query)) s[mt][nt][e] = -CUDART_INF_F;
                    }
            }
            #pragma unroll
            for (int half = 0; half < 2; ++half) {   // row g, then row g + 8
                float tile_max = -CUDART_INF_F;
                #pragma unroll
                for (int nt = 0; nt < BF_BN / 8; ++nt)
                    tile_max = fmaxf(tile_max, fmaxf(s[mt][nt][2 * half], s[mt][nt][2 * half + 1]));
                tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
                tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
                float m_new = fmaxf(m[mt][half], tile_max * scale_log2);
                float base = m_new == -CUDART_INF_F ? 0.0f : m_new;   // nothing unmasked yet: stay (-inf, 0)
                float alpha = exp2f(m[mt][half] - base);
                m[mt][half] = m_new;
                l[mt][half] *= alpha;
                #pragma unroll
                for (int nt = 0; nt < BF_BN / 8; ++nt)
                    #pragma unroll
                    for (int e = 2 * half; e < 2 * half + 2; ++e) {
                        s[mt][nt][e] = exp2f(s[mt][nt][e] * scale_log2 - base);
                        l[mt][half] += s[mt][nt][e];     // this thread's part of the row sum
                    }
                #pragma unroll
                for (int dt = 0; dt < ATT_D / 8; ++dt) {
                    o[mt][dt][2 * half] *= alpha;
                    o[mt][dt][2 * half + 1] *= alpha;
                }
            }
        }

        #pragma unroll
        for (int kk = 0; kk < BF_BN / 16; ++kk) {
            unsigned a[BF_M_TILES][4];
            #pragma unroll
            for (int mt = 0; mt < BF_M_TILES; ++mt) accumulators_as_a(a[mt], s[mt], kk);
            #pragma unroll
            for (int dp = 0; dp < ATT_D / 16; ++dp) {
                unsigned b[4];
                load_b_kn(b, Vt, 16 * kk, 16 * dp, ATT_D);
                #pragma unroll
                for (int mt = 0; mt < BF_M_TILES; ++mt) {
                    mma_m16n8k16(o[mt][2 * dp], a[mt], b[0], b[1]);
                    mma_m16n8k16(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
                }
            }
        }
        __syncthreads();                             // everyone is done with this stage
    }

    #pragma unroll
    for (int mt = 0; mt < BF_M_TILES; ++mt)
        #pragma unroll
        for (int half = 0; half < 2; ++half) {
            l[mt][half] += __shfl_xor_sync(0xffffffffu, l[mt][half], 1);
            l[mt][half] += __shfl_xor_sync(0xffffffffu, l[mt][half], 2);
            int row = row0 + 16 * mt + g + 8 * half;
            if (row >= N) continue;
            float inv = l[mt][half] > 0.0f ? 1.0f / l[mt][half] : 0.0f;
            #pragma unroll
            for (int dt = 0; dt < ATT_D / 8; ++dt)
                *reinterpret_cast<__nv_bfloat162*>(O + (size_t)row * ATT_D + 8 * dt + 2 * q) =
                    __floats2bfloat162_rn(o[mt][dt][2 * half] * inv, o[mt][dt][2 * half + 1] * inv);
            if (q == 0) lse[row] = l[mt][half] > 0.0f ? (m[mt][half] + log2f(l[mt][half])) * LN2 : -CUDART_INF_F;
        }
}

// ------------------------------------------------------------------------------------------------
// 5 (BF16).  D_i = dO_i . O_i (a warp per row), and the float accumulator of dQ set to zero.
#define PRE_WARPS 4
__global__ void __launch_bounds__(32 * PRE_WARPS)
attention_bf16_backward_preprocess(const bf16* __restrict__ O, const bf16* __restrict__ dO, float* __restrict__ Dvec,
                                   float* __restrict__ dQ_sum, int rows)
{
    int row = blockIdx.x * PRE_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    float sum = 0.0f;
    for (int c = lane; c < ATT_D; c += 32) {
        sum += __bfloat162float(O[(size_t)row * ATT_D + c]) * __bfloat162float(dO[(size_t)row * ATT_D + c]);
        dQ_sum[(size_t)row * ATT_D + c] = 0.0f;
    }
    #pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) Dvec[row] = sum;
}

// Block (kt, head) of BF_BWD_WARPS warps: keys k0 = BF_BM kt ... (BF_BM of them), warp w owns keys k0 + 16 w ... + 15
// of dK and dV; query tiles of BF_BM rows.
// Shared memory: K and V of the block (BF_BM x d), two stages of Q and dO (BF_BM x d), dS^T (BF_BM x BF_BM,
// BF16), two stages of L (log2 units) and D (BF_BM floats each).
__global__ void __launch_bounds__(BF_BWD_THREADS)
attention_backward_bf16(const bf16* __restrict__ Q, const bf16* __restrict__ K, const bf16* __restrict__ V,
                        const bf16* __restrict__ dO, const float* __restrict__ lse, const float* __restrict__ Dvec,
                        float* __restrict__ dQ_sum, bf16* __restrict__ dK, bf16* __restrict__ dV, int N, float scale,
                        int causal)
{
    extern __shared__ __align__(16) unsigned char bf_shared[];
    bf16* Ks = reinterpret_cast<bf16*>(bf_shared);
    bf16* Vs = Ks + BF_BM * ATT_D;
    bf16* Qs = Vs + BF_BM * ATT_D;                   // [2][BF_BM][ATT_D]
    bf16* dOs = Qs + 2 * BF_BM * ATT_D;              // [2][BF_BM][ATT_D]
    bf16* dSs = dOs + 2 * BF_BM * ATT_D;             // [BF_BM keys][BF_BM queries]
    float* Ls = reinterpret_cast<float*>(dSs + BF_BM * BF_BM);   // [2][BF_BM]
    float* Ds = Ls + 2 * BF_BM;                      // [2][BF_BM]

    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    int k0 = blockIdx.x * BF_BM, key0 = k0 + 16 * warp;
    size_t head = blockIdx.y, offset = head * N * ATT_D;
    Q += offset; K += offset; V += offset; dO += offset; dQ_sum += offset; dK += offset; dV += offset;
    lse += head * N;
    Dvec += head * N;
    float scale_log2 = scale * LOG2E;
    int first = causal ? k0 / BF_BM : 0;             // earlier query tiles see none of these keys
    int tiles = (N + BF_BM - 1) / BF_BM;

    copy_tile_async(Ks, K, k0, BF_BM, N, BF_BWD_THREADS);
    copy_tile_async(Vs, V, k0, BF_BM, N, BF_BWD_THREADS);
    auto fetch = [&](int qt, int stage) {            // query tile qt's Q, dO (copies) and L, D (loads) into a stage
        int q0 = qt * BF_BM;
        copy_tile_async(Qs + stage * BF_BM * ATT_D, Q, q0, BF_BM, N, BF_BWD_THREADS);
        copy_tile_async(dOs + stage * BF_BM * ATT_D, dO, q0, BF_BM, N, BF_BWD_THREADS);
        for (int t = threadIdx.x; t < BF_BM; t += BF_BWD_THREADS) {
            bool inside = q0 + t < N;
            Ls[stage * BF_BM + t] = inside ? lse[q0 + t] * LOG2E : 0.0f;
            Ds[stage * BF_BM + t] = inside ? Dvec[q0 + t] : 0.0f;
        }
    };
    if (first < tiles) fetch(first, 0);
    __pipeline_commit();

    float dk[ATT_D / 8][4], dv[ATT_D / 8][4];
    #pragma unroll
    for (int dt = 0; dt < ATT_D / 8; ++dt)
        #pragma unroll
        for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.0f;

    for (int qt = first; qt < tiles; ++qt) {
        int stage = (qt - first) & 1, q0 = qt * BF_BM;
        if (qt + 1 < tiles) fetch(qt + 1, stage ^ 1);
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();                             // this tile's Q, dO, L, D (and K, V the first time) are in
        const bf16* Qt = Qs + stage * BF_BM * ATT_D;
        const bf16* dOt = dOs + stage * BF_BM * ATT_D;
        const float* Lt = Ls + stage * BF_BM;
        const float* Dt = Ds + stage * BF_BM;

        float p[BF_BM / 8][4], ds[BF_BM / 8][4];     // P^T and dP^T (then dS^T): 16 keys x BF_BM queries
        #pragma unroll
        for (int nt = 0; nt < BF_BM / 8; ++nt)
            #pragma unroll
            for (int e = 0; e < 4; ++e) p[nt][e] = ds[nt][e] = 0.0f;
        #pragma unroll
        for (int ks = 0; ks < ATT_D / 16; ++ks) {
            unsigned ka[4], va[4];
            load_a(ka, Ks, 16 * warp, 16 * ks);
            load_a(va, Vs, 16 * warp, 16 * ks);
            #pragma unroll
            for (int np = 0; np < BF_BM / 16; ++np) {
                unsigned b[4];
                load_b_nk(b, Qt, 16 * np, 16 * ks);
                mma_m16n8k16(p[2 * np], ka, b[0], b[1]);
                mma_m16n8k16(p[2 * np + 1], ka, b[2], b[3]);
                load_b_nk(b, dOt, 16 * np, 16 * ks);
                mma_m16n8k16(ds[2 * np], va, b[0], b[1]);
                mma_m16n8k16(ds[2 * np + 1], va, b[2], b[3]);
            }
        }
        bool edge = q0 + BF_BM > N || k0 + BF_BM > N || (causal && key0 + 15 > q0);
        #pragma unroll
        for (int nt = 0; nt < BF_BM / 8; ++nt)
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                int col = 8 * nt + 2 * q + (e & 1), key = key0 + g + 8 * (e >> 1), query = q0 + col;
                bool masked = edge && (key >= N || query >= N || (causal && key > query));
                p[nt][e] = masked ? 0.0f : exp2f(p[nt][e] * scale_log2 - Lt[col]);
                ds[nt][e] = p[nt][e] * (ds[nt][e] - Dt[col]);
            }

        #pragma unroll
        for (int kk = 0; kk < BF_BM / 16; ++kk) {    // dV += P^T dO, dK += dS^T Q (k = the tile's queries)
            unsigned pa[4], sa[4];
            accumulators_as_a(pa, p, kk);
            accumulators_as_a(sa, ds, kk);
            #pragma unroll
            for (int dp = 0; dp < ATT_D / 16; ++dp) {
                unsigned b[4];
                load_b_kn(b, dOt, 16 * kk, 16 * dp, ATT_D);
                mma_m16n8k16(dv[2 * dp], pa, b[0], b[1]);
                mma_m16n8k16(dv[2 * dp + 1], pa, b[2], b[3]);
                load_b_kn(b, Qt, 16 * kk, 16 * dp, ATT_D);
                mma_m16n8k16(dk[2 * dp], sa, b[0], b[1]);
                mma_m16n8k16(dk[2 * dp + 1], sa, b[2], b[3]);
            }
        }
        #pragma unroll
        for (int nt = 0; nt < BF_BM / 8; ++nt)       // dS^T to shared memory, for dQ
            #pragma unroll
            for (int half = 0; half < 2; ++half)
                *reinterpret_cast<unsigned*>(dSs + swizzled(16 * warp + g + 8 * half, 8 * nt + 2 * q, BF_BM)) =
                    pack_bf16(ds[nt][2 * half], ds[nt][2 * half + 1]);
        __syncthreads();                             // dS^T is in

        // dQ for the query rows q0 + 16 w ... + 15: A = dS (ldmatrix.trans of dS^T), B = K (k = keys).
        int lane_i = lane / 8;
        #pragma unroll
        for (int dp = 0; dp < ATT_D / 16; ++dp) {
            float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
            #pragma unroll
            for (int kk = 0; kk < BF_BM / 16; ++kk) {
                unsigned a[4], b[4];
                ldmatrix_x4_trans(a, dSs + swizzled(16 * kk + 8 * (lane_i / 2) + lane % 8, 16 * warp + 8 * (lane_i % 2),
                                                    BF_BM));
                load_b_kn(b, Ks, 16 * kk, 16 * dp, ATT_D);
                mma_m16n8k16(acc[0], a, b[0], b[1]);
                mma_m16n8k16(acc[1], a, b[2], b[3]);
            }
            #pragma unroll
            for (int j = 0; j < 2; ++j)
                #pragma unroll
                for (int e = 0; e < 4; ++e) {
                    int row = q0 + 16 * warp + g + 8 * (e >> 1), col = 16 * dp + 8 * j + 2 * q + (e & 1);
                    if (row < N) atomicAdd(&dQ_sum[(size_t)row * ATT_D + col], scale * acc[j][e]);
                }
        }
        __syncthreads();                             // done with this stage and with dS^T
    }

    #pragma unroll
    for (int half = 0; half < 2; ++half) {
        int key = key0 + g + 8 * half;
        if (key >= N) continue;
        #pragma unroll
        for (int dt = 0; dt < ATT_D / 8; ++dt) {
            *reinterpret_cast<__nv_bfloat162*>(dK + (size_t)key * ATT_D + 8 * dt + 2 * q) =
                __floats2bfloat162_rn(scale * dk[dt][2 * half], scale * dk[dt][2 * half + 1]);
            *reinterpret_cast<__nv_bfloat162*>(dV + (size_t)key * ATT_D + 8 * dt + 2 * q) =
                __floats2bfloat162_rn(dv[dt][2 * half], dv[dt][2 * half + 1]);
        }
    }
}

// dQ = BF16(the float accumulator), grid-stride.
__global__ void attention_bf16_dq_convert(const float* __restrict__ dQ_sum, bf16* __restrict__ dQ, size_t count)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count; e += (size_t)blockDim.x * gridDim.x)
        dQ[e] = __float2bfloat16(dQ_sum[e]);
}
