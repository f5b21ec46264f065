// kernels/gemm/sgemm_bf16.cu -- versions 12 to 16 of the GEMM: C = A B^T with BF16 inputs on the tensor cores,
// every sum kept in float, C stored as BF16 (or float, with BF_OUT_FLOAT=1).
//
// A is M x K and B is N x K, both row-major: each row of either holds consecutive k, the order in which the
// tensor cores read both operands ("K-major").  That is how a linear layer keeps its weights (out x in, X W^T)
// and how attention multiplies queries by keys (Q K^T).  Several products of one shape run in one launch as a
// batch (A, B and C one after another in memory: gridDim.z, or `batches` for the persistent versions).
//
//   12. sgemm_bf16_wmma               CUDA's WMMA API, 16 x 16 x 16 fragments (runs on the CPU emulator too)
//   13. sgemm_bf16_mma                mma.sync m16n8k16 with ldmatrix, a four-stage cp.async pipeline (Ampere)
//   14. sgemm_bf16_wgmma_tma          Hopper: wgmma on tiles that the TMA unit copies through tensor maps, mbarriers
//   15. sgemm_bf16_warp_specialized   a producer warpgroup and two consumer warpgroups, persistent blocks that
//                                     walk the tiles, clusters of two that share B's tile (TMA multicast)
//   16. sgemm_bf16_fused              version 15 whose epilogue adds a bias and applies an activation
//
// Version 12 is CUDA C; versions 13 to 16 use PTX instructions (kernels/gemm/bf16_ptx.cuh) and are built only for
// sm_90a (DLK_ARCH_SPECIFIC).  What each version needs of the shapes:
//   12: any M, N, K >= 1 (loads past the edges read zeros, stores past them are skipped);
//   13: any M, N; K a multiple of 8 (16-byte rows for cp.async);
//   14-16: any M, N; K a multiple of 8 (the TMA unit needs rows whose byte length is a multiple of 16).

#include <cuda_bf16.h>
#include <mma.h>

#ifndef BF_OUT_FLOAT
#define BF_OUT_FLOAT 0
#endif
#if BF_OUT_FLOAT
typedef float out_t;
#else
typedef __nv_bfloat16 out_t;
#endif

__device__ __forceinline__ out_t to_out(float x)
{
#if BF_OUT_FLOAT
    return x;
#else
    return __float2bfloat16(x);
#endif
}

// ------------------------------------------------------------------------------------------------
// 12. WMMA.  A block of 8 warps computes a 128 x 128 tile of C, each warp 64 x 32 of it as 4 x 2 fragments of
//     16 x 16.  k-tiles of 32 pass through shared memory (rows padded by 8 values), read with bounds checks;
//     the BF16 products are exact in float and summed in float.  B's tile is stored as it is in memory, N rows of
//     K values, which WMMA reads as a column-major K x N fragment.  Results go out through a small per-warp
//     staging tile so that stores outside C are skipped.
#define W_BM 128
#define W_BN 128
#define W_BK 32
#define W_THREADS 256
#define W_PAD 8

__global__ void __launch_bounds__(W_THREADS)
sgemm_bf16_wmma(int M, int N, int K, const __nv_bfloat16* A, const __nv_bfloat16* B, out_t* C)
{
    using namespace nvcuda;
    __shared__ __align__(32) __nv_bfloat16 As[W_BM][W_BK + W_PAD];
    __shared__ __align__(32) __nv_bfloat16 Bs[W_BN][W_BK + W_PAD];
    __shared__ __align__(32) float staging[W_THREADS / 32][16][16 + 4];
    int t = threadIdx.x, warp = t / 32, lane = t % 32;
    int m0 = blockIdx.y * W_BM, n0 = blockIdx.x * W_BN;
    int wm = (warp / 4) * 64, wn = (warp % 4) * 32;        // this warp's 64 x 32 piece of the tile
    A += (size_t)blockIdx.z * M * K;
    B += (size_t)blockIdx.z * N * K;
    C += (size_t)blockIdx.z * M * N;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += W_BK) {
        for (int e = t; e < W_BM * W_BK; e += W_THREADS) {
            int r = e / W_BK, c = e % W_BK;
            As[r][c] = (m0 + r < M && k0 + c < K) ? A[(size_t)(m0 + r) * K + k0 + c] : __float2bfloat16(0.0f);
            Bs[r][c] = (n0 + r < N && k0 + c < K) ? B[(size_t)(n0 + r) * K + k0 + c] : __float2bfloat16(0.0f);
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < W_BK; k += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[4];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[2];
            #pragma unroll
            for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(a[i], &As[wm + 16 * i][k], W_BK + W_PAD);
            #pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Bs[wn + 16 * j][k], W_BK + W_PAD);
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::store_matrix_sync(&staging[warp][0][0], acc[i][j], 16 + 4, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                int r = m0 + wm + 16 * i + e / 16, c = n0 + wn + 16 * j + e % 16;
                if (r < M && c < N) C[(size_t)r * N + c] = to_out(staging[warp][e / 16][e % 16]);
            }
            __syncwarp();
        }
}

