// %%cuda capsule_grad_weight block=256
// Bug: no bounds check: threads past the last weight read and write out of bounds.
// Expect: rejected, out_of_bounds
__global__ void capsule_grad_weight(const float* grad_u_hat, const float* u, float* grad_W, int batch, int in_caps, int in_dim, int out_caps, int out_dim)
{
    long long row = (long long)out_caps * out_dim;
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long k = idx % in_dim;
    long long r = (idx / in_dim) % row;
    long long i = idx / (row * in_dim);
    float sum = 0.0f;
    for (long long b = 0; b < batch; ++b)
        sum += grad_u_hat[(b * in_caps + i) * row + r] * u[(b * in_caps + i) * in_dim + k];
    grad_W[idx] = sum;
}
