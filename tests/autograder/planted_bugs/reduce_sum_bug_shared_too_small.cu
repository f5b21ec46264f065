%%cuda reduce_sum block=256 grid=32 shared=512
// expect: shared=.*(smaller|too small)|dynamic shared memory
// planted bug: 512 bytes of dynamic shared memory hold 128 floats, the block has 256 threads
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
