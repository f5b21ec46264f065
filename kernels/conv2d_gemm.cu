// kernels/conv2d_gemm.cu -- the forward pass of a convolution layer as a matrix product.
//
// Tensors (PyTorch's layout): input X is N x C x H x W, filters Wt are M x C x K x K (read as the
// M x (C*K*K) filter matrix Wmat, one filter per row), output Y is N x M x H_out x W_out, with zero
// padding `pad` and stride `stride` (kernels/im2col.cu gives H_out and W_out).  P = H_out * W_out.
//
// Versions, in teaching order:
//   1. conv2d_gemm_batched    explicit GEMM: kernels/im2col.cu has unrolled `count` samples into U
//                             (count matrices of (C*K*K) x P); this computes Y[n0+s] = Wmat U[s] for
//                             each of them (blockIdx.z = s) with the warp-tiled SGEMM of
//                             kernels/sgemm.cu (version 7), whose output is already NCHW.
//   2. conv2d_implicit_gemm   implicit GEMM, as cuDNN does it: the same product over the whole batch,
//                             Y = Wmat U_all with U_all the (C*K*K) x (N*P) unrolled batch, but U_all
//                             never exists: each block gathers the k-tile of U_all it needs straight
//                             from X into shared memory, where the explicit version would read it
//                             from the unrolled matrix in global memory.
//
// The explicit version needs the SGEMM tile sizes chosen for this shape: kernels/conv2d_gemm.py
// compiles this file with WT_BM = 64 (a layer has tens to hundreds of output maps, not thousands).

#include "sgemm.cu"

// 1. Explicit: Y[n0 + s] (M x P) = Wmat (M x CKK) times U[s] (CKK x P), s = blockIdx.z < count.
__global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
conv2d_gemm_batched(const float* Wmat, const float* U, float* Y, int n0, int M, int CKK, int P)
{
    int s = blockIdx.z;
    sgemm_warptile_tile(M, P, CKK, Wmat, U + (size_t)s * CKK * P, Y + (size_t)(n0 + s) * M * P,
                        blockIdx.y * WT_BM, blockIdx.x * WT_BN);
}

// 2. Implicit GEMM.  The GEMM's rows are output maps m < M, its columns the N*P output pixels of the
//    whole batch (column q = n*P + p), its inner dimension the CKK = C*K*K filter taps
//    (k = c*K*K + i*K + j).  Element (k, q) of the unrolled matrix is X[n][c][h*stride-pad+i][w*stride-pad+j]
//    (0 in the padding), with p = h*W_out + w.
//
//    Tiles as sgemm_warptile (a 64 x 16*IG_NQ piece of the IG_BM x IG_BN tile per warp, 8 x 4*IG_NQ
//    results per thread, double-buffered k-tiles), with one change: the B tile is gathered from X.  A thread
//    always gathers the same IG_BN/32 columns (lane, lane+32, ...: a warp reads 32 neighbouring
//    pixels, coalesced) so it works out, once, where each column's receptive field starts; per
//    k-tile it only advances its (c, i, j) counters by IG_BK, with no division.
#ifndef IG_BM
#define IG_BM 64
#endif
#ifndef IG_BN
#define IG_BN 128
#endif
#ifndef IG_BK
#define IG_BK 16
#endif
#ifndef IG_MIN_BLOCKS
#define IG_MIN_BLOCKS 1                               // blocks per SM the register budget must allow
#endif
#ifndef IG_NQ
#define IG_NQ 2                                       // as WT_NQ: 8 x (4*IG_NQ) results per thread
#endif
#define IG_TN (4 * IG_NQ)
#ifndef IG_MAX_CKK
#define IG_MAX_CKK 4096                               // rows C*K*K of the tap table (16 KiB of shared memory)
#endif
#ifndef IG_WIDE_MASK
#define IG_WIDE_MASK 0                                // 1 for filters of 6x6 and 7x7 (up to 49 taps)
#endif
#if IG_WIDE_MASK
typedef unsigned long long ig_mask_t;
#define IG_NO_TAP 63
#else
typedef unsigned int ig_mask_t;                       // filters up to 5x5: 25 taps
#define IG_NO_TAP 31
#endif
#define IG_WARP_COLS (16 * IG_NQ)
#define IG_THREADS ((IG_BM / 64) * (IG_BN / IG_WARP_COLS) * 32)
#define IG_WARPS (IG_THREADS / 32)
#define IG_A_LOADS (IG_BM * IG_BK / 4 / IG_THREADS)   // float4 loads of filters per thread and k-tile
#define IG_COLS (IG_BN / 32)                          // columns of the B tile each thread gathers
#define IG_ROWS (IG_BK / IG_WARPS)                    // ... in this many rows of the k-tile
#if IG_A_LOADS < 1 || IG_ROWS < 1 || IG_BK % IG_WARPS
#error "IG_BM * IG_BK must be at least 4 * IG_THREADS and IG_BK a multiple of the warp count"
#endif
#if 4 * (2 * IG_BK * (IG_BM + 4) + 2 * IG_BK * IG_BN + IG_MAX_CKK + IG_BK) > 48 * 1024
#error "the IG_* tiles and the tap table need more than the 48 KiB of static shared memory a block may have"
#endif

