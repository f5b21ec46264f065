// kernels/dense/layernorm.cu -- layer normalisation over the rows of an n-by-c matrix (one row per sample).
//
// For a row x of c features, with the learned per-feature scale gamma and shift beta:
//   mu = sum_j x_j / c,   var = sum_j (x_j - mu)^2 / c,   y_j = (x_j - mu) / sqrt(var + eps) * gamma_j + beta_j.
// eps keeps the division finite for a row whose features are all equal (var = 0).
//
// Versions, in teaching order:
//   1. layernorm_forward    one thread per row, two passes for the statistics: the mean first, then the
//                           variance around it. The shortcut var = mean(x^2) - mu^2 needs one pass less, but
//                           for a row whose mean is large against its spread the two terms are nearly equal
//                           and their float32 difference is mostly rounding (it can even come out negative).

// 1. The mean, then the spread around it, then the normalised row: the row is read three times.
__global__ void layernorm_forward(const float* X, const float* gamma, const float* beta, float* Y, int n, int c,
                                  float eps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* x = X + (size_t)i * c;
    float mu = 0.0f;
    for (int j = 0; j < c; ++j) mu += x[j];
    mu /= c;
    float var = 0.0f;
    for (int j = 0; j < c; ++j) var += (x[j] - mu) * (x[j] - mu);
    float inv_std = rsqrtf(var / c + eps);
    for (int j = 0; j < c; ++j) Y[(size_t)i * c + j] = (x[j] - mu) * inv_std * gamma[j] + beta[j];
}
