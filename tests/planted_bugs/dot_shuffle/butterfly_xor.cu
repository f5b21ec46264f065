// %%cuda dot_shuffle block=128
// Also correct: a butterfly (__shfl_xor_sync), after which every lane holds the sum; one atomicAdd per warp, default grid.
// Expect: accepted
__global__ void dot_shuffle(const float* x, const float* y, float* out, int n) {
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        v = fmaf(x[i], y[i], v);
    }
    for (int m = 16; m > 0; m /= 2) {
        v += __shfl_xor_sync(0xffffffffu, v, m);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(out, v);
    }
}
