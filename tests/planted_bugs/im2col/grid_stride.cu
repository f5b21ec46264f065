// %%cuda im2col block=128 grid=7
// Also correct: a grid-stride loop over (sample, channel, pixel) with a small grid, one tap row at a time.
// Expect: accepted
__global__ void im2col(const float* X, float* U, int n0, int count, int C, int H, int W, int K, int pad,
                       int stride, int dilation, int H_out, int W_out)
{
    const int P = H_out * W_out;
    const int total = count * C * P;
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
        const int plane = e / P, at = e % P;
        const int row = at / W_out * stride - pad, column = at % W_out * stride - pad;
        for (int tap = 0; tap < K * K; ++tap) {
            const int y = row + tap / K * dilation, x = column + tap % K * dilation;
            float v = 0.0f;
            if (y >= 0 && y < H && x >= 0 && x < W) v = X[((long long)n0 * C + plane) * H * W + y * W + x];
            U[((long long)plane * K * K + tap) * P + at] = v;
        }
    }
}
