%%cuda saxpy block=256 grid=8
// expect: grid-stride
// planted bug: the grid-stride step is one too long, so an element is skipped at every pass
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x + 1) {
        y[i] = alpha * x[i] + y[i];
    }
}
