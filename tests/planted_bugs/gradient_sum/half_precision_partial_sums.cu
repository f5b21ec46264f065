// %%cuda gradient_sum block=256
// Bug: the partial sums are rounded to half precision (11 significant bits) at every step of the tree.
// Expect: rejected, wrong_result
__device__ float to_half_precision(float v)
{
    unsigned int u = __float_as_uint(v);
    return __uint_as_float((u + 0x1000u) & ~0x1FFFu);   // keep 10 mantissa bits, as float16 does
}

__global__ void gradient_sum(const float* grads, float* total, int n, int k)
{
    __shared__ float partial[256];
    int j = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = (i < n) ? to_half_precision(grads[i * k + j]) : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            partial[threadIdx.x] = to_half_precision(partial[threadIdx.x] + partial[threadIdx.x + stride]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(&total[j], partial[0]);
}
