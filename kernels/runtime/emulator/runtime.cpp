// The CPU emulator's worker: runs the kernels of one compiled module.
//
// Linked with the reader's translation unit (prelude.h + their source +
// generated trampolines) into one executable.  Python starts it, sends launch
// requests on fd 3 and reads replies on fd 4 (protocol.py).  Kernel crashes,
// AddressSanitizer reports and time limits end this process, never Python's.
//
// One block runs at a time.  Its threads are fibers that switch only at
// barriers and warp intrinsics; a kernel without either runs as a plain loop
// of calls.  A cooperative launch (a module using this_grid()) keeps every
// block's fibers and shared memory, parking each block at grid.sync() until
// all have reached it (run_grid_cooperative).  Each launch can be run twice from the same inputs (threads and
// blocks in forward, then in reverse order, with different poison patterns in
// shared memory) so that Python can compare the outputs to find races and
// reads of shared memory no thread wrote.

#include "prelude.h"
#undef printf
#undef clock

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <execinfo.h>
#endif

#include <algorithm>
#include <string>
#include <vector>

#if defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#endif

// The runtime itself is not instrumented (it is built with -O2 for speed), but it is
// linked with AddressSanitizer and annotates fiber switches for it.
#if defined(__SANITIZE_ADDRESS__) || defined(DLK_WITH_ASAN)
#define DLK_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#else
#define DLK_ASAN 0
#endif

// Fibers switch with a few instructions on x86-64 (callee-saved registers, stack
// pointer, SSE and x87 control words); elsewhere, or with DLK_FORCE_UCONTEXT, through
// the C library's ucontext.
#if defined(__x86_64__) && !defined(DLK_FORCE_UCONTEXT)
#define DLK_FAST_SWITCH 1
#else
#define DLK_FAST_SWITCH 0
#include <ucontext.h>
#endif

extern "C" const __dlk_kernel_entry __dlk_kernels[];
extern "C" const __dlk_variable_entry __dlk_variables[];
extern "C" const __dlk_variable_entry __dlk_file_shared[];

// ---------------------------------------------------------------------------
// Built-in variables
extern "C" {
uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;
unsigned __dlk_block_generation = 1;
}

namespace {

enum ErrorKind { ERR_NONE = 0, ERR_ASSERT = 1, ERR_DIVERGENCE = 2, ERR_TRAP = 3, ERR_OTHER = 4, ERR_GLOBAL_RACE = 5 };
enum State { RUNNABLE, AT_BARRIER, AT_WARP, DONE, AT_GRID };

const size_t kStackBytes = 64 * 1024;
const size_t kGuardBytes = 4096;
const int kWarp = 32;

struct Thread {
  State state;
  int line;
  uint3 idx;
  // a pending barrier or warp operation and its result
  int op;
  unsigned mask;
  unsigned long long value;
  int param, width;
  unsigned long long result;
#if DLK_FAST_SWITCH
  void* sp;
#else
  ucontext_t context;
#endif
  char* stack_lo;
};

// ---- launch state --------------------------------------------------------
void (*g_launch)(void* const*) = nullptr;
void* const* g_args = nullptr;
std::vector<Thread> g_threads;
std::vector<char*> g_stacks;
Thread* g_current = nullptr;
bool g_in_fiber = false;
bool g_fast_mode = false;
jmp_buf g_fast_escape;
int g_error = ERR_NONE;
std::string g_error_message;
std::string g_printf;
bool g_printf_truncated = false;
const char* g_run_name = "forward";
unsigned char g_poison = 0xFF;
long long g_clock_ticks = 0;  // clock(): a counter, restarted with each run so that runs agree

// static shared arrays seen in the current block
struct SharedRegion {
  void* address;
  size_t bytes, elem_bytes;
  const char* name;
  int line;
};
std::vector<SharedRegion> g_shared;
std::string g_unwritten;  // first shared array left (partly) unwritten by a block

// dynamic shared memory: the END of a static arena, followed by a poisoned pad, so
// that an overrun is reported (the runtime is not instrumented: it poisons itself)
const size_t kArenaBytes = 232 * 1024;
const size_t kArenaPad = 256;
alignas(64) char __dlk_dynamic_arena[kArenaBytes + kArenaPad];
char* g_dynamic = __dlk_dynamic_arena + kArenaBytes;
size_t g_dynamic_bytes = 0;
void** g_dynamic_slots[64];
int g_dynamic_slot_count = 0;

// argument buffers of the launch (for the crash report)
struct Buffer {
  char* data;
  size_t bytes;
  size_t margin = 0;  // bytes allocated before and after the data in a profiled launch (profiler.h)
  bool output;
  uint32_t element_bytes;  // of the buffer's dtype: the granularity of the race shadow
  std::vector<char> initial;
};
std::vector<Buffer> g_buffers;

// ---- fibers --------------------------------------------------------------
#if DLK_FAST_SWITCH
extern "C" void dlk_switch_context(void** save_sp, void* new_sp);
asm(R"(
    .text
    .globl dlk_switch_context
    .type dlk_switch_context,@function
dlk_switch_context:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size dlk_switch_context, .-dlk_switch_context
)");
void* g_scheduler_sp = nullptr;
#else
ucontext_t g_scheduler_context;
#endif

const void* g_scheduler_stack_bottom = nullptr;
size_t g_scheduler_stack_size = 0;

void fiber_main();

// Counts of the block's threads by state, kept as threads block and are released.
size_t g_nthreads = 0;
size_t g_done = 0, g_at_barrier = 0, g_at_warp = 0;
int g_barrier_line = -1;
bool g_barrier_mixed = false;
// grid-wide barriers (cooperative_groups::this_grid().sync()), in a cooperative launch only
bool g_cooperative = false;
size_t g_at_grid = 0;
int g_grid_line = -1;
bool g_grid_mixed = false;
bool g_reverse = false;
bool g_track_races = false;  // this run tracks accesses to global memory (race::)
[[noreturn]] void fail_in_kernel(int kind, const std::string& message);

}  // namespace

#include "profiler.h"
#include "global_races.h"

