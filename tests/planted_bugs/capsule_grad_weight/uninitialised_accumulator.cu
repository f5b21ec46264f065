// %%cuda capsule_grad_weight block=256
// Bug: accumulates into grad_W without setting it to zero first.
// Expect: rejected, wrong_result
__global__ void capsule_grad_weight(const float* grad_u_hat, const float* u, float* grad_W, int batch, int in_caps, int in_dim, int out_caps, int out_dim)
{
    long long row = (long long)out_caps * out_dim;
    long long n = (long long)in_caps * row * in_dim;
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= n) return;
    long long k = idx % in_dim;
    long long r = (idx / in_dim) % row;
    long long i = idx / (row * in_dim);
    for (long long b = 0; b < batch; ++b)
        grad_W[idx] += grad_u_hat[(b * in_caps + i) * row + r] * u[(b * in_caps + i) * in_dim + k];
}
