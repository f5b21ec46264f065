%%cuda saxpy block=256
// expect: out-of-bounds write .* at element -1
// expect-gpu: before the start of 'y'
// planted bug: every thread writes one element too early; thread 0 writes y[-1]
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i - 1] = alpha * x[i] + y[i];
}
