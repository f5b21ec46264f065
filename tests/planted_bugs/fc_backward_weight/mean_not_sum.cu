// %%cuda fc_backward_weight block_x=16 block_y=16
// Bug: divides by n (the mean over the minibatch) although dY already carries the loss's 1/n.
// Expect: rejected, wrong_result
__global__ void fc_backward_weight(const float* dY, const float* X, float* dW, int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (j >= out_features || k >= in_features) return;
    float acc = 0.0f;
    for (int i = 0; i < n; ++i)
        acc += dY[i * out_features + j] * X[i * in_features + k];
    dW[j * in_features + k] = acc / n;
}
