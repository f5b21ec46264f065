// Softmax over the rows of an N x C matrix in a single pass over the inputs, as training
// code's kernel ladders write it: each lane keeps a running (max, sum of exp(x - max)) pair,
// and the pairs are combined with cooperative groups' reduce and an operator of the
// program's own (a __device__ function, a functor, a lambda).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>
#include <math.h>

namespace cg = cooperative_groups;

struct SumMax {
  float maxval;  // the largest input seen so far
  float sum;     // the sum of exp(x - maxval) over the inputs seen
};

// merge two partial pairs: the smaller maximum's sum is rescaled to the larger one
__device__ __forceinline__ SumMax reduce_sum_max_op(SumMax a, SumMax b) {
  bool a_bigger = a.maxval > b.maxval;
  SumMax big = a_bigger ? a : b;
  SumMax small = a_bigger ? b : a;
  if (small.sum == 0.0f) return big;  // an empty pair (maxval -inf) adds nothing
  SumMax merged;
  merged.maxval = big.maxval;
  merged.sum = big.sum + small.sum * expf(small.maxval - big.maxval);
  return merged;
}

// One warp per row; launch with grid ceil(N / (blockDim.x / 32)).
__global__ void softmax_online_warp(float *out, const float *inp, int N, int C) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
  if (row >= N) return;
  const float *x = inp + row * C;
  SumMax partial = {-INFINITY, 0.0f};
  for (int i = warp.thread_rank(); i < C; i += warp.size()) partial = reduce_sum_max_op(partial, {x[i], 1.0f});
  SumMax total = cg::reduce(warp, partial, reduce_sum_max_op);
  float norm = 1.0f / total.sum;
  for (int i = warp.thread_rank(); i < C; i += warp.size()) out[row * C + i] = expf(x[i] - total.maxval) * norm;
}

// the same merge as a function object
struct MergeSumMax {
  __device__ SumMax operator()(const SumMax &a, const SumMax &b) const { return reduce_sum_max_op(a, b); }
};

// One block of BLOCK threads per row: warps reduce their pairs with the functor, then the
// first warp reduces the warps' pairs from shared memory.
template <int BLOCK>
__global__ void softmax_online_block(float *out, const float *inp, int C) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps, at most 32 of them");
  cg::thread_block block = cg::this_thread_block();
  auto warp = cg::tiled_partition<32>(block);
  __shared__ SumMax per_warp[BLOCK / 32];
  const float *x = inp + (size_t)blockIdx.x * C;
  SumMax partial = {-INFINITY, 0.0f};
  for (int i = block.thread_rank(); i < C; i += BLOCK) partial = MergeSumMax()(partial, SumMax{x[i], 1.0f});
  partial = cg::reduce(warp, partial, MergeSumMax());
  if (warp.thread_rank() == 0) per_warp[warp.meta_group_rank()] = partial;
  block.sync();
  if (warp.meta_group_rank() == 0) {
    SumMax mine = warp.thread_rank() < BLOCK / 32 ? per_warp[warp.thread_rank()] : SumMax{-INFINITY, 0.0f};
    mine = cg::reduce(warp, mine, MergeSumMax());
    if (warp.thread_rank() == 0) per_warp[0] = mine;
  }
  block.sync();
  const SumMax total = per_warp[0];
  for (int i = block.thread_rank(); i < C; i += BLOCK)
    out[(size_t)blockIdx.x * C + i] = expf(x[i] - total.maxval) / total.sum;
}

// Log-sum-exp of each row, one warp per row, in two passes combined with lambdas.
__global__ void logsumexp_rows(const float *inp, float *lse, int N, int C) {
  auto warp = cg::tiled_partition<32>(cg::this_thread_block());
  int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
  if (row >= N) return;
  const float *x = inp + row * C;
  float m = -INFINITY;
  for (int i = warp.thread_rank(); i < C; i += 32) m = fmaxf(m, x[i]);
  m = cg::reduce(warp, m, [](float a, float b) { return fmaxf(a, b); });
  float s = 0.0f;
  for (int i = warp.thread_rank(); i < C; i += 32) s += expf(x[i] - m);
  s = cg::reduce(warp, s, [](float a, float b) { return a + b; });
  if (warp.thread_rank() == 0) lse[row] = m + logf(s);
}
