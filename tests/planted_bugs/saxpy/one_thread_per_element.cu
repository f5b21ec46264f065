// %%cuda saxpy block=128
// Also correct: one thread per element with a bounds check, grid = ceil(n / block) by default.
// Expect: accepted
__global__ void saxpy(int n, float alpha, const float* __restrict__ x, int incx, float* __restrict__ y, int incy) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i * incy] = alpha * x[i * incx] + y[i * incy];
}
