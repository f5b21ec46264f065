// %%cuda capsule_grad_input block=256
// Bug: no bounds check: threads past the last element read and write out of bounds.
// Expect: rejected, out_of_bounds
__global__ void capsule_grad_input(const float* grad_u_hat, const float* W, float* grad_u, int batch, int in_caps, int in_dim, int out_caps, int out_dim)
{
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long k = idx % in_dim;
    long long i = (idx / in_dim) % in_caps;
    long long b = idx / ((long long)in_dim * in_caps);
    long long row = (long long)out_caps * out_dim;
    const float* g = grad_u_hat + (b * in_caps + i) * row;
    const float* w = W + i * row * in_dim + k;
    float sum = 0.0f;
    for (long long r = 0; r < row; ++r) sum += w[r * in_dim] * g[r];
    grad_u[idx] = sum;
}
