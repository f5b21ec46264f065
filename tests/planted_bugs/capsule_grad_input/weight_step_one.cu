// %%cuda capsule_grad_input block=256
// Bug: steps through W by 1 instead of by in_dim (reads a row of W[i], not column k).
// Expect: rejected, wrong_result
__global__ void capsule_grad_input(const float* grad_u_hat, const float* W, float* grad_u, int batch, int in_caps, int in_dim, int out_caps, int out_dim)
{
    long long n = (long long)batch * in_caps * in_dim;
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= n) return;
    long long k = idx % in_dim;
    long long i = (idx / in_dim) % in_caps;
    long long b = idx / ((long long)in_dim * in_caps);
    long long row = (long long)out_caps * out_dim;
    const float* g = grad_u_hat + (b * in_caps + i) * row;
    const float* w = W + i * row * in_dim + k * row;
    float sum = 0.0f;
    for (long long r = 0; r < row; ++r) sum += w[r] * g[r];
    grad_u[idx] = sum;
}
