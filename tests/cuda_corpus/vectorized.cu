// Element-wise kernels with 64- and 128-bit accesses through casting macros, as kernel
// collections for learners write them (several elements per thread, sizes a multiple of the
// vector width), in float and bfloat16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define WARP_SIZE 32
#define FLOAT4(value) (reinterpret_cast<float4 *>(&(value))[0])
#define CFLOAT4(value) (reinterpret_cast<const float4 *>(&(value))[0])
#define BFLOAT2(value) (reinterpret_cast<__nv_bfloat162 *>(&(value))[0])
#define LDST128BITS(value) (reinterpret_cast<float4 *>(&(value))[0])

// c = a + b, four floats per thread (N a multiple of 4)
__global__ void elementwise_add_f32x4(float *a, float *b, float *c, int N) {
  int idx = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (idx < N) {
    float4 reg_a = FLOAT4(a[idx]);
    float4 reg_b = FLOAT4(b[idx]);
    float4 reg_c;
    reg_c.x = reg_a.x + reg_b.x;
    reg_c.y = reg_a.y + reg_b.y;
    reg_c.z = reg_a.z + reg_b.z;
    reg_c.w = reg_a.w + reg_b.w;
    FLOAT4(c[idx]) = reg_c;
  }
}

// y = sigmoid(x), four floats per thread, with the read-only input through const float4
__global__ void sigmoid_f32x4(const float *x, float *y, int N) {
  int idx = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (idx < N) {
    float4 v = CFLOAT4(x[idx]);
    v.x = 1.0f / (1.0f + expf(-v.x));
    v.y = 1.0f / (1.0f + expf(-v.y));
    v.z = 1.0f / (1.0f + expf(-v.z));
    v.w = 1.0f / (1.0f + expf(-v.w));
    FLOAT4(y[idx]) = v;
  }
}

// y = relu(x) in bfloat16, two per thread through __nv_bfloat162 (N even)
__global__ void relu_bf16x2(__nv_bfloat16 *x, __nv_bfloat16 *y, int N) {
  int idx = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (idx < N) {
    __nv_bfloat162 v = BFLOAT2(x[idx]);
    const __nv_bfloat16 zero = __float2bfloat16(0.0f);
    v.x = __hgt(v.x, zero) ? v.x : zero;
    v.y = __hgt(v.y, zero) ? v.y : zero;
    BFLOAT2(y[idx]) = v;
  }
}

// y = x * scale in bfloat16, eight per thread through one 128-bit load and store (N a multiple of 8)
__global__ void scale_bf16x8(__nv_bfloat16 *x, __nv_bfloat16 *y, float scale, int N) {
  int idx = 8 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (idx < N) {
    __nv_bfloat16 pack[8];
    LDST128BITS(pack[0]) = LDST128BITS(x[idx]);
#pragma unroll
    for (int k = 0; k < 8; ++k) pack[k] = __float2bfloat16(__bfloat162float(pack[k]) * scale);
    LDST128BITS(y[idx]) = LDST128BITS(pack[0]);
  }
}
