// kernels/gemm/sgemm.cu -- single-precision matrix multiplication C = A B, from naive to near-cuBLAS.
//
// Layout: row-major.  A is M-by-K, B is K-by-N, C is M-by-N; every kernel takes
// (M, N, K, A, B, C) and overwrites C.  Every version is correct for any M, N, K >= 1:
// loads outside the matrices read zeros and stores outside C are skipped.
//
// Versions, in teaching order (each a small step from the one before):
//   1. sgemm_naive              one thread per element of C; threadIdx.x runs down a COLUMN of C,
//                               so the 32 threads of a warp read 32 different rows of A (32
//                               transactions) and write 32 different rows of C.
//   2. sgemm_coalesced          the same with threadIdx.x along a ROW of C: a warp reads one row of
//                               A (a broadcast) and 32 neighbouring values of B (one transaction).
//   3. sgemm_shared_tiled       32x32 tiles of A and B staged in shared memory: each value loaded
//                               from global memory is used 32 times.
//   4. sgemm_blocktile_1d       a 64x64 tile of C per block, 8 results per thread in a column
//                               (1-D register blocking): one shared-memory read of B serves 8 FMAs.
//   5. sgemm_blocktile_2d       a 128x128 tile per block, an 8x8 tile of results per thread
//                               (2-D register blocking): 16 shared-memory reads serve 64 FMAs.
//   6. sgemm_vectorized         as 5, with 16-byte (float4) loads from global and shared memory;
//                               A is stored transposed in shared memory so a thread's 8 values of
//                               A are contiguous.
//   7. sgemm_warptile           warp tiling and double buffering: each warp owns a 64 x 16*WT_NQ
//                               piece of the tile, each thread 8 x 4*WT_NQ results in 4x4 pieces
//                               spread so that a warp's shared reads hit distinct banks; the next
//                               k-tile is fetched into registers while the current one is multiplied,
//                               so one barrier per k-tile instead of two; blocks inside the matrices
//                               skip the bounds checks.  Tile sizes are compile-time defines (WT_BM,
//                               WT_BN, WT_BK, WT_NQ, WT_MIN_BLOCKS, WT_GROUP) so the benchmark can
//                               compare a few; kernels/gemm/sgemm.py's default is 128x128x16, WT_NQ = 4
//                               (4 warps of 64x64, 8x16 results per thread).
//
//   8. sgemm_splitk             tiles sized for the shape and K split across blocks (skinny products).
//   9. sgemm_tf32x3_wmma        float32 accuracy on the tensor cores: each input split into two TF32
//                               numbers and three tensor-core products summed (CUDA's WMMA API).
//   (10. kernels/gemm/sgemm_hopper.cu: the same split with Hopper's warpgroup MMA, GPU only.)
//
// Launch (done by kernels/gemm/sgemm.py): versions 1-3 use 32x32 threads; 4 uses 512 threads per 64x64
// tile; 5 and 6 use 256 threads per 128x128 tile; 7 uses (WT_BM/64)*(WT_BN/(16*WT_NQ)) warps per tile.
// grid.x runs over column tiles of C, grid.y over row tiles.

#include <mma.h>

// ------------------------------------------------------------------------------------------------
// 1. Naive: C[i][j] = sum_k A[i][k] B[k][j], one thread each.  i comes from threadIdx.x, so the
//    threads of a warp have consecutive i: their reads of A[i][k] are K floats apart.
__global__ void sgemm_naive(int M, int N, int K, const float* A, const float* B, float* C)
{
    int i = blockIdx.y * blockDim.x + threadIdx.x;   // row of C
    int j = blockIdx.x * blockDim.y + threadIdx.y;   // column of C
    if (i >= M || j >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[(size_t)i * K + k] * B[(size_t)k * N + j];
    C[(size_t)i * N + j] = acc;
}

// ------------------------------------------------------------------------------------------------
// 2. Coalesced: the only change is which index comes from threadIdx.x.  Now a warp's 32 threads
//    share i (A[i][k] is one broadcast read) and have consecutive j (B[k][j..j+31] and the stores
//    to C are one 128-byte transaction each).
__global__ void sgemm_coalesced(int M, int N, int K, const float* A, const float* B, float* C)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;   // column of C
    int i = blockIdx.y * blockDim.y + threadIdx.y;   // row of C
    if (i >= M || j >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[(size_t)i * K + k] * B[(size_t)k * N + j];
    C[(size_t)i * N + j] = acc;
}

// ------------------------------------------------------------------------------------------------
// 3. Shared-memory tiles.  Block (bx, by) computes the TILE x TILE tile of C at rows by*TILE..,
//    columns bx*TILE...  For each k-tile it loads a TILE x TILE tile of A and one of B (one value
//    per thread, zeros outside the matrices), waits, and takes TILE products from shared memory.
#define TILE 32

__global__ void sgemm_shared_tiled(int M, int N, int K, const float* A, const float* B, float* C)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * TILE + ty;
    int j = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Coalesced loads: threadIdx.x runs along a row of each tile.
        As[ty][tx] = (i < M && k0 + tx < K) ? A[(size_t)i * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && j < N) ? B[(size_t)(k0 + ty) * N + j] : 0.0f;
        __syncthreads();                       // the tiles are complete
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];      // As[ty][k]: broadcast; Bs[k][tx]: 32 banks
        __syncthreads();                       // everyone is done before the tiles are overwritten
    }
    if (i < M && j < N) C[(size_t)i * N + j] = acc;
}

