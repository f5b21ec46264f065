// cuda_fp16.h for the CPU emulator: __half and __half2 (see dlk_low_precision.h).
#pragma once
#include "dlk_low_precision.h"

DLK_LOW_PRECISION_TYPE(__half, __half2, half2, __dlk_float_to_half_bits, __dlk_half_bits_to_float)
DLK_LOW_PRECISION_CONVERSIONS(__half, __half2, half, half2)
typedef __half half;
typedef __half2 half2;
typedef unsigned short __half_raw_bits;

// Conversions only __half has.
static inline __half __uint2half_rn(unsigned i) { return __half(i); }
static inline int __half2int_rn(__half h) { return (int)nearbyintf((float)h); }
static inline int __half2int_rz(__half h) { return (int)(float)h; }
static inline unsigned __half2uint_rn(__half h) { return (unsigned)nearbyintf((float)h); }
