// Declarations the C++ front end (kernels/runtime/frontend.py) parses a reader's source with.
//
// The reader's #include lines are left out (only the kernels' declarations matter there), so
// this header declares what CUDA's headers would: the qualifiers, the built-in vector types
// with nvcc's alignments (vector_types.h), half and bfloat16 (cuda_fp16.h, cuda_bf16.h), the
// fixed-width integers, and the namespaces kernels name.  cudaTextureObject_t and other
// handles are left out on purpose: a kernel taking one is refused at its line.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __grid_constant__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __device_builtin__
#define __cudart_builtin__

typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef __INTPTR_TYPE__ intptr_t;
typedef __UINTPTR_TYPE__ uintptr_t;
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;
typedef long int64;

#define DLK_VEC(T, N, A1, A2, A3, A4) \
  struct __attribute__((aligned(A1))) N##1 { T x; }; \
  struct __attribute__((aligned(A2))) N##2 { T x, y; }; \
  struct __attribute__((aligned(A3))) N##3 { T x, y, z; }; \
  struct __attribute__((aligned(A4))) N##4 { T x, y, z, w; };
DLK_VEC(float, float, 4, 8, 4, 16)
DLK_VEC(double, double, 8, 16, 8, 16)
DLK_VEC(int, int, 4, 8, 4, 16)
DLK_VEC(unsigned int, uint, 4, 8, 4, 16)
DLK_VEC(long long, longlong, 8, 16, 8, 16)
DLK_VEC(unsigned long long, ulonglong, 8, 16, 8, 16)
DLK_VEC(short, short, 2, 4, 2, 8)
DLK_VEC(unsigned short, ushort, 2, 4, 2, 8)
DLK_VEC(signed char, char, 1, 2, 1, 4)
DLK_VEC(unsigned char, uchar, 1, 2, 1, 4)
#undef DLK_VEC
struct dim3 { unsigned int x, y, z; };

struct __attribute__((aligned(2))) __half { unsigned short __x; };
struct __attribute__((aligned(4))) __half2 { __half x, y; };
typedef __half half;
typedef __half2 half2;
struct __attribute__((aligned(2))) __nv_bfloat16 { unsigned short __x; };
struct __attribute__((aligned(4))) __nv_bfloat162 { __nv_bfloat16 x, y; };
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

extern const __device__ uint3 threadIdx, blockIdx;
extern const __device__ dim3 blockDim, gridDim;
extern const __device__ int warpSize;

namespace cooperative_groups { namespace details {} }
namespace nvcuda { namespace wmma {} }
namespace std {}
