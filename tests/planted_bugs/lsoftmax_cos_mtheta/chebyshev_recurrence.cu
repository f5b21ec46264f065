// %%cuda lsoftmax_cos_mtheta block=128
// Also right: T_m(c) by the recurrence T_{n+1} = 2c T_n - T_{n-1}, one thread per value.
// Expect: accepted
__global__ void lsoftmax_cos_mtheta(const float* cos_theta, float* cos_mtheta, int* k, int n, int m)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float c = fminf(1.0f, fmaxf(-1.0f, cos_theta[i]));
    float t0 = 1.0f, t1 = c;
    for (int p = 1; p < m; ++p) { float t2 = 2.0f * c * t1 - t0; t0 = t1; t1 = t2; }
    int kk = 0;
    for (int j = 1; j < m; ++j) kk += c < cospif((float)j / (float)m);
    cos_mtheta[i] = t1;
    k[i] = kk;
}
