// %%cuda mv_faster block=256 rows=8
// the accumulator is never initialised
// Expect: rejected, wrong_result
__global__ void mv_faster(int M, int K, const float* A, const float* x, float* C)
{
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= M) return;  // the whole warp leaves together: the shuffles below stay complete
    const float* a = A + (long long)row * K;
    float sum;
    for (int k = lane; k < K; k += 32) sum += a[k] * x[k];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) C[row] = sum;
}
