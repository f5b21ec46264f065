// kernels/conv/conv2d_gemm.cu -- the forward pass of a convolution layer as a matrix product.
//
// Tensors (PyTorch's layout): input X is N x C x H x W, filters Wt are M x C x K x K (read as the
// M x (C*K*K) filter matrix Wmat, one filter per row), output Y is N x M x H_out x W_out, with zero
// padding `pad` and stride `stride` (kernels/conv/im2col.cu gives H_out and W_out).  P = H_out * W_out.
//
// Versions, in teaching order:
//   1. conv2d_gemm_batched    explicit GEMM: kernels/conv/im2col.cu has unrolled `count` samples into U
//                             (count matrices of (C*K*K) x P); this computes Y[n0+s] = Wmat U[s] for
//                             each of them (blockIdx.z = s) with the warp-tiled SGEMM of
//                             kernels/gemm/sgemm.cu (version 7), whose output is already NCHW.
//   2. conv2d_implicit_gemm   implicit GEMM, as cuDNN does it: the same product over the whole batch,
//                             Y = Wmat U_all with U_all the (C*K*K) x (N*P) unrolled batch, but U_all
//                             never exists: each block gathers the k-tile of U_all it needs straight
//                             from X into shared memory, where the explicit version would read it
//                             from the unrolled matrix in global memory.
//   3. conv2d_winograd_*      Winograd's minimal filtering F(4x4, 3x3), for 3x3 filters at stride 1:
//                             36 multiplications per 4x4 output tile and channel pair instead of 144,
//                             as 36 independent matrix products between a transform of the filters,
//                             of the input tiles and, after, of the products (four launches).
//
// The explicit version needs the SGEMM tile sizes chosen for this shape: kernels/conv/conv2d_gemm.py
// compiles this file with WT_BM = 64 (a layer has tens to hundreds of output maps, not thousands).

#include "gemm/sgemm.cu"

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

// 3. Winograd F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).
//    A 4x4 tile of an output map is A^T [ (G g G^T) .* (B^T d B) ] A summed over the input channels, for
//    the channel pair's 3x3 filter g and the 6x6 input patch d under the tile (its rows 4*th - pad ..
//    4*th - pad + 5; zeros outside the map).  The 6x6 products .* are 36 element positions xi; summed over
//    the channels c, position xi of every (m, tile) pair is one matrix product:
//        Z[xi] (M x T) = V[xi] (M x C) times U[xi] (C x T),   T = N * tiles of 4x4 per output map,
//    with V[xi][m][c] the transformed filters and U[xi][c][t] the transformed input tiles.  So:
//      conv2d_winograd_filters  V = G g G^T for every (m, c)                 one thread per (m, c)
//      conv2d_winograd_inputs   U = B^T d B for every (c, tile t)            one thread per (c, t)
//      conv2d_winograd_gemm     the 36 products, blockIdx.z = xi, each with the warp-tiled SGEMM tile
//      conv2d_winograd_outputs  the 4x4 tile A^T Z A of every (m, t), cut at the map's edge
//    The matrices have entries up to 5 and 8 (B^T, A^T) and 1/24 (G): the rounding error is a few
//    times that of the direct sum, still about 1e-6 of the output's scale in float32.

// B^T d for the six values d[0], d[s], .., d[5s] (a column or a row of a 6x6 tile), into r[0..5].
__device__ __forceinline__ void winograd_bt(const float* d, int s, float* r)
{
    float d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
    r[0] = 4.0f * d0 - 5.0f * d2 + d4;
    r[1] = -4.0f * (d1 + d2) + d3 + d4;
    r[2] = 4.0f * (d1 - d2) - d3 + d4;
    r[3] = 2.0f * (d3 - d1) - d2 + d4;
    r[4] = 2.0f * (d1 - d3) - d2 + d4;
    r[5] = 4.0f * d1 - 5.0f * d3 + d5;
}

// G g for the three values g[0], g[s], g[2s], into r[0..5].
__device__ __forceinline__ void winograd_g(const float* g, int s, float* r)
{
    float g0 = g[0], g1 = g[s], g2 = g[2 * s];
    r[0] = 0.25f * g0;
    r[1] = -(g0 + g1 + g2) / 6.0f;
    r[2] = -(g0 - g1 + g2) / 6.0f;
    r[3] = g0 / 24.0f + g1 / 12.0f + g2 / 6.0f;
    r[4] = g0 / 24.0f - g1 / 12.0f + g2 / 6.0f;
    r[5] = g2;
}

// A^T m for the six values m[0], m[s], .., m[5s], into r[0..3].
__device__ __forceinline__ void winograd_at(const float* m, int s, float* r)
{
    float m0 = m[0], m1 = m[s], m2 = m[2 * s], m3 = m[3 * s], m4 = m[4 * s], m5 = m[5 * s];
    r[0] = m0 + m1 + m2 + m3 + m4;
    r[1] = m1 - m2 + 2.0f * (m3 - m4);
    r[2] = m1 + m2 + 4.0f * (m3 + m4);
    r[3] = m1 - m2 + 8.0f * (m3 - m4) + m5;
}

// The (map, tile) of a transform's thread: thread idx handles map idx / T and tile t = idx % T of the T =
// N * tiles_h * tiles_w in the batch (t fastest), tile t being (n, th, tw) = (t / tiles, (t % tiles) / tiles_w,
// t % tiles_w); valid is false past the last.
struct WinogradTile { bool valid; int map, n, th, tw; long long T, t; };

