%%cuda saxpy block=256 grid=24
// expect: visible
// planted bug: a size limit that only the visible sizes stay under
#define MAX_N 16384
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    int m = n < MAX_N ? n : MAX_N;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += blockDim.x * gridDim.x) {
        y[i] = alpha * x[i] + y[i];
    }
}