namespace {
size_t g_pass_k = 0;  // position of the running thread in this pass's order

inline size_t order_index(size_t k) { return g_reverse ? g_nthreads - 1 - k : k; }

// Starts a pass at thread t (position k): the threads then hand over to each
// other directly, in order, and the last one returns here.
void resume(Thread* t, size_t k) {
  g_pass_k = k;
  g_current = t;
  threadIdx = t->idx;
  g_in_fiber = true;
#if DLK_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, t->stack_lo, kStackBytes);
#endif
#if DLK_FAST_SWITCH
  dlk_switch_context(&g_scheduler_sp, t->sp);
#else
  swapcontext(&g_scheduler_context, &t->context);
#endif
#if DLK_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  g_in_fiber = false;
}

// The running thread blocks (or ends): switch to the next runnable thread of
// the pass, or back to the scheduler after the last one.
void switch_away(bool dying) {
  Thread* me = g_current;
  Thread* next = nullptr;
  if (!g_error) {
    for (size_t k = g_pass_k + 1; k < g_nthreads; ++k) {
      Thread* t = &g_threads[order_index(k)];
      if (t->state == RUNNABLE) {
        g_pass_k = k;
        next = t;
        break;
      }
    }
  }
#if DLK_ASAN
  void* fake = nullptr;
  if (next)
    __sanitizer_start_switch_fiber(dying ? nullptr : &fake, next->stack_lo, kStackBytes);
  else
    __sanitizer_start_switch_fiber(dying ? nullptr : &fake, g_scheduler_stack_bottom, g_scheduler_stack_size);
#endif
  if (next) {
    g_current = next;
    threadIdx = next->idx;
#if DLK_FAST_SWITCH
    dlk_switch_context(&me->sp, next->sp);
#else
    swapcontext(&me->context, &next->context);
#endif
  } else {
#if DLK_FAST_SWITCH
    dlk_switch_context(&me->sp, g_scheduler_sp);
#else
    swapcontext(&me->context, &g_scheduler_context);
#endif
  }
#if DLK_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  (void)dying;
}

// Not instrumented: its frame never returns, so it must leave no poisoned redzones
// on the stack that the next block's thread reuses.
const void* g_entry_bottom = nullptr;
size_t g_entry_size = 0;
__attribute__((no_sanitize_address)) void fiber_main() {
#if DLK_ASAN
  const void*& bottom = g_entry_bottom;
  size_t& size = g_entry_size;
  __sanitizer_finish_switch_fiber(nullptr, &bottom, &size);
  if (!g_scheduler_stack_bottom) {  // the first fiber ever is entered from the scheduler
    g_scheduler_stack_bottom = bottom;
    g_scheduler_stack_size = size;
  }
#endif
  g_launch(g_args);
  race::end_segment();
  g_current->state = DONE;
  ++g_done;
  switch_away(true);
  abort();  // a finished fiber is never resumed
}

__attribute__((no_sanitize_address)) void prepare_fiber(Thread* t) {
#if DLK_FAST_SWITCH
  uint64_t* sp = (uint64_t*)(((uintptr_t)(t->stack_lo + kStackBytes)) & ~(uintptr_t)15);
  *--sp = 0;                           // return address of fiber_main (never used)
  *--sp = (uint64_t)(uintptr_t)&fiber_main;  // where dlk_switch_context returns to
  for (int i = 0; i < 6; ++i) *--sp = 0;  // rbp rbx r12 r13 r14 r15
  uint32_t mxcsr;
  uint16_t fcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  uint64_t control = mxcsr | ((uint64_t)fcw << 32);
  *--sp = control;
  t->sp = sp;
#else
  getcontext(&t->context);
  t->context.uc_stack.ss_sp = t->stack_lo;
  t->context.uc_stack.ss_size = kStackBytes;
  t->context.uc_link = nullptr;
  makecontext(&t->context, fiber_main, 0);
#endif
}

void ensure_stacks(size_t n) {
  while (g_stacks.size() < n) {
    size_t total = kStackBytes + kGuardBytes;
    char* base = (char*)mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      fprintf(stderr, "emulator: cannot map a fiber stack\n");
      _exit(71);
    }
    mprotect(base, kGuardBytes, PROT_NONE);  // guard page below the stack
    g_stacks.push_back(base + kGuardBytes);
  }
}

// ---- errors ----------------------------------------------------------------
std::string where(const Thread* t) {
  char text[160];
  uint3 i = t ? t->idx : threadIdx;
  snprintf(text, sizeof text, "block (%u,%u,%u) thread (%u,%u,%u)", blockIdx.x, blockIdx.y, blockIdx.z, i.x, i.y, i.z);
  return text;
}

std::string thread_name(const Thread& t) {
  char text[64];
  snprintf(text, sizeof text, "(%u,%u,%u)", t.idx.x, t.idx.y, t.idx.z);
  return text;
}

// Called from kernel code: ends the launch with an error.
[[noreturn]] void fail_in_kernel(int kind, const std::string& message) {
  g_error = kind;
  g_error_message = message;
  if (g_in_fiber) {
    g_current->state = DONE;
    ++g_done;
    switch_away(false);
  } else if (g_fast_mode) {
    longjmp(g_fast_escape, 2);
  }
  fprintf(stderr, "emulator: %s\n", message.c_str());
  _exit(72);
}


// ---- the block scheduler -------------------------------------------------------

unsigned warp_existing_mask(size_t warp) {
  size_t first = warp * kWarp;
  size_t count = g_nthreads - first < (size_t)kWarp ? g_nthreads - first : kWarp;
  return count >= 32 ? 0xffffffffu : ((1u << count) - 1);
}

const char* op_name(int op) {
  switch (op) {
    case DLK_SHFL_IDX: return "__shfl_sync";
    case DLK_SHFL_UP: return "__shfl_up_sync";
    case DLK_SHFL_DOWN: return "__shfl_down_sync";
    case DLK_SHFL_XOR: return "__shfl_xor_sync";
    case DLK_BALLOT: return "__ballot_sync";
    case DLK_ANY: return "__any_sync";
    case DLK_ALL: return "__all_sync";
    case DLK_SYNCWARP: return "__syncwarp";
    case DLK_REDUCE_ADD: return "__reduce_add_sync";
    case DLK_REDUCE_MIN: return "__reduce_min_sync";
    case DLK_REDUCE_MAX: return "__reduce_max_sync";
    case DLK_MATCH_ANY: return "__match_any_sync";
    case DLK_ACTIVEMASK: return "__activemask";
  }
  return "warp operation";
}

void set_error(int kind, const std::string& message) {
  if (g_error == ERR_NONE) {
    g_error = kind;
    g_error_message = message;
  }
}

unsigned long long warp_result(Thread* lanes, unsigned group, int lane) {
  Thread& me = lanes[lane];
  int width = me.width;
  if (width <= 0 || width > kWarp || (width & (width - 1))) width = kWarp;
  int seg = lane & ~(width - 1);
  int src = lane;
  switch (me.op) {
    case DLK_SHFL_IDX: src = seg + (me.param & (width - 1)); break;
    case DLK_SHFL_UP: src = lane - me.param; if (src < seg) src = lane; break;
    case DLK_SHFL_DOWN: src = lane + me.param; if (src >= seg + width) src = lane; break;
    case DLK_SHFL_XOR: src = lane ^ me.param; if (src < seg || src >= seg + width) src = lane; break;
    case DLK_BALLOT: case DLK_ANY: case DLK_ALL: {
      unsigned bits = 0;
      for (int l = 0; l < kWarp; ++l)
        if ((group >> l & 1u) && lanes[l].value) bits |= 1u << l;
      if (me.op == DLK_BALLOT) return bits;
      if (me.op == DLK_ANY) return bits != 0;
      return bits == group;
    }
    case DLK_SYNCWARP: return 0;
    case DLK_REDUCE_ADD: case DLK_REDUCE_MIN: case DLK_REDUCE_MAX: {
      unsigned acc = me.op == DLK_REDUCE_ADD ? 0u : (me.op == DLK_REDUCE_MIN ? 0xffffffffu : 0u);
      for (int l = 0; l < kWarp; ++l) {
        if (!(group >> l & 1u)) continue;
        unsigned v = (unsigned)lanes[l].value;
        if (me.op == DLK_REDUCE_ADD) acc += v;
        else if (me.op == DLK_REDUCE_MIN) acc = v < acc ? v : acc;
        else acc = v > acc ? v : acc;
      }
      return acc;
    }
    case DLK_MATCH_ANY: {
      unsigned bits = 0;
      for (int l = 0; l < kWarp; ++l)
        if ((group >> l & 1u) && lanes[l].value == me.value) bits |= 1u << l;
      return bits;
    }
  }
  if (src < 0 || src >= kWarp || !(group >> src & 1u)) src = lane;
  return lanes[src].value;
}

