// %%cuda fc_backward_input block_x=16 block_y=16
// Bug: accumulates into dX without initialising it first (dX holds garbage before the launch).
// Expect: rejected, wrong_result
__global__ void fc_backward_input(const float* dY, const float* W, float* dX, int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || k >= in_features) return;
    for (int j = 0; j < out_features; ++j)
        dX[i * in_features + k] += dY[i * out_features + j] * W[j * in_features + k];
}
