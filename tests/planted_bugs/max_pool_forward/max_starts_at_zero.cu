// %%cuda max_pool_forward block=128
// Bug: the maximum starts at 0, so a window of negative values gives 0.
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
    float best = 0.0f;
    for (int p = 0; p < pool; ++p)
        for (int q = 0; q < pool; ++q)
            best = fmaxf(best, x[p * W + q]);
    Y[index] = best;
}
