%%cuda saxpy block=256 grid=8
// expect: grid-stride step.*blockDim\.x \* gridDim\.x
// planted bug: the loop steps by one block (i += blockDim.x), so the blocks redo each other's elements
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x) {
        y[i] = alpha * x[i] + y[i];
    }
}
