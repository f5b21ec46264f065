// kernels/attention/attention_bf16.cu -- attention with BF16 inputs on the tensor cores: version 4 (the fused
// forward) and the BF16 half of version 5 (the backward pass), FlashAttention-2's loop orders.
//
// Q, K, V, O, dO, dK, dV are (batch, heads, N, d) BF16; the log-sum-exp, D and the dQ accumulator are float.
// Every product is mma.sync m16n8k16 (BF16 in, float sums) with operands brought from shared memory by ldmatrix
// (kernels/warp_mma.cuh, which spells out the fragment layouts); the softmax statistics (m, l) and every
// accumulator are float.  Tiles arrive by cp.async (cuda_pipeline.h), the next key/value (or query) tile copied
// while the current one is multiplied.  Shared tiles are row-major with their 16-byte chunks permuted: chunk c of
// row r is stored at chunk c ^ (r % 8), so that the eight rows one ldmatrix reads lie in eight different banks.
//
//   4. attention_forward_bf16          a block of BF_WARPS warps per 16 BF_WARPS BF_M_TILES query rows, a warp per
//                                      16 BF_M_TILES rows (its Q fragments in registers when BF_M_TILES = 1); one
//                                      barrier per key tile; per key tile S = Q K^T (16 x BF_BN per
//                                      warp), the online softmax on S's accumulators (a row's 4 threads are one
//                                      quad: 2 shuffles per maximum), and P, converted to BF16 in registers, is
//                                      the A operand of O += P V: the accumulator layout of two n8 tiles is the
//                                      A layout of one k16 step, so P never goes to shared memory.  Scores are in
//                                      log2 units (x = s log2(e) q.k): one exp2 per element, the special-function
//                                      unit's ex2.approx.ftz (exp2f adds a range fix-up of three instructions).
//                                      Causal: the key tiles above the diagonal are skipped, the mask is applied
//                                      only on tiles that cross it, and blocks start from the last query tile (the
//                                      most work).  O leaves through shared memory, a 16-byte store per lane.
//   5. attention_bf16_backward_preprocess  D_i = dO_i . O_i in float, and the float dQ accumulator zeroed
//      attention_backward_bf16        a block per 16 BF_BWD_WARPS keys walks the query tiles of BF_BWD_BQ rows:
//                                      per tile, per warp (16 keys) S^T = K Q^T and dP^T = V dO^T,
//                                      P^T = 2^(x - L), dS^T = P^T o (dP^T - D); dV += P^T dO and dK += dS^T Q with
//                                      P^T and dS^T as A operands straight from registers; dS^T goes to shared
//                                      memory (BF16) for dQ += s dS K, which the warps add, split by 16 query rows
//                                      and by columns, to the float accumulator with atomics (two floats each).
//      attention_bf16_dq_convert      dQ = BF16(the accumulator).
//
// ATT_D (the head dimension: a multiple of 16, at most 128), BF_WARPS (4 or 8), BF_BN (keys per forward tile:
// 32, 64 or 128), BF_M_TILES (1 or 2), BF_MIN_BLOCKS (forward blocks per multiprocessor that the registers must
// leave room for: 2 with 8 warps caps them at 128), BF_RESCALE_SKIP (1: skip the rescale of O on the tiles where no
// maximum of the warp's rows grew, at the price of a vote and a few registers), BF_BWD_WARPS (4 or 8) and BF_BWD_BQ (queries per backward tile: 32, 64 or
// 128, at most 32 BF_BWD_WARPS) are compile-time defines (kernels/attention/attention_bf16.py); N need not be a
// multiple of any tile.  On the CPU emulator the warp-level operations run as shuffles (kernels/warp_mma.cuh), so
// that everything but the instructions themselves is checked there too.

#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <math_constants.h>

