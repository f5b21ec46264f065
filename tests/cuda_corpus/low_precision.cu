// Half-precision and bfloat16 kernels in the style of mixed-precision training code:
// 16-bit storage, float accumulation.  Run as written by tests/test_cuda_corpus.py.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef __half floatX;

__global__ void half_axpy(int n, __half a, const __half* x, __half* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __hfma(a, x[i], y[i]);
}

__global__ void half2_add(const half2* a, const half2* b, half2* c, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n2) c[i] = __hadd2(a[i], b[i]);
}

__global__ void float_to_half(const float* x, floatX* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(x[i]);
}

__global__ void half_to_float(const half* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __half2float(x[i]);
}

__global__ void half_relu(const __half* x, __half* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __hgt(x[i], __float2half(0.0f)) ? x[i] : __float2half(0.0f);
}

__global__ void half_dot(const __half* a, const __half* b, float* out, int n) {
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        acc += __half2float(a[i]) * __half2float(b[i]);
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if (threadIdx.x % 32 == 0) atomicAdd(out, acc);
}

__global__ void bf16_to_float(const __nv_bfloat16* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __bfloat162float(x[i]);
}

__global__ void bf16_gelu(const nv_bfloat16* x, nv_bfloat16* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = __bfloat162float(x[i]);
        y[i] = __float2bfloat16(0.5f * v * (1.0f + erff(v * 0.70710678f)));
    }
}

__global__ void bf16_matmul(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += __bfloat162float(A[row * K + k]) * __bfloat162float(B[k * N + col]);
        C[row * N + col] = acc;
    }
}

__global__ void half2_scale_sum(const __half2* x, float* out, float s, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n2) {
        float2 v = __half22float2(x[i]);
        atomicAdd(out, s * (v.x + v.y));
    }
}