// Release every warp whose named lanes have all arrived.  Returns true if any did.
bool release_warps() {
  bool released = false;
  size_t nwarps = (g_nthreads + kWarp - 1) / kWarp;
  for (size_t w = 0; w < nwarps; ++w) {
    Thread* lanes = &g_threads[w * kWarp];
    unsigned existing = warp_existing_mask(w);
    for (int lane = 0; lane < kWarp; ++lane) {
      if (!(existing >> lane & 1u) || lanes[lane].state != AT_WARP) continue;
      Thread& me = lanes[lane];
      if (me.op == DLK_ACTIVEMASK) {
        // every other lane has blocked or ended: the converged lanes are those at this call
        unsigned group = 0;
        for (int l = 0; l < kWarp; ++l)
          if ((existing >> l & 1u) && lanes[l].state == AT_WARP && lanes[l].op == DLK_ACTIVEMASK && lanes[l].line == me.line)
            group |= 1u << l;
        for (int l = 0; l < kWarp; ++l)
          if (group >> l & 1u) {
            lanes[l].result = group;
            lanes[l].state = RUNNABLE;
            --g_at_warp;
          }
        released = true;
        continue;
      }
      unsigned group = me.mask & existing;
      if (!(group >> lane & 1u)) {
        char text[400];
        snprintf(text, sizeof text,
                 "%s on line %d: thread %s (lane %d of warp %zu) passed mask 0x%08x, which does not include its own lane; "
                 "every thread calling a *_sync intrinsic must be named in its mask",
                 op_name(me.op), me.line, thread_name(me).c_str(), lane, w, me.mask);
        set_error(ERR_DIVERGENCE, text);
        return false;
      }
      bool ready = true;
      for (int l = 0; l < kWarp; ++l) {
        if (!(group >> l & 1u)) continue;
        if (lanes[l].state == DONE) {
          char text[600];
          snprintf(text, sizeof text,
                   "%s on line %d: thread %s waits for lane %d of its warp (thread %s), which is named in mask 0x%08x "
                   "but has already exited; a *_sync intrinsic must be reached by every lane its mask names "
                   "(use __activemask() or __ballot_sync to build the mask of the lanes still running)",
                   op_name(me.op), me.line, thread_name(me).c_str(), l, thread_name(lanes[l]).c_str(), me.mask);
          set_error(ERR_DIVERGENCE, text);
          return false;
        }
        if (lanes[l].state != AT_WARP) ready = false;
      }
      if (!ready) continue;
      unsigned long long results[kWarp];
      for (int l = 0; l < kWarp; ++l)
        if (group >> l & 1u) results[l] = warp_result(lanes, group, l);
      for (int l = 0; l < kWarp; ++l)
        if (group >> l & 1u) {
          lanes[l].result = results[l];
          lanes[l].state = RUNNABLE;
          --g_at_warp;
        }
      released = true;
    }
  }
  return released;
}

std::string describe_states() {
  // "N threads at <what> (e.g. thread (x,y,z))" for each distinct wait point
  struct Group { int state, op, line; size_t count; size_t first; };
  std::vector<Group> groups;
  for (size_t i = 0; i < g_nthreads; ++i) {
    Thread& t = g_threads[i];
    int op = t.state == AT_WARP ? t.op : -1;
    int line = t.state == DONE ? 0 : t.line;
    bool found = false;
    for (auto& g : groups)
      if (g.state == t.state && g.op == op && g.line == line) { g.count++; found = true; break; }
    if (!found) groups.push_back({t.state, op, line, 1, i});
  }
  std::string text;
  for (auto& g : groups) {
    char part[300];
    const char* what = g.state == DONE ? "have exited the kernel" : nullptr;
    char wait[160];
    if (g.state == AT_BARRIER) { snprintf(wait, sizeof wait, "wait at __syncthreads() on line %d", g.line); what = wait; }
    if (g.state == AT_WARP) { snprintf(wait, sizeof wait, "wait at %s on line %d", op_name(g.op), g.line); what = wait; }
    if (g.state == AT_GRID) { snprintf(wait, sizeof wait, "wait at grid.sync() on line %d", g.line); what = wait; }
    if (!what) what = "are running";
    snprintf(part, sizeof part, "\n  %zu thread%s %s (e.g. thread %s)", g.count, g.count == 1 ? "" : "s", what,
             thread_name(g_threads[g.first]).c_str());
    text += part;
  }
  return text;
}

void start_block_fibers(size_t first_stack) {
  for (size_t i = 0; i < g_nthreads; ++i) {
    Thread& t = g_threads[i];
    t.state = RUNNABLE;
    t.line = 0;
    t.stack_lo = g_stacks[first_stack + i];
    prepare_fiber(&t);
  }
  g_done = g_at_barrier = g_at_warp = g_at_grid = 0;
  g_barrier_line = g_grid_line = -1;
  g_barrier_mixed = g_grid_mixed = false;
}

bool grid_wait_ends_block();

// Runs the block's threads until all have exited (or, in a cooperative launch, all that
// have not exited wait at grid.sync()), or until an error.
void schedule_block_fibers(bool reverse) {
  g_reverse = reverse;
  for (;;) {
    for (size_t k = 0; k < g_nthreads; ++k) {
      Thread* t = &g_threads[order_index(k)];
      if (t->state == RUNNABLE) {
        resume(t, k);
        break;
      }
    }
    if (g_error) return;
    size_t done = g_done, at_barrier = g_at_barrier, at_warp = g_at_warp;
    if (done == g_nthreads) return;
    if (at_warp) {
      if (release_warps()) continue;
      if (g_error) return;
    }
    if (g_at_grid && !at_warp) {
      grid_wait_ends_block();
      return;
    }
    if (at_barrier && !at_warp) {
      int line = g_barrier_line;
      bool same_line = !g_barrier_mixed;
      if (done == 0 && same_line) {
        int op = g_threads[0].op, count = 0, all = 1, any = 0;
        if (op >= 0) {
          for (size_t i = 0; i < g_nthreads; ++i) {
            int p = g_threads[i].value != 0;
            count += p;
            all &= p;
            any |= p;
          }
        }
        unsigned long long result = op == 0 ? count : (op == 1 ? all : any);
        for (size_t i = 0; i < g_nthreads; ++i) {
          g_threads[i].state = RUNNABLE;
          g_threads[i].result = result;
        }
        g_at_barrier = 0;
        g_barrier_line = -1;
        race::barrier();
        continue;
      }
      std::string text;
      char head[300];
      if (same_line) {
        snprintf(head, sizeof head,
                 "barrier divergence in block (%u,%u,%u): __syncthreads() on line %d is reached by %zu of the block's %zu "
                 "threads, but the others have exited the kernel without reaching it:",
                 blockIdx.x, blockIdx.y, blockIdx.z, line, at_barrier, g_nthreads);
        text = head + describe_states() +
               "\nEvery thread of a block must reach every __syncthreads(): do not return early before a barrier "
               "(guard the work with an if instead), and do not put a barrier inside a branch that only some threads take.";
      } else {
        snprintf(head, sizeof head,
                 "barrier divergence in block (%u,%u,%u): the threads wait at different __syncthreads() calls:",
                 blockIdx.x, blockIdx.y, blockIdx.z);
        text = head + describe_states() +
               "\nA __syncthreads() inside an if/else or a loop with a thread-dependent condition is reached by only "
               "some threads; move it out of the branch so that all threads of the block reach the same barrier.";
      }
      set_error(ERR_DIVERGENCE, text);
      return;
    }
    char head[300];
    snprintf(head, sizeof head, "deadlock in block (%u,%u,%u): no thread can go on:", blockIdx.x, blockIdx.y, blockIdx.z);
    set_error(ERR_DIVERGENCE, head + describe_states() +
                                  "\nThreads waiting at a warp intrinsic wait for lanes of their mask that are at a "
                                  "__syncthreads() (or at another warp intrinsic): all lanes named in a mask must reach "
                                  "the same *_sync call.");
    return;
  }
}