#ifdef DLK_ARCH_SPECIFIC
#include "gemm/bf16_ptx.cuh"

// The dynamic shared memory of versions 14 to 16, aligned for the 128-byte swizzle (see swizzle_aligned).
extern __shared__ __align__(1024) unsigned char tma_smem[];

// ------------------------------------------------------------------------------------------------
// Shared by versions 13 to 16.

// C[row][col], C[row][col + 1] = x, y (col even), as one 4- or 8-byte store where both are inside C and aligned.
__device__ __forceinline__ void store_pair(out_t* C, int M, int N, int row, int col, float x, float y)
{
    if (row >= M || col >= N) return;
    out_t* p = C + (size_t)row * N + col;
    if (col + 1 < N && N % 2 == 0) {
#if BF_OUT_FLOAT
        *reinterpret_cast<float2*>(p) = make_float2(x, y);
#else
        *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
#endif
    } else {
        p[0] = to_out(x);
        if (col + 1 < N) p[1] = to_out(y);
    }
}

// Tile `id` of a tiles_m x tiles_n grid, in groups of `group` tile rows taken column by column, so that the
// tiles computed at the same time share panels of A and B in L2 (version 7's WT_GROUP).
__device__ __forceinline__ void grouped_tile(int id, int tiles_m, int tiles_n, int group, int& tm, int& tn)
{
    int per_group = group * tiles_n;
    int first = (id / per_group) * group;
    int rows = min(tiles_m - first, group);
    tm = first + (id % per_group) % rows;
    tn = (id % per_group) / rows;
}

// ------------------------------------------------------------------------------------------------
// 13. mma.sync with ldmatrix and a cp.async pipeline: the Ampere way.  A block of 8 warps computes a 128 x 128
//     tile, each warp 64 x 32 of it as 4 x 4 products m16n8k16 (64 float sums a thread).  k-tiles of 64 go
//     through R_STAGES stages of shared memory: every thread copies 16-byte chunks with cp.async (no registers on
//     the way), R_STAGES - 1 k-tiles ahead of the one being multiplied.  A row of a tile is 128 bytes, and its eight
//     16-byte chunks are stored permuted (chunk c of row r at c ^ (r % 8)): ldmatrix reads one chunk column of 8
//     consecutive rows at once, which then lie in 8 different groups of banks.  This is the permutation the TMA
//     unit applies by itself in versions 14 to 16 (its "128-byte swizzle").
#define R_BM 128
#define R_BN 128
#define R_BK 64
#ifndef R_STAGES
#define R_STAGES 4
#endif
#define R_THREADS 256
#define R_GROUP 8
#define R_TILE_BYTES (R_BM * R_BK * 2)                 // A's tile of a stage; B's is as large
#define R_SHARED_BYTES (R_STAGES * 2 * R_TILE_BYTES)

