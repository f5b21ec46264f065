%%cuda saxpy block=256 grid=24
// honest: grid-stride loop, any grid covers any n
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = alpha * x[i] + y[i];
    }
}
