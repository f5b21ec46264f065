// cooperative_groups.h for the CPU emulator: the block and tile parts.
//
// thread_block, this_thread_block(), tiled_partition<N>() / tiled_partition(g, N),
// thread_block_tile<N> with sync, shfl*, any/all/ballot, and reduce() with plus/less/
// greater/bit operations or the program's own operator (a function, functor or lambda).
// Tile operations are the warp intrinsics over the tile's lanes (the mask of the tile), so
// the emulator's checks of warp intrinsics apply.  A tile shuffles a value that is not a
// number (a struct of the program's own, such as a (max, sum) pair) as CUDA's cooperative
// groups do: in 32-bit words, for trivially copyable types of at most 32 bytes.
// Grid-wide groups: this_grid() with sync(), thread_rank(), size(), block_rank(), num_blocks().
// A module that uses this_grid() is launched cooperatively (every block resident): see
// run_grid_cooperative in runtime.cpp; grid.sync() is checked like a barrier.
#pragma once

#include <string.h>
#include <type_traits>

namespace cooperative_groups {

namespace details {
// a value the warp intrinsics do not take, moved word by word with shuffle_word
template <class T, class Shuffle>
static inline T shuffle_words(T value, Shuffle shuffle_word) {
  static_assert(std::is_trivially_copyable<T>::value, "a tile shuffles trivially copyable types only");
  static_assert(sizeof(T) <= 32, "cooperative groups' collectives are limited to types of at most 32 bytes");
  constexpr unsigned count = (sizeof(T) + sizeof(unsigned) - 1) / sizeof(unsigned);
  unsigned words[count] = {};
  memcpy(words, &value, sizeof(T));
  for (unsigned k = 0; k < count; ++k) words[k] = shuffle_word(words[k]);
  memcpy(&value, words, sizeof(T));
  return value;
}
}  // namespace details

struct thread_block {
  __device__ void sync() const { __syncthreads(); }
  __device__ unsigned thread_rank() const { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
  __device__ unsigned size() const { return blockDim.x * blockDim.y * blockDim.z; }
  __device__ unsigned num_threads() const { return size(); }
  __device__ dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  __device__ dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  __device__ dim3 group_dim() const { return blockDim; }
  __device__ dim3 dim_threads() const { return blockDim; }
};

static inline thread_block this_thread_block() { return thread_block(); }
static inline void sync(const thread_block& g) { g.sync(); }

struct grid_group {
  // __builtin_LINE() as a default argument is the caller's line: the reader's grid.sync() line
  __device__ void sync(int line = __builtin_LINE()) const { __dlk_grid_sync(line); }
  __device__ unsigned long long block_rank() const {
    return blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
  }
  __device__ unsigned long long num_blocks() const { return (unsigned long long)gridDim.x * gridDim.y * gridDim.z; }
  __device__ unsigned long long thread_rank() const {
    return block_rank() * (blockDim.x * blockDim.y * blockDim.z) +
           (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  }
  __device__ unsigned long long size() const { return num_blocks() * (blockDim.x * blockDim.y * blockDim.z); }
  __device__ unsigned long long num_threads() const { return size(); }
  __device__ dim3 group_dim() const { return gridDim; }
  __device__ dim3 dim_blocks() const { return gridDim; }
  __device__ dim3 block_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  __device__ bool is_valid() const { return true; }
};

static inline grid_group this_grid() { return grid_group(); }
static inline void sync(const grid_group& g, int line = __builtin_LINE()) { g.sync(line); }

template <unsigned N>
struct thread_block_tile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "a thread_block_tile has a power-of-two size of at most 32");
  static __device__ unsigned block_rank() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
  __device__ unsigned mask() const {
    unsigned lane = block_rank() % 32;
    unsigned base = lane & ~(N - 1);
    return N == 32 ? 0xffffffffu : (((1u << N) - 1) << base);
  }
  __device__ unsigned thread_rank() const { return block_rank() % N; }
  __device__ unsigned size() const { return N; }
  __device__ unsigned num_threads() const { return N; }
  __device__ unsigned meta_group_rank() const { return block_rank() / N; }
  __device__ unsigned meta_group_size() const {
    return (blockDim.x * blockDim.y * blockDim.z + N - 1) / N;
  }
  __device__ void sync() const { __syncwarp(mask()); }
  // a number as the warp intrinsic moves it, anything else word by word (intrinsic: a generic lambda)
  template <class T, class Intrinsic> static __device__ T shuffled(T v, Intrinsic intrinsic) {
    if constexpr (std::is_arithmetic<T>::value) return intrinsic(v);
    else return details::shuffle_words(v, intrinsic);
  }
  template <class T> __device__ T shfl(T v, int src) const {
    return shuffled(v, [&](auto w) { return __shfl_sync(mask(), w, src, N); });
  }
  template <class T> __device__ T shfl_down(T v, unsigned d) const {
    return shuffled(v, [&](auto w) { return __shfl_down_sync(mask(), w, d, N); });
  }
  template <class T> __device__ T shfl_up(T v, unsigned d) const {
    return shuffled(v, [&](auto w) { return __shfl_up_sync(mask(), w, d, N); });
  }
  template <class T> __device__ T shfl_xor(T v, unsigned m) const {
    return shuffled(v, [&](auto w) { return __shfl_xor_sync(mask(), w, m, N); });
  }
  __device__ int any(int p) const { return __any_sync(mask(), p); }
  __device__ int all(int p) const { return __all_sync(mask(), p); }
  __device__ unsigned ballot(int p) const {
    unsigned lane = block_rank() % 32;
    return __ballot_sync(mask(), p) >> (N == 32 ? 0 : (lane & ~(N - 1)));
  }
};

template <unsigned N> static inline thread_block_tile<N> tiled_partition(const thread_block&) { return thread_block_tile<N>(); }
template <unsigned N> static inline void sync(const thread_block_tile<N>& g) { g.sync(); }

template <class T> struct plus { __device__ T operator()(T a, T b) const { return a + b; } };
template <class T> struct less { __device__ T operator()(T a, T b) const { return a < b ? a : b; } };
template <class T> struct greater { __device__ T operator()(T a, T b) const { return a < b ? b : a; } };
template <class T> struct bit_and { __device__ T operator()(T a, T b) const { return a & b; } };
template <class T> struct bit_or { __device__ T operator()(T a, T b) const { return a | b; } };
template <class T> struct bit_xor { __device__ T operator()(T a, T b) const { return a ^ b; } };

// every lane of the tile gets the reduction of all its lanes' values
template <unsigned N, class T, class Op>
static inline T reduce(const thread_block_tile<N>& g, T value, Op op) {
  for (unsigned m = N / 2; m > 0; m /= 2) value = op(value, g.shfl_xor(value, m));
  return value;
}

// inclusive and exclusive scans over the lanes of the tile
template <unsigned N, class T, class Op>
static inline T inclusive_scan(const thread_block_tile<N>& g, T value, Op op) {
  for (unsigned d = 1; d < N; d *= 2) {
    T up = g.shfl_up(value, d);
    if (g.thread_rank() >= d) value = op(value, up);
  }
  return value;
}
template <unsigned N, class T>
static inline T inclusive_scan(const thread_block_tile<N>& g, T value) { return inclusive_scan(g, value, plus<T>()); }

}  // namespace cooperative_groups
