// %%cuda conv2d_backward_input
// Bug: terms with h - p < 0 or w - q < 0 are not skipped: reads before the start of the map.
// Expect: rejected, out_of_bounds
#define TILE_WIDTH 16
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
    for (int m = 0; m < M; ++m)
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q) {
                int ho = h - p, wo = w - q;
                if (ho < H_out && wo < W_out)
                    acc += dY[((n * M + m) * H_out + ho) * W_out + wo] * Wf[((m * C + c) * K + p) * K + q];
            }
    dX[((n * C + c) * H + h) * W + w] = acc;
}
