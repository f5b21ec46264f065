%%cuda saxpy block=256 grid=8
// expect: no __global__ function 'saxpy'.*sxpy
// planted bug: the kernel is called sxpy; the feedback must name the name, not say it does not compile
__global__ void sxpy(int n, float alpha, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = alpha * x[i] + y[i];
    }
}
