// mma.h for the CPU emulator: warp matrix operations (nvcuda::wmma) computed in float.
//
// Every lane of the warp holds the whole fragment (num_elements is the tile's size,
// so loops over frag.x[i] touch every element in every lane and agree); loads are
// made by every lane, stores by lane 0 of the group after the lanes meet, and
// mma_sync accumulates in float as the tensor cores do for half and bfloat16 inputs.
//
// TF32 (sm_80+, 16x16x8 only, as in CUDA): precision::tf32 is a tag; the fragments
// store float, loaded from float memory unchanged.  __float_to_tf32 rounds to the
// nearest TF32 value (10 explicit mantissa bits, ties away from zero: cvt.rna.tf32.f32),
// keeping infinities and NaNs, and leaves the low 13 mantissa bits zero.  The tensor
// cores read only the top 19 bits of each tf32 input, so mma_sync zeroes the low 13
// bits of each input first: a kernel that forgets to convert gets TF32-like error here
// too, never FP32 accuracy.  Each product of two 11-bit mantissas is exact (formed in
// double), and the products are accumulated in float as for half and bfloat16.
#pragma once
#include "cuda_fp16.h"
#include "cuda_bf16.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace precision {
struct tf32;  // a type tag only, declared (not defined) as in CUDA's mma.h
}

template <class T, class U> struct __dlk_same { enum { value = 0 }; };
template <class T> struct __dlk_same<T, T> { enum { value = 1 }; };
template <class T> struct __dlk_is_tf32 { enum { value = __dlk_same<T, precision::tf32>::value }; };

// What a fragment's x[] holds: the element type itself, except float for the tf32 tag.
template <class T> struct __dlk_storage { typedef T type; };
template <> struct __dlk_storage<precision::tf32> { typedef float type; };

// cvt.rna.tf32.f32: add half a TF32 ulp to the magnitude's bits (a carry runs into the
// exponent, and past the largest TF32 value into infinity), then drop the low 13 bits.
// Infinities and NaNs are not rounded; a NaN whose payload lay only in the dropped bits
// keeps the quiet bit, so that it stays a NaN.
static inline float __float_to_tf32(float in) {
  unsigned int u;
  memcpy(&u, &in, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;
  else if ((u & 0x007fffffu) != 0 && (u & 0x007fe000u) == 0) u |= 0x00400000u;
  u &= 0xffffe000u;
  float out;
  memcpy(&out, &u, 4);
  return out;
}

// The value the tensor cores read from a fragment element: the value itself (half and
// bfloat16 are exact in float), or for tf32 the top 19 bits (sign, exponent, 10 bits).
template <class T> struct __dlk_mma_input {
  template <class S> static float value(const S& v) { return (float)v; }
};
template <> struct __dlk_mma_input<precision::tf32> {
  static float value(float v) {
    unsigned int u;
    memcpy(&u, &v, 4);
    u &= 0xffffe000u;
    memcpy(&v, &u, 4);
    return v;
  }
};

template <class Use, int M, int N, int K> struct __dlk_tile;
template <int M, int N, int K> struct __dlk_tile<matrix_a, M, N, K> { enum { rows = M, cols = K }; };
template <int M, int N, int K> struct __dlk_tile<matrix_b, M, N, K> { enum { rows = K, cols = N }; };
template <int M, int N, int K> struct __dlk_tile<accumulator, M, N, K> { enum { rows = M, cols = N }; };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(!__dlk_is_tf32<T>::value || (M == 16 && N == 16 && K == 8 && !__dlk_same<Use, accumulator>::value),
                "wmma: precision::tf32 is for matrix_a and matrix_b fragments of shape 16x16x8 only "
                "(the accumulator is float)");
  enum { rows = __dlk_tile<Use, M, N, K>::rows, cols = __dlk_tile<Use, M, N, K>::cols, num_elements = rows * cols,
         num_storage_elements = num_elements };
  typedef T element_type;
  typedef typename __dlk_storage<T>::type storage_element_type;
  storage_element_type x[num_elements];
};

template <class Use, int M, int N, int K, class T, class L, class V>
DLK_NOT_PROFILED static inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const V& value) {
  typedef typename __dlk_storage<T>::type S;
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = (S)value;
}

