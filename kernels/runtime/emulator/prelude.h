// CUDA C built-ins for the CPU emulator.
//
// Every kernel source is compiled by g++ with this header in front of it.  It
// defines what nvcc provides implicitly: the execution-space keywords, the
// built-in index variables, vector types, atomics, warp intrinsics, barriers
// and the usual math intrinsics.  Barriers and warp intrinsics call into the
// emulator's scheduler (runtime.cpp), which runs the threads of a block as
// fibers and checks that they meet.
#pragma once

#include <assert.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>  // before the clock() macro below, so that a kernel's own #include <time.h> is harmless

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

// ---- what nvcc defines ------------------------------------------------------
// The macros nvcc's device pass defines (nvcc -arch=sm_90 -dryrun lists them), with the values of the
// course's GPU (an H100 or H200: compute capability 9.0) and toolkit, so that a kernel cannot tell the
// emulator from nvcc by its macros: code under #ifndef __NVCC__ or #if __CUDA_ARCH__ < 900 is compiled
// here exactly as there (build.nvcc_defines() reads this block).
// nvcc identity begins
#define __CUDACC__ 1
#define __NVCC__ 1
#define __CUDA_ARCH__ 900
#define __CUDA_ARCH_LIST__ 900
#define __CUDACC_VER_MAJOR__ 13
#define __CUDACC_VER_MINOR__ 0
#define __CUDACC_VER_BUILD__ 88
#define __CUDA_API_VER_MAJOR__ 13
#define __CUDA_API_VER_MINOR__ 0
#define __NVCC_DIAG_PRAGMA_SUPPORT__ 1
#define __CUDACC_DEVICE_ATOMIC_BUILTINS__ 1
#define CUDA_DOUBLE_MATH_FUNCTIONS 1
// nvcc identity ends
// The one macro of the emulator's own: the book's kernels choose by it the warp shuffles that stand for PTX
// the emulator cannot run (kernels/warp_mma.cuh, kernels/attention/attention_bf16.cu).  A graded kernel whose
// text depends on it is refused (autograder/source_policy.py), so that no graded kernel computes one thing here
// and another on a GPU.
#define DLK_EMULATOR 1

// ---- execution spaces and qualifiers ------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline
// __noinline__ is no macro here: libstdc++ 13 writes __attribute__((__noinline__)), which such a
// macro would break; rewrite.py spells the reader's own __noinline__ as the attribute instead.
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __cudart_builtin__
// The emulator rewrites __shared__ declarations itself (poisoned per block);
// one that reaches the compiler (made by a macro, say) still works, unchecked.
#define __shared__ static

// ---- vector types ----------------------------------------------------------
#define DLK_VEC2(T, N, A) \
  struct __attribute__((aligned(A))) N##2 { T x, y; }; \
  static inline N##2 make_##N##2(T x, T y) { N##2 v; v.x = x; v.y = y; return v; }
#define DLK_VEC3(T, N) \
  struct N##3 { T x, y, z; }; \
  static inline N##3 make_##N##3(T x, T y, T z) { N##3 v; v.x = x; v.y = y; v.z = z; return v; }
#define DLK_VEC4(T, N, A) \
  struct __attribute__((aligned(A))) N##4 { T x, y, z, w; }; \
  static inline N##4 make_##N##4(T x, T y, T z, T w) { N##4 v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }
#define DLK_VEC1(T, N) \
  struct N##1 { T x; }; \
  static inline N##1 make_##N##1(T x) { N##1 v; v.x = x; return v; }
#define DLK_VECS(T, N, A2, A4) DLK_VEC1(T, N) DLK_VEC2(T, N, A2) DLK_VEC3(T, N) DLK_VEC4(T, N, A4)
DLK_VECS(float, float, 8, 16)
DLK_VECS(double, double, 16, 16)
DLK_VECS(int, int, 8, 16)
DLK_VECS(unsigned int, uint, 8, 16)
DLK_VECS(long long, longlong, 16, 16)
DLK_VECS(unsigned long long, ulonglong, 16, 16)
DLK_VECS(short, short, 4, 8)
DLK_VECS(unsigned short, ushort, 4, 8)
DLK_VECS(signed char, char, 2, 4)
DLK_VECS(unsigned char, uchar, 2, 4)
#undef DLK_VECS
#undef DLK_VEC1
#undef DLK_VEC2
#undef DLK_VEC3
#undef DLK_VEC4

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ---- built-in variables (set by the scheduler before each thread runs) ------
extern "C" uint3 threadIdx;
extern "C" uint3 blockIdx;
extern "C" dim3 blockDim;
extern "C" dim3 gridDim;
constexpr int warpSize = 32;

