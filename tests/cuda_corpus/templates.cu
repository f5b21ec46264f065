// Template kernels, launched by naming an instantiation: Kernel("sgemm<32, 32, 8>").
template <typename T, int BLOCK = 128>
__global__ void scale(const T* x, T* y, T s, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}

// a block computes a BM x BN tile of C, stepping through K by BK; blockDim is (BN, BM)
template <int BM, int BN, int BK>
__global__ void sgemm(int M, int N, int K, const float* A, const float* B, float* C) {
    __shared__ float As[BM][BK], Bs[BK][BN];
    int ty = threadIdx.y, tx = threadIdx.x;
    int row = blockIdx.y * BM + ty, col = blockIdx.x * BN + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int k = tx; k < BK; k += BN) As[ty][k] = (row < M && k0 + k < K) ? A[row * K + k0 + k] : 0.0f;
        for (int k = ty; k < BK; k += BM) Bs[k][tx] = (k0 + k < K && col < N) ? B[(k0 + k) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BK; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

template <typename T>
__device__ T warp_reduce(T v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

template <typename T, int THREADS>
__global__ void block_reduce(const T* x, T* out, int n) {
    __shared__ T partial[THREADS / 32];
    T v = 0;
    for (int i = blockIdx.x * THREADS + threadIdx.x; i < n; i += THREADS * gridDim.x) v += x[i];
    v = warp_reduce(v);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        T s = 0;
        for (int w = 0; w < THREADS / 32; ++w) s += partial[w];
        out[blockIdx.x] = s;
    }
}

namespace ops {
template <typename T>
__global__ void axpy(T a, const T* __restrict__ x, T* __restrict__ y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] += a * x[i];
}
}  // namespace ops
