// The memory and branch profile of a launch, for the emulator's profiling build (included once, by
// runtime.cpp).
//
// The profiling build compiles the reader's code with g++'s ThreadSanitizer instrumentation
// (-fsanitize=thread) and its basic-block coverage (-fsanitize-coverage=trace-pc), but links no
// sanitizer library: the hooks that instrumentation calls are defined here.  Every load and store
// of the reader's code (its size, its address, the code address that made it) and every basic block
// a thread enters come here.  The hooks are in every build of the runtime; only the profiling
// build's code calls them, so a launch that is not profiled pays nothing.
//
// What is recorded, for the first few blocks of the grid (the sample a launch asks for): one event
// per access of a thread to global memory (the argument buffers, __device__ variables) or shared
// memory (static and dynamic shared arrays), and one per branch a thread takes (a basic block and
// the block it went to next).  Other accesses (a thread's own locals, __constant__ memory) are left
// out.  The threads of a warp run one after another here, not in lock step, so each event carries
// what lines the lanes of a warp up again in Python (profiling.py): the instruction (its code
// address, and the call site of the function it is in), and how many times this thread reached it
// since its last barrier.  The k-th time lanes of one warp reach one instruction between the same two
// barriers is one warp-level instruction: one request, whose lanes' addresses decide its sectors or
// its bank conflicts.

