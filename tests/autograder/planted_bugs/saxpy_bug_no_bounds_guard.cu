%%cuda saxpy block=256
// expect: bounds
// planted bug: no `if (i < n)`; the last block writes past the end of y
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = alpha * x[i] + y[i];
}
