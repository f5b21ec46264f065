// %%cuda capsule_predict block=160
// Also correct (for in_dim up to 64, the size of its shared copy): one block per (sample, input capsule), the input capsule staged in shared memory, the outputs strided by the block; 64-bit offsets where they reach the arrays.
// Expect: accepted
__global__ void capsule_predict(const float* u, const float* W, float* u_hat,
                                int batch, int in_caps, int in_dim, int out_caps, int out_dim, int types)
{
    __shared__ float x[64];
    const int row = out_caps * out_dim;
    for (long long capsule = blockIdx.x; capsule < (long long)batch * in_caps; capsule += gridDim.x) {
        __syncthreads();  // the previous capsule's readers are done with x
        for (int k = threadIdx.x; k < in_dim; k += blockDim.x) x[k] = u[capsule * in_dim + k];
        __syncthreads();
        const float* m = W + (size_t)(capsule % in_caps % types) * row * in_dim;
        float* out = u_hat + capsule * row;
        for (int r = threadIdx.x; r < row; r += blockDim.x) {
            float s = 0.0f;
            for (int k = 0; k < in_dim; ++k) s += m[(size_t)r * in_dim + k] * x[k];
            out[r] = s;
        }
    }
}
