// %%cuda capsule_grad_weight block=256 grid=64
// Bug: a grid-stride loop over (sample, weight) pairs where each pair adds into grad_W with a plain +=: a race between threads of different samples, on top of a missing zeroing.
// Expect: rejected, race
// Feedback: race on global memory
__global__ void capsule_grad_weight(const float* grad_u_hat, const float* u, float* grad_W, int batch, int in_caps, int in_dim, int out_caps, int out_dim)
{
    long long row = (long long)out_caps * out_dim;
    long long n = (long long)in_caps * row * in_dim;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n * batch; e += (long long)gridDim.x * blockDim.x) {
        long long idx = e % n, b = e / n;
        long long k = idx % in_dim;
        long long r = (idx / in_dim) % row;
        long long i = idx / (row * in_dim);
        if (b == 0) grad_W[idx] = 0.0f;
        grad_W[idx] += grad_u_hat[(b * in_caps + i) * row + r] * u[(b * in_caps + i) * in_dim + k];
    }
}
