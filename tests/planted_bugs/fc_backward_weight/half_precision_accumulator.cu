// %%cuda fc_backward_weight block_x=16 block_y=16
// Bug: the sum over the minibatch is rounded to half precision (11 significant bits) at every step.
// Expect: rejected, wrong_result
__device__ float to_half_precision(float v)
{
    unsigned int u = __float_as_uint(v);
    return __uint_as_float((u + 0x1000u) & ~0x1FFFu);   // keep 10 mantissa bits, as float16 does
}

__global__ void fc_backward_weight(const float* dY, const float* X, float* dW, int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (j >= out_features || k >= in_features) return;
    float acc = 0.0f;
    for (int i = 0; i < n; ++i)
        acc = to_half_precision(acc + dY[i * out_features + j] * X[i * in_features + k]);
    dW[j * in_features + k] = acc;
}