// ---- the scheduler's interface ----------------------------------------------
extern "C" {
void __dlk_syncthreads(int line);
void __dlk_grid_sync(int line);
int __dlk_syncthreads_reduce(int op, int predicate, int line);
unsigned long long __dlk_warp_op(int op, unsigned mask, unsigned long long value, int param, int width, int line);
void __dlk_shared_register(void* ptr, size_t bytes, size_t elem_bytes, const char* name, int line);
void __dlk_shared_register_once(unsigned* generation, void* ptr, size_t bytes, size_t elem_bytes, const char* name, int line);
void* __dlk_dynamic_shared(void);
void* __dlk_dynamic_shared_register(void** slot, const char* name);
extern unsigned __dlk_block_generation;
void __dlk_trap(int line) __attribute__((noreturn));
int __dlk_printf(const char* format, ...) __attribute__((format(printf, 1, 2)));
long long __dlk_clock(void);
void __dlk_atomic_access(void* address, size_t bytes, void* caller);
// the profiling build: one access as the hardware makes it, where the emulator makes it otherwise (wmma fragments)
void __dlk_profile_access(const void* address, size_t bytes, int store);
void __dlk_threadfence(void);
}

// One static __shared__ declarator, rewritten by the emulator as
//   static T name[N]; DLK_SHARED(name, line);
// which poisons it the first time a thread of each block reaches it (the runtime keeps the test of
// "first", so that the reader's code has no branch of the emulator's own for the profiler to see).
template <class T> struct __dlk_base { typedef T type; };
template <class T, size_t N> struct __dlk_base<T[N]> { typedef typename __dlk_base<T>::type type; };
#define DLK_SHARED(name, line)                                                                  \
  do {                                                                                          \
    static unsigned __dlk_gen_of_##name = 0;                                                    \
    __dlk_shared_register_once(&__dlk_gen_of_##name, (void*)&(name), sizeof(name),              \
                               sizeof(typename __dlk_base<decltype(name)>::type), #name, line); \
  } while (0)

// ---- barriers ---------------------------------------------------------------
#define __syncthreads() __dlk_syncthreads(__LINE__)
#define __syncthreads_count(p) __dlk_syncthreads_reduce(0, (p), __LINE__)
#define __syncthreads_and(p) __dlk_syncthreads_reduce(1, (p), __LINE__)
#define __syncthreads_or(p) __dlk_syncthreads_reduce(2, (p), __LINE__)
#define __threadfence() __dlk_threadfence()
#define __threadfence_block() ((void)0)
#define __threadfence_system() ((void)0)
#define __trap() __dlk_trap(__LINE__)
#define __nanosleep(ns) ((void)(ns))
#define clock() __dlk_clock()
#define clock64() __dlk_clock()

// ---- warp intrinsics (warp size 32) ---------------------------------------
enum { DLK_SHFL_IDX, DLK_SHFL_UP, DLK_SHFL_DOWN, DLK_SHFL_XOR, DLK_BALLOT, DLK_ANY, DLK_ALL, DLK_SYNCWARP,
       DLK_REDUCE_ADD, DLK_REDUCE_MIN, DLK_REDUCE_MAX, DLK_MATCH_ANY, DLK_ACTIVEMASK };

template <class T> static inline unsigned long long __dlk_bits(T v) {
  static_assert(sizeof(T) <= 8, "warp shuffles move values of at most 8 bytes");
  unsigned long long b = 0;
  memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T> static inline T __dlk_from_bits(unsigned long long b) {
  T v;
  memcpy(&v, &b, sizeof(T));
  return v;
}
#define DLK_SHFL(op, mask, var, p, width) \
  __dlk_from_bits<decltype(+(var))>(__dlk_warp_op(op, mask, __dlk_bits<decltype(+(var))>(var), p, width, __LINE__))
#define __shfl_sync(mask, var, ...) DLK_SHFL_ARGS(DLK_SHFL_IDX, mask, var, __VA_ARGS__, 32)
#define __shfl_up_sync(mask, var, ...) DLK_SHFL_ARGS(DLK_SHFL_UP, mask, var, __VA_ARGS__, 32)
#define __shfl_down_sync(mask, var, ...) DLK_SHFL_ARGS(DLK_SHFL_DOWN, mask, var, __VA_ARGS__, 32)
#define __shfl_xor_sync(mask, var, ...) DLK_SHFL_ARGS(DLK_SHFL_XOR, mask, var, __VA_ARGS__, 32)
#define DLK_SHFL_ARGS(op, mask, var, p, width, ...) DLK_SHFL(op, mask, var, p, width)
#define __ballot_sync(mask, pred) ((unsigned)__dlk_warp_op(DLK_BALLOT, mask, (pred) ? 1 : 0, 0, 32, __LINE__))
#define __any_sync(mask, pred) ((int)__dlk_warp_op(DLK_ANY, mask, (pred) ? 1 : 0, 0, 32, __LINE__))
#define __all_sync(mask, pred) ((int)__dlk_warp_op(DLK_ALL, mask, (pred) ? 1 : 0, 0, 32, __LINE__))
#define __syncwarp(...) ((void)__dlk_warp_op(DLK_SYNCWARP, DLK_SYNCWARP_MASK(__VA_ARGS__ + 0), 0, 0, 32, __LINE__))
#define DLK_SYNCWARP_MASK(m) ((m) == 0 ? 0xffffffffu : (unsigned)(m))
// the lanes of the warp that reach this same call (the converged lanes); lanes that
// exited or wait elsewhere are not in it
#define __activemask() ((unsigned)__dlk_warp_op(DLK_ACTIVEMASK, 0xffffffffu, 0, 0, 32, __LINE__))
#define __reduce_add_sync(mask, v) ((unsigned)__dlk_warp_op(DLK_REDUCE_ADD, mask, (unsigned)(v), 0, 32, __LINE__))
#define __reduce_min_sync(mask, v) ((unsigned)__dlk_warp_op(DLK_REDUCE_MIN, mask, (unsigned)(v), 0, 32, __LINE__))
#define __reduce_max_sync(mask, v) ((unsigned)__dlk_warp_op(DLK_REDUCE_MAX, mask, (unsigned)(v), 0, 32, __LINE__))
#define __match_any_sync(mask, v) ((unsigned)__dlk_warp_op(DLK_MATCH_ANY, mask, __dlk_bits(v), 0, 32, __LINE__))

// ---- atomics: the threads of a block run one at a time, so plain operations are atomic.
// They are not instrumented as plain loads and stores: each tells the runtime of one
// atomic access (bounds-checked, and not a race with other atomics).
// (nor, in the profiling build, as a load and a store: the profile counts them as one atomic)
// The emulator's own copies in <mma.h> (every lane copies a whole tile) are not counted by the profiler
// (no_sanitize_thread) and add no branches to its counts (no_sanitize_coverage).
#define DLK_NOT_PROFILED __attribute__((no_sanitize_thread, no_sanitize_coverage))
#define DLK_ATOMIC_FN __attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize_coverage, noinline)) static
#define DLK_ATOMIC_NOTE(address) __dlk_atomic_access((void*)(address), sizeof(*(address)), __builtin_return_address(0))
#define DLK_ATOMIC(name, expr)                                                         \
  template <class T, class U> DLK_ATOMIC_FN T name(T* address, U value_) {            \
    DLK_ATOMIC_NOTE(address);                                                          \
    T value = (T)value_;                                                               \
    T old = *address;                                                                  \
    *address = (expr);                                                                 \
    return old;                                                                        \
  }
DLK_ATOMIC(atomicAdd, old + value)
DLK_ATOMIC(atomicSub, old - value)
DLK_ATOMIC(atomicExch, value)
DLK_ATOMIC(atomicMax, old < value ? value : old)
DLK_ATOMIC(atomicMin, value < old ? value : old)
DLK_ATOMIC(atomicAnd, old & value)
DLK_ATOMIC(atomicOr, old | value)
DLK_ATOMIC(atomicXor, old ^ value)
#undef DLK_ATOMIC
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
DLK_ATOMIC_FN unsigned atomicInc(unsigned* address, unsigned limit) {
  DLK_ATOMIC_NOTE(address);
  unsigned old = *address;
  *address = old >= limit ? 0 : old + 1;
  return old;
}
DLK_ATOMIC_FN unsigned atomicDec(unsigned* address, unsigned limit) {
  DLK_ATOMIC_NOTE(address);
  unsigned old = *address;
  *address = (old == 0 || old > limit) ? limit : old - 1;
  return old;
}
template <class T, class U, class V> DLK_ATOMIC_FN T atomicCAS(T* address, U compare, V value) {
  DLK_ATOMIC_NOTE(address);
  T old = *address;
  if (old == (T)compare) *address = (T)value;
  return old;
}

// ---- loads --------------------------------------------------------------------
template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldlu(const T* p) { return *p; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }
template <class T> static inline void __stwt(T* p, T v) { *p = v; }

// ---- integer min/max overloads of CUDA's math library -----------------------
#define DLK_MINMAX(T)                                           \
  static inline T min(T a, T b) { return a < b ? a : b; }       \
  static inline T max(T a, T b) { return a < b ? b : a; }
DLK_MINMAX(int)
DLK_MINMAX(unsigned int)
DLK_MINMAX(long)
DLK_MINMAX(unsigned long)
DLK_MINMAX(long long)
DLK_MINMAX(unsigned long long)
#undef DLK_MINMAX
static inline unsigned int min(int a, unsigned int b) { return min((unsigned)a, b); }
static inline unsigned int min(unsigned int a, int b) { return min(a, (unsigned)b); }
static inline unsigned int max(int a, unsigned int b) { return max((unsigned)a, b); }
static inline unsigned int max(unsigned int a, int b) { return max(a, (unsigned)b); }
static inline long long min(long long a, int b) { return min(a, (long long)b); }
static inline long long min(int a, long long b) { return min((long long)a, b); }
static inline long long max(long long a, int b) { return max(a, (long long)b); }
static inline long long max(int a, long long b) { return max((long long)a, b); }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(float a, double b) { return fmin(a, b); }
static inline double min(double a, float b) { return fmin(a, b); }
static inline double max(float a, double b) { return fmax(a, b); }
static inline double max(double a, float b) { return fmax(a, b); }
static inline long long llmin(long long a, long long b) { return min(a, b); }
static inline long long llmax(long long a, long long b) { return max(a, b); }
static inline unsigned umin(unsigned a, unsigned b) { return min(a, b); }
static inline unsigned umax(unsigned a, unsigned b) { return max(a, b); }

// ---- float intrinsics ------------------------------------------------------
// glibc declares __expf, __sinf, ... itself (same meaning): CUDA's fast versions are macros
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) sincosf(x, s, c)
#define __powf(x, y) powf(x, y)
static inline float __fdividef(float a, float b) { return a / b; }
static inline float fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752); }
static inline float sinpif(float x) { return sinf(3.14159265358979323846f * x); }
static inline float cospif(float x) { return cosf(3.14159265358979323846f * x); }

