// %%cuda max_pool_forward block=128
// Bug: rows of the window are W_out apart instead of W.
// Expect: rejected, wrong_result
__global__ void max_pool_forward(const float* X, float* Y, int N, int C, int H, int W, int pool)
{
    int H_out = H / pool, W_out = W / pool;
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= N * C * H_out * W_out) return;
    int j = index % W_out;
    int i = (index / W_out) % H_out;
    int plane = index / (W_out * H_out);
    const float* x = X + plane * H * W + (i * pool) * W + j * pool;
    float best = x[0];
    for (int p = 0; p < pool; ++p)
        for (int q = 0; q < pool; ++q)
            best = fmaxf(best, x[p * W_out + q]);
    Y[index] = best;
}
