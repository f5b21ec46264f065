// %%cuda mv_faster block=256 rows=8
// lane 0 writes its own partial sum: no reduction across the warp
// Expect: rejected, wrong_result
__global__ void mv_faster(int M, int K, const float* A, const float* x, float* C)
{
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= M) return;  // the whole warp leaves together: the shuffles below stay complete
    const float* a = A + (long long)row * K;
    float sum = 0.0f;
    for (int k = lane; k < K; k += 32) sum += a[k] * x[k];
    if (lane == 0) C[row] = sum;
}