void run_block_fibers(bool reverse) {
  start_block_fibers(0);
  schedule_block_fibers(reverse);
}

// Every thread of the block that has not exited waits at grid.sync(): the block waits for the
// grid (returns true).  Threads at different grid.sync() calls, or some at a __syncthreads(), or
// some exited: a divergent grid barrier, reported as such (returns false).
bool grid_wait_ends_block() {
  char head[400];
  if (g_at_barrier) {
    snprintf(head, sizeof head,
             "barrier divergence in block (%u,%u,%u): some threads wait at grid.sync() while others wait at "
             "__syncthreads():", blockIdx.x, blockIdx.y, blockIdx.z);
    set_error(ERR_DIVERGENCE, head + describe_states() +
                                  "\nEvery thread must reach the same barriers in the same order.");
    return false;
  }
  if (g_grid_mixed) {
    snprintf(head, sizeof head,
             "barrier divergence in block (%u,%u,%u): the threads wait at different grid.sync() calls:",
             blockIdx.x, blockIdx.y, blockIdx.z);
    set_error(ERR_DIVERGENCE, head + describe_states() +
                                  "\nA grid.sync() inside a branch or loop with a thread-dependent condition is reached by "
                                  "only some threads; every thread of the grid must reach the same grid.sync().");
    return false;
  }
  if (g_done) {
    snprintf(head, sizeof head,
             "barrier divergence in block (%u,%u,%u): grid.sync() on line %d is reached by %zu of the block's %zu "
             "threads, but the others have exited the kernel without reaching it:",
             blockIdx.x, blockIdx.y, blockIdx.z, g_grid_line, g_at_grid, g_nthreads);
    set_error(ERR_DIVERGENCE, head + describe_states() +
                                  "\nEvery thread of the grid must reach every grid.sync(): do not return early before it "
                                  "(guard the work with an if instead).");
    return false;
  }
  return true;
}

void block_prologue() {
  ++__dlk_block_generation;
  g_shared.clear();
  if (g_dynamic_bytes) {
    memset(g_dynamic, g_poison, g_dynamic_bytes);
    g_shared.push_back({g_dynamic, g_dynamic_bytes, 1, "extern __shared__ (dynamic shared memory)", 0});
  }
  for (const __dlk_variable_entry* v = __dlk_file_shared; v->name; ++v) {
    memset(v->address, g_poison, v->bytes);
    g_shared.push_back({v->address, v->bytes, v->elem_bytes, v->name, 0});
  }
}

// Records shared elements a block left unwritten (still holding the poison
// pattern): "bx,by,bz<TAB>name<TAB>line<TAB>elements<TAB>first-last,first-last,...".
int g_unwritten_records = 0;
void block_epilogue() {
  if (g_unwritten_records >= 16) return;
  for (auto& r : g_shared) {
    size_t e = r.elem_bytes ? r.elem_bytes : 1;
    unsigned char* p = (unsigned char*)r.address;
    std::string ranges;
    size_t count = 0, n = r.bytes / e;
    long long start = -1;
    for (size_t k = 0; k <= n; ++k) {
      bool poisoned = false;
      if (k < n) {
        poisoned = true;
        for (size_t b = 0; b < e && poisoned; ++b) poisoned = p[k * e + b] == g_poison;
      }
      if (poisoned) {
        ++count;
        if (start < 0) start = (long long)k;
      } else if (start >= 0) {
        char part[64];
        snprintf(part, sizeof part, "%s%lld-%zu", ranges.empty() ? "" : ",", start, k - 1);
        if (ranges.size() < 2000) ranges += part;
        start = -1;
      }
    }
    if (!count) continue;
    char head[400];
    snprintf(head, sizeof head, "%u,%u,%u\t%s\t%d\t%zu\t%zu\t", blockIdx.x, blockIdx.y, blockIdx.z, r.name, r.line, n, e);
    g_unwritten += head + ranges + "\n";
    if (++g_unwritten_records >= 16) return;
  }
}

// Runs the whole grid once.  Returns false when it must be rerun with fibers.
bool run_grid(bool reverse, bool fibers) {
  unsigned long long nblocks = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
  g_nthreads = (size_t)blockDim.x * blockDim.y * blockDim.z;
  if (fibers) {
    ensure_stacks(g_nthreads);
#if DLK_ASAN
    // frames of threads abandoned by an earlier error may have left poisoned redzones
    for (size_t i = 0; i < g_nthreads; ++i) __asan_unpoison_memory_region(g_stacks[i], kStackBytes);
#endif
    g_threads.assign(g_nthreads, Thread());
    for (size_t i = 0; i < g_nthreads; ++i) {
      g_threads[i].idx = uint3{(unsigned)(i % blockDim.x), (unsigned)(i / blockDim.x % blockDim.y),
                               (unsigned)(i / ((size_t)blockDim.x * blockDim.y))};
    }
  }
  static volatile unsigned long long block_index;
  static volatile size_t thread_index;
  if (g_track_races) race::start_run(nblocks);
  else race::stop();
  prof::start_run();
  g_fast_mode = !fibers;
  if (!fibers) {
    int jumped = setjmp(g_fast_escape);
    if (jumped == 1) { g_fast_mode = false; return false; }
    if (jumped == 2) { g_fast_mode = false; return true; }
  }
  for (block_index = 0; block_index < nblocks; block_index = block_index + 1) {
    unsigned long long b = reverse ? nblocks - 1 - block_index : block_index;
    blockIdx = uint3{(unsigned)(b % gridDim.x), (unsigned)(b / gridDim.x % gridDim.y),
                     (unsigned)(b / ((unsigned long long)gridDim.x * gridDim.y))};
    block_prologue();
    race::start_block(blockIdx);
    if (!prof::start_block() && prof::g_enabled) break;  // a profiled launch runs its sample of blocks only
    if (fibers) {
      run_block_fibers(reverse);
      if (g_error) {
        if (g_error_message.find("block (") == std::string::npos && g_current)
          g_error_message += " [" + where(g_current) + "]";
        return true;
      }
    } else {
      for (thread_index = 0; thread_index < g_nthreads; thread_index = thread_index + 1) {
        size_t i = reverse ? g_nthreads - 1 - thread_index : thread_index;
        threadIdx = uint3{(unsigned)(i % blockDim.x), (unsigned)(i / blockDim.x % blockDim.y),
                          (unsigned)(i / ((size_t)blockDim.x * blockDim.y))};
        g_launch(g_args);
        race::end_segment();
      }
    }
    block_epilogue();
    prof::end_block();
  }
  g_fast_mode = false;
  return true;
}

