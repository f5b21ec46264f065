%%cuda reduce_sum block=256 grid=32
// expect: half
// planted bug: partial sums are rounded to float16 precision (11 significant bits)
__device__ float round_to_half_precision(float v) {
    int bits = __float_as_int(v);
    bits = (bits + 0x1000) & ~0x1FFF;
    return __int_as_float(bits);
}
__global__ void reduce_sum(const float* x, float* out, int n) {
    extern __shared__ float partial[];
    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        sum = round_to_half_precision(sum + x[i]);
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] = round_to_half_precision(partial[threadIdx.x] + partial[threadIdx.x + stride]);
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}
