// %%cuda perceptron_forward block=128
// Bug: reads x as if it were stored column by column (x[j * n + i]).
// Expect: rejected, wrong_result
__global__ void perceptron_forward(const float* x, const float* params, float* y, int n, int d)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float z = params[d];
    for (int j = 0; j < d; ++j)
        z += params[j] * x[j * n + i];
    y[i] = 1.0f / (1.0f + expf(-z));
}
