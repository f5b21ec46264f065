// %%cuda im2col block=128 grid=7
// Also correct: a grid-stride loop over (sample, channel, pixel) with a small grid.
// Expect: accepted
__global__ void im2col(const float* X, float* U, int n0, int count, int C, int H, int W, int K, int pad,
                       int stride, int H_out, int W_out)
{
    int P = H_out * W_out;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < count * C * P; t += gridDim.x * blockDim.x) {
    int p = t % P, c = (t / P) % C, s = t / (P * C);
    int h = p / W_out, w = p % W_out;
    const float* x = X + ((long long)(n0 + s) * C + c) * H * W;
    float* u = U + ((long long)s * C + c) * K * K * P + p;
    for (int i = 0; i < K; ++i)
        for (int j = 0; j < K; ++j) {
            int hi = h * stride - pad + i, wj = w * stride - pad + j;
            u[(i * K + j) * P] = (hi >= 0 && hi < H && wj >= 0 && wj < W) ? x[hi * W + wj] : 0.0f;
        }
    }
}
