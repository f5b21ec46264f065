// %%cuda fc_backward_input block_x=16 block_y=16
// Bug: reads W as if it were in-by-out (W[k * out + j]): W is used where W^T belongs.
// Expect: rejected, wrong_result
__global__ void fc_backward_input(const float* dY, const float* W, float* dX, int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || k >= in_features) return;
    float acc = 0.0f;
    for (int j = 0; j < out_features; ++j)
        acc += dY[i * out_features + j] * W[k * out_features + j];
    dX[i * in_features + k] = acc;
}
