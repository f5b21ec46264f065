// %%cuda fc_backward_input block_x=16 block_y=16
// Bug: right only for the visible shapes: caches a row of dY in a fixed array of 64 and ignores the outputs past it.
// Expect: rejected, wrong_result
__global__ void fc_backward_input(const float* dY, const float* W, float* dX, int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || k >= in_features) return;
    float row[64];
    int m = out_features < 64 ? out_features : 64;
    for (int j = 0; j < m; ++j) row[j] = dY[i * out_features + j];
    float acc = 0.0f;
    for (int j = 0; j < m; ++j)
        acc += row[j] * W[j * in_features + k];
    dX[i * in_features + k] = acc;
}
