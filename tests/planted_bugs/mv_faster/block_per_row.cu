// %%cuda mv_faster block=128 rows=1
// correct: one block per row, a shared-memory tree over the block's partial sums
// Expect: accepted
__global__ void mv_faster(int M, int K, const float* A, const float* x, float* C)
{
    __shared__ float partial[1024];
    const int row = blockIdx.x;
    float sum = 0.0f;
    for (int k = threadIdx.x; k < K; k += blockDim.x) sum += A[(long long)row * K + k] * x[k];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) C[row] = partial[0];
}
