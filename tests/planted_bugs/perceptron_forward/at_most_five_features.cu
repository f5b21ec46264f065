// %%cuda perceptron_forward block=128
// Bug: right only for the visible shapes: it reads at most 5 features per sample.
// Expect: rejected, wrong_result
__global__ void perceptron_forward(const float* x, const float* params, float* y, int n, int d)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float z = params[d];
    for (int j = 0; j < d && j < 5; ++j)
        z += params[j] * x[i * d + j];
    y[i] = 1.0f / (1.0f + expf(-z));
}