// A cooperative launch: every block is resident at once.  Blocks still run one at a time, each
// until all its threads have exited or wait at grid.sync(); a waiting block is parked (its fibers,
// shared memory and counters kept) and the next one runs.  When every block waits, all are
// released and run again, in the same order, to the next grid.sync().
struct ParkedBlock {
  std::vector<Thread> threads;
  std::vector<SharedRegion> shared;
  std::vector<std::string> contents;  // of each shared region
  unsigned generation = 0;
  size_t done = 0;
  int grid_line = -1;
  bool finished = false;
};

bool run_grid_cooperative(bool reverse) {
  unsigned long long nblocks = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
  g_nthreads = (size_t)blockDim.x * blockDim.y * blockDim.z;
  ensure_stacks(g_nthreads * nblocks);
#if DLK_ASAN
  for (size_t i = 0; i < g_nthreads * nblocks; ++i) __asan_unpoison_memory_region(g_stacks[i], kStackBytes);
#endif
  std::vector<ParkedBlock> blocks(nblocks);
  if (g_track_races) race::start_run(nblocks);
  else race::stop();
  g_fast_mode = false;
  for (int phase = 0;; ++phase) {
    int line = -1;
    std::vector<unsigned long long> waiting, exited;
    for (unsigned long long k = 0; k < nblocks; ++k) {
      unsigned long long b = reverse ? nblocks - 1 - k : k;
      ParkedBlock& P = blocks[b];
      if (P.finished) continue;
      blockIdx = uint3{(unsigned)(b % gridDim.x), (unsigned)(b / gridDim.x % gridDim.y),
                       (unsigned)(b / ((unsigned long long)gridDim.x * gridDim.y))};
      if (phase == 0) {
        block_prologue();
        P.generation = __dlk_block_generation;
        g_threads.assign(g_nthreads, Thread());
        for (size_t i = 0; i < g_nthreads; ++i)
          g_threads[i].idx = uint3{(unsigned)(i % blockDim.x), (unsigned)(i / blockDim.x % blockDim.y),
                                   (unsigned)(i / ((size_t)blockDim.x * blockDim.y))};
        start_block_fibers(b * g_nthreads);
      } else {
        __dlk_block_generation = P.generation;
        g_threads.swap(P.threads);
        g_shared = P.shared;
        for (size_t r = 0; r < g_shared.size(); ++r) memcpy(g_shared[r].address, P.contents[r].data(), g_shared[r].bytes);
        g_done = P.done;
        g_at_barrier = g_at_warp = g_at_grid = 0;
        g_barrier_line = g_grid_line = -1;
        g_barrier_mixed = g_grid_mixed = false;
        for (auto& t : g_threads)
          if (t.state == AT_GRID) t.state = RUNNABLE;
      }
      race::start_block(blockIdx);
      schedule_block_fibers(reverse);
      if (g_error) {
        if (g_error_message.find("block (") == std::string::npos && g_current)
          g_error_message += " [" + where(g_current) + "]";
        return true;
      }
      if (g_done == g_nthreads) {
        block_epilogue();
        P.finished = true;
        exited.push_back(b);
        P.threads.clear();
        continue;
      }
      // parked at grid.sync()
      if (line < 0) line = g_grid_line;
      else if (g_grid_line != line) {
        char text[300];
        snprintf(text, sizeof text,
                 "barrier divergence: block (%u,%u,%u) waits at grid.sync() on line %d, but other blocks wait at "
                 "grid.sync() on line %d; every thread of the grid must reach the same grid.sync()",
                 blockIdx.x, blockIdx.y, blockIdx.z, g_grid_line, line);
        set_error(ERR_DIVERGENCE, text);
        return true;
      }
      P.threads.swap(g_threads);
      P.shared = g_shared;
      P.contents.resize(g_shared.size());
      for (size_t r = 0; r < g_shared.size(); ++r)
        P.contents[r].assign((const char*)g_shared[r].address, g_shared[r].bytes);
      P.done = g_done;
      waiting.push_back(b);
    }
    if (waiting.empty()) break;
    if (!exited.empty()) {
      unsigned long long e = exited[0], w = waiting[0];
      char text[500];
      snprintf(text, sizeof text,
               "barrier divergence: grid.sync() on line %d is reached by %zu of the grid's %llu blocks (e.g. block "
               "(%llu,%llu,%llu)), but %zu %s (e.g. block (%llu,%llu,%llu)) exited the kernel without reaching it; "
               "every thread of the grid must reach every grid.sync()",
               line, waiting.size(), nblocks, w % gridDim.x, w / gridDim.x % gridDim.y, w / ((unsigned long long)gridDim.x * gridDim.y),
               exited.size(), exited.size() == 1 ? "block" : "blocks", e % gridDim.x, e / gridDim.x % gridDim.y, e / ((unsigned long long)gridDim.x * gridDim.y));
      set_error(ERR_DIVERGENCE, text);
      return true;
    }
    race::grid_barrier();
  }
  return true;
}

// ---- snapshot of writable __device__ variables ---------------------------------
std::vector<std::vector<char>> snapshot_variables() {
  std::vector<std::vector<char>> s;
  for (const __dlk_variable_entry* v = __dlk_variables; v->name; ++v)
    s.emplace_back((char*)v->address, (char*)v->address + (v->writable ? v->bytes : 0));
  return s;
}
void restore_variables(const std::vector<std::vector<char>>& s) {
  size_t i = 0;
  for (const __dlk_variable_entry* v = __dlk_variables; v->name; ++v, ++i)
    if (v->writable && i < s.size()) memcpy(v->address, s[i].data(), v->bytes);
}

// ---- protocol ----------------------------------------------------------------
int kIn = 3, kOut = 4;

void read_exact(void* p, size_t n) {
  char* c = (char*)p;
  while (n) {
    ssize_t r = read(kIn, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) _exit(0);  // Python went away
    c += r;
    n -= (size_t)r;
  }
}
template <class T> T read_value() {
  T v;
  read_exact(&v, sizeof v);
  return v;
}
std::string read_string() {
  uint32_t n = read_value<uint32_t>();
  std::string s(n, '\0');
  read_exact(&s[0], n);
  return s;
}

