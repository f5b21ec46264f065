%%cuda reduce_sum block=256 grid=64
// expect: no grid-stride loop
// planted bug: no grid-stride loop; 64 blocks of 256 threads cover n <= 16384 (every fixed visible size) only; check() adds one just past that pass
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
