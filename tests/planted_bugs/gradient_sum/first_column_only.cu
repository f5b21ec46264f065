// %%cuda gradient_sum block=256 grid_y=1
// Bug: sums column 0 only (ignores blockIdx.y and k).
// Expect: rejected, wrong_result
__global__ void gradient_sum(const float* grads, float* total, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&total[0], grads[i * k]);
}