// Byte offset of chunk c (8 values) of row r in a swizzled tile.
__device__ __forceinline__ int swizzled(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

// k-tile kt of A's rows m0.. and B's rows n0.. into one stage; chunks past M, N or K are zeros.
__device__ __forceinline__ void mma_load_stage(unsigned char* stage, const __nv_bfloat16* A, const __nv_bfloat16* B,
                                               int M, int N, int K, int m0, int n0, int kt, int t)
{
    #pragma unroll
    for (int i = 0; i < R_BM * 8 / R_THREADS; ++i) {
        int c = t + i * R_THREADS, row = c / 8, chunk = c % 8, k = kt * R_BK + chunk * 8;
        bool a_in = m0 + row < M && k < K, b_in = n0 + row < N && k < K;
        cp_async_16(stage + swizzled(row, chunk), a_in ? A + (size_t)(m0 + row) * K + k : A, a_in ? 16 : 0);
        cp_async_16(stage + R_TILE_BYTES + swizzled(row, chunk), b_in ? B + (size_t)(n0 + row) * K + k : B,
                    b_in ? 16 : 0);
    }
}

__global__ void __launch_bounds__(R_THREADS, 1)
sgemm_bf16_mma(int M, int N, int K, const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B, out_t* C)
{
    extern __shared__ __align__(128) unsigned char smem[];
    int t = threadIdx.x, warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    int tiles_m = (M + R_BM - 1) / R_BM, tiles_n = (N + R_BN - 1) / R_BN, tm, tn;
    grouped_tile(blockIdx.x, tiles_m, tiles_n, R_GROUP, tm, tn);
    int m0 = tm * R_BM, n0 = tn * R_BN;
    A += (size_t)blockIdx.z * M * K;
    B += (size_t)blockIdx.z * N * K;
    C += (size_t)blockIdx.z * M * N;
    int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
    int k_tiles = (K + R_BK - 1) / R_BK;

    float acc[4][4][4];
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j)
            #pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    #pragma unroll
    for (int s = 0; s < R_STAGES - 1; ++s) {
        if (s < k_tiles) mma_load_stage(smem + s * 2 * R_TILE_BYTES, A, B, M, N, K, m0, n0, s, t);
        cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<R_STAGES - 2>();                 // this thread's copies of k-tile kt have landed
        __syncthreads();                               // ... everyone's; and k-tile kt - 1 is multiplied
        int next = kt + R_STAGES - 1;                  // into the stage of kt - 1
        if (next < k_tiles) mma_load_stage(smem + (next % R_STAGES) * 2 * R_TILE_BYTES, A, B, M, N, K, m0, n0, next, t);
        cp_async_commit();

        const unsigned char* As = smem + (kt % R_STAGES) * 2 * R_TILE_BYTES;
        const unsigned char* Bs = As + R_TILE_BYTES;
        #pragma unroll
        for (int ks = 0; ks < R_BK / 16; ++ks) {
            unsigned a[4][4], b[2][4];
            // A: lanes 0-15 give rows 0-15 at k 0-7 of the step, lanes 16-31 the same rows at k 8-15
            #pragma unroll
            for (int i = 0; i < 4; ++i) ldmatrix_x4(a[i], As + swizzled(wm + 16 * i + lane % 16, 2 * ks + lane / 16));
            // B: lanes 0-7 rows n 0-7 at k 0-7, 8-15 the same rows at k 8-15, 16-31 rows n 8-15 likewise
            #pragma unroll
            for (int j = 0; j < 2; ++j)
                ldmatrix_x4(b[j], Bs + swizzled(wn + 16 * j + lane % 8 + 8 * (lane / 16), 2 * ks + (lane / 8) % 2));
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j) mma_m16n8k16(acc[i][j], a[i], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]);
        }
    }
    cp_async_wait<0>();
    // acc[i][j]: rows wm + 16i + g (+ 8), columns wn + 8j + 2q, + 1
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            int row = m0 + wm + 16 * i + g, col = n0 + wn + 8 * j + 2 * q;
            store_pair(C, M, N, row, col, acc[i][j][0], acc[i][j][1]);
            store_pair(C, M, N, row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
}

// ------------------------------------------------------------------------------------------------
// Shared by versions 14 to 16: a k-tile of 64 is, for each operand, boxes of 128 rows x 64 values (128 bytes a
// row) that the TMA unit copies from the tensor map, permuting each row's 16-byte pieces by the 128-byte
// swizzle; wgmma reads them through descriptors that name the same swizzle.  A warpgroup computes 64 rows x T_BN
// columns with one wgmma.m64nT_BNk16 a k16 step (T_BN / 2 float sums a thread); a stage holds A's 128 rows and
// B's T_BN rows.
#define T_BM 128
#ifndef T_BN
#define T_BN 256                                      // 64, 128 or 256
#endif
#if T_BN != 64 && T_BN != 128 && T_BN != 256
#error "T_BN must be 64, 128 or 256 (the wgmma shapes m64n64, m64n128, m64n256)"
#endif
#define T_B_BOX (T_BN < 128 ? T_BN : 128)             // rows of B one TMA copy moves (a box has at most 256 rows)
#define T_BK 64
#define T_ROW_BYTES 128                               // T_BK BF16 values
#define T_A_BYTES (T_BM * T_ROW_BYTES)
#define T_B_BYTES (T_BN * T_ROW_BYTES)
#define T_STAGE_BYTES (T_A_BYTES + T_B_BYTES)
#define T_ACC (T_BN / 2)                              // float sums a thread

// The k-tile's products of one warpgroup: rows 64 wg.. of the stage's A against all of its B, four k16 steps.
__device__ __forceinline__ void warpgroup_products(float (&acc)[T_ACC], const unsigned char* stage, int wg, bool first)
{
    const unsigned char* a = stage + wg * 64 * T_ROW_BYTES;
    const unsigned char* b = stage + T_A_BYTES;
    wgmma_fence();
    #pragma unroll
    for (int s = 0; s < T_BK / 16; ++s) {
        unsigned long long da = swizzled_descriptor(a + 32 * s), db = swizzled_descriptor(b + 32 * s);
#if T_BN == 256
        wgmma_m64n256k16(acc, da, db, !(first && s == 0));
#elif T_BN == 128
        wgmma_m64n128k16(acc, da, db, !(first && s == 0));
#else
        wgmma_m64n64k16(acc, da, db, !(first && s == 0));
#endif
    }
    wgmma_commit();
}

