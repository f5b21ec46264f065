// kernels/warp_mma.cuh -- the warp-level tensor-core instructions that BF16 kernels of two parts share: the GEMM
// ladder's version 13 (kernels/gemm/sgemm_bf16.cu, through gemm/bf16_ptx.cuh) and attention's versions 4 and 5
// (kernels/attention/attention_bf16.cu).
//
//   ldmatrix_x4(r, p)         four 8 x 8 matrices of 16-bit values from shared memory: lanes 8i .. 8i + 7 each give
//                             the address of one 16-byte row of matrix i; lane l receives, in r[i], row l / 4,
//                             elements 2 (l % 4) and 2 (l % 4) + 1 (the lower index in the low half).
//   ldmatrix_x4_trans(r, p)   the same matrices transposed: lane l receives rows 2 (l % 4) and 2 (l % 4) + 1 of
//                             column l / 4.
//   mma_m16n8k16(d, a, b0, b1)  d += A B for A 16 x 16 (row-major, BF16), B 16 x 8 (column-major, BF16), d float:
//                             with g = lane / 4, q = lane % 4,
//                               a[0]: A[g][2q, 2q+1]   a[1]: A[g+8][2q, 2q+1]   a[2]: A[g][2q+8, +9]   a[3]: A[g+8][2q+8, +9]
//                               b0: B[2q, 2q+1][g]     b1: B[2q+8, 2q+9][g]
//                               d[0], d[1]: D[g][2q, 2q+1]   d[2], d[3]: D[g+8][2q, 2q+1]
//   exp2_fast(x)              2^x by the special-function unit alone (ex2.approx.ftz, one instruction: exp2f adds
//                             three for results below 2^-126, which a softmax weight that small does not need);
//                             2^-inf = 0.  Attention's softmax takes one per score.
//
// On a GPU (sm_80 and newer) each is one PTX instruction.  On the CPU emulator, which runs CUDA C as C++ and cannot
// run PTX, each is the same data movement written with warp shuffles: the layouts above, lane by lane, so that the
// kernels' indexing, masking and synchronisation are checked on the emulator; the instructions themselves only on
// a GPU.
#pragma once

#include <cuda_bf16.h>

// Two floats as the two BF16 halves of a register (x in the low half), rounded to nearest.
__device__ __forceinline__ unsigned pack_bf16(float x, float y)
{
    return (unsigned)__bfloat16_as_ushort(__float2bfloat16(x)) | ((unsigned)__bfloat16_as_ushort(__float2bfloat16(y)) << 16);
}

#ifndef DLK_EMULATOR

__device__ __forceinline__ unsigned shared_address(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(shared_address(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(shared_address(p)));
}

__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float exp2_fast(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

#else  // the CPU emulator: the same layouts through shuffles

__device__ __forceinline__ float bf16_low(unsigned v) { return __bfloat162float(__ushort_as_bfloat16((unsigned short)(v & 0xffffu))); }
__device__ __forceinline__ float bf16_high(unsigned v) { return __bfloat162float(__ushort_as_bfloat16((unsigned short)(v >> 16))); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p)
{
    int lane = threadIdx.x % 32;
    for (int i = 0; i < 4; ++i) {
        const unsigned char* row = __shfl_sync(0xffffffffu, (const unsigned char*)p, 8 * i + lane / 4);
        r[i] = *reinterpret_cast<const unsigned*>(row + 4 * (lane % 4));
    }
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p)
{
    int lane = threadIdx.x % 32;
    for (int i = 0; i < 4; ++i) {
        const unsigned short* first = __shfl_sync(0xffffffffu, (const unsigned short*)p, 8 * i + 2 * (lane % 4));
        const unsigned short* second = __shfl_sync(0xffffffffu, (const unsigned short*)p, 8 * i + 2 * (lane % 4) + 1);
        r[i] = (unsigned)first[lane / 4] | ((unsigned)second[lane / 4] << 16);
    }
}

__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    for (int half = 0; half < 2; ++half)              // k = 0..7, then 8..15
        for (int kp = 0; kp < 4; ++kp) {              // k = 8 half + 2 kp and + 1: held by lane 4 row + kp
            unsigned top = __shfl_sync(0xffffffffu, a[half ? 2 : 0], 4 * g + kp);
            unsigned bottom = __shfl_sync(0xffffffffu, a[half ? 3 : 1], 4 * g + kp);
            unsigned left = __shfl_sync(0xffffffffu, half ? b1 : b0, 4 * (2 * q) + kp);
            unsigned right = __shfl_sync(0xffffffffu, half ? b1 : b0, 4 * (2 * q + 1) + kp);
            d[0] += bf16_low(top) * bf16_low(left) + bf16_high(top) * bf16_high(left);
            d[1] += bf16_low(top) * bf16_low(right) + bf16_high(top) * bf16_high(right);
            d[2] += bf16_low(bottom) * bf16_low(left) + bf16_high(bottom) * bf16_high(left);
            d[3] += bf16_low(bottom) * bf16_low(right) + bf16_high(bottom) * bf16_high(right);
        }
}

__device__ __forceinline__ float exp2_fast(float x) { return exp2f(x); }

#endif
