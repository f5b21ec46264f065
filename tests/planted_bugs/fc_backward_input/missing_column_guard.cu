// %%cuda fc_backward_input block_x=16 block_y=16
// Bug: checks the sample index but not the feature index, writing past the end of each row.
// Expect: rejected, out_of_bounds
__global__ void fc_backward_input(const float* dY, const float* W, float* dX, int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n) return;
    float acc = 0.0f;
    for (int j = 0; j < out_features; ++j)
        acc += dY[i * out_features + j] * W[j * in_features + k];
    if (i * in_features + k < n * in_features) dX[i * in_features + k] = acc;
}
