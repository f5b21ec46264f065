// %%cuda conv2d_gemm_forward tile_m=32 tile_n=32
// Bug: reads past the filter rows and the unrolled matrix when CKK is no multiple of the tile.
// Expect: rejected, out_of_bounds
#define TILE 32
__global__ void conv2d_gemm_forward(const float* Wmat, const float* U, float* Y, int n0, int M, int CKK, int P)
{
    __shared__ float Ws[TILE][TILE];
    __shared__ float Us[TILE][TILE];
    const float* u = U + (long long)blockIdx.z * CKK * P;           // this sample's unrolled matrix
    float* y = Y + (long long)(n0 + blockIdx.z) * M * P;            // and its output maps
    int tx = threadIdx.x, ty = threadIdx.y;
    int m = blockIdx.y * TILE + ty, p = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < CKK; k0 += TILE) {
        Ws[ty][tx] = (m < M) ? Wmat[m * CKK + k0 + tx] : 0.0f;
        Us[ty][tx] = (p < P) ? u[(k0 + ty) * P + p] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            acc += Ws[ty][k] * Us[k][tx];
        __syncthreads();
    }
    if (m < M && p < P) y[m * P + p] = acc;
}