namespace prof {

// One event, 32 bytes, read by kernels/runtime/emulator/profiling.py (EVENT_DTYPE): keep them in step.
struct Event {
  uint64_t address;   // the address accessed; for a branch, the code address of the block the thread went to
  uint32_t site;      // code address of the access (of the block that branched), from __executable_start
  uint32_t caller;    // return address into the caller of the function holding `site` (0: unknown)
  uint32_t instance;  // times this thread reached (site, caller) before, since its last barrier
  uint32_t epoch;     // barriers this thread has passed in its block
  uint16_t block;     // the profiled block, in the order blocks ran (0, 1, ...)
  uint16_t thread;    // linear index of the thread in its block
  uint16_t size;      // bytes accessed (0 for a branch)
  uint8_t kind;       // LOAD, STORE, ATOMIC or BRANCH
  uint8_t space;      // GLOBAL or SHARED (NONE for a branch)
};
static_assert(sizeof(Event) == 32, "the event layout is shared with Python");

enum Kind : uint8_t { LOAD = 0, STORE = 1, ATOMIC = 2, BRANCH = 3 };
enum Space : uint8_t { NONE = 0, GLOBAL = 1, SHARED = 2 };

struct ThreadState {
  uint32_t epoch = 0;
  uint32_t last_block = 0;  // code address of the basic block it is in (0: none yet)
  std::vector<uint32_t> callers;
  std::vector<std::pair<uint64_t, uint32_t>> counts;  // (site, caller) -> times reached since the last barrier
};

bool g_enabled = false;      // this launch is profiled
bool g_recording = false;    // the running block is one of the sample
unsigned g_sample_blocks = 0;  // blocks to profile (0: all)
unsigned g_blocks_done = 0;
bool g_truncated = false;    // stopped at kMaxEvents
bool g_branches_truncated = false;  // stopped recording branches at kMaxBranchEvents
bool g_block_started = false;
const size_t kMaxEvents = (size_t)6 << 20;  // 192 MiB of events at most
const size_t kMaxBranchEvents = (size_t)2 << 20;  // of which branches (a long loop enters a block per step)
// Bytes of margin before and after each argument buffer of a profiled launch: a kernel that runs past the ends
// of its arrays (a missing bounds check) touches them, and those accesses are recorded as the buffer's.
const size_t kBufferMargin = 4096;
size_t g_branch_events = 0;
std::vector<Event> g_events;
std::vector<SharedRegion> g_shared_seen;  // the shared arrays the profiled blocks declared (a static one's address
                                          // is the same in every block)
std::vector<ThreadState> g_threads_state;

extern "C" char __executable_start;
inline uint32_t code_offset(const void* ret) {
  return (uint32_t)((uintptr_t)ret - 1 - (uintptr_t)&__executable_start);
}

inline size_t linear_thread() {
  return threadIdx.x + (size_t)blockDim.x * (threadIdx.y + (size_t)blockDim.y * threadIdx.z);
}

// Global memory: an argument buffer (with its margins) or a writable __device__ variable; shared: a registered
// shared array.
uint8_t space_of(uintptr_t a) {
  for (auto& b : g_buffers)
    if (a - ((uintptr_t)b.data - b.margin) < b.bytes + 2 * b.margin) return GLOBAL;
  for (auto& r : g_shared)
    if (a - (uintptr_t)r.address < r.bytes) return SHARED;
  for (const __dlk_variable_entry* v = __dlk_variables; v->name; ++v)
    if (v->writable && a - (uintptr_t)v->address < v->bytes) return GLOBAL;
  return NONE;
}

uint32_t next_instance(ThreadState& t, uint64_t key) {
  for (auto& c : t.counts)
    if (c.first == key) return c.second++;
  t.counts.emplace_back(key, 1);
  return 0;
}

void record(uint64_t address, uint32_t site, uint16_t size, uint8_t kind, uint8_t space) {
  if (kind == BRANCH && g_branch_events++ >= kMaxBranchEvents) {
    g_branches_truncated = true;
    return;
  }
  if (g_events.size() >= kMaxEvents) {
    g_truncated = true;
    g_recording = false;
    return;
  }
  size_t i = linear_thread();
  if (i >= g_threads_state.size()) return;
  ThreadState& t = g_threads_state[i];
  uint32_t caller = t.callers.empty() ? 0 : t.callers.back();
  Event e;
  e.address = address;
  e.site = site;
  e.caller = caller;
  e.instance = next_instance(t, ((uint64_t)site << 32) | caller);
  e.epoch = t.epoch;
  e.block = (uint16_t)g_blocks_done;
  e.thread = (uint16_t)i;
  e.size = size;
  e.kind = kind;
  e.space = space;
  g_events.push_back(e);
}

inline void access(const void* p, size_t n, uint8_t kind, const void* ret) {
  uint8_t space = space_of((uintptr_t)p);
  if (space != NONE) record((uint64_t)(uintptr_t)p, code_offset(ret), (uint16_t)(n > 0xffff ? 0xffff : n), kind, space);
}

// A thread entered a basic block: the branch it took out of the last one is an event.
inline void entered_block(const void* ret) {
  size_t i = linear_thread();
  if (i >= g_threads_state.size()) return;
  uint32_t here = code_offset(ret);
  uint32_t from = g_threads_state[i].last_block;
  g_threads_state[i].last_block = here;
  if (from) record(here, from, 0, BRANCH, NONE);
}

// A fresh run of the grid (a fast run abandoned for fibers starts again here too).
void start_run() {
  g_events.clear();
  g_shared_seen.clear();
  g_blocks_done = 0;
  g_truncated = g_branches_truncated = g_block_started = false;
  g_branch_events = 0;
  g_recording = false;
}

// Whether the block about to run is profiled; a profiled launch runs only its sample.
bool start_block() {
  if (!g_enabled || g_truncated || (g_sample_blocks && g_blocks_done >= g_sample_blocks)) return false;
  g_threads_state.assign(g_nthreads, ThreadState());
  g_recording = g_block_started = true;
  return true;
}

void end_block() {
  if (!g_block_started) return;
  g_recording = g_block_started = false;
  ++g_blocks_done;
  for (auto& r : g_shared) {
    bool seen = false;
    for (auto& s : g_shared_seen) seen |= s.address == r.address;
    if (!seen) g_shared_seen.push_back(r);
  }
}

// The running thread reached a __syncthreads() or grid.sync(): instances count again from there.
void barrier_reached() {
  if (!g_recording) return;
  size_t i = linear_thread();
  if (i >= g_threads_state.size()) return;
  ThreadState& t = g_threads_state[i];
  ++t.epoch;
  t.counts.clear();
}

// Branches out of a block that every thread of the sample left the same way cannot diverge: dropped,
// so that what goes back to Python is mostly memory events.
void drop_uniform_branches() {
  std::vector<std::pair<uint32_t, uint64_t>> first_target;  // block -> first target (sorted by block)
  std::vector<uint32_t> branching;
  for (auto& e : g_events)
    if (e.kind == BRANCH) first_target.emplace_back(e.site, e.address);
  std::sort(first_target.begin(), first_target.end());
  for (size_t k = 0; k < first_target.size();) {
    size_t j = k;
    bool several = false;
    while (j < first_target.size() && first_target[j].first == first_target[k].first) {
      several |= first_target[j].second != first_target[k].second;
      ++j;
    }
    if (several) branching.push_back(first_target[k].first);
    k = j;
  }
  size_t kept = 0;
  for (auto& e : g_events)
    if (e.kind != BRANCH || std::binary_search(branching.begin(), branching.end(), e.site)) g_events[kept++] = e;
  g_events.resize(kept);
}

}  // namespace prof

