// Half precision (__half) and bfloat16 (__nv_bfloat16) for the CPU emulator:
// 16-bit storage types whose arithmetic is done in float and rounded back to
// nearest-even after each operation, as a GPU's 16-bit instructions round.
// Included by cuda_fp16.h and cuda_bf16.h.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef __FLT16_MAX__
#error "the CPU emulator's half-precision types need a C++ compiler with _Float16 (g++ 12 or newer)"
#endif

static inline unsigned short __dlk_float_to_half_bits(float f) {
  _Float16 h = (_Float16)f;
  unsigned short b;
  memcpy(&b, &h, 2);
  return b;
}
static inline float __dlk_half_bits_to_float(unsigned short b) {
  _Float16 h;
  memcpy(&h, &b, 2);
  return (float)h;
}
static inline unsigned short __dlk_float_to_bfloat16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return (unsigned short)(u >> 16);
}
static inline float __dlk_bfloat16_bits_to_float(unsigned short b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// One 16-bit type T (bits <-> float through TO/FROM), its pair T2 (S2 in function names:
// __halves2half2), and their operators and intrinsics.
#define DLK_LOW_PRECISION_TYPE(T, T2, S2, TO, FROM)                                                            \
  struct __attribute__((aligned(2))) T {                                                                    \
    unsigned short __x;                                                                                     \
    T() = default;                                                                                          \
    T(float f) : __x(TO(f)) {}                                                                              \
    T(double f) : __x(TO((float)f)) {}                                                                      \
    T(int i) : __x(TO((float)i)) {}                                                                         \
    T(unsigned int i) : __x(TO((float)i)) {}                                                                \
    T(long long i) : __x(TO((float)i)) {}                                                                   \
    T(unsigned long long i) : __x(TO((float)i)) {}                                                          \
    T(short i) : __x(TO((float)i)) {}                                                                       \
    T(unsigned short i) : __x(TO((float)i)) {}                                                              \
    operator float() const { return FROM(__x); }                                                            \
    T& operator=(float f) { __x = TO(f); return *this; }                                                    \
    T& operator=(double f) { __x = TO((float)f); return *this; }                                            \
    T& operator+=(const T& o) { __x = TO(FROM(__x) + FROM(o.__x)); return *this; }                          \
    T& operator-=(const T& o) { __x = TO(FROM(__x) - FROM(o.__x)); return *this; }                          \
    T& operator*=(const T& o) { __x = TO(FROM(__x) * FROM(o.__x)); return *this; }                          \
    T& operator/=(const T& o) { __x = TO(FROM(__x) / FROM(o.__x)); return *this; }                          \
  };                                                                                                        \
  static inline T operator+(const T& a, const T& b) { return T(FROM(a.__x) + FROM(b.__x)); }                \
  static inline T operator-(const T& a, const T& b) { return T(FROM(a.__x) - FROM(b.__x)); }                \
  static inline T operator*(const T& a, const T& b) { return T(FROM(a.__x) * FROM(b.__x)); }                \
  static inline T operator/(const T& a, const T& b) { return T(FROM(a.__x) / FROM(b.__x)); }                \
  static inline T operator-(const T& a) { T r; r.__x = (unsigned short)(a.__x ^ 0x8000u); return r; }       \
  static inline T operator+(const T& a) { return a; }                                                       \
  static inline bool operator==(const T& a, const T& b) { return FROM(a.__x) == FROM(b.__x); }              \
  static inline bool operator!=(const T& a, const T& b) { return FROM(a.__x) != FROM(b.__x); }              \
  static inline bool operator<(const T& a, const T& b) { return FROM(a.__x) < FROM(b.__x); }                \
  static inline bool operator<=(const T& a, const T& b) { return FROM(a.__x) <= FROM(b.__x); }              \
  static inline bool operator>(const T& a, const T& b) { return FROM(a.__x) > FROM(b.__x); }                \
  static inline bool operator>=(const T& a, const T& b) { return FROM(a.__x) >= FROM(b.__x); }              \
  struct __attribute__((aligned(4))) T2 {                                                                   \
    T x, y;                                                                                                 \
    T2() = default;                                                                                         \
    T2(const T& a, const T& b) : x(a), y(b) {}                                                              \
    T2& operator+=(const T2& o) { x += o.x; y += o.y; return *this; }                                       \
    T2& operator*=(const T2& o) { x *= o.x; y *= o.y; return *this; }                                       \
  };                                                                                                        \
  static inline T2 operator+(const T2& a, const T2& b) { return T2(a.x + b.x, a.y + b.y); }                 \
  static inline T2 operator-(const T2& a, const T2& b) { return T2(a.x - b.x, a.y - b.y); }                 \
  static inline T2 operator*(const T2& a, const T2& b) { return T2(a.x * b.x, a.y * b.y); }                 \
  static inline T2 operator/(const T2& a, const T2& b) { return T2(a.x / b.x, a.y / b.y); }                 \
  static inline T __hadd(T a, T b) { return a + b; }                                                        \
  static inline T __hsub(T a, T b) { return a - b; }                                                        \
  static inline T __hmul(T a, T b) { return a * b; }                                                        \
  static inline T __hdiv(T a, T b) { return a / b; }                                                        \
  static inline T __hfma(T a, T b, T c) { return T(fmaf((float)a, (float)b, (float)c)); }                   \
  static inline T __hneg(T a) { return -a; }                                                                \
  static inline T __habs(T a) { T r; r.__x = (unsigned short)(a.__x & 0x7fffu); return r; }                \
  static inline T __hmax(T a, T b) { return T(fmaxf((float)a, (float)b)); }                                 \
  static inline T __hmin(T a, T b) { return T(fminf((float)a, (float)b)); }                                 \
  static inline bool __heq(T a, T b) { return a == b; }                                                     \
  static inline bool __hne(T a, T b) { return a != b; }                                                     \
  static inline bool __hlt(T a, T b) { return a < b; }                                                      \
  static inline bool __hle(T a, T b) { return a <= b; }                                                     \
  static inline bool __hgt(T a, T b) { return a > b; }                                                      \
  static inline bool __hge(T a, T b) { return a >= b; }                                                     \
  static inline bool __hisnan(T a) { return isnan((float)a); }                                              \
  static inline int __hisinf(T a) { float f = (float)a; return isinf(f) ? (f > 0 ? 1 : -1) : 0; }          \
  static inline T hexp(T a) { return T(expf((float)a)); }                                                   \
  static inline T hexp2(T a) { return T(exp2f((float)a)); }                                                 \
  static inline T hlog(T a) { return T(logf((float)a)); }                                                   \
  static inline T hlog2(T a) { return T(log2f((float)a)); }                                                 \
  static inline T hsqrt(T a) { return T(sqrtf((float)a)); }                                                 \
  static inline T hrsqrt(T a) { return T(1.0f / sqrtf((float)a)); }                                         \
  static inline T hrcp(T a) { return T(1.0f / (float)a); }                                                  \
  static inline T hsin(T a) { return T(sinf((float)a)); }                                                   \
  static inline T hcos(T a) { return T(cosf((float)a)); }                                                   \
  static inline T htanh(T a) { return T(tanhf((float)a)); }                                                 \
  static inline T hfloor(T a) { return T(floorf((float)a)); }                                               \
  static inline T hceil(T a) { return T(ceilf((float)a)); }                                                 \
  static inline T htrunc(T a) { return T(truncf((float)a)); }                                               \
  static inline T2 __hadd2(T2 a, T2 b) { return a + b; }                                                    \
  static inline T2 __hsub2(T2 a, T2 b) { return a - b; }                                                    \
  static inline T2 __hmul2(T2 a, T2 b) { return a * b; }                                                    \
  static inline T2 __h2div(T2 a, T2 b) { return a / b; }                                                    \
  static inline T2 __hfma2(T2 a, T2 b, T2 c) { return T2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }  \
  static inline T2 __hneg2(T2 a) { return T2(-a.x, -a.y); }                                                 \
  static inline T2 __habs2(T2 a) { return T2(__habs(a.x), __habs(a.y)); }                                   \
  static inline T2 __hmax2(T2 a, T2 b) { return T2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }                   \
  static inline T2 __hmin2(T2 a, T2 b) { return T2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }                   \
  static inline T2 h2exp(T2 a) { return T2(hexp(a.x), hexp(a.y)); }                                         \
  static inline T2 h2sqrt(T2 a) { return T2(hsqrt(a.x), hsqrt(a.y)); }                                      \
  static inline T __low2half(T2 a) { return a.x; }                                                          \
  static inline T __high2half(T2 a) { return a.y; }                                                         \
  static inline float __low2float(T2 a) { return (float)a.x; }                                              \
  static inline float __high2float(T2 a) { return (float)a.y; }                                             \
  static inline T2 __halves2##S2(T a, T b) { return T2(a, b); }                                             \
  static inline T2 __lowhigh2highlow(T2 a) { return T2(a.y, a.x); }                                         \
  static inline T2 __low2##S2(T2 a) { return T2(a.x, a.x); }                                                \
  static inline T2 __high2##S2(T2 a) { return T2(a.y, a.y); }

// The conversions both 16-bit types have, named from S (half, bfloat16) and S2 (half2,
// bfloat162): __float2S, __float2S_rn, __double2S, __S2float, __int2S_rn, __float2S2_rn,
// __floats2S2_rn, __float22S2_rn, __S22float2, __S2S2, __S_as_ushort, __S_as_short,
// __ushort_as_S, __short_as_S (e.g. __float2half, __bfloat1622float2).
#define DLK_LOW_PRECISION_CONVERSIONS(T, T2, S, S2)                                                     \
  static inline T __float2##S(float f) { return T(f); }                                               \
  static inline T __float2##S##_rn(float f) { return T(f); }                                          \
  static inline T __double2##S(double f) { return T(f); }                                             \
  static inline float __##S##2float(T h) { return (float)h; }                                         \
  static inline T __int2##S##_rn(int i) { return T(i); }                                              \
  static inline T2 __float2##S2##_rn(float f) { return T2(T(f), T(f)); }                              \
  static inline T2 __floats2##S2##_rn(float a, float b) { return T2(T(a), T(b)); }                    \
  static inline T2 __float22##S2##_rn(float2 f) { return T2(T(f.x), T(f.y)); }                        \
  static inline float2 __##S2##2float2(T2 h) { return make_float2((float)h.x, (float)h.y); }          \
  static inline T2 __##S##2##S2(T h) { return T2(h, h); }                                             \
  static inline unsigned short __##S##_as_ushort(T h) { return h.__x; }                               \
  static inline short __##S##_as_short(T h) { return (short)h.__x; }                                  \
  static inline T __ushort_as_##S(unsigned short b) { T h; h.__x = b; return h; }                     \
  static inline T __short_as_##S(short b) { T h; h.__x = (unsigned short)b; return h; }
