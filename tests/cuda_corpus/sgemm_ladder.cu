// A single-precision GEMM ladder in the style of the kernel-by-kernel SGEMM write-ups:
// each kernel computes C = alpha * A @ B + beta * C for row-major A (M x K), B (K x N)
// and C (M x N).  Like those write-ups, the file starts with `#pragma once` (it was a
// header there), and the tiled kernels assume M, N and K are multiples of their tiles.
#pragma once

#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CEIL_DIV(M, N) (((M) + (N) - 1) / (N))

// One thread per element of C, a 2D block of threads per BLOCKSIZE x BLOCKSIZE tile:
// launch with grid (CEIL_DIV(N, BLOCKSIZE), CEIL_DIV(M, BLOCKSIZE)), block BLOCKSIZE * BLOCKSIZE.
// Neighbouring threads take neighbouring columns, so a warp reads B and writes C coalesced.
template <const uint BLOCKSIZE>
__global__ void sgemm_coalesced(int M, int N, int K, float alpha, const float *A, const float *B,
                                float beta, float *C) {
  const int col = blockIdx.x * BLOCKSIZE + (threadIdx.x % BLOCKSIZE);
  const int row = blockIdx.y * BLOCKSIZE + (threadIdx.x / BLOCKSIZE);
  if (row < M && col < N) {
    float dot = 0.0f;
    for (int k = 0; k < K; ++k) dot += A[row * K + k] * B[k * N + col];
    C[row * N + col] = alpha * dot + beta * C[row * N + col];
  }
}

// Shared-memory tiles of BM x BK (A) and BK x BN (B); each thread accumulates a column
// strip of TM results in registers.  Block: BM * BN / TM threads; grid (N / BN, M / BM).
template <const int BM, const int BN, const int BK, const int TM>
__global__ void sgemm_strip_per_thread(int M, int N, int K, float alpha, const float *A,
                                       const float *B, float beta, float *C) {
  __shared__ float tileA[BM * BK];
  __shared__ float tileB[BK * BN];
  const int stripCol = threadIdx.x % BN;       // this thread's column of the C tile
  const int stripRow = threadIdx.x / BN;       // and its strip of TM rows
  const int loadRowA = threadIdx.x / BK, loadColA = threadIdx.x % BK;
  const int loadRowB = threadIdx.x / BN, loadColB = threadIdx.x % BN;
  assert(BM * BK == blockDim.x && BK * BN == blockDim.x);  // one element of each tile per thread

  const float *a = A + blockIdx.y * BM * K;
  const float *b = B + blockIdx.x * BN;
  float *c = C + blockIdx.y * BM * N + blockIdx.x * BN;
  float strip[TM] = {0.0f};
  for (int k0 = 0; k0 < K; k0 += BK) {
    tileA[loadRowA * BK + loadColA] = a[loadRowA * K + loadColA];
    tileB[loadRowB * BN + loadColB] = b[loadRowB * N + loadColB];
    __syncthreads();
    a += BK;
    b += BK * N;
    for (int k = 0; k < BK; ++k) {
      const float bValue = tileB[k * BN + stripCol];
      for (int r = 0; r < TM; ++r) strip[r] += tileA[(stripRow * TM + r) * BK + k] * bValue;
    }
    __syncthreads();
  }
  for (int r = 0; r < TM; ++r) {
    float *out = &c[(stripRow * TM + r) * N + stripCol];
    *out = alpha * strip[r] + beta * *out;
  }
}

// Register blocking (TM x TN results per thread), 128-bit loads and stores, and two stages
// of shared memory: while the block computes on one stage, each thread has already fetched
// its float4 of the next A and B tiles into registers, and stores them into the other stage,
// so one barrier per step of k suffices.  A is kept transposed in shared memory (k-major) so
// that a thread's TM values of one k are contiguous.
// Block: (BM / TM) * (BN / TN) threads; grid (N / BN, M / BM).
template <const int BM, const int BN, const int BK, const int TM, const int TN>
__global__ void __launch_bounds__((BM * BN) / (TM * TN), 1)
    sgemm_double_buffered(int M, int N, int K, float alpha, const float *A, const float *B,
                          float beta, float *C) {
  constexpr int THREADS = (BM * BN) / (TM * TN);
  static_assert(BM * BK == 4 * THREADS && BK * BN == 4 * THREADS, "each thread moves one float4 of each tile");
  static_assert(TN == 4, "a thread's row of results is stored as one float4");
  __shared__ float stageA[2][BK * BM];
  __shared__ float stageB[2][BK * BN];

  const int tid = threadIdx.x;
  const int resRow = tid / (BN / TN), resCol = tid % (BN / TN);
  const int rowA = tid / (BK / 4), colA = 4 * (tid % (BK / 4));
  const int rowB = tid / (BN / 4), colB = 4 * (tid % (BN / 4));
  const float *a = A + blockIdx.y * BM * K;
  const float *b = B + blockIdx.x * BN;

  float4 nextA = reinterpret_cast<const float4 *>(&a[rowA * K + colA])[0];
  float4 nextB = reinterpret_cast<const float4 *>(&b[rowB * N + colB])[0];
  stageA[0][(colA + 0) * BM + rowA] = nextA.x;
  stageA[0][(colA + 1) * BM + rowA] = nextA.y;
  stageA[0][(colA + 2) * BM + rowA] = nextA.z;
  stageA[0][(colA + 3) * BM + rowA] = nextA.w;
  reinterpret_cast<float4 *>(&stageB[0][rowB * BN + colB])[0] = nextB;
  __syncthreads();

  float acc[TM][TN] = {{0.0f}};
  float fragA[TM], fragB[TN];
  int stage = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    const bool more = k0 + BK < K;
    if (more) {  // the next tiles' loads are issued before the math on this one
      nextA = reinterpret_cast<const float4 *>(&a[rowA * K + k0 + BK + colA])[0];
      nextB = reinterpret_cast<const float4 *>(&b[(k0 + BK + rowB) * N + colB])[0];
    }
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; ++i) fragA[i] = stageA[stage][k * BM + resRow * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) fragB[j] = stageB[stage][k * BN + resCol * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += fragA[i] * fragB[j];
    }
    if (more) {
      const int other = stage ^ 1;
      stageA[other][(colA + 0) * BM + rowA] = nextA.x;
      stageA[other][(colA + 1) * BM + rowA] = nextA.y;
      stageA[other][(colA + 2) * BM + rowA] = nextA.z;
      stageA[other][(colA + 3) * BM + rowA] = nextA.w;
      reinterpret_cast<float4 *>(&stageB[other][rowB * BN + colB])[0] = nextB;
    }
    __syncthreads();
    stage ^= 1;
  }

  float *c = C + (blockIdx.y * BM + resRow * TM) * N + blockIdx.x * BN + resCol * TN;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    float4 old = reinterpret_cast<float4 *>(&c[i * N])[0];
    old.x = alpha * acc[i][0] + beta * old.x;
    old.y = alpha * acc[i][1] + beta * old.y;
    old.z = alpha * acc[i][2] + beta * old.z;
    old.w = alpha * acc[i][3] + beta * old.w;
    reinterpret_cast<float4 *>(&c[i * N])[0] = old;
  }
}
