%%cuda reduce_sum block=256 grid=32
// expect: race on global memory.*different blocks
// expect-gpu: race|not added|more than once|changed from one run
// planted bug: thread 0 of every block adds its block's sum with a plain += instead of atomicAdd
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
    if (threadIdx.x == 0) *out += partial[0];
}