// The profiler (profiler.h) counts a fragment's loads and stores as the tensor cores' instructions make
// them, not as the emulator does them (every lane copies the whole tile): each lane touches its own
// elements, in the layout of mma.sync's fragments (a lane's group g = lane / 4, its place t = lane % 4).
// The emulator's own copies are not counted: DLK_NOT_PROFILED, defined in the prelude, where the
// source policy's scan of the student's preprocessed text does not see the attributes it forbids to students.
// Shapes 16x16x8 (tf32) and 16x16x16 (half, bfloat16) only; other shapes' fragments are not counted.
static inline void __dlk_lane_element(matrix_a, int K, int g, int t, int i, int& r, int& c) {
  if (K == 8) { r = g + 8 * (i & 1); c = t + 4 * (i >> 1); }
  else { r = g + 8 * ((i >> 1) & 1); c = 2 * t + (i & 1) + 8 * (i >> 2); }
}
static inline void __dlk_lane_element(matrix_b, int K, int g, int t, int i, int& r, int& c) {
  if (K == 8) { r = t + 4 * (i & 1); c = g + 8 * (i >> 1); }
  else { r = 2 * t + (i & 1) + 8 * ((i >> 1) & 1); c = g + 8 * (i >> 2); }
}
static inline void __dlk_lane_element(accumulator, int, int g, int t, int i, int& r, int& c) {
  r = g + 8 * ((i >> 1) & 1);
  c = 2 * t + (i & 1) + 8 * (i >> 2);
}
template <class Use, int M, int N, int K, class P>
__attribute__((always_inline)) static inline void __dlk_profile_fragment(const P* p, unsigned ldm, bool row_major_memory,
                                                                         int store) {
  if (M != 16 || N != 16 || (K != 8 && K != 16)) return;
  int lane = (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32);
  int per_lane = __dlk_tile<Use, M, N, K>::rows * __dlk_tile<Use, M, N, K>::cols / 32;
  for (int i = 0; i < per_lane; ++i) {
    int r, c;
    __dlk_lane_element(Use(), K, lane >> 2, lane & 3, i, r, c);
    __dlk_profile_access(row_major_memory ? p + (size_t)r * ldm + c : p + (size_t)c * ldm + r, sizeof(P), store);
  }
}

template <class Use, int M, int N, int K, class T, class L, class P>
DLK_NOT_PROFILED static inline void __dlk_load(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm, bool row_major_memory) {
  static_assert(!__dlk_is_tf32<T>::value || __dlk_same<P, float>::value,
                "wmma: a precision::tf32 fragment is loaded from const float* memory");
  typedef typename __dlk_storage<T>::type S;
  for (int r = 0; r < f.rows; ++r)
    for (int c = 0; c < f.cols; ++c)
      f.x[r * f.cols + c] = (S)(row_major_memory ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]);
  __syncwarp();
}

template <class Use, int M, int N, int K, class T, class P>
__attribute__((always_inline)) static inline void load_matrix_sync(fragment<Use, M, N, K, T, row_major>& f, const P* p,
                                                                   unsigned ldm) {
  __dlk_profile_fragment<Use, M, N, K>(p, ldm, true, 0);
  __dlk_load(f, p, ldm, true);
}
template <class Use, int M, int N, int K, class T, class P>
__attribute__((always_inline)) static inline void load_matrix_sync(fragment<Use, M, N, K, T, col_major>& f, const P* p,
                                                                   unsigned ldm) {
  __dlk_profile_fragment<Use, M, N, K>(p, ldm, false, 0);
  __dlk_load(f, p, ldm, false);
}
template <int M, int N, int K, class T, class P>
__attribute__((always_inline)) static inline void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const P* p,
                                                                   unsigned ldm, layout_t layout) {
  __dlk_profile_fragment<accumulator, M, N, K>(p, ldm, layout == mem_row_major, 0);
  __dlk_load(f, p, ldm, layout == mem_row_major);
}

template <int M, int N, int K, class T, class P>
DLK_NOT_PROFILED static inline void __dlk_store(P* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm,
                                         layout_t layout) {
  if (threadIdx.x % 32 == 0)
    for (int r = 0; r < f.rows; ++r)
      for (int c = 0; c < f.cols; ++c)
        (layout == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]) = (P)f.x[r * f.cols + c];
}
template <int M, int N, int K, class T, class P>
__attribute__((always_inline)) static inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T, void>& f,
                                                                    unsigned ldm, layout_t layout) {
  __dlk_profile_fragment<accumulator, M, N, K>(p, ldm, layout == mem_row_major, 1);
  __syncwarp();
  __dlk_store(p, f, ldm, layout);
  __syncwarp();
}

// Each product is formed exactly in double and rounded once to float (for half, bfloat16
// and tf32 inputs it is exact in float too, so this is the float product), then added to
// the float accumulator.
template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC, class TD>
DLK_NOT_PROFILED static inline void mma_sync(fragment<accumulator, M, N, K, TD, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                            const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC, void>& c) {
  static_assert(__dlk_is_tf32<TA>::value == __dlk_is_tf32<TB>::value &&
                (!__dlk_is_tf32<TA>::value || (__dlk_same<TC, float>::value && __dlk_same<TD, float>::value)),
                "wmma: mma_sync with precision::tf32 takes tf32 matrix_a and matrix_b fragments and float accumulators");
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = (float)c.x[i * N + j];
      for (int k = 0; k < K; ++k)
        acc += (float)((double)__dlk_mma_input<TA>::value(a.x[i * K + k]) * (double)__dlk_mma_input<TB>::value(b.x[k * N + j]));
      out[i * N + j] = acc;
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = (TD)out[i];
  __syncwarp();
}

}  // namespace wmma
}  // namespace nvcuda