// Activations the fused epilogue of version 16 applies (BF_ACTIVATION): 0 none, 1 ReLU, 2 GELU (tanh form, as
// torch.nn.functional.gelu(approximate="tanh"), with the hardware's tanh: tanhf takes some twenty instructions
// a value, and the consumers' epilogue is time the tensor cores wait).
#ifndef BF_ACTIVATION
#define BF_ACTIVATION 0
#endif
__device__ __forceinline__ float activation(float x)
{
#if BF_ACTIVATION == 1
    return fmaxf(x, 0.0f);
#elif BF_ACTIVATION == 2
    return 0.5f * x * (1.0f + tanh_approx(0.7978845608f * (x + 0.044715f * x * x * x)));
#else
    return x;
#endif
}

// bias[col] and bias[col + 1] (col even; zero past N), as one 4-byte load where both are inside and aligned.
__device__ __forceinline__ void column_bias(const __nv_bfloat16* bias, int N, int col, float& b0, float& b1)
{
    if (col + 1 < N && N % 2 == 0) {
        float2 pair = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(bias + col));
        b0 = pair.x; b1 = pair.y;
    } else {
        b0 = col < N ? __bfloat162float(bias[col]) : 0.0f;
        b1 = col + 1 < N ? __bfloat162float(bias[col + 1]) : 0.0f;
    }
}

// A warpgroup's sums to C: acc[4j + 0, 1] = C[row][n0 + 8j + 2q, + 1], acc[4j + 2, 3] = C[row + 8][...], row the
// thread's first row.  With a bias (version 16): activation(sum + bias[column]).
__device__ __forceinline__ void store_warpgroup(out_t* C, int M, int N, int row, int n0, int q, float (&acc)[T_ACC],
                                                const __nv_bfloat16* bias)
{
    #pragma unroll
    for (int j = 0; j < T_BN / 8; ++j) {
        int col = n0 + 8 * j + 2 * q;
        float x0 = acc[4 * j], x1 = acc[4 * j + 1], y0 = acc[4 * j + 2], y1 = acc[4 * j + 3];
        if (bias) {
            float b0, b1;
            column_bias(bias, N, col, b0, b1);
            x0 = activation(x0 + b0); x1 = activation(x1 + b1);
            y0 = activation(y0 + b0); y1 = activation(y1 + b1);
        }
        store_pair(C, M, N, row, col, x0, x1);
        store_pair(C, M, N, row + 8, col, y0, y1);
    }
}

// ------------------------------------------------------------------------------------------------
// 14. wgmma fed by the TMA unit, paced by mbarriers (version 11's pipeline, for BF16).  A block of two
//     warpgroups computes a 128 x T_BN tile.  Thread 0 issues each stage as TMA copies of 2-D boxes straight
//     from A and B as they lie in memory: the tensor map says where a row starts, and the TMA unit writes the box
//     swizzled, zeros past the matrix's edges.  No packing kernel, as version 11 needed, and no bounds checks.
//     The driver writes the two tensor maps on the host (128 bytes each, kernels/runtime/tensor_maps.py); the
//     launcher copies them to global memory, where the TMA unit reads them.
//     A stage is full when its bytes have landed (the copies count them down on its full mbarrier); it is empty
//     when every warp's products that read it are done (each warp arrives on its empty mbarrier), and thread 0
//     waits for that before refilling it with the k-tile T_STAGES - 1 ahead.
#ifndef T_STAGES
#define T_STAGES 4
#endif
#ifndef T_GROUP
#define T_GROUP 8
#endif

// Round up the dynamic shared memory's start to 1024 bytes, where the 128-byte swizzle's pattern starts over
// (the launch asks for 1024 bytes more).
__device__ __forceinline__ unsigned char* swizzle_aligned(unsigned char* smem)
{
    return smem + ((1024 - (shared_address(smem) & 1023)) & 1023);
}

__device__ __forceinline__ void tma_stage(unsigned char* stage, unsigned long long* full, const void* a_map,
                                          const void* b_map, int m0, int n0, int batch, int kt)
{
    mbarrier_arrive_expect(full, T_STAGE_BYTES);
    tma_load(stage, a_map, full, kt * T_BK, m0, batch);
    #pragma unroll
    for (int h = 0; h < T_BN / T_B_BOX; ++h)
        tma_load(stage + T_A_BYTES + h * T_B_BOX * T_ROW_BYTES, b_map, full, kt * T_BK, n0 + T_B_BOX * h, batch);
}

