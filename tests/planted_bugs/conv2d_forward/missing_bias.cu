// %%cuda conv2d_forward
// Bug: the bias is left out.
// Expect: rejected, wrong_result
#define TILE_WIDTH 16
__global__ void conv2d_forward(const float* X, const float* Wf, const float* b, float* Y,
                               int N, int C, int H, int W, int M, int K, int W_grid)
{
    int H_out = H - K + 1, W_out = W - K + 1;
    int m = blockIdx.x;
    int h = (blockIdx.y / W_grid) * TILE_WIDTH + threadIdx.y;
    int w = (blockIdx.y % W_grid) * TILE_WIDTH + threadIdx.x;
    int n = blockIdx.z;
    if (h >= H_out || w >= W_out) return;
    float acc = 0.0f;
    for (int c = 0; c < C; ++c)
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
                acc += X[((n * C + c) * H + h + p) * W + w + q] * Wf[((m * C + c) * K + p) * K + q];
    Y[((n * M + m) * H_out + h) * W_out + w] = acc;
}
