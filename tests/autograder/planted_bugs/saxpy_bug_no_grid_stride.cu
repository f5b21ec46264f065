%%cuda saxpy block=256 grid=8
// expect: grid-stride
// planted bug: one element per thread and no loop: with grid=8 only the first 2048 elements are computed
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i] + y[i];
}