__global__ void __launch_bounds__(256, 1)
sgemm_bf16_wgmma_tma(int M, int N, int K, const unsigned long long* __restrict__ maps, out_t* C)
{
    const void* a_map = maps;                          // the tensor maps of A and B, 128 bytes each
    const void* b_map = maps + 16;
    unsigned char* smem = swizzle_aligned(tma_smem);
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + T_STAGES * T_STAGE_BYTES);
    unsigned long long* empty = full + T_STAGES;
    int t = threadIdx.x, wg = t / 128, warp = (t / 32) % 4, lane = t % 32;
    int tiles_m = (M + T_BM - 1) / T_BM, tiles_n = (N + T_BN - 1) / T_BN, tm, tn;
    grouped_tile(blockIdx.x, tiles_m, tiles_n, T_GROUP, tm, tn);
    int m0 = tm * T_BM, n0 = tn * T_BN, batch = blockIdx.z;
    int k_tiles = (K + T_BK - 1) / T_BK;

    if (t == 0) {
        for (int s = 0; s < T_STAGES; ++s) {
            mbarrier_init(&full[s], 1);                // thread 0's arrival, with the bytes to expect
            mbarrier_init(&empty[s], 8);               // one arrival per warp
        }
        mbarrier_init_fence();
    }
    __syncthreads();
    if (t == 0)
        for (int s = 0; s < T_STAGES - 1 && s < k_tiles; ++s)
            tma_stage(smem + s * T_STAGE_BYTES, &full[s], a_map, b_map, m0, n0, batch, s);

    float acc[T_ACC];
    #pragma unroll
    for (int i = 0; i < T_ACC; ++i) acc[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt) {
        int slot = kt % T_STAGES;
        mbarrier_wait(&full[slot], (kt / T_STAGES) & 1);
        warpgroup_products(acc, smem + slot * T_STAGE_BYTES, wg, kt == 0);
        wgmma_wait<1>();                               // this warpgroup's products of k-tile kt - 1 are done
        int old = (kt + T_STAGES - 1) % T_STAGES, next = kt + T_STAGES - 1;
        if (kt > 0 && lane == 0) mbarrier_arrive(&empty[old]);
        if (t == 0 && next < k_tiles) {
            if (kt > 0) mbarrier_wait(&empty[old], ((kt - 1) / T_STAGES) & 1);
            tma_stage(smem + old * T_STAGE_BYTES, &full[old], a_map, b_map, m0, n0, batch, next);
        }
    }
    wgmma_wait<0>();
    wgmma_release(acc);
    store_warpgroup(C + (size_t)batch * M * N, M, N, m0 + wg * 64 + warp * 16 + lane / 4, n0, lane % 4, acc, nullptr);
}

// ------------------------------------------------------------------------------------------------
// 15. Warp specialisation, persistent blocks, clusters.  Three warpgroups a block: warpgroup 0 produces (one of
//     its threads issues every TMA copy; the others leave at once), warpgroups 1 and 2 consume (each multiplies 64
//     rows of the 128 x T_BN tile).  setmaxnreg moves registers from the producer, which needs few, to the
//     consumers, whose T_BN / 2 float sums need many.  The grid has one block per multiprocessor, and each block
//     walks the tiles (the scheduler: block i takes tiles i, i + blocks, ...), so the producer already loads the
//     next tile's first k-tiles while the consumers store the last one.  With S_CLUSTER = 2, two blocks on
//     neighbouring multiprocessors form a cluster and compute two tiles one above the other, which need the same
//     k-tiles of B: each block copies half of B's tile and the TMA unit writes it into both blocks' shared memory
//     (multicast), so B is read from L2 half as often.  A stage is then refilled only when the consumers of both
//     blocks are done with it: every consumer warp arrives on the empty mbarrier of each block of the cluster.
//     With S_TMA_STORE the epilogue goes through shared memory and the TMA unit (store_warpgroup_tma), so that
//     writing C overlaps the next tile's products.
//     A small product has too few tiles for the multiprocessors (1024^3 in 128 x 128 tiles: 64 for 132).  With
//     S_SPLIT_K = 2 two blocks of a cluster share each tile, each summing half of its k-tiles, and add their halves
//     through distributed shared memory: in the block of split s, consumer warpgroup s keeps its 64 rows and
//     receives the partner block's sums of them, the other consumer sends its own sums to the partner (st.async,
//     which counts its bytes down the partner's barrier as a TMA copy does).  So each block stores half of the
//     tile, and no second kernel or atomic adds are needed.  With S_CLUSTER = 2 as well, a cluster is four blocks:
//     two tile rows (sharing B's tiles by multicast) times two halves of K.
#ifndef S_CLUSTER
#define S_CLUSTER 2                                   // blocks sharing B's tile (tile rows per cluster): 1 or 2
#endif
#ifndef S_SPLIT_K
#define S_SPLIT_K 1                                   // blocks sharing a tile, each with a share of its k-tiles: 1 or 2
#endif
#if S_SPLIT_K != 1 && S_SPLIT_K != 2
#error "S_SPLIT_K must be 1 or 2"
#endif
#define S_CLUSTER_BLOCKS (S_CLUSTER * S_SPLIT_K)     // block rank = split + S_SPLIT_K * (tile row in the cluster)
#ifndef S_STAGES
#define S_STAGES 3                                    // 4 fit beside the staging tiles only without S_TMA_STORE
#endif
#ifndef S_GROUP
#define S_GROUP 8                                     // tile rows (of clusters) per group of the tile order
#endif
#ifndef S_TMA_STORE
#define S_TMA_STORE 1                                 // the epilogue: 1 through shared memory and TMA stores, 0 direct
#endif
#if BF_OUT_FLOAT
#undef S_TMA_STORE
#define S_TMA_STORE 0                                 // (a float tile would not fit beside the stages)
#endif
#define S_THREADS 384
#define S_CONSUMER_WARPS 8
#define S_STAGING_BYTES (S_TMA_STORE ? 2 * 64 * T_BN * 2 : 0)   // a 64 x T_BN BF16 tile per consumer warpgroup
#define S_REDUCE_BYTES (S_SPLIT_K > 1 ? 64 * T_BN * 4 : 0)      // the partner's float sums of 64 x T_BN

