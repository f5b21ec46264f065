// %%cuda gradient_sum block=256
// Bug: threads past n leave their shared slot unwritten, and the tree adds whatever it held.
// Expect: rejected, uninitialised_shared_memory
__global__ void gradient_sum(const float* grads, float* total, int n, int k)
{
    __shared__ float partial[256];
    int j = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) partial[threadIdx.x] = grads[i * k + j];
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(&total[j], partial[0]);
}