__device__ __forceinline__ WinogradTile winograd_tile(int N, int maps, int tiles_h, int tiles_w)
{
    WinogradTile at;
    at.T = (long long)N * tiles_h * tiles_w;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    at.valid = idx < at.T * maps;
    at.map = (int)(idx / at.T);
    at.t = idx % at.T;
    int tiles = tiles_h * tiles_w, in_map = (int)(at.t % tiles);
    at.n = (int)(at.t / tiles);
    at.th = in_map / tiles_w;
    at.tw = in_map % tiles_w;
    return at;
}

// Launch: one thread per (m, c), 1-D.  V is 36 x M x C.
__global__ void conv2d_winograd_filters(const float* Wt, float* V, int M, int C)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= M * C) return;
    const float* g = Wt + (size_t)idx * 9;            // filter (m, c) = idx / C, idx % C: 3x3, row-major
    float col[6][3], v[6][6];
    for (int j = 0; j < 3; ++j) {                     // G g: each column of g
        float r[6];
        winograd_g(g + j, 3, r);
        for (int i = 0; i < 6; ++i) col[i][j] = r[i];
    }
    for (int i = 0; i < 6; ++i) winograd_g(&col[i][0], 1, v[i]);   // (G g) G^T: each row
    size_t plane = (size_t)M * C;
    for (int xi = 0; xi < 36; ++xi) V[xi * plane + idx] = v[xi / 6][xi % 6];
}

// Launch: one thread per (c, t) (winograd_tile), t fastest: consecutive threads, consecutive tiles, so the
// 36 stores of a warp are each 32 consecutive floats.  U is 36 x C x T.
__global__ void conv2d_winograd_inputs(const float* X, float* U, int N, int C, int H, int W, int pad,
                                       int tiles_h, int tiles_w)
{
    WinogradTile at = winograd_tile(N, C, tiles_h, tiles_w);
    if (!at.valid) return;
    int c = at.map, n = at.n, th = at.th, tw = at.tw;
    long long T = at.T, t = at.t;
    int h0 = 4 * th - pad, w0 = 4 * tw - pad;
    const float* x = X + ((size_t)n * C + c) * H * W;
    float d[6][6], col[6][6], u[6][6];
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
            int h = h0 + i, w = w0 + j;
            d[i][j] = (h >= 0 && h < H && w >= 0 && w < W) ? x[h * W + w] : 0.0f;
        }
    for (int j = 0; j < 6; ++j) {                     // B^T d: each column
        float r[6];
        winograd_bt(&d[0][j], 6, r);
        for (int i = 0; i < 6; ++i) col[i][j] = r[i];
    }
    for (int i = 0; i < 6; ++i) winograd_bt(&col[i][0], 1, u[i]);  // (B^T d) B: each row
    size_t plane = (size_t)C * T;
    for (int xi = 0; xi < 36; ++xi) U[xi * plane + (size_t)c * T + t] = u[xi / 6][xi % 6];
}

// Launch: the warp-tiled SGEMM's block, grid (ceil(T / WT_BN), ceil(M / WT_BM), 36).
__global__ void __launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)
conv2d_winograd_gemm(const float* V, const float* U, float* Z, int M, int C, int T)
{
    size_t xi = blockIdx.z;
    sgemm_warptile_tile(M, T, C, V + xi * M * C, U + xi * C * T, Z + xi * M * T, blockIdx.y * WT_BM,
                        blockIdx.x * WT_BN);
}

// Launch: one thread per (m, t) (winograd_tile), t fastest.  Y is N x M x H_out x W_out; the tiles of the last row and
// column may stick out of the map (H_out or W_out not a multiple of 4): those outputs are not written.
__global__ void conv2d_winograd_outputs(const float* Z, float* Y, int N, int M, int H_out, int W_out,
                                        int tiles_h, int tiles_w)
{
    WinogradTile at = winograd_tile(N, M, tiles_h, tiles_w);
    if (!at.valid) return;
    int m = at.map, n = at.n, th = at.th, tw = at.tw;
    long long T = at.T, t = at.t;
    size_t plane = (size_t)M * T;
    float z[6][6], col[4][6], y[4][4];
    for (int xi = 0; xi < 36; ++xi) z[xi / 6][xi % 6] = Z[xi * plane + (size_t)m * T + t];
    for (int j = 0; j < 6; ++j) {                     // A^T z: each column
        float r[4];
        winograd_at(&z[0][j], 6, r);
        for (int i = 0; i < 4; ++i) col[i][j] = r[i];
    }
    for (int i = 0; i < 4; ++i) winograd_at(&col[i][0], 1, y[i]);  // (A^T z) A: each row
    float* out = Y + ((size_t)n * M + m) * H_out * W_out;
    // A row of the tile as one 16-byte store where every tile fits the map's width and the rows are aligned
    // (neighbouring threads, neighbouring tiles: a warp's stores then fill whole sectors).
    bool rows_of_four = W_out % 4 == 0 && ((size_t)out & 15) == 0;
    for (int i = 0; i < 4; ++i) {
        int h = 4 * th + i;
        if (h >= H_out) break;
        if (rows_of_four) {
            *reinterpret_cast<float4*>(out + h * W_out + 4 * tw) = make_float4(y[i][0], y[i][1], y[i][2], y[i][3]);
            continue;
        }
        for (int j = 0; j < 4; ++j)
            if (4 * tw + j < W_out) out[h * W_out + 4 * tw + j] = y[i][j];
    }
}
