%%cuda saxpy block=256
// expect: 0
// planted bug: writes zeros
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.0f;
}
