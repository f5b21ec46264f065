// %%cuda sgemm_register_tiles tile_m=64 tile_n=64 block_x=128
// Also correct: 64 x 64 tiles of 128 threads, each 8 x 4 results; B's values kept in registers per k, A's read as used.
// Expect: accepted
#define TBM 64
#define TBN 64
#define TBK 16
__global__ void sgemm_register_tiles(int M, int N, int K, const float* A, const float* B, const float* bias,
                                     float* C, int epilogue)
{
    __shared__ float a_k[TBK][TBM];       // k-major
    __shared__ float b_k[TBK][TBN];
    int t = threadIdx.x;
    int r0 = (t / 16) * 8, c0 = (t % 16) * 4;      // 8 rows x 4 columns a thread
    int bi = blockIdx.y * TBM, bj = blockIdx.x * TBN;
    float v[8][4];
    for (int r = 0; r < 8; ++r)
        for (int c = 0; c < 4; ++c) v[r][c] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TBK) {
        for (int e = t; e < TBM * TBK; e += 128) {
            int m = e / TBK, k = e % TBK;
            a_k[k][m] = (bi + m < M && k0 + k < K) ? A[(size_t)(bi + m) * K + k0 + k] : 0.0f;
            int kk = e / TBN, n = e % TBN;
            b_k[kk][n] = (k0 + kk < K && bj + n < N) ? B[(size_t)(k0 + kk) * N + bj + n] : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < TBK; ++k) {
            float b0 = b_k[k][c0], b1 = b_k[k][c0 + 1], b2 = b_k[k][c0 + 2], b3 = b_k[k][c0 + 3];
            for (int r = 0; r < 8; ++r) {
                float a = a_k[k][r0 + r];
                v[r][0] += a * b0;
                v[r][1] += a * b1;
                v[r][2] += a * b2;
                v[r][3] += a * b3;
            }
        }
        __syncthreads();
    }
    for (int r = 0; r < 8; ++r) {
        int i = bi + r0 + r;
        for (int c = 0; c < 4; ++c) {
            int j = bj + c0 + c;
            if (i < M && j < N) {
                float x = v[r][c];
                if (epilogue & 1) x += bias[j];
                if (epilogue & 2) x = x > 0.0f ? x : 0.0f;
                C[(size_t)i * N + j] = x;
            }
        }
    }
}
