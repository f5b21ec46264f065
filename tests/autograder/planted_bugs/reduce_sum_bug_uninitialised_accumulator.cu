%%cuda reduce_sum block=256 grid=32
// expect: uninitiali|NaN|never written|read before
// planted bug: each thread adds into its shared-memory slot, which nobody set to zero first
__global__ void reduce_sum(const float* x, float* out, int n) {
    __shared__ float partial[256];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        partial[threadIdx.x] += x[i];
    }
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}
