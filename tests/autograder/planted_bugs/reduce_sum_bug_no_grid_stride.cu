%%cuda reduce_sum block=256 grid=1056 shared=1024
// expect: not added|grid-stride
// planted bug: one element per thread, no grid-stride loop: right while n <= grid x block = 270336 only
__global__ void reduce_sum(const float* x, float* out, int n) {
    extern __shared__ float partial[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}
