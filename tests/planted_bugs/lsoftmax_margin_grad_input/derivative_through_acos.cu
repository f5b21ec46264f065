// %%cuda lsoftmax_margin_grad_input block=128
// Bug: psi' = (-1)^k m sin(m theta) / sin(theta) with theta = acos(c): 0/0 at c = +-1.
// Expect: rejected, wrong_result
__global__ void lsoftmax_margin_grad_input(const float* grad_target, const float* X, const float* W, const int* labels, float* grad_x, int batch, int dim, int classes, int m, float lam)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= batch) return;
    const float* x = X + (long long)i * dim;
    const float* w = W + (long long)labels[i] * dim;
    float xw = 0.0f, xx = 0.0f, ww = 0.0f;
    for (int d = 0; d < dim; ++d) { xw += x[d] * w[d]; xx += x[d] * x[d]; ww += w[d] * w[d]; }
    float a = sqrtf(ww), b = sqrtf(xx);
    float c = xw / (fmaxf(a, 1e-12f) * fmaxf(b, 1e-12f));
    c = fminf(1.0f, fmaxf(-1.0f, c));
    float t0 = 1.0f, t1 = c, u0 = 0.0f, u1 = 1.0f;
    for (int p = 1; p < m; ++p) {
        float t2 = 2.0f * c * t1 - t0; t0 = t1; t1 = t2;
        float u2 = 2.0f * c * u1 - u0; u0 = u1; u1 = u2;
    }
    int k = 0;
    for (int q = 1; q < m; ++q) k += c < cospif((float)q / (float)m);
    float sign = (k & 1) ? -1.0f : 1.0f;
    float theta = acosf(c);
    float psi = sign * t1 - 2.0f * k, dpsi = sign * m * sinf(m * theta) / sinf(theta);
    float coef_w = (lam + dpsi) / (1.0f + lam);
    float coef_x = a / fmaxf(b, 1e-12f) * (psi - c * dpsi) / (1.0f + lam);
    float g = grad_target[i];
    for (int d = 0; d < dim; ++d) grad_x[(long long)i * dim + d] = g * (coef_w * w[d] + coef_x * x[d]);
}
