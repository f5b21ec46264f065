// kernels/conv2d_backward.cu -- the backward pass of a convolutional layer (kernels/conv2d.cu).
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
