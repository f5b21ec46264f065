%%cuda reduce_sum block=96 grid=32
// expect: power of two
// planted bug: a tree reduction halving blockDim.x = 96 (48, 24, 12, 6, 3, 1) drops the odd element at 3 -> 1
__global__ void reduce_sum(const float* x, float* out, int n) {
    extern __shared__ float partial[];
    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        sum += x[i];
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}
