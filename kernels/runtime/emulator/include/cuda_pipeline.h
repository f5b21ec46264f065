// cuda_pipeline.h for the CPU emulator: asynchronous copies (cp.async) made synchronous.
//
// A copy is done at the latest moment the program allows: when the thread waits for
// its batch (__pipeline_wait_prior), not when it is issued.  A kernel that reads the
// destination before waiting (or before the __syncthreads() after the wait, for
// other threads' copies) reads shared memory no copy has written yet, which the
// emulator reports.  Copies never waited for are never made.
#pragma once
#include <string.h>

struct __dlk_async_copy {
  void* dst;
  const void* src;
  size_t bytes, zero_fill;
  unsigned batch;  // 0: not committed yet
};
static const int __dlk_max_threads = 1024;
static __dlk_async_copy* __dlk_async_pending[__dlk_max_threads];
static int __dlk_async_count[__dlk_max_threads];
static unsigned __dlk_async_committed[__dlk_max_threads];
static unsigned __dlk_async_block[__dlk_max_threads];

static inline int __dlk_async_thread() {
  int t = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  if (__dlk_async_block[t] != __dlk_block_generation) {  // a new block: nothing pending
    __dlk_async_block[t] = __dlk_block_generation;
    __dlk_async_count[t] = 0;
    __dlk_async_committed[t] = 0;
  }
  if (!__dlk_async_pending[t]) __dlk_async_pending[t] = (__dlk_async_copy*)calloc(64, sizeof(__dlk_async_copy));
  return t;
}

static inline void __pipeline_memcpy_async(void* dst, const void* src, size_t bytes, size_t zero_fill = 0) {
  int t = __dlk_async_thread();
  if (__dlk_async_count[t] == 64) {
    printf("emulator: more than 64 asynchronous copies pending in one thread; wait for some first\n");
    __trap();
  }
  __dlk_async_pending[t][__dlk_async_count[t]++] = {dst, src, bytes - zero_fill, zero_fill, 0};
}

static inline void __pipeline_commit() {
  int t = __dlk_async_thread();
  unsigned batch = ++__dlk_async_committed[t];
  for (int k = 0; k < __dlk_async_count[t]; ++k)
    if (!__dlk_async_pending[t][k].batch) __dlk_async_pending[t][k].batch = batch;
}

// The copy is made by loads of the kernel's own, which AddressSanitizer checks as it checks the kernel's: while a
// launch tracks races, every buffer it may write is poisoned (as every buffer is when the grader reads the inputs
// back), and a load from one is a tracked read, where memcpy's interceptor would report the poison as an error.
static inline void __dlk_async_copy_bytes(void* dst, const void* src, size_t bytes) {
  if ((((uintptr_t)dst | (uintptr_t)src | bytes) & 3) == 0) {
    for (size_t k = 0; k < bytes / 4; ++k) ((unsigned*)dst)[k] = ((const volatile unsigned*)src)[k];
  } else {
    for (size_t k = 0; k < bytes; ++k) ((char*)dst)[k] = ((const volatile char*)src)[k];
  }
}

static inline void __pipeline_wait_prior(size_t prior) {
  int t = __dlk_async_thread();
  unsigned done_through = __dlk_async_committed[t] > prior ? __dlk_async_committed[t] - (unsigned)prior : 0;
  int kept = 0;
  for (int k = 0; k < __dlk_async_count[t]; ++k) {
    __dlk_async_copy c = __dlk_async_pending[t][k];
    if (c.batch && c.batch <= done_through) {
      __dlk_async_copy_bytes(c.dst, c.src, c.bytes);
      if (c.zero_fill) memset((char*)c.dst + c.bytes, 0, c.zero_fill);
    } else {
      __dlk_async_pending[t][kept++] = c;
    }
  }
  __dlk_async_count[t] = kept;
}

static inline size_t __cvta_generic_to_shared(const void* p) { return (size_t)p; }
static inline void* __cvta_shared_to_generic(size_t a) { return (void*)a; }
