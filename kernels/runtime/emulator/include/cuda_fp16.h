// cuda_fp16.h for the CPU emulator: __half and __half2 (see dlk_low_precision.h).
#pragma once
#include "dlk_low_precision.h"

DLK_LOW_PRECISION_TYPE(__half, __half2, half2, __dlk_float_to_half_bits, __dlk_half_bits_to_float)
typedef __half half;
typedef __half2 half2;
typedef unsigned short __half_raw_bits;

static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __double2half(double f) { return __half(f); }
static inline float __half2float(__half h) { return (float)h; }
static inline __half __int2half_rn(int i) { return __half(i); }
static inline __half __uint2half_rn(unsigned i) { return __half(i); }
static inline int __half2int_rn(__half h) { return (int)nearbyintf((float)h); }
static inline int __half2int_rz(__half h) { return (int)(float)h; }
static inline unsigned __half2uint_rn(__half h) { return (unsigned)nearbyintf((float)h); }
static inline __half2 __float2half2_rn(float f) { return __half2(__half(f), __half(f)); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
static inline __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
static inline float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
static inline __half2 __half2half2(__half h) { return __half2(h, h); }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline __half __ushort_as_half(unsigned short b) { __half h; h.__x = b; return h; }
static inline __half __short_as_half(short b) { __half h; h.__x = (unsigned short)b; return h; }