__global__ void __launch_bounds__(IG_THREADS, IG_MIN_BLOCKS)
conv2d_implicit_gemm(const float* X, const float* Wmat, float* Y, int N, int C, int H, int W, int M,
                     int K, int pad, int stride, int H_out, int W_out)
{
    __shared__ __align__(16) float AsT[2][IG_BK][IG_BM + 4];
    __shared__ __align__(16) float Bs[2][IG_BK][IG_BN];
    __shared__ int tap_table[IG_MAX_CKK + IG_BK];
    int P = H_out * W_out, KK = K * K, CKK = C * KK;
    long long NP = (long long)N * P;
    int t = threadIdx.x, warp = t / 32, lane = t % 32;
    int tile_i = blockIdx.y * IG_BM;                  // first output map of this tile
    long long tile_j = (long long)blockIdx.x * IG_BN;  // first output pixel (over the batch)
    int lr = (warp / (IG_BN / IG_WARP_COLS)) * 64 + (lane / 4) * 4;
    int lc = (warp % (IG_BN / IG_WARP_COLS)) * IG_WARP_COLS + (lane % 4) * 4;
    bool a_aligned = (CKK % 4) == 0;
    int tiles = (CKK + IG_BK - 1) / IG_BK;

    // Where each gathered column's receptive field starts: the offset of X[n][0][h0][w0] (h0 and w0
    // may be negative, in the padding) and a mask with bit i*K+j set when tap (i, j) lies inside the
    // input map.  Columns past N*P get an empty mask.
    int col_base[IG_COLS];
    ig_mask_t col_mask[IG_COLS];
    #pragma unroll
    for (int q = 0; q < IG_COLS; ++q) {
        long long col = tile_j + lane + 32 * q;
        int n = (int)(col / P), p = (int)(col % P);
        int h0 = (p / W_out) * stride - pad, w0 = (p % W_out) * stride - pad;
        col_base[q] = n * C * H * W + h0 * W + w0;
        ig_mask_t mask = 0;
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < K; ++j)
                if (h0 + i >= 0 && h0 + i < H && w0 + j >= 0 && w0 + j < W)
                    mask |= (ig_mask_t)1 << (i * K + j);
        col_mask[q] = col < NP ? mask : 0;
    }
    // The tap table: for every row k of the unrolled matrix, the offset of its tap (c, i, j) in a
    // sample of X and its bit i*K+j, packed as offset << 6 | bit; rows past CKK (the tail of the last
    // k-tile) get the bit IG_NO_TAP, which no mask has.  Built once per block, it turns a gather into
    // a broadcast shared load per row, then a bit test, an add and a load per value.
    for (int k = t; k < tiles * IG_BK; k += IG_THREADS) {
        int entry = IG_NO_TAP;
        if (k < CKK) {
            int c = k / KK, i = (k % KK) / K, j = k % K;
            entry = ((c * H * W + i * W + j) << 6) | (i * K + j);
        }
        tap_table[k] = entry;
    }
    __syncthreads();

    float acc[8][IG_TN];
    #pragma unroll
    for (int r = 0; r < 8; ++r)
        #pragma unroll
        for (int c = 0; c < IG_TN; ++c) acc[r][c] = 0.0f;
    float4 a_next[IG_A_LOADS];
    float b_next[IG_ROWS][IG_COLS];
    float a_reg[8], b_reg[IG_TN];

    for (int kt = 0; kt <= tiles; ++kt) {
        int cur = kt & 1;
        if (kt < tiles) {
            // Fetch k-tile kt into registers: filters as in sgemm_warptile, pixels by gathering.
            int k0 = kt * IG_BK;
            #pragma unroll
            for (int l = 0; l < IG_A_LOADS; ++l) {
                int e = t + l * IG_THREADS;
                a_next[l] = load_row4(Wmat, M, CKK, tile_i + e / (IG_BK / 4), k0 + (e % (IG_BK / 4)) * 4, a_aligned);
            }
            #pragma unroll
            for (int r = 0; r < IG_ROWS; ++r) {
                int entry = tap_table[k0 + warp + IG_WARPS * r];    // the same for the whole warp
                int tap = entry >> 6, bit = entry & 63;
                #pragma unroll
                for (int q = 0; q < IG_COLS; ++q)
                    b_next[r][q] = ((col_mask[q] >> bit) & 1) ? X[col_base[q] + tap] : 0.0f;
            }
        }
        if (kt > 0) {
            // Multiply k-tile kt-1 (in buffer cur^1) while the loads of k-tile kt are in flight.
            #pragma unroll
            for (int k = 0; k < IG_BK; ++k) {
                unpack4(a_reg, 0, *reinterpret_cast<const float4*>(&AsT[cur ^ 1][k][lr]));
                unpack4(a_reg, 4, *reinterpret_cast<const float4*>(&AsT[cur ^ 1][k][lr + 32]));
                #pragma unroll
                for (int g = 0; g < IG_NQ; ++g)
                    unpack4(b_reg, 4 * g, *reinterpret_cast<const float4*>(&Bs[cur ^ 1][k][lc + 16 * g]));
                #pragma unroll
                for (int r = 0; r < 8; ++r)
                    #pragma unroll
                    for (int c = 0; c < IG_TN; ++c)
                        acc[r][c] += a_reg[r] * b_reg[c];
            }
        }
        if (kt < tiles) {
            // Stash k-tile kt in buffer cur.  The multiply of iteration kt-1 read buffer cur last, and
            // every thread finished it before that iteration's barrier.
            #pragma unroll
            for (int l = 0; l < IG_A_LOADS; ++l) {
                int e = t + l * IG_THREADS;
                int row = e / (IG_BK / 4), c = (e % (IG_BK / 4)) * 4;
                AsT[cur][c + 0][row] = a_next[l].x;
                AsT[cur][c + 1][row] = a_next[l].y;
                AsT[cur][c + 2][row] = a_next[l].z;
                AsT[cur][c + 3][row] = a_next[l].w;
            }
            #pragma unroll
            for (int r = 0; r < IG_ROWS; ++r)
                #pragma unroll
                for (int q = 0; q < IG_COLS; ++q)
                    Bs[cur][warp + IG_WARPS * r][lane + 32 * q] = b_next[r][q];
            __syncthreads();
        }
    }

    // Column q of the GEMM is pixel p of sample n: Y[n][m][p].
    #pragma unroll
    for (int c = 0; c < IG_TN; ++c) {
        long long col = tile_j + lc + 16 * (c / 4) + c % 4;
        if (col >= NP) continue;
        int n = (int)(col / P), p = (int)(col % P);
        float* y = Y + (long long)n * M * P + p;
        #pragma unroll
        for (int r = 0; r < 8; ++r) {
            int m = tile_i + lr + (r < 4 ? r : 32 + r - 4);
            if (m < M) y[(long long)m * P] = acc[r][c];
        }
    }
}
