%%cuda reduce_sum block=256 grid=32
// expect: race on global memory.*same block
// expect-gpu: race|not added|more than once|changed from one run
// planted bug: every thread adds its grid-stride sum into *out with a plain +=
__global__ void reduce_sum(const float* x, float* out, int n) {
    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        sum += x[i];
    }
    *out += sum;
}