// ---- conversions and bit tricks -------------------------------------------
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
static inline unsigned __float2uint_rz(float x) { return (unsigned)x; }
static inline long long __float2ll_rn(float x) { return (long long)nearbyintf(x); }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline float __ll2float_rn(long long x) { return (float)x; }
static inline int __double2int_rn(double x) { return (int)nearbyint(x); }
static inline float __double2float_rn(double x) { return (float)x; }
static inline int __float_as_int(float x) { return __dlk_from_bits<int>(__dlk_bits(x)); }
static inline unsigned __float_as_uint(float x) { return __dlk_from_bits<unsigned>(__dlk_bits(x)); }
static inline float __int_as_float(int x) { return __dlk_from_bits<float>(__dlk_bits(x)); }
static inline float __uint_as_float(unsigned x) { return __dlk_from_bits<float>(__dlk_bits(x)); }
static inline long long __double_as_longlong(double x) { return __dlk_from_bits<long long>(__dlk_bits(x)); }
static inline double __longlong_as_double(long long x) { return __dlk_from_bits<double>(__dlk_bits(x)); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
static inline int __mul24(int a, int b) { return a * b; }
static inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  s &= 31;
  return s ? (hi << s) | (lo >> (32 - s)) : hi;
}
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  s &= 31;
  return s ? (lo >> s) | (hi << (32 - s)) : lo;
}

