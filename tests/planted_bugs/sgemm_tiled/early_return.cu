// %%cuda sgemm_tiled tile_m=32 tile_n=32
// Bug: threads outside C return before helping to load the tiles (and skip the barriers).
// Expect: rejected, barrier_divergence
#define TILE 32
__global__ void sgemm_tiled(int M, int N, int K, const float* A, const float* B, float* C)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * TILE + ty, j = blockIdx.x * TILE + tx;
    if (i >= M || j >= N) return;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (i < M && k0 + tx < K) ? A[i * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && j < N) ? B[(k0 + ty) * N + j] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (i < M && j < N) C[i * N + j] = acc;
}