// Cluster tile `id` of the schedule: matrix `batch`, tile row tm of this block (`rank`: its row in the cluster),
// tile column tn.
__device__ __forceinline__ void scheduled_tile(int id, int tiles_m, int tiles_n, unsigned rank, int& batch, int& tm, int& tn)
{
    int cluster_rows = (tiles_m + S_CLUSTER - 1) / S_CLUSTER, per_batch = cluster_rows * tiles_n;
    batch = id / per_batch;
    grouped_tile(id % per_batch, cluster_rows, tiles_n, S_GROUP, tm, tn);
    tm = tm * S_CLUSTER + rank;
}

// A consumer warp is done with a stage: it arrives on the stage's empty barrier in every block that shares B's
// tile with it, its own and the blocks of the same split in the other tile rows of the cluster (each block's
// producer refills the stage in all of their shared memory).
__device__ __forceinline__ void release_stage(unsigned long long* empty, unsigned split, unsigned row)
{
    mbarrier_arrive(empty);
    #pragma unroll
    for (int r = 1; r < S_CLUSTER; ++r) mbarrier_arrive_cluster(empty, split + S_SPLIT_K * ((row + r) % S_CLUSTER));
}

// Split-K's exchange (S_SPLIT_K = 2).  The sending warpgroup: its sums, as float4s in the order of its threads
// (coalesced, no bank conflicts), into the partner's buffer, where the receiver's threads hold the same elements.
// It first waits until the partner has read the previous tile's sums (`released`, phase sent - 1).
__device__ __forceinline__ void send_sums(float (&acc)[T_ACC], unsigned remote_buffer, unsigned remote_reduced,
                                          unsigned long long* released, int sent)
{
    int t = threadIdx.x % 128;
    if (sent > 0) mbarrier_wait(released, (sent - 1) & 1);
    #pragma unroll
    for (int i = 0; i < T_ACC / 4; ++i)
        st_async_v4(remote_buffer + (i * 128 + t) * 16, acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3],
                    remote_reduced);
}

// The receiving warpgroup: waits for the partner's S_REDUCE_BYTES (phase `received` of `reduced`), adds them to its
// own sums, and tells the partner that the buffer may be written again (each warp on `released` there).
__device__ __forceinline__ void receive_sums(float (&acc)[T_ACC], const float4* buffer, unsigned long long* reduced,
                                             unsigned long long* released, unsigned partner, int received)
{
    int t = threadIdx.x % 128;
    if (t == 0) mbarrier_arrive_expect(reduced, S_REDUCE_BYTES);   // (the bytes may land before or after this)
    mbarrier_wait(reduced, received & 1);
    #pragma unroll
    for (int i = 0; i < T_ACC / 4; ++i) {
        float4 v = buffer[i * 128 + t];
        acc[4 * i] += v.x; acc[4 * i + 1] += v.y; acc[4 * i + 2] += v.z; acc[4 * i + 3] += v.w;
    }
    __syncwarp();
    if (t % 32 == 0) mbarrier_arrive_cluster(released, partner);
}

// The epilogue through shared memory (S_TMA_STORE): the warpgroup writes its 64 x T_BN tile of C, as BF16, into
// `staging` in 64-column chunks of 64 rows x 128 bytes, each row's 16-byte pieces swizzled as the TMA unit's
// 128-byte swizzle expects (the eight rows a warp writes at once land in eight groups of banks), and one thread
// hands the chunks to the TMA unit, which writes them to C (cutting them at C's edges) while the warpgroup goes on
// to its next tile.  Before writing the staging tile again, that thread waits until the TMA unit has read it.
__device__ __forceinline__ void store_warpgroup_tma(const void* c_map, unsigned char* staging, int consumer, int m0, int n0,
                                                    int batch, int N, float (&acc)[T_ACC], const __nv_bfloat16* bias)
{
    int t = threadIdx.x % 128, warp = t / 32, lane = t % 32, q = lane % 4;
    if (t == 0) bulk_wait_read();
    named_barrier(1 + consumer, 128);
    #pragma unroll
    for (int j = 0; j < T_BN / 8; ++j) {
        int col = n0 + 8 * j + 2 * q;
        float b0 = 0.0f, b1 = 0.0f;
        if (bias) column_bias(bias, N, col, b0, b1);
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            int r = 16 * warp + lane / 4 + 8 * h;
            float x = acc[4 * j + 2 * h] + b0, y = acc[4 * j + 2 * h + 1] + b1;
            if (bias) { x = activation(x); y = activation(y); }
            int offset = (j / 8) * 64 * 128 + r * 128 + (((j % 8) ^ (r % 8)) << 4) + 4 * q;
            *reinterpret_cast<__nv_bfloat162*>(staging + offset) = __floats2bfloat162_rn(x, y);
        }
    }
    fence_async_shared();
    named_barrier(1 + consumer, 128);
    if (t == 0) {
        #pragma unroll
        for (int c = 0; c < T_BN / 64; ++c) tma_store(c_map, staging + c * 64 * 128, n0 + 64 * c, m0, batch);
        bulk_commit();
    }
}