// ---- the hooks the profiling build's instrumentation calls ----------------------------
extern "C" {
void __tsan_init(void) {}
void __tsan_func_entry(void* caller) {
  if (!prof::g_recording) return;
  size_t i = prof::linear_thread();
  if (i < prof::g_threads_state.size()) prof::g_threads_state[i].callers.push_back(prof::code_offset(caller));
}
void __tsan_func_exit(void) {
  if (!prof::g_recording) return;
  size_t i = prof::linear_thread();
  if (i < prof::g_threads_state.size() && !prof::g_threads_state[i].callers.empty())
    prof::g_threads_state[i].callers.pop_back();
}
#define DLK_PROFILE_HOOKS(n)                                                                                   \
  void __tsan_read##n(void* a) { if (prof::g_recording) prof::access(a, n, prof::LOAD, __builtin_return_address(0)); } \
  void __tsan_write##n(void* a) { if (prof::g_recording) prof::access(a, n, prof::STORE, __builtin_return_address(0)); } \
  void __tsan_unaligned_read##n(void* a) { if (prof::g_recording) prof::access(a, n, prof::LOAD, __builtin_return_address(0)); } \
  void __tsan_unaligned_write##n(void* a) { if (prof::g_recording) prof::access(a, n, prof::STORE, __builtin_return_address(0)); } \
  void __tsan_volatile_read##n(void* a) { if (prof::g_recording) prof::access(a, n, prof::LOAD, __builtin_return_address(0)); } \
  void __tsan_volatile_write##n(void* a) { if (prof::g_recording) prof::access(a, n, prof::STORE, __builtin_return_address(0)); }
DLK_PROFILE_HOOKS(1)
DLK_PROFILE_HOOKS(2)
DLK_PROFILE_HOOKS(4)
DLK_PROFILE_HOOKS(8)
DLK_PROFILE_HOOKS(16)
#undef DLK_PROFILE_HOOKS
void __tsan_read_range(void* a, unsigned long n) {
  if (prof::g_recording) prof::access(a, n, prof::LOAD, __builtin_return_address(0));
}
void __tsan_write_range(void* a, unsigned long n) {
  if (prof::g_recording) prof::access(a, n, prof::STORE, __builtin_return_address(0));
}
// C++'s own atomics in the reader's translation unit (the guard of a function-local static of a class type,
// such as a __shared__ array of __nv_bfloat16): done as they ask, not counted (nothing of the kernel's).
#define DLK_TSAN_ATOMICS(n, T)                                                                                       \
  T __tsan_atomic##n##_load(const volatile T* a, int mo) { return __atomic_load_n(a, mo); }                          \
  void __tsan_atomic##n##_store(volatile T* a, T v, int mo) { __atomic_store_n(a, v, mo); }                         \
  T __tsan_atomic##n##_exchange(volatile T* a, T v, int mo) { return __atomic_exchange_n(a, v, mo); }              \
  T __tsan_atomic##n##_fetch_add(volatile T* a, T v, int mo) { return __atomic_fetch_add(a, v, mo); }              \
  T __tsan_atomic##n##_fetch_sub(volatile T* a, T v, int mo) { return __atomic_fetch_sub(a, v, mo); }              \
  T __tsan_atomic##n##_fetch_and(volatile T* a, T v, int mo) { return __atomic_fetch_and(a, v, mo); }              \
  T __tsan_atomic##n##_fetch_or(volatile T* a, T v, int mo) { return __atomic_fetch_or(a, v, mo); }                \
  T __tsan_atomic##n##_fetch_xor(volatile T* a, T v, int mo) { return __atomic_fetch_xor(a, v, mo); }              \
  T __tsan_atomic##n##_fetch_nand(volatile T* a, T v, int mo) { return __atomic_fetch_nand(a, v, mo); }            \
  int __tsan_atomic##n##_compare_exchange_strong(volatile T* a, T* c, T v, int mo, int fmo) {                     \
    return __atomic_compare_exchange_n(a, c, v, false, mo, fmo);                                                  \
  }                                                                                                               \
  int __tsan_atomic##n##_compare_exchange_weak(volatile T* a, T* c, T v, int mo, int fmo) {                       \
    return __atomic_compare_exchange_n(a, c, v, true, mo, fmo);                                                   \
  }                                                                                                               \
  T __tsan_atomic##n##_compare_exchange_val(volatile T* a, T c, T v, int mo, int fmo) {                           \
    __atomic_compare_exchange_n(a, &c, v, false, mo, fmo);                                                        \
    return c;                                                                                                     \
  }
DLK_TSAN_ATOMICS(8, char)
DLK_TSAN_ATOMICS(16, short)
DLK_TSAN_ATOMICS(32, int)
DLK_TSAN_ATOMICS(64, long long)
#undef DLK_TSAN_ATOMICS
void __tsan_atomic_thread_fence(int mo) { __atomic_thread_fence(mo); }
void __tsan_atomic_signal_fence(int mo) { __atomic_signal_fence(mo); }
void __tsan_vptr_read(void** p) { (void)p; }
void __tsan_vptr_update(void** p, void* v) { (void)p; (void)v; }
void __dlk_profile_access(const void* address, size_t bytes, int store) {
  if (prof::g_recording) prof::access(address, bytes, store ? prof::STORE : prof::LOAD, __builtin_return_address(0));
}
void __sanitizer_cov_trace_pc(void) {
  if (prof::g_recording) prof::entered_block(__builtin_return_address(0));
}
}
