%%cuda saxpy block=256 grid=24
// expect: half
// planted bug: the result is rounded to float16 precision (11 significant bits)
__device__ float round_to_half_precision(float v) {
    int bits = __float_as_int(v);
    bits = (bits + 0x1000) & ~0x1FFF;
    return __int_as_float(bits);
}
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = round_to_half_precision(alpha * x[i] + y[i]);
    }
}
