// %%cuda fc_backward_input block_x=16 block_y=16
// Bug: the loop over the outputs stops one short.
// Expect: rejected, wrong_result
__global__ void fc_backward_input(const float* dY, const float* W, float* dX, int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || k >= in_features) return;
    float acc = 0.0f;
    for (int j = 0; j < out_features - 1; ++j)
        acc += dY[i * out_features + j] * W[j * in_features + k];
    dX[i * in_features + k] = acc;
}