// ------------------------------------------------------------------------------------------------
// 4. 1-D register blocking.  A block of BT1_BM*BT1_BN/BT1_TM = 512 threads computes a 64x64 tile of
//    C; each thread computes BT1_TM = 8 results in one column.  In the inner loop one value of B
//    from shared memory is kept in a register and used for 8 FMAs, so shared-memory traffic per
//    FMA falls from 2 reads to about 1.1.
#define BT1_BM 64
#define BT1_BN 64
#define BT1_BK 8
#define BT1_TM 8

__global__ void __launch_bounds__(512)
sgemm_blocktile_1d(int M, int N, int K, const float* A, const float* B, float* C)
{
    __shared__ float As[BT1_BM][BT1_BK];
    __shared__ float Bs[BT1_BK][BT1_BN];
    int t = threadIdx.x;
    int col = t % BT1_BN;                 // column of the tile this thread computes
    int row0 = (t / BT1_BN) * BT1_TM;     // first of its BT1_TM rows
    int tile_i = blockIdx.y * BT1_BM, tile_j = blockIdx.x * BT1_BN;
    // Which element of the A and B tiles this thread loads (64x8 and 8x64: one each).
    int a_r = t / BT1_BK, a_c = t % BT1_BK;
    int b_r = t / BT1_BN, b_c = t % BT1_BN;
    float acc[BT1_TM] = {0.0f};
    for (int k0 = 0; k0 < K; k0 += BT1_BK) {
        int ai = tile_i + a_r, ak = k0 + a_c;
        As[a_r][a_c] = (ai < M && ak < K) ? A[(size_t)ai * K + ak] : 0.0f;
        int bk = k0 + b_r, bj = tile_j + b_c;
        Bs[b_r][b_c] = (bk < K && bj < N) ? B[(size_t)bk * N + bj] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BT1_BK; ++k) {
            float b = Bs[k][col];
            #pragma unroll
            for (int r = 0; r < BT1_TM; ++r)
                acc[r] += As[row0 + r][k] * b;
        }
        __syncthreads();
    }
    int j = tile_j + col;
    #pragma unroll
    for (int r = 0; r < BT1_TM; ++r) {
        int i = tile_i + row0 + r;
        if (i < M && j < N) C[(size_t)i * N + j] = acc[r];
    }
}

// ------------------------------------------------------------------------------------------------
// 5. 2-D register blocking.  256 threads compute a 128x128 tile; each thread an 8x8 block of it.
//    Per k: load 8 values of A and 8 of B into registers, then 64 FMAs from registers (an outer
//    product).  Each thread loads 4 values of each 128x8 / 8x128 tile per k-tile.
#define BT2_BM 128
#define BT2_BN 128
#define BT2_BK 8
#define BT2_TM 8
#define BT2_TN 8
#define BT2_THREADS ((BT2_BM / BT2_TM) * (BT2_BN / BT2_TN))

