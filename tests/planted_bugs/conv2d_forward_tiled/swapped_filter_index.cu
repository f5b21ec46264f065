// %%cuda conv2d_forward_tiled
// Bug: the filter is read as W[c][m] instead of W[m][c].
// Expect: rejected, wrong_result
#define TILE_WIDTH 16
__global__ void conv2d_forward_tiled(const float* X, const float* Wf, const float* b, float* Y,
                                     int N, int C, int H, int W, int M, int K, int W_grid)
{
    extern __shared__ float shared[];
    int X_tile_width = TILE_WIDTH + K - 1;
    float* X_shared = shared;
    float* W_shared = shared + X_tile_width * X_tile_width;
    int H_out = H - K + 1, W_out = W - K + 1;
    int m = blockIdx.x, n = blockIdx.z;
    int h0 = (blockIdx.y / W_grid) * TILE_WIDTH, w0 = (blockIdx.y % W_grid) * TILE_WIDTH;
    int ty = threadIdx.y, tx = threadIdx.x;
    int h = h0 + ty, w = w0 + tx;
    float acc = 0.0f;
    for (int c = 0; c < C; ++c) {
        const float* x = X + (n * C + c) * H * W;
        for (int i = ty; i < X_tile_width; i += TILE_WIDTH)
            for (int j = tx; j < X_tile_width; j += TILE_WIDTH) {
                int hi = h0 + i, wj = w0 + j;
                X_shared[i * X_tile_width + j] = (hi < H && wj < W) ? x[hi * W + wj] : 0.0f;
            }
        if (ty < K && tx < K)
            W_shared[ty * K + tx] = Wf[((c * M + m) * K + ty) * K + tx];
        __syncthreads();
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
                acc += X_shared[(ty + p) * X_tile_width + tx + q] * W_shared[p * K + q];
        __syncthreads();
    }
    if (h < H_out && w < W_out)
        Y[((n * M + m) * H_out + h) * W_out + w] = acc + b[m];
}
