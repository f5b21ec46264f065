// %%cuda gradient_sum block=256
// Bug: thread 0 of each block adds the block's partial sum with a plain += instead of atomicAdd: blocks race on total[j].
// Expect: rejected, race
// Feedback: race on global memory
__global__ void gradient_sum(const float* grads, float* total, int n, int k)
{
    __shared__ float partial[256];
    int j = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = (i < n) ? grads[i * k + j] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        total[j] += partial[0];
}
