// Kernels written the ways larger code bases write them: made by macros, inside
// namespaces, with template helpers, type aliases and launch bounds.
#include <stdint.h>
#include <ctime>

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define ELEMENTWISE(NAME, T, EXPR)                                        \
    __global__ void NAME(const T* __restrict__ x, T* __restrict__ y, int n) { \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                  \
        if (i < n) { T v = x[i]; y[i] = (EXPR); }                        \
    }

ELEMENTWISE(square_f32, float, v * v)
ELEMENTWISE(negate_f64, double, -v)
ELEMENTWISE(abs_i32, int, v < 0 ? -v : v)

#define BLOCK_SUM_KERNEL(NAME, T)                          \
__global__ void NAME(const T* x, T* out, int n) {          \
    __shared__ T partial[64];                              \
    int i = blockIdx.x * blockDim.x + threadIdx.x;         \
    partial[threadIdx.x] = i < n ? x[i] : (T)0;            \
    __syncthreads();                                       \
    if (threadIdx.x == 0) {                                \
        T s = 0;                                           \
        for (int k = 0; k < blockDim.x; ++k) s += partial[k]; \
        out[blockIdx.x] = s;                               \
    }                                                      \
}
BLOCK_SUM_KERNEL(block_sums_i64, long long)

template <typename T>
__device__ __forceinline__ T load_ro(const T* p) { return __ldg(p); }

template <int N>
__device__ float unrolled_dot(const float* a, const float* b) {
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) acc += a[k] * b[k];
    return acc;
}

namespace nn {
namespace activations {

__device__ inline float softplus(float v) { return v > 20.0f ? v : log1pf(expf(v)); }

__global__ void softplus_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = softplus(load_ro(&x[i]));
}

}  // namespace activations

__global__ void rows_dot8(const float* a, const float* b, float* y, int rows) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) y[r] = unrolled_dot<8>(a + 8 * r, b + 8 * r);
}

}  // namespace nn

struct Affine {
    float scale, shift;
    __device__ float operator()(float v) const { return scale * v + shift; }
};

__global__ void affine_struct_inside(const float* x, float* y, float scale, float shift, int n) {
    Affine f{scale, shift};
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = f(x[i]);
}

using u32 = uint32_t;
typedef unsigned int uint;

__global__ void xorshift_hash(const u32* seeds, uint* out, uint rounds, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 s = seeds[i];
    for (uint r = 0; r < rounds; ++r) { s ^= s << 13; s ^= s >> 17; s ^= s << 5; }
    out[i] = s;
}

__global__ void __launch_bounds__(128, 4) tiles_ceil_div(const float* x, float* y, int n, int per_thread) {
    int chunks = CEIL_DIV(n, per_thread);
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += blockDim.x * gridDim.x) {
        float acc = 0.0f;
        for (int k = c * per_thread; k < min(n, (c + 1) * per_thread); ++k) acc += x[k];
        y[c] = acc;
    }
}

__device__ int fib(int k) { return k < 2 ? k : fib(k - 1) + fib(k - 2); }

__global__ void recursive_device_function(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fib(i);
}

__global__ void warp_allreduce_xor(const float* x, float* y) {
    float v = x[threadIdx.x];
    for (int mask = 16; mask > 0; mask >>= 1) v += __shfl_xor_sync(0xffffffffu, v, mask);
    y[threadIdx.x] = v;
}

__global__ void warp_inclusive_scan(const int* x, int* y) {
    int v = x[threadIdx.x];
    for (int offset = 1; offset < 32; offset <<= 1) {
        int up = __shfl_up_sync(0xffffffffu, v, offset);
        if ((threadIdx.x & 31) >= offset) v += up;
    }
    y[threadIdx.x] = v;
}

__global__ void atomic_max_int(const int* x, int* best, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicMax(best, x[i]);
}

// the classic float max through atomicCAS on the bits
__device__ float atomic_max_float(float* address, float value) {
    int* bits = (int*)address;
    int old = *bits, assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) >= value) break;
        old = atomicCAS(bits, assumed, __float_as_int(value));
    } while (assumed != old);
    return __int_as_float(old);
}

__global__ void atomic_cas_float_max(const float* x, float* best, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomic_max_float(best, x[i]);
}

// partial sums, a fence and a ticket: the last block to finish adds them up
__global__ void last_block_sum(const float* x, float* partial, unsigned int* ticket, float* out, int n) {
    __shared__ float buf[64];
    __shared__ bool is_last;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = buf[0];
        __threadfence();
        is_last = atomicInc(ticket, gridDim.x) == gridDim.x - 1;
    }
    __syncthreads();
    if (is_last && threadIdx.x == 0) {
        float total = 0.0f;
        for (int b = 0; b < gridDim.x; ++b) total += partial[b];
        *out = total;
    }
}

__constant__ float c_filter[9];

__global__ void constant_filter_conv(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 8) {
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < 9; ++k) acc += c_filter[k] * x[i + k];
        y[i] = acc;
    }
}

__global__ void syncwarp_tile_sum(const float* x, float* y) {
    __shared__ float tile[64];
    tile[threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x];
    __syncwarp();
    for (int s = 16; s > 0; s >>= 1) {
        int lane = threadIdx.x & 31;
        if (lane < s) tile[threadIdx.x] += tile[threadIdx.x + s];
        __syncwarp();
    }
    if ((threadIdx.x & 31) == 0) y[blockIdx.x * 2 + threadIdx.x / 32] = tile[threadIdx.x];
}

__global__ void integer_intrinsics(const unsigned* a, const unsigned* b, unsigned* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned r = __byte_perm(a[i], b[i], 0x5140) ^ (unsigned)__dp4a((int)a[i], (int)b[i], 7);
        r += __vsadu4(a[i], b[i]) + __sad((int)(a[i] & 0xffff), (int)(b[i] & 0xffff), 3u);
        y[i] = r ^ __vadd4(a[i], b[i]);
    }
}

__global__ void special_functions(const float* p, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = erfinvf(2.0f * p[i] - 1.0f) + normcdfinvf(p[i]) + rhypotf(p[i], 1.0f) + __fadd_rz(p[i], 1e-8f);
}

__global__ void grid_constant_scale(const __grid_constant__ float s, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}

__global__ void const_reference_scale(const float& s, const float* x, float* y, const int& n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}
