// %%cuda perceptron_forward block=128
// Bug: no bounds check; the threads of the last block past n read and write out of bounds.
// Expect: rejected, out_of_bounds
__global__ void perceptron_forward(const float* x, const float* params, float* y, int n, int d)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float z = params[d];
    for (int j = 0; j < d; ++j)
        z += params[j] * x[i * d + j];
    y[i] = 1.0f / (1.0f + expf(-z));
}
