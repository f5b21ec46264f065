// %%cuda mv_faster block=128 rows=1
// the block tree without barriers between its levels: a race
// Expect: rejected, race
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
    }
    if (threadIdx.x == 0) C[row] = partial[0];
}