template <bool FUSED>
__device__ __forceinline__ void warp_specialized(int M, int N, int K, int batches, const unsigned long long* maps,
                                                 out_t* C, const __nv_bfloat16* bias)
{
    const void* a_map = maps;
    const void* b_map = maps + 16;
    const void* c_map = maps + 32;                     // read with S_TMA_STORE only
    unsigned char* smem = swizzle_aligned(tma_smem);
    unsigned char* staging = smem + S_STAGES * T_STAGE_BYTES;
    unsigned char* reduce_buffer = staging + S_STAGING_BYTES;   // S_SPLIT_K = 2 only
    unsigned long long* full = reinterpret_cast<unsigned long long*>(reduce_buffer + S_REDUCE_BYTES);
    unsigned long long* empty = full + S_STAGES;
    unsigned long long* reduced = empty + S_STAGES;    // the partner's sums have landed in reduce_buffer
    unsigned long long* released = reduced + 1;        // the partner has read the sums this block sent
    int t = threadIdx.x, wg = t / 128;
    unsigned rank = S_CLUSTER_BLOCKS > 1 ? cluster_rank() : 0;
    unsigned split = rank % S_SPLIT_K, row = rank / S_SPLIT_K;   // this block's half of K, its tile row in the cluster
    int tiles_m = (M + T_BM - 1) / T_BM, tiles_n = (N + T_BN - 1) / T_BN;
    int tiles = ((tiles_m + S_CLUSTER - 1) / S_CLUSTER) * tiles_n * batches;   // cluster tiles
    int clusters = gridDim.x / S_CLUSTER_BLOCKS, cluster = blockIdx.x / S_CLUSTER_BLOCKS;
    int k_tiles = (K + T_BK - 1) / T_BK, k_share = (k_tiles + S_SPLIT_K - 1) / S_SPLIT_K;
    int k_begin = min(k_tiles, (int)split * k_share), k_end = min(k_tiles, k_begin + k_share);   // this block's k-tiles

    if (t == 0) {
        for (int s = 0; s < S_STAGES; ++s) {
            mbarrier_init(&full[s], 1);
            mbarrier_init(&empty[s], S_CONSUMER_WARPS * S_CLUSTER);
        }
        mbarrier_init(reduced, 1);                     // the receiver's arrival, with the bytes to expect
        mbarrier_init(released, 4);                    // one arrival per warp of the partner's receiver
        mbarrier_init_fence();
    }
    // Every block's barriers are initialised before any block copies into it or arrives on them.
    if (S_CLUSTER_BLOCKS > 1) cluster_sync(); else __syncthreads();

    if (wg == 0) {
        registers_decrease<40>();
        if (t != 0) return;
        unsigned short sharers = 0;                    // the blocks of this split: B's tile is multicast to them
        #pragma unroll
        for (int r = 0; r < S_CLUSTER; ++r) sharers |= (unsigned short)(1 << (split + S_SPLIT_K * r));
        int fill = 0;                                  // k-tiles issued so far: stage fill % S_STAGES, round fill / S_STAGES
        for (int id = cluster; id < tiles; id += clusters) {
            int batch, tm, tn;
            scheduled_tile(id, tiles_m, tiles_n, row, batch, tm, tn);
            for (int kt = k_begin; kt < k_end; ++kt, ++fill) {
                int slot = fill % S_STAGES;
                // A fresh barrier counts as completed in the phase before its first: round 0 does not wait.
                mbarrier_wait(&empty[slot], ((fill / S_STAGES) & 1) ^ 1);
                unsigned char* stage = smem + slot * T_STAGE_BYTES;
                mbarrier_arrive_expect(&full[slot], T_STAGE_BYTES);
                tma_load(stage, a_map, &full[slot], kt * T_BK, tm * T_BM, batch);
                constexpr int part = T_BN / S_CLUSTER, box = part < 128 ? part : 128;   // rows of B this block copies
                #pragma unroll
                for (int h = 0; h < part / box; ++h) {
                    int rows = row * part + h * box;
                    if (S_CLUSTER > 1)
                        tma_load_multicast(stage + T_A_BYTES + rows * T_ROW_BYTES, b_map, &full[slot], kt * T_BK,
                                           tn * T_BN + rows, batch, sharers);
                    else
                        tma_load(stage + T_A_BYTES + rows * T_ROW_BYTES, b_map, &full[slot], kt * T_BK, tn * T_BN + rows,
                                 batch);
                }
            }
        }
        // Wait until every consumer of the cluster has released every stage: only then can no other block still
        // arrive on this block's barriers, and the block may end.
        for (int i = 0; i < S_STAGES; ++i, ++fill) mbarrier_wait(&empty[fill % S_STAGES], ((fill / S_STAGES) & 1) ^ 1);
        return;
    }

    registers_increase<232>();
    int consumer = wg - 1, warp = (t / 32) % 4, lane = t % 32;
#if S_SPLIT_K > 1
    // This consumer keeps its rows of each tile (it is consumer `split`), or sends them to the partner.
    bool sends = consumer != (int)split;
    unsigned partner = rank ^ 1;                       // the block of the other split, same tile
    unsigned remote_buffer = cluster_address(reduce_buffer, partner), remote_reduced = cluster_address(reduced, partner);
    int exchanged = 0;                                 // tiles whose sums were sent, or received
#endif
    float acc[T_ACC];
    #pragma unroll
    for (int i = 0; i < T_ACC; ++i) acc[i] = 0.0f;
    int use = 0;                                       // k-tiles consumed so far
    for (int id = cluster; id < tiles; id += clusters) {
        int batch, tm, tn;
        scheduled_tile(id, tiles_m, tiles_n, row, batch, tm, tn);
        for (int kt = k_begin; kt < k_end; ++kt, ++use) {
            int slot = use % S_STAGES;
            mbarrier_wait(&full[slot], (use / S_STAGES) & 1);
            warpgroup_products(acc, smem + slot * T_STAGE_BYTES, consumer, kt == k_begin);
            wgmma_wait<1>();                           // the products of the k-tile before are done: release it
            if (kt > k_begin && lane == 0) release_stage(&empty[(use - 1) % S_STAGES], split, row);
        }
        wgmma_wait<0>();
        if (lane == 0 && k_end > k_begin) release_stage(&empty[(use - 1) % S_STAGES], split, row);
        wgmma_release(acc);
#if S_SPLIT_K > 1
        if (k_end == k_begin) {                        // (split 1 of a product of one k-tile: no sums of its own)
            #pragma unroll
            for (int i = 0; i < T_ACC; ++i) acc[i] = 0.0f;
        }
        if (sends) {
            send_sums(acc, remote_buffer, remote_reduced, released, exchanged++);
            continue;
        }
        receive_sums(acc, reinterpret_cast<const float4*>(reduce_buffer), reduced, released, partner, exchanged++);
#endif
        if (S_TMA_STORE && N % 8 == 0)                 // (TMA rows of a multiple of 16 bytes)
            store_warpgroup_tma(c_map, staging + consumer * 64 * T_BN * 2, consumer, tm * T_BM + consumer * 64,
                                tn * T_BN, batch, N, acc, FUSED ? bias : nullptr);
        else
            store_warpgroup(C + (size_t)batch * M * N, M, N, tm * T_BM + consumer * 64 + warp * 16 + lane / 4,
                            tn * T_BN, lane % 4, acc, FUSED ? bias : nullptr);
    }
#if S_SPLIT_K > 1
    // The partner has read the last sums sent (it arrives on this block's barrier, which must outlive that).
    if (sends && exchanged > 0) mbarrier_wait(released, (exchanged - 1) & 1);
#endif
    if (S_TMA_STORE && threadIdx.x % 128 == 0) bulk_wait();   // the last tile's stores are done before the block ends
}

__global__ void __launch_bounds__(S_THREADS, 1) __cluster_dims__(S_CLUSTER_BLOCKS, 1, 1)
sgemm_bf16_warp_specialized(int M, int N, int K, int batches, const unsigned long long* __restrict__ maps, out_t* C)
{
    warp_specialized<false>(M, N, K, batches, maps, C, nullptr);
}

// ------------------------------------------------------------------------------------------------
// 16. Version 15 with a fused epilogue: C = activation(A B^T + bias), bias one BF16 value per column, the
//     activation chosen by BF_ACTIVATION, applied to the float sums in registers before the one BF16 store.  A
//     library GEMM followed by a bias kernel and an activation kernel writes C and reads it back twice.
__global__ void __launch_bounds__(S_THREADS, 1) __cluster_dims__(S_CLUSTER_BLOCKS, 1, 1)
sgemm_bf16_fused(int M, int N, int K, int batches, const unsigned long long* __restrict__ maps, out_t* C,
                 const __nv_bfloat16* __restrict__ bias)
{
    warp_specialized<true>(M, N, K, batches, maps, C, bias);
}
#endif  // DLK_ARCH_SPECIFIC