__global__ void __launch_bounds__(BT2_THREADS)
sgemm_blocktile_2d(int M, int N, int K, const float* A, const float* B, float* C)
{
    __shared__ float As[BT2_BM][BT2_BK];
    __shared__ float Bs[BT2_BK][BT2_BN];
    int t = threadIdx.x;
    int trow = (t / (BT2_BN / BT2_TN)) * BT2_TM;   // this thread's 8x8 block within the tile
    int tcol = (t % (BT2_BN / BT2_TN)) * BT2_TN;
    int tile_i = blockIdx.y * BT2_BM, tile_j = blockIdx.x * BT2_BN;
    float acc[BT2_TM][BT2_TN] = {{0.0f}};
    float a_reg[BT2_TM], b_reg[BT2_TN];
    for (int k0 = 0; k0 < K; k0 += BT2_BK) {
        // 1024 values of each tile, 256 threads: 4 loads each, consecutive threads on consecutive
        // addresses (A: along k within a row; B: along a row).
        #pragma unroll
        for (int l = 0; l < (BT2_BM * BT2_BK) / BT2_THREADS; ++l) {
            int e = t + l * BT2_THREADS;
            int r = e / BT2_BK, c = e % BT2_BK;
            int i = tile_i + r, k = k0 + c;
            As[r][c] = (i < M && k < K) ? A[(size_t)i * K + k] : 0.0f;
        }
        #pragma unroll
        for (int l = 0; l < (BT2_BK * BT2_BN) / BT2_THREADS; ++l) {
            int e = t + l * BT2_THREADS;
            int r = e / BT2_BN, c = e % BT2_BN;
            int k = k0 + r, j = tile_j + c;
            Bs[r][c] = (k < K && j < N) ? B[(size_t)k * N + j] : 0.0f;
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < BT2_BK; ++k) {
            #pragma unroll
            for (int r = 0; r < BT2_TM; ++r) a_reg[r] = As[trow + r][k];
            #pragma unroll
            for (int c = 0; c < BT2_TN; ++c) b_reg[c] = Bs[k][tcol + c];
            #pragma unroll
            for (int r = 0; r < BT2_TM; ++r)
                #pragma unroll
                for (int c = 0; c < BT2_TN; ++c)
                    acc[r][c] += a_reg[r] * b_reg[c];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int r = 0; r < BT2_TM; ++r) {
        int i = tile_i + trow + r;
        #pragma unroll
        for (int c = 0; c < BT2_TN; ++c) {
            int j = tile_j + tcol + c;
            if (i < M && j < N) C[(size_t)i * N + j] = acc[r][c];
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Helpers for versions 6 and 7: 16-byte loads where the four floats lie inside the matrix and the
// address is 16-byte aligned (row length a multiple of 4), element by element with zeros otherwise.
// `ld` is the row length; (r, c) the first of the four elements (c, c+1, c+2, c+3 in row r).
__device__ __forceinline__ float4 load_row4(const float* X, int rows, int cols, int r, int c, bool aligned)
{
    if (r < rows && aligned && c + 3 < cols)
        return *reinterpret_cast<const float4*>(X + (size_t)r * cols + c);
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < rows) {
        const float* p = X + (size_t)r * cols;
        if (c + 0 < cols) v.x = p[c + 0];
        if (c + 1 < cols) v.y = p[c + 1];
        if (c + 2 < cols) v.z = p[c + 2];
        if (c + 3 < cols) v.w = p[c + 3];
    }
    return v;
}

// Copy a float4 into reg[at..at+3] (a register array indexed only by constants).
__device__ __forceinline__ void unpack4(float* reg, int at, float4 v)
{
    reg[at + 0] = v.x;
    reg[at + 1] = v.y;
    reg[at + 2] = v.z;
    reg[at + 3] = v.w;
}

// Store four results at C[r][c..c+3], as one float4 where it fits.
__device__ __forceinline__ void store_row4(float* C, int rows, int cols, int r, int c, float4 v, bool aligned)
{
    if (r >= rows) return;
    float* p = C + (size_t)r * cols;
    if (aligned && c + 3 < cols) {
        *reinterpret_cast<float4*>(p + c) = v;
        return;
    }
    if (c + 0 < cols) p[c + 0] = v.x;
    if (c + 1 < cols) p[c + 1] = v.y;
    if (c + 2 < cols) p[c + 2] = v.z;
    if (c + 3 < cols) p[c + 3] = v.w;
}

// ------------------------------------------------------------------------------------------------
// 6. Vectorised: version 5 with float4 traffic.  Each thread loads one float4 of the 128x8 A tile
//    (four consecutive k of one row) and stores it TRANSPOSED, AsT[k][m], so that the 8 values of
//    A a thread needs for one k are contiguous: two 16-byte shared loads, as for B.  AsT rows are
//    padded by 4 floats: the transposed stores of a warp would otherwise fall two to a bank.
#define VEC_BM 128
#define VEC_BN 128
#define VEC_BK 8
#define VEC_TM 8
#define VEC_TN 8
#define VEC_THREADS ((VEC_BM / VEC_TM) * (VEC_BN / VEC_TN))

__global__ void __launch_bounds__(VEC_THREADS)
sgemm_vectorized(int M, int N, int K, const float* A, const float* B, float* C)
{
    __shared__ __align__(16) float AsT[VEC_BK][VEC_BM + 4];
    __shared__ __align__(16) float Bs[VEC_BK][VEC_BN];
    int t = threadIdx.x;
    int trow = (t / (VEC_BN / VEC_TN)) * VEC_TM;
    int tcol = (t % (VEC_BN / VEC_TN)) * VEC_TN;
    int tile_i = blockIdx.y * VEC_BM, tile_j = blockIdx.x * VEC_BN;
    bool a_aligned = (K % 4) == 0, b_aligned = (N % 4) == 0;
    // The float4 each thread loads: A tile 128 rows x 2 float4; B tile 8 rows x 32 float4.
    int a_r = t / (VEC_BK / 4), a_c = (t % (VEC_BK / 4)) * 4;
    int b_r = t / (VEC_BN / 4), b_c = (t % (VEC_BN / 4)) * 4;
    float acc[VEC_TM][VEC_TN] = {{0.0f}};
    float a_reg[VEC_TM], b_reg[VEC_TN];
    for (int k0 = 0; k0 < K; k0 += VEC_BK) {
        float4 a = load_row4(A, M, K, tile_i + a_r, k0 + a_c, a_aligned);
        AsT[a_c + 0][a_r] = a.x;
        AsT[a_c + 1][a_r] = a.y;
        AsT[a_c + 2][a_r] = a.z;
        AsT[a_c + 3][a_r] = a.w;
        float4 b = (k0 + b_r < K) ? load_row4(B, K, N, k0 + b_r, tile_j + b_c, b_aligned)
                                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        *reinterpret_cast<float4*>(&Bs[b_r][b_c]) = b;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < VEC_BK; ++k) {
            unpack4(a_reg, 0, *reinterpret_cast<const float4*>(&AsT[k][trow]));
            unpack4(a_reg, 4, *reinterpret_cast<const float4*>(&AsT[k][trow + 4]));
            unpack4(b_reg, 0, *reinterpret_cast<const float4*>(&Bs[k][tcol]));
            unpack4(b_reg, 4, *reinterpret_cast<const float4*>(&Bs[k][tcol + 4]));
            #pragma unroll
            for (int r = 0; r < VEC_TM; ++r)
                #pragma unroll
                for (int c = 0; c < VEC_TN; ++c)
                    acc[r][c] += a_reg[r] * b_reg[c];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int r = 0; r < VEC_TM; ++r) {
        #pragma unroll
        for (int c = 0; c < VEC_TN; c += 4)
            store_row4(C, M, N, tile_i + trow + r, tile_j + tcol + c,
                       make_float4(acc[r][c], acc[r][c + 1], acc[r][c + 2], acc[r][c + 3]), b_aligned);
    }
}

// ------------------------------------------------------------------------------------------------
// 7. Warp tiling with double buffering.
//
//    Block tile WT_BM x WT_BN, k-tile WT_BK.  Warps are laid out (WT_BM/64) x (WT_BN/32); a warp owns
//    a 64x32 piece of the tile; within it the 32 lanes form an 8 (rows) x 4 (columns) grid and each
//    lane computes four 4x4 pieces: rows {r, r+32} x columns {c, c+16} with r = 4*(lane/4) and
//    c = 4*(lane%4).  (With WT_NQ = 4 a warp owns 64x64 and a lane 8x16 results, columns
//    {c, c+16, c+32, c+48}: 6 shared loads per 128 FMAs, but twice the accumulator registers.)  So the 8 float4 reads of A a warp issues per k hit 8 distinct addresses (the
//    other lanes get broadcasts) and likewise 4 for B: no bank conflicts, 4 shared loads per 64 FMAs.
//
//    Two shared-memory buffers: while the block multiplies k-tile t from buffer t%2, each thread
//    already holds its part of k-tile t+1 in registers (loaded from global memory before the
//    multiply, so the load latency hides behind 8 x 64 FMAs); it writes them to the other buffer
//    afterwards.  One barrier per k-tile.
//
//    The body is a __device__ function over one tile so that conv2d_gemm.cu can reuse it for a
//    batch of products (blockIdx.z), with row strides lda, ldb, ldc.
#ifndef WT_BM
#define WT_BM 128
#endif
#ifndef WT_BN
#define WT_BN 128
#endif
#ifndef WT_BK
#define WT_BK 16
#endif
#ifndef WT_MIN_BLOCKS
#define WT_MIN_BLOCKS 2                              // blocks per SM the register budget must allow
#endif
#ifndef WT_NQ
#define WT_NQ 4                                      // 4-column groups per thread: 8x(4*WT_NQ) results
#endif
#ifndef WT_A_KM
#define WT_A_KM 0                                    // 1: A is passed as A^T, K x M row-major (version 8's dY^T X)
#endif
#define WT_TN (4 * WT_NQ)                            // columns of C per thread
#define WT_WARP_COLS (16 * WT_NQ)                    // columns of C per warp (4 lanes x 4 x WT_NQ)
#define WT_THREADS ((WT_BM / 64) * (WT_BN / WT_WARP_COLS) * 32)
#define WT_A_PAD 4                                   // AsT rows padded as in version 6
#define WT_A_LOADS (WT_BM * WT_BK / 4 / WT_THREADS)  // float4 loads per thread per k-tile
#define WT_B_LOADS (WT_BK * WT_BN / 4 / WT_THREADS)
#if WT_A_LOADS < 1 || WT_B_LOADS < 1
#error "WT_BM * WT_BK and WT_BK * WT_BN must each be at least 4 * WT_THREADS"
#endif
#if 4 * (2 * WT_BK * (WT_BM + WT_A_PAD) + 2 * WT_BK * WT_BN) > 48 * 1024
#error "the WT_* tiles need more than the 48 KiB of static shared memory a block may have"
#endif

// Stage the float4 loads of one k-tile (k0..k0+WT_BK) into registers.
__device__ __forceinline__ void warptile_fetch(const float* A, const float* B, int M, int N, int K,
                                               int tile_i, int tile_j, int k0, int t,
                                               bool a_aligned, bool b_aligned,
                                               float4 (&a_next)[WT_A_LOADS], float4 (&b_next)[WT_B_LOADS])
{
    #pragma unroll
    for (int l = 0; l < WT_A_LOADS; ++l) {
        int e = t + l * WT_THREADS;                              // which float4 of the A tile
#if WT_A_KM
        int r = e / (WT_BM / 4), c = (e % (WT_BM / 4)) * 4;      // A given as A^T (K x M): k row r, columns m
        a_next[l] = load_row4(A, K, M, k0 + r, tile_i + c, a_aligned);
#else
        int r = e / (WT_BK / 4), c = (e % (WT_BK / 4)) * 4;
        a_next[l] = load_row4(A, M, K, tile_i + r, k0 + c, a_aligned);
#endif
    }
    #pragma unroll
    for (int l = 0; l < WT_B_LOADS; ++l) {
        int e = t + l * WT_THREADS;
        int r = e / (WT_BN / 4), c = (e % (WT_BN / 4)) * 4;
        b_next[l] = load_row4(B, K, N, k0 + r, tile_j + c, b_aligned);
    }
}

// The same where the whole k-tile lies inside A and B and rows are 16-byte aligned (every k-tile of
// an interior block but a last partial one): plain float4 loads with no bounds checks, which leaves
// more of the instruction issue slots to the FMAs.
__device__ __forceinline__ void warptile_fetch_interior(const float* A, const float* B, int M, int N, int K,
                                                        int tile_i, int tile_j, int k0, int t,
                                                        float4 (&a_next)[WT_A_LOADS], float4 (&b_next)[WT_B_LOADS])
{
    #pragma unroll
    for (int l = 0; l < WT_A_LOADS; ++l) {
        int e = t + l * WT_THREADS;
#if WT_A_KM
        int r = e / (WT_BM / 4), c = (e % (WT_BM / 4)) * 4;
        a_next[l] = *reinterpret_cast<const float4*>(A + (size_t)(k0 + r) * M + tile_i + c);
#else
        int r = e / (WT_BK / 4), c = (e % (WT_BK / 4)) * 4;
        a_next[l] = *reinterpret_cast<const float4*>(A + (size_t)(tile_i + r) * K + k0 + c);
#endif
    }
    #pragma unroll
    for (int l = 0; l < WT_B_LOADS; ++l) {
        int e = t + l * WT_THREADS;
        int r = e / (WT_BN / 4), c = (e % (WT_BN / 4)) * 4;
        b_next[l] = *reinterpret_cast<const float4*>(B + (size_t)(k0 + r) * N + tile_j + c);
    }
}

__device__ __forceinline__ void warptile_stash(float (*AsT)[WT_BM + WT_A_PAD], float (*Bs)[WT_BN], int t,
                                               const float4 (&a_next)[WT_A_LOADS], const float4 (&b_next)[WT_B_LOADS])
{
    #pragma unroll
    for (int l = 0; l < WT_A_LOADS; ++l) {
        int e = t + l * WT_THREADS;
#if WT_A_KM
        int r = e / (WT_BM / 4), c = (e % (WT_BM / 4)) * 4;
        *reinterpret_cast<float4*>(&AsT[r][c]) = a_next[l];       // already k-major: stored as it came
#else
        int r = e / (WT_BK / 4), c = (e % (WT_BK / 4)) * 4;
        AsT[c + 0][r] = a_next[l].x;                              // transposed: AsT[k][m]
        AsT[c + 1][r] = a_next[l].y;
        AsT[c + 2][r] = a_next[l].z;
        AsT[c + 3][r] = a_next[l].w;
#endif
    }
    #pragma unroll
    for (int l = 0; l < WT_B_LOADS; ++l) {
        int e = t + l * WT_THREADS;
        int r = e / (WT_BN / 4), c = (e % (WT_BN / 4)) * 4;
        *reinterpret_cast<float4*>(&Bs[r][c]) = b_next[l];
    }
}

// One WT_BM x WT_BN tile of C = A B (A: M x K, B: K x N, C: M x N, all dense row-major), summed over the
// k-tiles kt_begin <= kt < kt_end only (all of them for this version; a K-slice for version 8), plus
// bias[j] on every row when bias is not null (the fully connected layer's bias, added in the store).
__device__ __forceinline__ void sgemm_warptile_tile_range(int M, int N, int K, const float* A, const float* B,
                                                          float* C, int tile_i, int tile_j, int kt_begin, int kt_end,
                                                          const float* bias)
{
    __shared__ __align__(16) float AsT[2][WT_BK][WT_BM + WT_A_PAD];
    __shared__ __align__(16) float Bs[2][WT_BK][WT_BN];
    int t = threadIdx.x;
    int warp = t / 32, lane = t % 32;
    int warp_row = (warp / (WT_BN / WT_WARP_COLS)) * 64;    // this warp's 64 x WT_WARP_COLS piece
    int warp_col = (warp % (WT_BN / WT_WARP_COLS)) * WT_WARP_COLS;
    int lr = warp_row + (lane / 4) * 4;              // rows lr..lr+3 and lr+32..lr+35
    int lc = warp_col + (lane % 4) * 4;              // columns lc..lc+3, lc+16..lc+19, ... (WT_NQ groups)
    bool a_aligned = (WT_A_KM ? M : K) % 4 == 0, b_aligned = (N % 4) == 0;

    float acc[8][WT_TN];
    #pragma unroll
    for (int r = 0; r < 8; ++r)
        #pragma unroll
        for (int c = 0; c < WT_TN; ++c) acc[r][c] = 0.0f;
    float4 a_next[WT_A_LOADS], b_next[WT_B_LOADS];
    float a_reg[8], b_reg[WT_TN];

    int tiles = kt_end;
    // Interior blocks take the unchecked loads for every full k-tile (a branch the whole block takes
    // the same way); edge blocks and a last partial k-tile take the checked ones.
    bool interior = tile_i + WT_BM <= M && tile_j + WT_BN <= N && a_aligned && b_aligned;
    int full_tiles = interior ? K / WT_BK : 0;
    if (kt_begin < full_tiles)
        warptile_fetch_interior(A, B, M, N, K, tile_i, tile_j, kt_begin * WT_BK, t, a_next, b_next);
    else
        warptile_fetch(A, B, M, N, K, tile_i, tile_j, kt_begin * WT_BK, t, a_aligned, b_aligned, a_next, b_next);
    warptile_stash(AsT[0], Bs[0], t, a_next, b_next);
    __syncthreads();
    for (int kt = kt_begin; kt < tiles; ++kt) {
        int cur = (kt - kt_begin) & 1;
        // Start the next k-tile's global loads now; their values are used only after the FMAs.
        if (kt + 1 < full_tiles)
            warptile_fetch_interior(A, B, M, N, K, tile_i, tile_j, (kt + 1) * WT_BK, t, a_next, b_next);
        else if (kt + 1 < tiles)
            warptile_fetch(A, B, M, N, K, tile_i, tile_j, (kt + 1) * WT_BK, t, a_aligned, b_aligned, a_next, b_next);
        #pragma unroll
        for (int k = 0; k < WT_BK; ++k) {
            unpack4(a_reg, 0, *reinterpret_cast<const float4*>(&AsT[cur][k][lr]));
            unpack4(a_reg, 4, *reinterpret_cast<const float4*>(&AsT[cur][k][lr + 32]));
            #pragma unroll
            for (int g = 0; g < WT_NQ; ++g)
                unpack4(b_reg, 4 * g, *reinterpret_cast<const float4*>(&Bs[cur][k][lc + 16 * g]));
            #pragma unroll
            for (int r = 0; r < 8; ++r)
                #pragma unroll
                for (int c = 0; c < WT_TN; ++c)
                    acc[r][c] += a_reg[r] * b_reg[c];
        }
        if (kt + 1 < tiles) {
            // The other buffer was last read in iteration kt-1, before the barrier that ended it.
            warptile_stash(AsT[cur ^ 1], Bs[cur ^ 1], t, a_next, b_next);
            __syncthreads();
        }
    }
    float4 add[WT_NQ];
    #pragma unroll
    for (int g = 0; g < WT_NQ; ++g)
        add[g] = bias ? load_row4(bias, 1, N, 0, tile_j + lc + 16 * g, b_aligned) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    #pragma unroll
    for (int r = 0; r < 8; ++r) {
        int i = tile_i + lr + (r < 4 ? r : 32 + r - 4);
        #pragma unroll
        for (int g = 0; g < WT_NQ; ++g)
            store_row4(C, M, N, i, tile_j + lc + 16 * g,
                       make_float4(acc[r][4 * g] + add[g].x, acc[r][4 * g + 1] + add[g].y,
                                   acc[r][4 * g + 2] + add[g].z, acc[r][4 * g + 3] + add[g].w), b_aligned);
    }
}

// The whole of K, no bias: the tile as versions 7 and the convolution and L-Softmax kernels use it.
__device__ __forceinline__ void sgemm_warptile_tile(int M, int N, int K, const float* A, const float* B, float* C,
                                                    int tile_i, int tile_j)
{
    sgemm_warptile_tile_range(M, N, K, A, B, C, tile_i, tile_j, 0, (K + WT_BK - 1) / WT_BK, nullptr);
}

#ifndef WT_GROUP
#define WT_GROUP 0   // > 1: hand out tiles in groups of WT_GROUP tile rows (see below)
#endif

__global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
sgemm_warptile(int M, int N, int K, const float* A, const float* B, float* C)
{
    int tile_row = blockIdx.y, tile_col = blockIdx.x;
#if WT_GROUP > 1
    // Blocks run roughly in the order of their linear index.  Row by row, the blocks running at once
    // span a few rows of C and so read ALL of B; in groups of WT_GROUP rows, column by column, they
    // read WT_GROUP panels of A and a few panels of B, which stay in L2 for the blocks that follow.
    int id = blockIdx.y * gridDim.x + blockIdx.x;
    int per_group = WT_GROUP * gridDim.x;
    int first_row = (id / per_group) * WT_GROUP;
    int rows = (int)gridDim.y - first_row < WT_GROUP ? (int)gridDim.y - first_row : WT_GROUP;
    tile_row = first_row + (id % per_group) % rows;
    tile_col = (id % per_group) / rows;
#endif
    sgemm_warptile_tile(M, N, K, A, B, C, tile_row * WT_BM, tile_col * WT_BN);
}


// ------------------------------------------------------------------------------------------------
// 8. Skinny shapes: tiles sized for the shape, and split-K.  Version 7 gives each block one tile of C
//    and the whole of K.  When C has few tiles -- C = X W^T with 10 classes is 4096 x 10, 32 tiles
//    of 128 x 128 on 132 multiprocessors -- most of the GPU idles and each busy block walks K alone.
//    Two remedies, chosen per shape by kernels/gemm/sgemm.py (sgemm_plan):
//      - a tile that fits the shape (the WT_* defines: 128 x 16 for at most 16 columns, 64 x 64 for
//        C of few large tiles), so that fewer of the multiply-adds fall outside C;
//      - split-K: grid.z slices of K, tiles_per_split k-tiles each.  Block (x, y, z) multiplies its
//        slice and writes its partial tile to partial[z] (M x N, as C); sgemm_splitk_sum then adds
//        the slices in the order z = 0, 1, ... (the same bits every run, unlike atomicAdd into C).
//    With one slice the block writes C directly and the sum is not launched.  Compiled with WT_A_KM = 1,
//    A arrives as A^T (K x M row-major), as dY does in a weight gradient dW = dY^T X: its k-tiles are
//    then read along M and stored into AsT as they come, with no transpose kernel before the product.
__global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
sgemm_splitk(int M, int N, int K, const float* A, const float* B, float* C, float* partial, int tiles_per_split,
             const float* bias, int has_bias)
{
    int kt_total = (K + WT_BK - 1) / WT_BK;
    int kt_begin = blockIdx.z * tiles_per_split;
    int kt_end = min(kt_total, kt_begin + tiles_per_split);
    float* out = gridDim.z == 1 ? C : partial + (size_t)blockIdx.z * M * N;
    const float* add = (gridDim.z == 1 && has_bias) ? bias : nullptr;   // with slices, the sum adds it
    sgemm_warptile_tile_range(M, N, K, A, B, out, blockIdx.y * WT_BM, blockIdx.x * WT_BN, kt_begin, kt_end, add);
}

// C[i][j] = sum over z of partial[z][i][j] (+ bias[j]): grid-stride over the M N elements.
__global__ void sgemm_splitk_sum(const float* __restrict__ partial, int splits, int M, int N,
                                 const float* __restrict__ bias, int has_bias, float* C)
{
    size_t total = (size_t)M * N;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)blockDim.x * gridDim.x) {
        float s = has_bias ? bias[e % N] : 0.0f;
        for (int z = 0; z < splits; ++z) s += partial[z * total + e];
        C[e] = s;
    }
}

// ------------------------------------------------------------------------------------------------
// 9. Tensor cores at float32 accuracy: 3xTF32 with CUDA's WMMA API.  Versions 1-8 use the FP32 units;
//    a tensor core multiplies 16 x 8 by 8 x 16 tiles of TF32 numbers (float's exponent, 10 mantissa
//    bits instead of 23) at 8x their rate.  Plain TF32 loses float's last 13 bits; the split keeps them:
//        big = tf32(x),  small = tf32(x - big)        (x - big is exact in float)
//        A B ~ A_small B_big + A_big B_small + A_big B_big
//    three tensor-core products into one float accumulator (A_small B_small, ~2^-22 of the product,
//    is dropped), small ones first, and each k-tile's sum added to a float total by the FP32 units.  The split is elementwise, so it works on WMMA fragments whatever
//    their (unspecified) layout: load a fragment, then big.x[i] and small.x[i] from raw.x[i].
//
//    A block of 8 warps computes a 128 x 128 tile; each warp 64 x 32 of it as 4 x 2 WMMA tiles of
//    16 x 16.  k-tiles of 32 pass through shared memory (rows padded by 4 floats), read with bounds
//    checks (zeros outside A and B); results go out through a small per-warp staging tile so that
//    stores outside C are skipped.  Version 10 (kernels/gemm/sgemm_hopper.cu) does the same product with
//    Hopper's warpgroup MMA, which this API cannot reach.
#define TC_BM 128
#define TC_BN 128
#define TC_BK 32
#define TC_THREADS 256
#define TC_PAD 4
// A fragment of floats (as loaded) -> its big and small TF32 parts, element by element.
template <class Fragment>
__device__ __forceinline__ void split_tf32(Fragment& big, Fragment& small)
{
    #pragma unroll
    for (int e = 0; e < big.num_elements; ++e) {
        float x = big.x[e];
        big.x[e] = nvcuda::wmma::__float_to_tf32(x);
        small.x[e] = nvcuda::wmma::__float_to_tf32(x - big.x[e]);
    }
}

__global__ void __launch_bounds__(TC_THREADS)
sgemm_tf32x3_wmma(int M, int N, int K, const float* A, const float* B, float* C)
{
    using namespace nvcuda;
    __shared__ __align__(32) float As[TC_BM][TC_BK + TC_PAD];
    __shared__ __align__(32) float Bs[TC_BK][TC_BN + TC_PAD];
    __shared__ __align__(32) float staging[TC_THREADS / 32][16][16 + TC_PAD];
    int t = threadIdx.x, warp = t / 32, lane = t % 32;
    int tile_i = blockIdx.y * TC_BM, tile_j = blockIdx.x * TC_BN;
    int wr = (warp / 4) * 64, wc = (warp % 4) * 32;       // this warp's 64 x 32 piece of the tile

    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[4][2], part[4][2];
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::fill_fragment(acc[i][j], 0.0f);
            wmma::fill_fragment(part[i][j], 0.0f);
        }

    for (int k0 = 0; k0 < K; k0 += TC_BK) {
        for (int e = t; e < TC_BM * TC_BK; e += TC_THREADS) {
            int r = e / TC_BK, c = e % TC_BK;
            As[r][c] = (tile_i + r < M && k0 + c < K) ? A[(size_t)(tile_i + r) * K + k0 + c] : 0.0f;
        }
        for (int e = t; e < TC_BK * TC_BN; e += TC_THREADS) {
            int r = e / TC_BN, c = e % TC_BN;
            Bs[r][c] = (k0 + r < K && tile_j + c < N) ? B[(size_t)(k0 + r) * N + tile_j + c] : 0.0f;
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TC_BK; k += 8) {
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a_big[4], a_small[4];
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b_big[2], b_small[2];
            #pragma unroll
            for (int i = 0; i < 4; ++i) {
                wmma::load_matrix_sync(a_big[i], &As[wr + 16 * i][k], TC_BK + TC_PAD);
                split_tf32(a_big[i], a_small[i]);
            }
            #pragma unroll
            for (int j = 0; j < 2; ++j) {
                wmma::load_matrix_sync(b_big[j], &Bs[k][wc + 16 * j], TC_BN + TC_PAD);
                split_tf32(b_big[j], b_small[j]);
            }
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 2; ++j) {
                    wmma::mma_sync(part[i][j], a_small[i], b_big[j], part[i][j]);
                    wmma::mma_sync(part[i][j], a_big[i], b_small[j], part[i][j]);
                    wmma::mma_sync(part[i][j], a_big[i], b_big[j], part[i][j]);
                }
        }
        __syncthreads();
        // The tensor cores' float sums truncate; summed over all of K that bias grows to 10x an FP32
        // product's error (K = 4096).  So each k-tile's sum starts from zero and is added to acc here,
        // rounded to nearest by the FP32 units: elementwise, like the split.
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 2; ++j)
                #pragma unroll
                for (int e = 0; e < acc[i][j].num_elements; ++e) {
                    acc[i][j].x[e] += part[i][j].x[e];
                    part[i][j].x[e] = 0.0f;
                }
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::store_matrix_sync(&staging[warp][0][0], acc[i][j], 16 + TC_PAD, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                int r = tile_i + wr + 16 * i + e / 16, c = tile_j + wc + 16 * j + e % 16;
                if (r < M && c < N) C[(size_t)r * N + c] = staging[warp][e / 16][e % 16];
            }
            __syncwarp();
        }
}