#include "warp_mma.cuh"

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
#ifndef BF_MIN_BLOCKS
#define BF_MIN_BLOCKS 0                              // forward blocks per multiprocessor the registers must allow
#endif                                               // (0: no bound, the compiler's choice)
#ifndef BF_RESCALE_SKIP
#define BF_RESCALE_SKIP 1                            // 1: O rescaled only when a maximum of the warp's rows grew
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
#ifndef BF_BWD_BQ
#define BF_BWD_BQ 64                                 // queries per backward tile
#endif
#define BF_BKEYS (16 * BF_BWD_WARPS)                 // keys per backward block
#define BF_BWD_THREADS (32 * BF_BWD_WARPS)
#if BF_BWD_BQ % 16 != 0 || BF_BWD_BQ > BF_BWD_THREADS
#error "BF_BWD_BQ (queries per backward tile) must be a multiple of 16, at most 32 BF_BWD_WARPS"
#endif
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

// Rows [row0, row0 + ROWS) of an (N x ATT_D) matrix into a swizzled tile by 16-byte cp.async copies of the
// block's THREADS threads; rows past N are filled with zeros (a copy of 0 bytes from a valid address).  Not waited
// for.  Thread t copies chunk t % BF_CHUNKS of rows t / BF_CHUNKS + PASS_ROWS p: a multiple of 8 rows apart, so
// one swizzled offset and one address serve every pass, a constant apart.
template <int ROWS, int THREADS>
__device__ __forceinline__ void copy_tile_async(bf16* tile, const bf16* X, int row0, int N)
{
    constexpr int PASS_ROWS = THREADS / BF_CHUNKS;
    static_assert(THREADS % BF_CHUNKS == 0 && PASS_ROWS % 8 == 0, "a pass must cover whole groups of 8 rows");
    int r = threadIdx.x / BF_CHUNKS, c = (threadIdx.x % BF_CHUNKS) * 8;
    bf16* to = tile + swizzled(r, c, ATT_D);
    const bf16* from = X + (size_t)(row0 + r) * ATT_D + c;
    #pragma unroll
    for (int pass = 0; pass < (ROWS + PASS_ROWS - 1) / PASS_ROWS; ++pass) {
        if (ROWS % PASS_ROWS != 0 && r + pass * PASS_ROWS >= ROWS) break;
        bool inside = row0 + r + pass * PASS_ROWS < N;
        __pipeline_memcpy_async(to + pass * PASS_ROWS * ATT_D, inside ? from + pass * PASS_ROWS * ATT_D : X, 16,
                                inside ? 0 : 16);
    }
}

