%%cuda saxpy block=256 grid=64
// expect: visible
// planted bug: no grid-stride loop; 64 blocks of 256 threads cover n <= 16384 (every visible size) only
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i] + y[i];
}