// ---- more of CUDA's math library and integer intrinsics ------------------------
static inline float erfinvf(float y) {
  if (y <= -1.0f) return y == -1.0f ? -INFINITY : NAN;
  if (y >= 1.0f) return y == 1.0f ? INFINITY : NAN;
  // Giles' single-precision approximation, then two Newton steps on erf in double
  float w = -logf((1.0f - y) * (1.0f + y)), p;
  if (w < 5.0f) {
    w -= 2.5f;
    p = 2.81022636e-08f; p = 3.43273939e-07f + p * w; p = -3.5233877e-06f + p * w; p = -4.39150654e-06f + p * w;
    p = 0.00021858087f + p * w; p = -0.00125372503f + p * w; p = -0.00417768164f + p * w; p = 0.246640727f + p * w;
    p = 1.50140941f + p * w;
  } else {
    w = sqrtf(w) - 3.0f;
    p = -0.000200214257f; p = 0.000100950558f + p * w; p = 0.00134934322f + p * w; p = -0.00367342844f + p * w;
    p = 0.00573950773f + p * w; p = -0.0076224613f + p * w; p = 0.00943887047f + p * w; p = 1.00167406f + p * w;
    p = 2.83297682f + p * w;
  }
  double x = (double)p * y;
  for (int k = 0; k < 2; ++k) x -= (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
  return (float)x;
}
static inline double erfinv(double y) { return (double)erfinvf((float)y); }
static inline float erfcinvf(float y) { return erfinvf(1.0f - y); }
static inline float normcdfinvf(float p) { return -1.41421356237f * erfcinvf(2.0f * p); }
static inline float rhypotf(float a, float b) { return 1.0f / hypotf(a, b); }
static inline float norm3df(float a, float b, float c) { return sqrtf(a * a + b * b + c * c); }
static inline float rnorm3df(float a, float b, float c) { return 1.0f / sqrtf(a * a + b * b + c * c); }
static inline float norm4df(float a, float b, float c, float d) { return sqrtf(a * a + b * b + c * c + d * d); }
static inline float rnorm4df(float a, float b, float c, float d) { return 1.0f / sqrtf(a * a + b * b + c * c + d * d); }
static inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
// float operations rounded toward zero / down / up: exact in double, then rounded once more
static inline float __dlk_round_float(double exact, int mode) {
  float r = (float)exact;
  if ((double)r == exact || r != r) return r;
  bool above = (double)r > exact;
  if (mode == 0 && above == (exact > 0)) r = nextafterf(r, 0.0f);  // toward zero
  else if (mode < 0 && above) r = nextafterf(r, -INFINITY);        // down
  else if (mode > 0 && !above) r = nextafterf(r, INFINITY);        // up
  return r;
}
static inline float __fadd_rz(float a, float b) { return __dlk_round_float((double)a + b, 0); }
static inline float __fadd_rd(float a, float b) { return __dlk_round_float((double)a + b, -1); }
static inline float __fadd_ru(float a, float b) { return __dlk_round_float((double)a + b, 1); }
static inline float __fmul_rz(float a, float b) { return __dlk_round_float((double)a * b, 0); }
static inline float __fmul_rd(float a, float b) { return __dlk_round_float((double)a * b, -1); }
static inline float __fmul_ru(float a, float b) { return __dlk_round_float((double)a * b, 1); }
static inline float __fsub_rz(float a, float b) { return __dlk_round_float((double)a - b, 0); }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long bytes = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int k = 0; k < 4; ++k) r |= (unsigned)((bytes >> (8 * ((s >> (4 * k)) & 7))) & 0xff) << (8 * k);
  return r;
}
static inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; ++k) c += (int)(signed char)(a >> (8 * k)) * (int)(signed char)(b >> (8 * k));
  return c;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (int k = 0; k < 4; ++k) c += ((a >> (8 * k)) & 0xff) * ((b >> (8 * k)) & 0xff);
  return c;
}
static inline unsigned __sad(int x, int y, unsigned z) { return (unsigned)(x > y ? x - y : y - x) + z; }
static inline unsigned __usad(unsigned x, unsigned y, unsigned z) { return (x > y ? x - y : y - x) + z; }
static inline int __hadd(int x, int y) { return (int)(((long long)x + y) >> 1); }
static inline int __rhadd(int x, int y) { return (int)(((long long)x + y + 1) >> 1); }
static inline unsigned __uhadd(unsigned x, unsigned y) { return (unsigned)(((unsigned long long)x + y) >> 1); }
static inline unsigned __urhadd(unsigned x, unsigned y) { return (unsigned)(((unsigned long long)x + y + 1) >> 1); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned s) { return s >= 32 ? lo : __funnelshift_l(lo, hi, s); }
static inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned s) { return s >= 32 ? hi : __funnelshift_r(lo, hi, s); }
static inline unsigned long long __brevll(unsigned long long x) {
  return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
// SIMD within a word: four bytes or two halfwords
#define DLK_SIMD(name, lanes, expr)                                              \
  static inline unsigned name(unsigned a, unsigned b) {                          \
    const int bits = 32 / lanes;                                                 \
    const unsigned m = lanes == 4 ? 0xffu : 0xffffu;                             \
    unsigned r = 0;                                                              \
    for (int k = 0; k < lanes; ++k) {                                            \
      unsigned x = (a >> (bits * k)) & m, y = (b >> (bits * k)) & m;             \
      r |= ((unsigned)(expr) & m) << (bits * k);                                 \
    }                                                                            \
    return r;                                                                    \
  }
DLK_SIMD(__vadd4, 4, x + y)
DLK_SIMD(__vsub4, 4, x - y)
DLK_SIMD(__vadd2, 2, x + y)
DLK_SIMD(__vsub2, 2, x - y)
DLK_SIMD(__vmaxu4, 4, x > y ? x : y)
DLK_SIMD(__vminu4, 4, x < y ? x : y)
DLK_SIMD(__vmaxu2, 2, x > y ? x : y)
DLK_SIMD(__vminu2, 2, x < y ? x : y)
DLK_SIMD(__vabsdiffu4, 4, x > y ? x - y : y - x)
DLK_SIMD(__vabsdiffu2, 2, x > y ? x - y : y - x)
DLK_SIMD(__vavgu4, 4, (x + y + 1) >> 1)
DLK_SIMD(__vcmpeq4, 4, x == y ? 0xffu : 0u)
DLK_SIMD(__vcmpgtu4, 4, x > y ? 0xffu : 0u)
#undef DLK_SIMD
static inline unsigned __vsadu4(unsigned a, unsigned b) {
  unsigned d = __vabsdiffu4(a, b);
  return (d & 0xff) + ((d >> 8) & 0xff) + ((d >> 16) & 0xff) + (d >> 24);
}

// ---- launch trampolines: unpack the argument array into the kernel's parameters
struct __dlk_pointer_arg {
  void* const* slot;
  template <class T> operator T*() const { return *(T* const*)slot; }
};
struct __dlk_scalar_arg {
  const void* slot;
  template <class T> operator T() const {
    T v;
    memcpy(&v, slot, sizeof(T));
    return v;
  }
};
struct __dlk_kernel_entry {
  const char* name;
  void (*launch)(void* const* args);
};
struct __dlk_variable_entry {
  const char* name;
  void* address;
  size_t bytes;
  size_t elem_bytes;
  int writable;  // a __device__ variable (kernels may write it), not __constant__
};

// ---- printf: collected per launch and shown after it --------------------------
#define printf __dlk_printf