// p[0] += x, p[1] += y, atomically: one instruction for the pair on Hopper (p 8-byte aligned), two before it.
__device__ __forceinline__ void atomic_add_pair(float* p, float x, float y)
{
#if !defined(DLK_EMULATOR) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float2*>(p), make_float2(x, y));
#else
    atomicAdd(p, x);
    atomicAdd(p + 1, y);
#endif
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
//    Only warp w reads those rows of Q in shared memory, so at the end it stages its rows of O there.
//    One barrier per key tile: after it, tile kt is in for everyone and everyone is done with tile kt - 1, whose
//    stage then receives tile kt + 1 (copied while tile kt is multiplied).
#if BF_MIN_BLOCKS > 0
__global__ void __launch_bounds__(BF_THREADS, BF_MIN_BLOCKS)
#else
__global__ void __launch_bounds__(BF_THREADS)
#endif
attention_forward_bf16(const bf16* __restrict__ Q, const bf16* __restrict__ K, const bf16* __restrict__ V,
                       bf16* __restrict__ O, float* __restrict__ lse, int N, float scale, int causal)
{
    extern __shared__ __align__(16) unsigned char bf_shared[];
    bf16* Qs = reinterpret_cast<bf16*>(bf_shared);
    bf16* Ks = Qs + BF_ROWS * ATT_D;                 // [2][BF_BN][ATT_D]
    bf16* Vs = Ks + 2 * BF_BN * ATT_D;               // [2][BF_BN][ATT_D]

    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    int qt = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;   // causal: the longest rows first
    int q0 = qt * BF_ROWS, wrow = 16 * BF_M_TILES * warp, row0 = q0 + wrow;   // first query row: block, warp
    size_t head = blockIdx.y;
    Q += head * N * ATT_D;
    K += head * N * ATT_D;
    V += head * N * ATT_D;
    O += head * N * ATT_D;
    lse += head * N;
    float scale_log2 = scale * LOG2E;
    int tiles = (N + BF_BN - 1) / BF_BN;
    if (causal) tiles = min(tiles, (q0 + BF_ROWS - 1) / BF_BN + 1);

    copy_tile_async<BF_ROWS, BF_THREADS>(Qs, Q, q0, N);
    __pipeline_commit();
    copy_tile_async<BF_BN, BF_THREADS>(Ks, K, 0, N);
    copy_tile_async<BF_BN, BF_THREADS>(Vs, V, 0, N);
    __pipeline_commit();
    __pipeline_wait_prior(1);                        // Q is in (the first key tile may still be on its way)
    __syncthreads();
#if BF_Q_IN_REGISTERS
    unsigned qf[BF_M_TILES][ATT_D / 16][4];
    #pragma unroll
    for (int mt = 0; mt < BF_M_TILES; ++mt)
        #pragma unroll
        for (int ks = 0; ks < ATT_D / 16; ++ks) load_a(qf[mt][ks], Qs, wrow + 16 * mt, 16 * ks);
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
        __pipeline_wait_prior(0);                    // this thread's copies of tile kt are done ...
        __syncthreads();                             // ... everyone's, and everyone is done with tile kt - 1
        if (kt + 1 < tiles) {                        // the next tile into the stage of tile kt - 1
            copy_tile_async<BF_BN, BF_THREADS>(Ks + (stage ^ 1) * BF_BN * ATT_D, K, (kt + 1) * BF_BN, N);
            copy_tile_async<BF_BN, BF_THREADS>(Vs + (stage ^ 1) * BF_BN * ATT_D, V, (kt + 1) * BF_BN, N);
            __pipeline_commit();
        }
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
            for (int mt = 0; mt < BF_M_TILES; ++mt) load_a(qk[mt], Qs, wrow + 16 * mt, 16 * ks);
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

        float alpha[BF_M_TILES][2];                  // each row's rescale 2^(m_old - m_new)
        bool grew = false;                           // has a maximum of this thread's rows grown?
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
                alpha[mt][half] = exp2_fast(m[mt][half] - base);
                grew |= m_new > m[mt][half];
                m[mt][half] = m_new;
                l[mt][half] *= alpha[mt][half];
                #pragma unroll
                for (int nt = 0; nt < BF_BN / 8; ++nt)
                    #pragma unroll
                    for (int e = 2 * half; e < 2 * half + 2; ++e) {
                        s[mt][nt][e] = exp2_fast(s[mt][nt][e] * scale_log2 - base);
                        l[mt][half] += s[mt][nt][e];     // this thread's part of the row sum
                    }
            }
        }
        // O rescaled only if a maximum of the warp's rows grew (alpha = 1 everywhere else): after the first tiles
        // most do not, and the warp skips the d / BF_BN multiplications per score.
        if (!BF_RESCALE_SKIP || __any_sync(0xffffffffu, grew)) {
            #pragma unroll
            for (int mt = 0; mt < BF_M_TILES; ++mt)
                #pragma unroll
                for (int dt = 0; dt < ATT_D / 8; ++dt)
                    #pragma unroll
                    for (int e = 0; e < 4; ++e) o[mt][dt][e] *= alpha[mt][e / 2];
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
    }

    // O = o / l, in BF16, into this warp's rows of the Q tile; then each row leaves as 16-byte stores.
    __syncwarp();                                    // the warp's last reads of those rows (Q from shared memory)
    #pragma unroll
    for (int mt = 0; mt < BF_M_TILES; ++mt)
        #pragma unroll
        for (int half = 0; half < 2; ++half) {
            l[mt][half] += __shfl_xor_sync(0xffffffffu, l[mt][half], 1);
            l[mt][half] += __shfl_xor_sync(0xffffffffu, l[mt][half], 2);
            int r = wrow + 16 * mt + g + 8 * half;
            float inv = l[mt][half] > 0.0f ? 1.0f / l[mt][half] : 0.0f;
            #pragma unroll
            for (int dt = 0; dt < ATT_D / 8; ++dt)
                *reinterpret_cast<unsigned*>(Qs + swizzled(r, 8 * dt + 2 * q, ATT_D)) =
                    pack_bf16(o[mt][dt][2 * half] * inv, o[mt][dt][2 * half + 1] * inv);
            if (q == 0 && q0 + r < N)
                lse[q0 + r] = l[mt][half] > 0.0f ? (m[mt][half] + log2f(l[mt][half])) * LN2 : -CUDART_INF_F;
        }
    __syncwarp();
    constexpr int WARP_CHUNKS = 16 * BF_M_TILES * BF_CHUNKS;   // 16-byte chunks of the warp's rows (a multiple of 32)
    #pragma unroll
    for (int i = 0; i < WARP_CHUNKS / 32; ++i) {
        int e = lane + 32 * i, r = wrow + e / BF_CHUNKS, c = (e % BF_CHUNKS) * 8;
        if (q0 + r < N)
            *reinterpret_cast<uint4*>(O + (size_t)(q0 + r) * ATT_D + c) =
                *reinterpret_cast<const uint4*>(Qs + swizzled(r, c, ATT_D));
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

// Block (kt, head) of BF_BWD_WARPS warps: keys k0 = BF_BKEYS kt ... (BF_BKEYS of them), warp w owns keys
// k0 + 16 w ... + 15 of dK and dV; query tiles of BF_BWD_BQ rows.
// Shared memory: K and V of the block (BF_BKEYS x d), two stages of Q and dO (BF_BWD_BQ x d), dS^T (BF_BKEYS x
// BF_BWD_BQ, BF16), two stages of L (log2 units) and D (BF_BWD_BQ floats each).
// Two barriers per query tile: (A) the tile is in, and everyone is done with the previous one (whose stage the next
// tile's copies then fill, and whose dS^T this one overwrites); (B) dS^T is in, for dQ.  L and D of the next tile
// are loaded into registers at (A) and stored before (B): the loads' latency passes during the products.
__global__ void __launch_bounds__(BF_BWD_THREADS)
attention_backward_bf16(const bf16* __restrict__ Q, const bf16* __restrict__ K, const bf16* __restrict__ V,
                        const bf16* __restrict__ dO, const float* __restrict__ lse, const float* __restrict__ Dvec,
                        float* __restrict__ dQ_sum, bf16* __restrict__ dK, bf16* __restrict__ dV, int N, float scale,
                        int causal)
{
    extern __shared__ __align__(16) unsigned char bf_shared[];
    bf16* Ks = reinterpret_cast<bf16*>(bf_shared);
    bf16* Vs = Ks + BF_BKEYS * ATT_D;
    bf16* Qs = Vs + BF_BKEYS * ATT_D;                // [2][BF_BWD_BQ][ATT_D]
    bf16* dOs = Qs + 2 * BF_BWD_BQ * ATT_D;          // [2][BF_BWD_BQ][ATT_D]
    bf16* dSs = dOs + 2 * BF_BWD_BQ * ATT_D;         // [BF_BKEYS keys][BF_BWD_BQ queries]
    float* Ls = reinterpret_cast<float*>(dSs + BF_BKEYS * BF_BWD_BQ);   // [2][BF_BWD_BQ]
    float* Ds = Ls + 2 * BF_BWD_BQ;                  // [2][BF_BWD_BQ]

    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    int k0 = blockIdx.x * BF_BKEYS, key0 = k0 + 16 * warp;
    size_t head = blockIdx.y, offset = head * N * ATT_D;
    Q += offset; K += offset; V += offset; dO += offset; dQ_sum += offset; dK += offset; dV += offset;
    lse += head * N;
    Dvec += head * N;
    float scale_log2 = scale * LOG2E;
    int first = causal ? k0 / BF_BWD_BQ : 0;         // earlier query tiles see none of these keys
    int tiles = (N + BF_BWD_BQ - 1) / BF_BWD_BQ;
    int t = threadIdx.x;                             // threads t < BF_BWD_BQ move L and D of query q0 + t

    copy_tile_async<BF_BKEYS, BF_BWD_THREADS>(Ks, K, k0, N);
    copy_tile_async<BF_BKEYS, BF_BWD_THREADS>(Vs, V, k0, N);
    if (first < tiles) {
        copy_tile_async<BF_BWD_BQ, BF_BWD_THREADS>(Qs, Q, first * BF_BWD_BQ, N);
        copy_tile_async<BF_BWD_BQ, BF_BWD_THREADS>(dOs, dO, first * BF_BWD_BQ, N);
        if (t < BF_BWD_BQ) {
            bool inside = first * BF_BWD_BQ + t < N;
            Ls[t] = inside ? lse[first * BF_BWD_BQ + t] * LOG2E : 0.0f;
            Ds[t] = inside ? Dvec[first * BF_BWD_BQ + t] : 0.0f;
        }
    }
    __pipeline_commit();

    float dk[ATT_D / 8][4], dv[ATT_D / 8][4];
    #pragma unroll
    for (int dt = 0; dt < ATT_D / 8; ++dt)
        #pragma unroll
        for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.0f;

    for (int qt = first; qt < tiles; ++qt) {
        int stage = (qt - first) & 1, q0 = qt * BF_BWD_BQ;
        __pipeline_wait_prior(0);
        __syncthreads();                             // (A) this tile's Q, dO, L, D (and K, V the first time) are in
        bool more = qt + 1 < tiles;
        float l_next = 0.0f, d_next = 0.0f;
        if (more) {                                  // the next tile into the other stage
            copy_tile_async<BF_BWD_BQ, BF_BWD_THREADS>(Qs + (stage ^ 1) * BF_BWD_BQ * ATT_D, Q, q0 + BF_BWD_BQ, N);
            copy_tile_async<BF_BWD_BQ, BF_BWD_THREADS>(dOs + (stage ^ 1) * BF_BWD_BQ * ATT_D, dO, q0 + BF_BWD_BQ, N);
            __pipeline_commit();
            if (t < BF_BWD_BQ && q0 + BF_BWD_BQ + t < N) {
                l_next = lse[q0 + BF_BWD_BQ + t];
                d_next = Dvec[q0 + BF_BWD_BQ + t];
            }
        }
        const bf16* Qt = Qs + stage * BF_BWD_BQ * ATT_D;
        const bf16* dOt = dOs + stage * BF_BWD_BQ * ATT_D;
        const float* Lt = Ls + stage * BF_BWD_BQ;
        const float* Dt = Ds + stage * BF_BWD_BQ;

        float p[BF_BWD_BQ / 8][4], ds[BF_BWD_BQ / 8][4];   // P^T and dP^T (then dS^T): 16 keys x BF_BWD_BQ queries
        #pragma unroll
        for (int nt = 0; nt < BF_BWD_BQ / 8; ++nt)
            #pragma unroll
            for (int e = 0; e < 4; ++e) p[nt][e] = ds[nt][e] = 0.0f;
        #pragma unroll
        for (int ks = 0; ks < ATT_D / 16; ++ks) {
            unsigned ka[4], va[4];
            load_a(ka, Ks, 16 * warp, 16 * ks);
            load_a(va, Vs, 16 * warp, 16 * ks);
            #pragma unroll
            for (int np = 0; np < BF_BWD_BQ / 16; ++np) {
                unsigned b[4];
                load_b_nk(b, Qt, 16 * np, 16 * ks);
                mma_m16n8k16(p[2 * np], ka, b[0], b[1]);
                mma_m16n8k16(p[2 * np + 1], ka, b[2], b[3]);
                load_b_nk(b, dOt, 16 * np, 16 * ks);
                mma_m16n8k16(ds[2 * np], va, b[0], b[1]);
                mma_m16n8k16(ds[2 * np + 1], va, b[2], b[3]);
            }
        }
        bool edge = q0 + BF_BWD_BQ > N || k0 + BF_BKEYS > N || (causal && key0 + 15 > q0);
        #pragma unroll
        for (int nt = 0; nt < BF_BWD_BQ / 8; ++nt) {
            float2 Lq = *reinterpret_cast<const float2*>(Lt + 8 * nt + 2 * q);   // L, D of this thread's two queries
            float2 Dq = *reinterpret_cast<const float2*>(Dt + 8 * nt + 2 * q);
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                int col = 8 * nt + 2 * q + (e & 1), key = key0 + g + 8 * (e >> 1), query = q0 + col;
                bool masked = edge && (key >= N || query >= N || (causal && key > query));
                p[nt][e] = masked ? 0.0f : exp2_fast(p[nt][e] * scale_log2 - ((e & 1) ? Lq.y : Lq.x));
                ds[nt][e] = p[nt][e] * (ds[nt][e] - ((e & 1) ? Dq.y : Dq.x));
            }
        }

        #pragma unroll
        for (int kk = 0; kk < BF_BWD_BQ / 16; ++kk) {   // dV += P^T dO, dK += dS^T Q (k = the tile's queries)
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
        for (int nt = 0; nt < BF_BWD_BQ / 8; ++nt)   // dS^T to shared memory, for dQ
            #pragma unroll
            for (int half = 0; half < 2; ++half)
                *reinterpret_cast<unsigned*>(dSs + swizzled(16 * warp + g + 8 * half, 8 * nt + 2 * q, BF_BWD_BQ)) =
                    pack_bf16(ds[nt][2 * half], ds[nt][2 * half + 1]);
        if (more && t < BF_BWD_BQ) {                 // the next tile's L and D (their stage is free since (A))
            Ls[(stage ^ 1) * BF_BWD_BQ + t] = l_next * LOG2E;
            Ds[(stage ^ 1) * BF_BWD_BQ + t] = d_next;
        }
        __syncthreads();                             // (B) dS^T is in

        // dQ += s dS K for the tile's queries: A = dS (ldmatrix.trans of dS^T), B = K (k = keys).  The jobs are the
        // tile's 16-row tiles, each split into DQ_SPLIT runs of columns so that every warp has one when there are
        // more warps than row tiles.  A job's products run over the block's keys with every column of its run at
        // once: 2 DQ_RUN independent sums (not 2 in turn), and each fragment of dS loaded once.
        constexpr int DQ_ROW_TILES = BF_BWD_BQ / 16, DQ_PAIRS = ATT_D / 16;
        constexpr int DQ_WANTED = BF_BWD_WARPS > DQ_ROW_TILES ? BF_BWD_WARPS / DQ_ROW_TILES : 1;
        constexpr int DQ_SPLIT = DQ_PAIRS % DQ_WANTED == 0 ? DQ_WANTED : 1;
        constexpr int DQ_RUN = DQ_PAIRS / DQ_SPLIT;  // column pairs (16 columns each) per job
        int lane_i = lane / 8;
        for (int job = warp; job < DQ_ROW_TILES * DQ_SPLIT; job += BF_BWD_WARPS) {
            int rt = job % DQ_ROW_TILES, dp0 = (job / DQ_ROW_TILES) * DQ_RUN;
            if (causal && q0 + 16 * rt + 15 < k0) continue;   // these queries see none of the block's keys: dS = 0
            float acc[DQ_RUN][2][4];
            #pragma unroll
            for (int j = 0; j < DQ_RUN; ++j)
                #pragma unroll
                for (int e = 0; e < 8; ++e) acc[j][e / 4][e % 4] = 0.0f;
            #pragma unroll
            for (int kk = 0; kk < BF_BKEYS / 16; ++kk) {
                unsigned a[4];
                ldmatrix_x4_trans(a, dSs + swizzled(16 * kk + 8 * (lane_i / 2) + lane % 8, 16 * rt + 8 * (lane_i % 2),
                                                    BF_BWD_BQ));
                #pragma unroll
                for (int j = 0; j < DQ_RUN; ++j) {
                    unsigned b[4];
                    load_b_kn(b, Ks, 16 * kk, 16 * (dp0 + j), ATT_D);
                    mma_m16n8k16(acc[j][0], a, b[0], b[1]);
                    mma_m16n8k16(acc[j][1], a, b[2], b[3]);
                }
            }
            #pragma unroll
            for (int j = 0; j < DQ_RUN; ++j)
                #pragma unroll
                for (int n8 = 0; n8 < 2; ++n8)
                    #pragma unroll
                    for (int half = 0; half < 2; ++half) {
                        int row = q0 + 16 * rt + g + 8 * half, col = 16 * (dp0 + j) + 8 * n8 + 2 * q;
                        if (row < N)
                            atomic_add_pair(&dQ_sum[(size_t)row * ATT_D + col], scale * acc[j][n8][2 * half],
                                            scale * acc[j][n8][2 * half + 1]);
                    }
        }
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
