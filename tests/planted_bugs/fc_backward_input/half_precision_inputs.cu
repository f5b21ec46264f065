// %%cuda fc_backward_input block_x=16 block_y=16
// Bug: dY and W are read as half precision (11 significant bits), as if stored in float16.
// Expect: rejected, wrong_result
__device__ float to_half_precision(float v)
{
    unsigned int u = __float_as_uint(v);
    return __uint_as_float((u + 0x1000u) & ~0x1FFFu);   // keep 10 mantissa bits, as float16 does
}

__global__ void fc_backward_input(const float* dY, const float* W, float* dX, int n, int in_features, int out_features)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || k >= in_features) return;
    float acc = 0.0f;
    for (int j = 0; j < out_features; ++j)
        acc += to_half_precision(dY[i * out_features + j]) * to_half_precision(W[j * in_features + k]);
    dX[i * in_features + k] = acc;
}
