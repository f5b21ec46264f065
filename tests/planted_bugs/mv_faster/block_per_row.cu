// %%cuda mv_faster block=256 rows=1
// Also correct: one block per row, a strided sum per thread and a shared-memory tree per vector (the row re-read for each vector, from the cache).
// Expect: accepted
__global__ void mv_faster(int M, int K, int N, const float* A, const float* x, float* C)
{
    __shared__ float partial[1024];
    const int row = blockIdx.x;
    for (int n = 0; n < N; ++n) {
        float s = 0.0f;
        for (int k = threadIdx.x; k < K; k += blockDim.x) s += A[(size_t)row * K + k] * x[(size_t)n * K + k];
        partial[threadIdx.x] = s;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
            __syncthreads();
        }
        if (threadIdx.x == 0) C[(size_t)n * M + row] = partial[0];
        __syncthreads();  // partial[0] read before the next vector overwrites it
    }
}
