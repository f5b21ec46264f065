// mma.h for the CPU emulator: warp matrix operations (nvcuda::wmma) computed in float.
//
// Every lane of the warp holds the whole fragment (num_elements is the tile's size,
// so loops over frag.x[i] touch every element in every lane and agree); loads are
// made by every lane, stores by lane 0 of the group after the lanes meet, and
// mma_sync accumulates in float as the tensor cores do for half and bfloat16 inputs.
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

template <class Use, int M, int N, int K> struct __dlk_tile;
template <int M, int N, int K> struct __dlk_tile<matrix_a, M, N, K> { enum { rows = M, cols = K }; };
template <int M, int N, int K> struct __dlk_tile<matrix_b, M, N, K> { enum { rows = K, cols = N }; };
template <int M, int N, int K> struct __dlk_tile<accumulator, M, N, K> { enum { rows = M, cols = N }; };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  enum { rows = __dlk_tile<Use, M, N, K>::rows, cols = __dlk_tile<Use, M, N, K>::cols, num_elements = rows * cols };
  typedef T element_type;
  T x[num_elements];
};

template <class Use, int M, int N, int K, class T, class L, class V>
static inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const V& value) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = (T)value;
}

template <class Use, int M, int N, int K, class T, class L, class P>
static inline void __dlk_load(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm, bool row_major_memory) {
  for (int r = 0; r < f.rows; ++r)
    for (int c = 0; c < f.cols; ++c)
      f.x[r * f.cols + c] = (T)(row_major_memory ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]);
  __syncwarp();
}

template <class Use, int M, int N, int K, class T, class P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, row_major>& f, const P* p, unsigned ldm) { __dlk_load(f, p, ldm, true); }
template <class Use, int M, int N, int K, class T, class P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, col_major>& f, const P* p, unsigned ldm) { __dlk_load(f, p, ldm, false); }
template <int M, int N, int K, class T, class P>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const P* p, unsigned ldm, layout_t layout) {
  __dlk_load(f, p, ldm, layout == mem_row_major);
}

template <int M, int N, int K, class T, class P>
static inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm, layout_t layout) {
  __syncwarp();
  if (threadIdx.x % 32 == 0)
    for (int r = 0; r < f.rows; ++r)
      for (int c = 0; c < f.cols; ++c)
        (layout == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]) = (P)f.x[r * f.cols + c];
  __syncwarp();
}

template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC, class TD>
static inline void mma_sync(fragment<accumulator, M, N, K, TD, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                            const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC, void>& c) {
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = (float)c.x[i * N + j];
      for (int k = 0; k < K; ++k) acc += (float)a.x[i * K + k] * (float)b.x[k * N + j];
      out[i * N + j] = acc;
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = (TD)out[i];
  __syncwarp();
}

}  // namespace wmma
}  // namespace nvcuda
