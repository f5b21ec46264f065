%%cuda saxpy block=256 grid=24
// expect: race on global memory.*blockDim.x \* gridDim.x
// expect-gpu: .
// planted bug: the grid-stride loop steps by blockDim.x, so the blocks' index ranges overlap and elements are updated more than once
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x) {
        y[i] = alpha * x[i] + y[i];
    }
}