// ------------------------------------------------------------------------------------------------
// Transpose: out = in^T for in of rows x cols.  Our GEMMs take row-major operands only, so a product
// with a transposed operand (X W^T of a fully connected layer, dY^T X for its weight gradient) first
// transposes it.  32 x 32 tiles through shared memory (rows padded by one float so that reading a
// column hits 32 different banks): both the loads and the stores are coalesced.
#define TRANSPOSE_TILE 32
#define TRANSPOSE_ROWS 8   // the block is 32 x 8 threads; each thread moves 4 elements of the tile
__global__ void matrix_transpose(const float* __restrict__ in, float* out, int rows, int cols)
{
    __shared__ float tile[TRANSPOSE_TILE][TRANSPOSE_TILE + 1];
    int c0 = blockIdx.x * TRANSPOSE_TILE, r0 = blockIdx.y * TRANSPOSE_TILE;
    for (int dy = threadIdx.y; dy < TRANSPOSE_TILE; dy += TRANSPOSE_ROWS) {
        int r = r0 + dy, c = c0 + threadIdx.x;
        tile[dy][threadIdx.x] = (r < rows && c < cols) ? in[(size_t)r * cols + c] : 0.0f;
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < TRANSPOSE_TILE; dy += TRANSPOSE_ROWS) {
        int c = c0 + dy, r = r0 + threadIdx.x;     // out row c, column r
        if (c < cols && r < rows) out[(size_t)c * rows + r] = tile[threadIdx.x][dy];
    }
}
