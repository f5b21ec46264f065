// %%cuda lsoftmax_cos_mtheta block=128
// Also right: theta from acosf of the clamped value, cos(m theta + alpha) directly, and k the multiples of pi that m theta + alpha is past (the inputs keep away from the thresholds, where acosf's rounding could move k).
// Expect: accepted
__global__ void lsoftmax_cos_mtheta(const float* cos_theta, float* cos_mtheta, int* k_out, int N, int m,
                                    float angle_margin)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float phi = m * acosf(fminf(1.0f, fmaxf(-1.0f, cos_theta[i]))) + angle_margin;
    int k = 0;
    for (int j = 1; j <= m; ++j) k += phi > j * 3.14159265f;
    cos_mtheta[i] = cosf(phi);
    k_out[i] = k;
}
