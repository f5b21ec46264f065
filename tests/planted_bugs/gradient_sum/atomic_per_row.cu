// %%cuda gradient_sum block=256 grid_y=1
// Not a bug: the atomic version (one thread per row, k atomicAdds each) is correct, only slow.
// Expect: accepted
// The hidden tests must accept it.
__global__ void gradient_sum(const float* grads, float* total, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (int j = 0; j < k; ++j)
        atomicAdd(&total[j], grads[i * k + j]);
}
