// %%cuda lsoftmax_cos_mtheta block=256 grid=16
// Bug: the (-1)^n of the binomial expansion is missing.
// Expect: rejected, wrong_result
__global__ void lsoftmax_cos_mtheta(const float* cos_theta, float* cos_mtheta, int* k, int n, int m)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        float c = fminf(1.0f, fmaxf(-1.0f, cos_theta[i]));
        float s2 = (1.0f - c) * (1.0f + c);
        float sum = 0.0f, binom = 1.0f, sign = 1.0f, s2n = 1.0f;
        for (int p = 0; 2 * p <= m; ++p) {
            float cpow = 1.0f;
            for (int q = 0; q < m - 2 * p; ++q) cpow *= c;
            sum += sign * binom * cpow * s2n;
            binom = binom * (float)((m - 2 * p) * (m - 2 * p - 1)) / (float)((2 * p + 1) * (2 * p + 2));
            
            s2n *= s2;
        }
        int kk = 0;
        for (int j = 1; j < m; ++j) kk += c < cospif((float)j / (float)m);
        cos_mtheta[i] = sum;
        k[i] = kk;
    }
}
