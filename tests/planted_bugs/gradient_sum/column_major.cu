// %%cuda gradient_sum block=256
// Bug: reads grads as if stored column by column (grads[j * n + i]).
// Expect: rejected, wrong_result
__global__ void gradient_sum(const float* grads, float* total, int n, int k)
{
    __shared__ float partial[256];
    int j = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = (i < n) ? grads[j * n + i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(&total[j], partial[0]);
}
