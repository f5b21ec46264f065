// %%cuda perceptron_forward block=128
// Bug: the loop runs to j <= d, adding the bias times the next sample's first feature.
// Expect: rejected, wrong_result
__global__ void perceptron_forward(const float* x, const float* params, float* y, int n, int d)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float z = params[d];
    for (int j = 0; j <= d && i * d + j < n * d; ++j)
        z += params[j] * x[i * d + j];
    y[i] = 1.0f / (1.0f + expf(-z));
}