std::string g_reply;
template <class T> void put(T v) { g_reply.append((const char*)&v, sizeof v); }
void put_bytes(const void* p, size_t n) { g_reply.append((const char*)p, n); }
void put_string(const std::string& s) {
  put<uint32_t>((uint32_t)s.size());
  g_reply += s;
}
void send_reply() {
  uint64_t n = g_reply.size();
  std::string all((const char*)&n, sizeof n);
  all += g_reply;
  const char* p = all.data();
  size_t left = all.size();
  while (left) {
    ssize_t w = write(kOut, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(0);
    p += w;
    left -= (size_t)w;
  }
  g_reply.clear();
}

struct Launch {
  const __dlk_kernel_entry* kernel = nullptr;
  bool needs_fibers = false;
  std::vector<void*> slots;
  std::vector<unsigned long long> scalars;
  std::vector<void*> pointers;
  std::vector<std::string> records;  // structs passed by value
  std::vector<std::vector<char>> variables_before;
};
Launch g_current_launch;
std::vector<bool> g_kernel_needs_fibers;

void set_dynamic_shared(size_t bytes) {
#if DLK_ASAN
  __asan_unpoison_memory_region(__dlk_dynamic_arena, kArenaBytes + kArenaPad);
#endif
  uintptr_t end = (uintptr_t)(__dlk_dynamic_arena + kArenaBytes);
  g_dynamic = (char*)((end - bytes) & ~(uintptr_t)15);
  g_dynamic_bytes = bytes;
#if DLK_ASAN
  __asan_poison_memory_region(__dlk_dynamic_arena, (size_t)(g_dynamic - __dlk_dynamic_arena));
  __asan_poison_memory_region(g_dynamic + bytes, (size_t)(end + kArenaPad - (uintptr_t)(g_dynamic + bytes)));
#endif
  for (int i = 0; i < g_dynamic_slot_count; ++i) *g_dynamic_slots[i] = g_dynamic;
}

// Fill patterns of shared memory: 0xFF bytes are NaN as floats (-1 as integers);
// 0x3F bytes are 0.747 as a float, a value that arithmetic does not absorb, so
// that a result computed from unwritten memory differs between the two patterns.
const unsigned char kFirstPoison = 0xFF, kSecondPoison = 0x3F;

// Runs the current launch once from its initial buffers; appends the run's
// report to the reply.  Returns false after an error (reply holds it).
bool run_once(const char* name, bool reverse, unsigned char poison, unsigned kernel_index) {
  Launch& L = g_current_launch;
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (auto& b : g_buffers) memcpy(b.data, b.initial.data(), b.bytes);
    restore_variables(L.variables_before);
    g_printf.clear();
    g_printf_truncated = false;
    g_unwritten.clear();
    g_unwritten_records = 0;
    g_clock_ticks = 0;
    g_error = ERR_NONE;
    g_error_message.clear();
    g_current = nullptr;
    g_run_name = name;
    g_poison = poison;
    bool fibers = g_kernel_needs_fibers[kernel_index];
    bool finished = g_cooperative ? run_grid_cooperative(reverse) : run_grid(reverse, fibers);
    race::stop();
    std::string race_found = race::take_pending();
    if (finished && !g_error && !race_found.empty()) {
      g_error = ERR_GLOBAL_RACE;
      g_error_message = race_found;
    }
    if (finished) break;
    g_kernel_needs_fibers[kernel_index] = true;  // it called a barrier: rerun with fibers
  }
  if (g_error) {
    put<uint32_t>((uint32_t)g_error);
    put_string(std::string(name) == "forward" ? std::string() : std::string(name));
    put_string(g_error_message);
    put_string(g_printf);
    return false;
  }
  put<uint32_t>(0);
  put_string(g_printf_truncated ? g_printf + "\n[printf output truncated]\n" : g_printf);
  put_string(g_unwritten);
  for (auto& b : g_buffers)
    if (b.output) put_bytes(b.data, b.bytes);
  return true;
}

void handle_launch() {
  Launch& L = g_current_launch;
  unsigned kernel_index = read_value<uint32_t>();
  uint32_t dims[6];
  read_exact(dims, sizeof dims);
  uint64_t shared_bytes = read_value<uint64_t>();
  uint32_t runs_and_flags = read_value<uint32_t>();
  uint32_t nruns = runs_and_flags & 0xff;
  g_cooperative = (runs_and_flags >> 8) & 1;  // a cooperative launch: all blocks resident, grid.sync() allowed
  // a profiled launch (the profiling build): one forward run of the first (runs_and_flags >> 16) blocks (0: all)
  prof::g_enabled = (runs_and_flags >> 9) & 1;
  prof::g_sample_blocks = runs_and_flags >> 16;
  uint32_t nbuf = read_value<uint32_t>();
  for (auto& b : g_buffers) free(b.data ? b.data - b.margin : nullptr);
  g_buffers.assign(nbuf, Buffer());
  for (auto& b : g_buffers) {
    b.bytes = read_value<uint64_t>();
    b.output = read_value<uint8_t>() != 0;
    b.element_bytes = read_value<uint32_t>();
    b.initial.resize(b.bytes);
    read_exact(b.initial.data(), b.bytes);
    // exactly sized (ASan knows its bounds) and aligned as a GPU allocation is, so that the profile's
    // 32-byte sectors fall where a GPU's do; a profiled launch (no ASan) has a margin on either side, where
    // the accesses of a kernel that runs past its arrays land and are recorded, not corrupting the heap
    b.margin = prof::g_enabled ? prof::kBufferMargin : 0;
    void* data = nullptr;
    if (posix_memalign(&data, 256, b.bytes + 2 * b.margin ? b.bytes + 2 * b.margin : 1) != 0) data = nullptr;
    if (data && b.margin) memset(data, 0xFF, b.bytes + 2 * b.margin);
    b.data = data ? (char*)data + b.margin : nullptr;
  }
  uint32_t nparams = read_value<uint32_t>();
  L.slots.assign(nparams, nullptr);
  L.scalars.assign(nparams, 0);
  L.pointers.assign(nparams, nullptr);
  L.records.assign(nparams, std::string());
  for (uint32_t i = 0; i < nparams; ++i) {
    uint8_t kind = read_value<uint8_t>();
    uint64_t value = read_value<uint64_t>();
    if (kind == 0) {
      L.pointers[i] = value < g_buffers.size() ? g_buffers[value].data : nullptr;
      L.slots[i] = &L.pointers[i];
    } else if (kind == 2) {  // a struct by value: `value` bytes follow
      L.records[i].resize(value ? value : 1);
      read_exact(&L.records[i][0], value);
      L.slots[i] = &L.records[i][0];
    } else {
      L.scalars[i] = value;
      L.slots[i] = &L.scalars[i];
    }
  }
  L.kernel = &__dlk_kernels[kernel_index];
  g_launch = L.kernel->launch;
  g_args = L.slots.data();
  gridDim = dim3(dims[0], dims[1], dims[2]);
  blockDim = dim3(dims[3], dims[4], dims[5]);
  set_dynamic_shared(shared_bytes);
  L.variables_before = snapshot_variables();

  // races on global memory: tracked in the first run, for the buffers the kernel may write
  std::vector<race::Region> regions;
  for (size_t i = 0; i < g_buffers.size(); ++i) {
    Buffer& b = g_buffers[i];
    if (!b.output || !b.bytes) continue;
    unsigned shift = 0;
    while (shift < 3 && b.element_bytes % (2u << shift) == 0) ++shift;
    race::Region r{(uintptr_t)b.data, b.bytes, shift, i, {}};
    r.cells.resize((b.bytes + (1u << shift) - 1) >> shift);
    regions.push_back(std::move(r));
  }
  // and the kernel's own __device__ variables (global memory too)
  size_t variable_index = 0;
  for (const __dlk_variable_entry* v = __dlk_variables; v->name; ++v, ++variable_index) {
    if (!v->writable || !v->bytes) continue;
    unsigned shift = 0;
    while (shift < 3 && v->elem_bytes % (2u << shift) == 0) ++shift;
    race::Region r{(uintptr_t)v->address, v->bytes, shift, race::kVariableBase + variable_index, {}};
    r.cells.resize((v->bytes + (1u << shift) - 1) >> shift);
    regions.push_back(std::move(r));
  }
  race::set_regions(std::move(regions));
  g_track_races = nruns > 1 && !prof::g_enabled;
  bool ok_forward = run_once("forward", false, kFirstPoison, kernel_index);
  g_track_races = false;
  if (prof::g_enabled) {
    prof::g_enabled = false;
    if (ok_forward) {
      prof::drop_uniform_branches();
      put<uint32_t>(prof::g_blocks_done);
      put<uint32_t>((prof::g_truncated ? 1 : 0) | (prof::g_branches_truncated ? 2 : 0));
      put<uint64_t>(prof::g_events.size());
      put_bytes(prof::g_events.data(), prof::g_events.size() * sizeof(prof::Event));
      // where each buffer's data starts, and the shared arrays the profiled blocks declared: the elements the
      // events touched
      put<uint32_t>((uint32_t)g_buffers.size());
      for (auto& b : g_buffers) put<uint64_t>((uint64_t)(uintptr_t)b.data);
      put<uint32_t>((uint32_t)prof::g_shared_seen.size());
      for (auto& r : prof::g_shared_seen) {
        put<uint64_t>((uint64_t)(uintptr_t)r.address);
        put<uint64_t>(r.bytes);
        put<uint64_t>(r.elem_bytes);
        put_string(r.name ? r.name : "");
      }
    }
    std::vector<prof::Event>().swap(prof::g_events);
    send_reply();
    return;
  }
  if (!ok_forward) { send_reply(); return; }
  auto after_forward = snapshot_variables();
  if (nruns > 1) {
    bool ok = run_once("reverse", true, kSecondPoison, kernel_index);
    restore_variables(after_forward);
    (void)ok;
  }
  send_reply();
}

