%%cuda saxpy block=256 grid=24
// expect: input
// planted bug: writes into its input x (casting away const)
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    float* xw = (float*)x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = alpha * x[i] + y[i];
        xw[i] = 0.0f;
    }
}
