// %%cuda mv_faster block=256 rows=8
// no row guard: the warps past the last row read and write out of bounds
// Expect: rejected, out_of_bounds
__global__ void mv_faster(int M, int K, const float* A, const float* x, float* C)
{
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const float* a = A + (long long)row * K;
    float sum = 0.0f;
    for (int k = lane; k < K; k += 32) sum += a[k] * x[k];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) C[row] = sum;
}
