// %%cuda conv2d_gemm_forward tile_m=16 tile_n=16
// Also correct: 16x16 tiles, and the output pixel's window worked out per tap.
// Expect: accepted
#define T 16
__global__ void conv2d_gemm_forward(const float* X, const float* Wmat, float* Y, int N, int C, int H,
                                    int W, int M, int K, int pad, int stride, int dilation,
                                    int H_out, int W_out)
{
    __shared__ float sw[T][T];
    __shared__ float su[T][T];
    int tx = threadIdx.x, ty = threadIdx.y, n = blockIdx.z;
    int P = H_out * W_out, KK = K * K, CKK = C * KK;
    int m = blockIdx.y * T + ty, p = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < CKK; k0 += T) {
        int kw = k0 + tx, ku = k0 + ty;
        sw[ty][tx] = (m < M && kw < CKK) ? Wmat[(size_t)m * CKK + kw] : 0.0f;
        float u = 0.0f;
        if (ku < CKK && p < P) {
            int c = ku / KK, r = ku % KK;
            int h = (p / W_out) * stride - pad + (r / K) * dilation;
            int w = (p % W_out) * stride - pad + (r % K) * dilation;
            if (h >= 0 && h < H && w >= 0 && w < W) u = X[(((size_t)n * C + c) * H + h) * W + w];
        }
        su[ty][tx] = u;
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += sw[ty][k] * su[k][tx];
        __syncthreads();
    }
    if (m < M && p < P) Y[((size_t)n * M + m) * P + p] = acc;
}
