// %%cuda perceptron_forward block=128
// Bug: the sample index ignores the block index, so only the first block's samples are computed.
// Expect: rejected, race
// Feedback: race on global memory.*index ranges overlap
__global__ void perceptron_forward(const float* x, const float* params, float* y, int n, int d)
{
    int i = threadIdx.x;
    if (i >= n) return;
    float z = params[d];
    for (int j = 0; j < d; ++j)
        z += params[j] * x[i * d + j];
    y[i] = 1.0f / (1.0f + expf(-z));
}
