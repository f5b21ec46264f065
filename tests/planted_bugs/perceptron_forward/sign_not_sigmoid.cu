// %%cuda perceptron_forward block=128
// Bug: the step function (0 or 1) instead of the sigmoid.
// Expect: rejected, wrong_result
__global__ void perceptron_forward(const float* x, const float* params, float* y, int n, int d)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float z = params[d];
    for (int j = 0; j < d; ++j)
        z += params[j] * x[i * d + j];
    y[i] = z > 0.0f ? 1.0f : 0.0f;
}
