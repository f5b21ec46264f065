// %%cuda capsule_predict block=256
// Bug: W is indexed as if it were [out_caps][out_dim][in_dim], shared by all input capsules.
// Expect: rejected, wrong_result
__global__ void capsule_predict(const float* u, const float* W, float* u_hat, int batch, int in_caps, int in_dim, int out_caps, int out_dim)
{
    long long n = (long long)batch * in_caps * out_caps * out_dim;
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= n) return;
    long long d = idx % out_dim;
    long long j = (idx / out_dim) % out_caps;
    long long i = (idx / ((long long)out_dim * out_caps)) % in_caps;
    long long b = idx / ((long long)out_dim * out_caps * in_caps);
    const float* w = W + (j * out_dim + d) * in_dim;
    const float* x = u + (b * in_caps + i) * in_dim;
    float sum = 0.0f;
    for (int k = 0; k < in_dim; ++k) sum += w[k] * x[k];
    u_hat[idx] = sum;
}
