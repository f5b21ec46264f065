// %%cuda capsule_predict block=256
// Bug: j and d are recovered with out_caps and out_dim swapped (right only when out_caps == out_dim).
// Expect: rejected, out_of_bounds
__global__ void capsule_predict(const float* u, const float* W, float* u_hat, int batch, int in_caps, int in_dim, int out_caps, int out_dim)
{
    long long n = (long long)batch * in_caps * out_caps * out_dim;
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= n) return;
    long long d = idx % out_caps;
    long long j = (idx / out_caps) % out_dim;
    long long i = (idx / ((long long)out_dim * out_caps)) % in_caps;
    long long b = idx / ((long long)out_dim * out_caps * in_caps);
    const float* w = W + ((i * out_caps + j) * out_dim + d) * in_dim;
    const float* x = u + (b * in_caps + i) * in_dim;
    float sum = 0.0f;
    for (int k = 0; k < in_dim; ++k) sum += w[k] * x[k];
    u_hat[idx] = sum;
}
