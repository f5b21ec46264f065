// %%cuda fc_backward_weight block_x=16 block_y=16
// Bug: no bounds check, so threads past the edges of dW read and write out of bounds.
// Expect: rejected, out_of_bounds
__global__ void fc_backward_weight(const float* dY, const float* X, float* dW, int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    float acc = 0.0f;
    for (int i = 0; i < n; ++i)
        acc += dY[i * out_features + j] * X[i * in_features + k];
    dW[j * in_features + k] = acc;
}
