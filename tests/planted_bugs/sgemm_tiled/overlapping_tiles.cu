// %%cuda sgemm_tiled tile_m=32 tile_n=32
// Bug: blocks step by TILE - 1 rows and columns, so neighbouring output tiles overlap (and the last rows are never computed).
// Expect: rejected, race
// Feedback: race on global memory
#define TILE 32
__global__ void sgemm_tiled(int M, int N, int K, const float* A, const float* B, float* C)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * (TILE - 1) + ty, j = blockIdx.x * (TILE - 1) + tx;
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
