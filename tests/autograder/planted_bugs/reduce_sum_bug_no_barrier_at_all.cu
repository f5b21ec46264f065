%%cuda reduce_sum block=256 grid=32
// expect: __syncthreads
// planted bug: no __syncthreads() anywhere: the tree reads partial sums other threads have not written yet
__global__ void reduce_sum(const float* x, float* out, int n) {
    extern __shared__ float partial[];
    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        sum += x[i];
    }
    partial[threadIdx.x] = sum;
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}
