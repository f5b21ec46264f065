// %%cuda sgemm_tiled tile_m=16 tile_n=16
// Also correct: 16x16 tiles, with the epilogue written as a branch on beta.
// Expect: accepted
#define T 16
__global__ void sgemm_tiled(int M, int N, int K, float alpha, const float* A, const float* B,
                            float beta, float* C)
{
    __shared__ float sa[T][T];
    __shared__ float sb[T][T];
    int x = threadIdx.x, y = threadIdx.y;
    int r = blockIdx.y * T + y, c = blockIdx.x * T + x;
    float v = 0.0f;
    for (int k = 0; k < K; k += T) {
        sa[y][x] = (r < M && k + x < K) ? A[(size_t)r * K + k + x] : 0.0f;
        sb[y][x] = (k + y < K && c < N) ? B[(size_t)(k + y) * N + c] : 0.0f;
        __syncthreads();
        for (int q = 0; q < T; ++q) v += sa[y][q] * sb[q][x];
        __syncthreads();
    }
    if (r >= M || c >= N) return;  // after the last barrier
    size_t at = (size_t)r * N + c;
    if (beta != 0.0f) C[at] = alpha * v + beta * C[at];
    else C[at] = alpha * v;
}