void handle_rerun() {
  // forward order again, with the second poison pattern
  unsigned kernel_index = read_value<uint32_t>();
  auto keep = snapshot_variables();
  run_once("forward-repoisoned", false, kSecondPoison, kernel_index);
  restore_variables(keep);
  send_reply();
}

const __dlk_variable_entry* find_variable(const std::string& name) {
  for (const __dlk_variable_entry* v = __dlk_variables; v->name; ++v)
    if (name == v->name) return v;
  return nullptr;
}

void handle_set_variable() {
  std::string name = read_string();
  uint64_t n = read_value<uint64_t>();
  std::vector<char> data(n);
  read_exact(data.data(), n);
  const __dlk_variable_entry* v = find_variable(name);
  if (!v) put<uint32_t>(1);
  else if (n > v->bytes) put<uint32_t>(2);
  else {
    memcpy(v->address, data.data(), n);
    put<uint32_t>(0);
  }
  put<uint64_t>(v ? v->bytes : 0);
  send_reply();
}

void handle_get_variable() {
  std::string name = read_string();
  uint64_t n = read_value<uint64_t>();
  const __dlk_variable_entry* v = find_variable(name);
  if (!v) put<uint32_t>(1);
  else if (n > v->bytes) put<uint32_t>(2);
  else {
    put<uint32_t>(0);
  }
  put<uint64_t>(v ? v->bytes : 0);
  if (v && n <= v->bytes) put_bytes(v->address, n);
  send_reply();
}

// ---- crash context: which block, thread and buffers, for Python's message -------
void print_context() {
  char text[512];
  const Thread* t = g_in_fiber ? g_current : nullptr;
  int n = snprintf(text, sizeof text, "\nDLK-CONTEXT run=%s %s\n", g_run_name, where(t).c_str());
  (void)!write(2, text, n);
  for (size_t i = 0; i < g_buffers.size(); ++i) {
    n = snprintf(text, sizeof text, "DLK-BUFFER %zu 0x%llx %zu\n", i, (unsigned long long)(uintptr_t)g_buffers[i].data,
                 g_buffers[i].bytes);
    (void)!write(2, text, n);
  }
  for (auto& r : g_shared) {
    n = snprintf(text, sizeof text, "DLK-SHARED 0x%llx %zu %zu %s\n", (unsigned long long)(uintptr_t)r.address, r.bytes,
                 r.elem_bytes, r.name);
    (void)!write(2, text, n);
  }
  n = snprintf(text, sizeof text, "DLK-DYNAMIC 0x%llx %zu 0x%llx %zu\n", (unsigned long long)(uintptr_t)g_dynamic,
               g_dynamic_bytes, (unsigned long long)(uintptr_t)__dlk_dynamic_arena, kArenaBytes);
  (void)!write(2, text, n);
}

// Without AddressSanitizer: print the return addresses of the crashing thread, so that
// Python can find the reader's line with addr2line.
extern "C" char __executable_start;
void crash_handler(int sig) {
  print_context();
#if defined(__GLIBC__)
  void* frames[32];
  int n = backtrace(frames, 32);
  char text[64];
  int len = snprintf(text, sizeof text, "DLK-BASE 0x%llx\n", (unsigned long long)(uintptr_t)&__executable_start);
  (void)!write(2, text, len);
  for (int i = 0; i < n; ++i) {
    len = snprintf(text, sizeof text, "DLK-FRAME 0x%llx\n", (unsigned long long)(uintptr_t)frames[i]);
    (void)!write(2, text, len);
  }
#endif
  signal(sig, SIG_DFL);
  raise(sig);
}

// ---- sandbox: seccomp filter for submitted kernels --------------------------------
#if defined(__linux__) && defined(__x86_64__)
#define DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
// An open-like call whose flags are argument `flags_arg`: refused when the flags would write.
#define READ_ONLY(call, flags_arg)                                       \
  BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)), \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (call), 0, 3),                     \
  BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(flags_arg)),                 \
  BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, write_flags, 0, 1),               \
  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)

bool install_sandbox() {
  unsigned pid = (unsigned)getpid();
  const unsigned write_flags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      // x32 system calls
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      DENY(SYS_execve), DENY(SYS_execveat), DENY(SYS_fork), DENY(SYS_vfork),
      DENY(SYS_socket), DENY(SYS_socketpair), DENY(SYS_connect), DENY(SYS_ptrace),
      DENY(SYS_process_vm_readv), DENY(SYS_process_vm_writev),
      DENY(SYS_unlink), DENY(SYS_unlinkat), DENY(SYS_rename), DENY(SYS_renameat), DENY(SYS_renameat2),
      DENY(SYS_creat), DENY(SYS_truncate), DENY(SYS_mkdir), DENY(SYS_mkdirat), DENY(SYS_rmdir),
      DENY(SYS_link), DENY(SYS_linkat), DENY(SYS_symlink), DENY(SYS_symlinkat), DENY(SYS_chmod),
      DENY(SYS_fchmodat), DENY(SYS_chown), DENY(SYS_lchown), DENY(SYS_fchownat), DENY(SYS_openat2),
      DENY(SYS_open_by_handle_at), DENY(SYS_name_to_handle_at), DENY(SYS_mknod), DENY(SYS_mknodat),
      DENY(SYS_setsid),
      // clone3 cannot be inspected (its flags are in memory): say it does not exist, so
      // that the C library falls back to clone, whose flags are checked below
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      // clone: only new threads (CLONE_THREAD) are allowed
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      // kill/tkill/tgkill: only this process
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_kill, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_tgkill, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_tkill, 0, 4),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, pid, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      // open(path, flags) / openat(dir, path, flags): reading only
      READ_ONLY(SYS_open, 1),
      READ_ONLY(SYS_openat, 2),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}
