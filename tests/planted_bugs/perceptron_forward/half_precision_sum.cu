// %%cuda perceptron_forward block=128
// Bug: the weighted sum is accumulated in half precision (11 significant bits).
// Expect: rejected, wrong_result
__device__ float to_half_precision(float v)
{
    unsigned int u = __float_as_uint(v);
    return __uint_as_float((u + 0x1000u) & ~0x1FFFu);   // keep 10 mantissa bits, as float16 does
}

__global__ void perceptron_forward(const float* x, const float* params, float* y, int n, int d)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float z = to_half_precision(params[d]);
    for (int j = 0; j < d; ++j)
        z = to_half_precision(z + params[j] * x[i * d + j]);
    y[i] = 1.0f / (1.0f + expf(-z));
}
