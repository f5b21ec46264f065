// cuda_bf16.h for the CPU emulator: __nv_bfloat16 and __nv_bfloat162 (see dlk_low_precision.h).
#pragma once
#include "dlk_low_precision.h"

DLK_LOW_PRECISION_TYPE(__nv_bfloat16, __nv_bfloat162, bfloat162, __dlk_float_to_bfloat16_bits, __dlk_bfloat16_bits_to_float)
DLK_LOW_PRECISION_CONVERSIONS(__nv_bfloat16, __nv_bfloat162, bfloat16, bfloat162)
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;
