// %%cuda fc_backward_weight block_x=16 block_y=16
// Bug: the outer product of the first sample only, not summed over the minibatch.
// Expect: rejected, wrong_result
__global__ void fc_backward_weight(const float* dY, const float* X, float* dW, int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (j >= out_features || k >= in_features) return;
    dW[j * in_features + k] = dY[j] * X[k];
}
