// kernels/dense/softmax.cu -- softmax over the rows of an n-by-c matrix of scores, and the cross-entropy loss.
//
// For scores z (one row per sample, one column per class) and the true class t of each sample:
//   p_j = exp(z_j) / sum_k exp(z_k),   loss = -log p_t = logsumexp(z) - z_t,
//   dloss/dz_j = p_j - [j == t]        (divided by n when the loss is the minibatch mean).
//
// Versions, in teaching order:
//   1. softmax_naive                     one thread per row, exp(z) straight away: exp overflows to inf for
//                                        z > 88 in float32 and the row becomes inf/inf = NaN.
//   2. softmax_stable                    subtracts the row maximum first: exp(z - max) <= 1, and at least one
//                                        term of the sum is 1, so neither overflow nor division by 0 can happen.
//                                        The result is the same because the factor exp(-max) cancels.
//   3. softmax_cross_entropy_forward     the stable softmax plus the loss of each row, computed as
//                                        logsumexp - z_t rather than -log(p_t), which would be -log(0) = inf
//                                        once p_t underflows.
//   4. softmax_cross_entropy_backward    dZ = (P - onehot(t)) / n, one thread per element: the gradient of the
//                                        mean loss, short because softmax and cross-entropy simplify together.

// 1. Mathematically right, numerically fragile.
__global__ void softmax_naive(const float* Z, float* P, int n, int c)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* z = Z + i * c;
    float sum = 0.0f;
    for (int j = 0; j < c; ++j) sum += expf(z[j]);
    for (int j = 0; j < c; ++j) P[i * c + j] = expf(z[j]) / sum;
}

// 2. Shift by the row maximum before exponentiating.
__global__ void softmax_stable(const float* Z, float* P, int n, int c)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* z = Z + i * c;
    float m = z[0];
    for (int j = 1; j < c; ++j) m = fmaxf(m, z[j]);
    float sum = 0.0f;
    for (int j = 0; j < c; ++j) sum += expf(z[j] - m);
    for (int j = 0; j < c; ++j) P[i * c + j] = expf(z[j] - m) / sum;
}

// 3. Softmax and per-sample loss in one pass over each row.  labels[i] is in 0..c-1.
__global__ void softmax_cross_entropy_forward(const float* Z, const int* labels, float* P, float* loss,
                                              int n, int c)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* z = Z + i * c;
    float m = z[0];
    for (int j = 1; j < c; ++j) m = fmaxf(m, z[j]);
    float sum = 0.0f;
    for (int j = 0; j < c; ++j) sum += expf(z[j] - m);
    for (int j = 0; j < c; ++j) P[i * c + j] = expf(z[j] - m) / sum;
    loss[i] = m + logf(sum) - z[labels[i]];      // logsumexp(z) - z_t
}

// 4. Gradient of the mean loss over the n samples with respect to the scores.
__global__ void softmax_cross_entropy_backward(const float* P, const int* labels, float* dZ, int n, int c)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * c) return;
    int i = idx / c, j = idx % c;
    dZ[idx] = (P[idx] - (j == labels[i] ? 1.0f : 0.0f)) / (float)n;
}