#else
bool install_sandbox() { return false; }
#endif

// The three waits of kernel code (__syncthreads, warp operations, grid.sync) share their
// way in and out of the scheduler.

// True when kernel code waits outside the fibers (the call then returns at once). A fast run
// (threads one after another, no scheduler) cannot wait: it is abandoned here (a longjmp) and
// the launch runs again under the fibers.
bool waits_outside_fibers() {
  if (g_in_fiber) return false;
  if (g_fast_mode) longjmp(g_fast_escape, 1);
  return true;
}

// The running thread stops at a wait on `line`: its race segment ends there.
Thread* stop_at(State state, int line) {
  race::end_segment();
  if (state == AT_BARRIER || state == AT_GRID) prof::barrier_reached();
  Thread* t = g_current;
  t->state = state;
  t->line = line;
  return t;
}

// Hand over to the other threads until the scheduler has completed the wait, then go on as t.
void wait_for_others(Thread* t) {
  switch_away(false);
  threadIdx = t->idx;
}

}  // namespace

// ---------------------------------------------------------------------------
// The interface the prelude declares
extern "C" {

void __dlk_syncthreads(int line) { __dlk_syncthreads_reduce(-1, 0, line); }

void __dlk_grid_sync(int line) {
  if (waits_outside_fibers()) return;
  if (!g_cooperative) {
    char text[300];
    snprintf(text, sizeof text, "grid.sync() on line %d needs a cooperative launch, and this launch is not one (%s)", line,
             where(g_current).c_str());
    fail_in_kernel(ERR_OTHER, text);
  }
  Thread* t = stop_at(AT_GRID, line);
  if (g_at_grid++ == 0) g_grid_line = line;
  else if (line != g_grid_line) g_grid_mixed = true;
  wait_for_others(t);
}

int __dlk_syncthreads_reduce(int op, int predicate, int line) {
  if (waits_outside_fibers()) return predicate;
  Thread* t = stop_at(AT_BARRIER, line);
  t->op = op;
  t->value = predicate != 0;
  if (g_at_barrier++ == 0) g_barrier_line = line;
  else if (line != g_barrier_line) g_barrier_mixed = true;
  wait_for_others(t);
  return (int)t->result;
}

unsigned long long __dlk_warp_op(int op, unsigned mask, unsigned long long value, int param, int width, int line) {
  if (waits_outside_fibers()) return value;
  Thread* t = stop_at(AT_WARP, line);
  t->op = op;
  t->mask = mask;
  t->value = value;
  t->param = param;
  t->width = width;
  ++g_at_warp;
  wait_for_others(t);
  return t->result;
}

void __dlk_shared_register(void* ptr, size_t bytes, size_t elem_bytes, const char* name, int line) {
  if (g_cooperative) {
    // a block resumed after grid.sync() keeps its shared arrays (another block may have registered them since)
    for (auto& r : g_shared)
      if (r.address == ptr) return;
  }
  memset(ptr, g_poison, bytes);
  g_shared.push_back({ptr, bytes, elem_bytes, name, line});
}

void __dlk_shared_register_once(unsigned* generation, void* ptr, size_t bytes, size_t elem_bytes, const char* name,
                                int line) {
  if (*generation == __dlk_block_generation) return;
  *generation = __dlk_block_generation;
  __dlk_shared_register(ptr, bytes, elem_bytes, name, line);
}

void* __dlk_dynamic_shared(void) { return g_dynamic; }

void* __dlk_dynamic_shared_register(void** slot, const char* name) {
  (void)name;
  if (g_dynamic_slot_count < 64) g_dynamic_slots[g_dynamic_slot_count++] = slot;
  return g_dynamic;
}

void __dlk_trap(int line) {
  char text[200];
  snprintf(text, sizeof text, "the kernel called __trap() on line %d (%s)", line, where(g_in_fiber ? g_current : nullptr).c_str());
  fail_in_kernel(ERR_TRAP, text);
}

void __assert_fail(const char* expression, const char* file, unsigned int line, const char* function) {
  char text[1024];
  snprintf(text, sizeof text, "assertion failed on line %u of %s in %s: assert(%s) [%s]", line, file, function, expression,
           where(g_in_fiber ? g_current : nullptr).c_str());
  fail_in_kernel(ERR_ASSERT, text);
}

int __dlk_printf(const char* format, ...) {
  char small[512];
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(small, sizeof small, format, ap);
  va_end(ap);
  if (n < 0) return n;
  if (g_printf.size() > (8u << 20)) {
    g_printf_truncated = true;
    return n;
  }
  if ((size_t)n < sizeof small) {
    g_printf.append(small, (size_t)n);
  } else {
    std::string big((size_t)n + 1, '\0');
    va_start(ap, format);
    vsnprintf(&big[0], big.size(), format, ap);
    va_end(ap);
    g_printf.append(big.data(), (size_t)n);
  }
  return n;
}

long long __dlk_clock(void) { return g_clock_ticks += 1000; }

#if DLK_ASAN
const char* __asan_default_options() {
  return "detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=23:detect_stack_use_after_return=0:"
         "detect_odr_violation=0:print_summary=1:redzone=64:allocator_may_return_null=1:handle_abort=1";
}
#endif

}  // extern "C"

int main(int argc, char** argv) {
  // usage: worker IN_FD OUT_FD [--sandbox]
  if (argc < 3) {
    fprintf(stderr, "this program is started by the kernels runtime (kernels.runtime.emulator)\n");
    return 2;
  }
  kIn = atoi(argv[1]);
  kOut = atoi(argv[2]);
  bool sandbox = argc > 3 && strcmp(argv[3], "--sandbox") == 0;
  size_t nkernels = 0;
  while (__dlk_kernels[nkernels].name) ++nkernels;
  g_kernel_needs_fibers.assign(nkernels, false);
#if DLK_ASAN
  __sanitizer_set_death_callback(print_context);
#else
  // the handler runs on its own stack: a fiber's stack may be the thing that overflowed
  static char alternate_stack[64 * 1024];
  stack_t ss = {};
  ss.ss_sp = alternate_stack;
  ss.ss_size = sizeof alternate_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa = {};
  sa.sa_handler = crash_handler;
  sa.sa_flags = SA_ONSTACK;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
#endif
  put<uint32_t>(0x444c4b31);  // "DLK1": ready
  put<uint32_t>((uint32_t)nkernels);
  if (sandbox) put<uint32_t>(install_sandbox() ? 1 : 0);
  else put<uint32_t>(2);
  send_reply();
  for (;;) {
    char request = read_value<char>();
    switch (request) {
      case 'L': handle_launch(); break;
      case 'C': handle_rerun(); break;
      case 'S': handle_set_variable(); break;
      case 'G': handle_get_variable(); break;
      case 'Q': return 0;
      default: _exit(74);
    }
  }
}
