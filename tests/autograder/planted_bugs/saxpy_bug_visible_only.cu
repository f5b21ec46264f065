%%cuda saxpy block=256 grid=64
// expect: no grid-stride loop
// planted bug: no grid-stride loop; 64 blocks of 256 threads cover n <= 16384 (every fixed visible size) only; check() adds one just past that pass
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i] + y[i];
}
