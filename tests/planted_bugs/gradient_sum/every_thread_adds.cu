// %%cuda gradient_sum block=256
// Bug: every thread adds its gradient into total[j] with a plain +=: threads of a block race on it.
// Expect: rejected, race
// Feedback: race on global memory
__global__ void gradient_sum(const float* grads, float* total, int n, int k)
{
    int j = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        total[j] += grads[i * k + j];
}
