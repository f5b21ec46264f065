// %%cuda reduce_sum block=128 shared=0
// Also correct, only slow: one atomicAdd per element; its float32 rounding must still be within tolerance.
// Expect: accepted
// gpu-timing-size: float32|rounding|precision|wrong
// (on a GPU it is also timed at n = 2**26 + 3, where one float32 total of that many
// values is far off: that size counts as one more shape and costs the speed points)
__global__ void reduce_sum(const float* x, int incx, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i * incx]);
}
