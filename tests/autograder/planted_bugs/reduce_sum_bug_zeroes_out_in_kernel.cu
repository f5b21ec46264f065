%%cuda reduce_sum block=256 grid=32
// expect: race on global memory.*updated atomically
// expect-gpu: race|not added|more than once|changed from one run
// planted bug: the first thread zeroes *out with a plain store while other blocks already add into it
__global__ void reduce_sum(const float* x, float* out, int n) {
    extern __shared__ float partial[];
    if (blockIdx.x == 0 && threadIdx.x == 0) *out = 0.0f;
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
