// Races on global memory, for the emulator's worker (included once, by runtime.cpp).
//
// The reader's code is compiled with AddressSanitizer in its recovering mode
// (-fsanitize-recover=address), whose checks call __asan_report_*_noabort for
// a poisoned address; those are defined here.  While a launch runs with race
// checks, the argument buffers the kernel may write (and its __device__
// variables) are poisoned, so that every checked access to them comes here
// (and nothing else is slower): inside such a buffer it is tracked for races;
// anything else is a real error, reported by AddressSanitizer as before, with
// the buffers unpoisoned first so that the report describes the real fault.
// (AddressSanitizer does not check a direct access to a scalar __device__
// variable, so such accesses are not tracked.)
//
// What orders two accesses of one launch (happens-before):
//   * program order within a thread;
//   * a __syncthreads() between them, for threads of the same block;
//   * for threads of different blocks, nothing -- except a __threadfence()
//     followed by an atomic in one block, and an atomic on the same address in
//     the other (the "last block" pattern of a reduction), taken per block.
// Two accesses to one element by different threads, not ordered, at least one
// of them a plain (non-atomic) write, are a race.  Launches are separate:
// what a launch wrote is ordered before the next launch.
//
// AddressSanitizer checks a memory reference once per stretch of straight-line
// code: in `*out += v` only the load calls a hook, not the store.  So every
// tracked read also notes the bytes it saw; when the thread next stops (at a
// barrier, a warp intrinsic, or its end), a noted element whose bytes changed
// was written by that thread (no other thread ran meanwhile): a write, at the
// read's line.
//
// Blocks run one after another, so an access need only be compared with a few
// earlier ones per element (as in FastTrack): the last plain write, the last
// atomic (and the latest one of an earlier block), and the reads since the
// last write (the latest, a second thread of the same barrier interval, one of
// an earlier block).  Every block and every barrier interval gets a new epoch
// number; an access from an epoch before the running block's first one comes
// from an earlier block.

#include <algorithm>

#if DLK_ASAN
extern "C" void __asan_report_load_n(void* address, size_t size);   // libasan: reports and ends the process
extern "C" void __asan_report_store_n(void* address, size_t size);
#endif

namespace race {

struct Access {
  uint32_t epoch;   // 0: none
  uint32_t thread;  // linear index of the thread in its block
  uint32_t pc;      // return address of the instrumentation call, relative to __executable_start
};

struct Cell {
  Access write, atomic, atomic_other, read, read_same, read_other;
  uint32_t noted_segment;  // the read was noted for write detection in this stretch of a thread
};

// a read whose element may be written back unseen (see above)
struct NotedRead {
  uintptr_t address;
  uint32_t size, pc;
  unsigned char bytes[16];
};
std::vector<NotedRead> g_noted;
uint32_t g_segment = 1;

enum Kind { READ = 0, WRITE = 1, ATOMIC = 2 };

const size_t kVariableBase = 1000000;  // Region::buffer of the k-th __device__ variable: kVariableBase + k

struct Region {
  uintptr_t base;
  size_t bytes;
  unsigned shift;  // log2 of the element size the shadow is kept at
  size_t buffer;   // index of the launch's argument buffer (or kVariableBase + index of a __device__ variable)
  std::vector<Cell> cells;
};

std::vector<Region> g_regions;
uintptr_t g_lo = 0, g_span = 0;  // the tracked address range (g_span 0: tracking off)
uint32_t g_epoch = 0, g_block_epoch = 0;
std::vector<uint32_t> g_block_first_epoch;  // in the order the blocks ran
std::vector<uint3> g_block_index;
bool g_block_fenced = false;
// blocks whose writes the running block acquired (through fence + atomic)
std::vector<char> g_acquired;
bool g_any_acquired = false;
std::vector<std::pair<uintptr_t, std::vector<char>>> g_releases;

extern "C" char __executable_start;

inline uint32_t pc_of(void* ret) { return (uint32_t)((uintptr_t)ret - 1 - (uintptr_t)&__executable_start); }

// Copies up to 16 bytes of a poisoned buffer (the C library's memcpy would be checked).
inline void copy_small(void* to, const void* from, size_t n) {
  switch (n) {
    case 1: __builtin_memcpy(to, from, 1); break;
    case 2: __builtin_memcpy(to, from, 2); break;
    case 4: __builtin_memcpy(to, from, 4); break;
    case 8: __builtin_memcpy(to, from, 8); break;
    case 16: __builtin_memcpy(to, from, 16); break;
    default:
      for (size_t i = 0; i < n; ++i) ((volatile unsigned char*)to)[i] = ((const volatile unsigned char*)from)[i];
  }
}

bool same_bytes(const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (((const volatile unsigned char*)a)[i] != ((const unsigned char*)b)[i]) return false;
  return true;
}

// The tracked buffer that holds all of [a, a + n), if any.
inline bool tracked(uintptr_t a, size_t n) {
  if (a - g_lo >= g_span) return false;
  for (auto& r : g_regions)
    if (a - r.base < r.bytes && n <= r.bytes - (a - r.base)) return true;
  return false;
}

void poison(bool on) {
#if DLK_ASAN
  for (auto& r : g_regions) {
    if (on) __asan_poison_memory_region((void*)r.base, r.bytes);
    else __asan_unpoison_memory_region((void*)r.base, r.bytes);
  }
#else
  (void)on;
#endif
}


void set_regions(std::vector<Region> regions) {
  g_regions = std::move(regions);
  g_lo = g_span = 0;
}

void enable() {
  g_lo = g_span = 0;
  if (g_regions.empty()) return;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (auto& r : g_regions) {
    lo = std::min(lo, r.base);
    hi = std::max(hi, r.base + r.bytes);
  }
  g_lo = lo;
  g_span = hi - lo;
}

// The first race of a run is kept, not reported at once: the grid runs on
// untracked, so that a more basic fault later in the same launch (an
// out-of-bounds access, which ends the process) is what the reader hears
// about.  A missing bounds guard whose stray stores land in a neighbour's
// elements first looks like a race; its real cause is the guard.
std::string g_pending;

// Tracking on: fresh shadow for a run of the grid.
void start_run(unsigned long long nblocks) {
  g_pending.clear();
  for (auto& r : g_regions) std::fill(r.cells.begin(), r.cells.end(), Cell());
  enable();
  g_epoch = 0;
  g_block_first_epoch.clear();
  g_block_index.clear();
  g_acquired.assign(g_span ? nblocks : 0, 0);
  g_releases.clear();
  g_noted.clear();
  g_segment = 1;
  poison(true);
}

void stop() {
  if (g_span) poison(false);
  g_lo = g_span = 0;
}

void start_block(uint3 block) {
  if (!g_span) return;
  g_block_epoch = ++g_epoch;
  g_block_first_epoch.push_back(g_block_epoch);
  g_block_index.push_back(block);
  if (g_acquired.size() < g_block_first_epoch.size()) g_acquired.resize(g_block_first_epoch.size(), 0);  // cooperative: blocks resume
  g_block_fenced = false;
  if (g_any_acquired) std::fill(g_acquired.begin(), g_acquired.end(), 0);
  g_any_acquired = false;
}

void barrier() {
  if (g_span) ++g_epoch;
}

// grid.sync() in a cooperative launch: everything before it is ordered before everything after,
// so the accesses recorded so far are forgotten.
void grid_barrier() {
  if (!g_span) return;
  for (auto& r : g_regions) std::fill(r.cells.begin(), r.cells.end(), Cell());
  ++g_epoch;
}

size_t block_of(uint32_t epoch) {
  auto it = std::upper_bound(g_block_first_epoch.begin(), g_block_first_epoch.end(), epoch);
  return (size_t)(it - g_block_first_epoch.begin()) - 1;
}

inline bool unordered(const Access& x, const Access& now) {
  if (!x.epoch) return false;
  if (x.epoch >= g_block_epoch) return x.thread != now.thread && x.epoch == now.epoch;
  return !(g_any_acquired && g_acquired[block_of(x.epoch)]);
}

const char* kind_name(int kind) { return kind == READ ? "read" : kind == WRITE ? "write" : "atomic"; }

std::string describe(const Access& a, int kind, bool current) {
  uint3 b = current ? blockIdx : g_block_index[block_of(a.epoch)];
  unsigned bx = blockDim.x, by = blockDim.y;
  char text[200];
  snprintf(text, sizeof text, "%s\t%u,%u,%u\t%u,%u,%u\t0x%x", kind_name(kind), b.x, b.y, b.z, a.thread % bx,
           a.thread / bx % by, a.thread / (bx * by), a.pc);
  return text;
}

void report(const Region& r, size_t offset, const Access& earlier, int earlier_kind, const Access& now,
            int now_kind) {
  if (!g_pending.empty()) return;
  char head[64];
  snprintf(head, sizeof head, "GLOBAL-RACE\t%zu\t%zu\t", r.buffer, offset);
  g_pending = head + describe(earlier, earlier_kind, false) + "\t" + describe(now, now_kind, true);
  stop();  // no more tracking in this run: one race is enough, and the rest runs at full speed
}

// The race kept by this run, if any (and forget it).
std::string take_pending() {
  std::string message;
  message.swap(g_pending);
  return message;
}

void cell_access(Region& r, size_t element, const Access& now, int kind) {
  Cell& c = r.cells[element];
  size_t offset = element << r.shift;
  if (kind == READ) {
    if (unordered(c.write, now)) report(r, offset, c.write, WRITE, now, READ);
    if (!c.read.epoch || c.read.epoch < g_block_epoch) {
      if (c.read.epoch) c.read_other = c.read;
      c.read = now;
      c.read_same.epoch = 0;
    } else if (c.read.epoch < now.epoch) {
      c.read = now;
      c.read_same.epoch = 0;
    } else if (c.read.thread != now.thread && !c.read_same.epoch) {
      c.read_same = now;
    }
    return;
  }
  if (kind == ATOMIC) {
    if (unordered(c.write, now)) report(r, offset, c.write, WRITE, now, ATOMIC);
    if (c.atomic.epoch && c.atomic.epoch < g_block_epoch) c.atomic_other = c.atomic;
    c.atomic = now;
    return;
  }
  if (unordered(c.write, now)) report(r, offset, c.write, WRITE, now, WRITE);
  if (unordered(c.atomic, now)) report(r, offset, c.atomic, ATOMIC, now, WRITE);
  if (unordered(c.atomic_other, now)) report(r, offset, c.atomic_other, ATOMIC, now, WRITE);
  if (unordered(c.read, now)) report(r, offset, c.read, READ, now, WRITE);
  if (unordered(c.read_same, now)) report(r, offset, c.read_same, READ, now, WRITE);
  if (unordered(c.read_other, now)) report(r, offset, c.read_other, READ, now, WRITE);
  c.write = now;
  c.read.epoch = c.read_same.epoch = c.read_other.epoch = 0;
}

// fence + atomic: this block publishes its writes (and those it acquired) at the address;
// any atomic on the address takes what was published there
void release_acquire(uintptr_t address, size_t current_block) {
  std::vector<char>* published = nullptr;
  for (auto& p : g_releases)
    if (p.first == address) published = &p.second;
  if (g_block_fenced) {
    if (!published) {
      g_releases.emplace_back(address, std::vector<char>(g_acquired.size(), 0));
      published = &g_releases.back().second;
    }
    if (published->size() < g_acquired.size()) published->resize(g_acquired.size(), 0);
    for (size_t i = 0; i < g_acquired.size(); ++i) (*published)[i] |= g_acquired[i];
    if (current_block < published->size()) (*published)[current_block] = 1;
  }
  if (published) {
    for (size_t i = 0; i < g_acquired.size() && i < published->size(); ++i) g_acquired[i] |= (*published)[i];
    g_any_acquired = true;
  }
}

__attribute__((noinline)) void track(uintptr_t a, size_t n, int kind, uint32_t pc) {
  for (auto& r : g_regions) {
    if (a - r.base >= r.bytes) continue;
    size_t off = a - r.base;
    size_t first = off >> r.shift, last = (off + n - 1) >> r.shift;
    if (last >= r.cells.size()) last = r.cells.size() - 1;
    Access now{g_epoch, (uint32_t)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)), pc};
    if (kind == READ && n <= 16 && r.cells[first].noted_segment != g_segment) {
      r.cells[first].noted_segment = g_segment;
      NotedRead note{a, (uint32_t)n, pc, {}};
      copy_small(note.bytes, (const void*)a, n);
      g_noted.push_back(note);
    }
    for (size_t e = first; e <= last; ++e) cell_access(r, e, now, kind);
    if (kind == ATOMIC) {
      // the atomic is about to change bytes a read of this thread noted: not a plain write
      for (size_t k = 0; k < g_noted.size();) {
        if (g_noted[k].address < a + n && a < g_noted[k].address + g_noted[k].size) {
          for (size_t e = first; e <= last; ++e) r.cells[e].noted_segment = 0;
          g_noted[k] = g_noted.back();
          g_noted.pop_back();
        } else {
          ++k;
        }
      }
      release_acquire(a, g_block_first_epoch.size() - 1);
    }
    return;
  }
}

// The running thread stops (barrier, warp intrinsic, end): noted elements it changed were written.
void end_segment() {
  if (!g_span) return;
  ++g_segment;
  if (g_noted.empty()) return;
  for (size_t i = 0; i < g_noted.size(); ++i) {
    const NotedRead& note = g_noted[i];
    if (!same_bytes((const void*)note.address, note.bytes, note.size)) track(note.address, note.size, WRITE, note.pc);
  }
  g_noted.clear();
}

}  // namespace race

#if DLK_ASAN
// Linked with the sanitizer's shared library, these definitions take the place of its own. Linked with its static
// library (DLK_STATIC_ASAN, faster: its thread-local data is then reached without __tls_get_addr at every fiber
// switch), both definitions would clash: the linker sends the instrumented code's calls to __wrap_<name> instead
// (-Wl,--wrap, see build.py).
#if DLK_STATIC_ASAN
#define DLK_HOOK(name) __wrap_##name
#else
#define DLK_HOOK(name) name
#endif
extern "C" {
#define DLK_REPORT(n)                                                                     \
  void DLK_HOOK(__asan_report_load##n##_noabort)(uintptr_t a) {                           \
    if (race::tracked(a, n)) race::track(a, n, race::READ, race::pc_of(__builtin_return_address(0))); \
    else race::stop(), __asan_report_load_n((void*)a, n);                                  \
  }                                                                                       \
  void DLK_HOOK(__asan_report_store##n##_noabort)(uintptr_t a) {                          \
    if (race::tracked(a, n)) race::track(a, n, race::WRITE, race::pc_of(__builtin_return_address(0))); \
    else race::stop(), __asan_report_store_n((void*)a, n);                                 \
  }
DLK_REPORT(1)
DLK_REPORT(2)
DLK_REPORT(4)
DLK_REPORT(8)
DLK_REPORT(16)
#undef DLK_REPORT
void DLK_HOOK(__asan_report_load_n_noabort)(uintptr_t a, size_t n) {
  if (race::tracked(a, n)) race::track(a, n, race::READ, race::pc_of(__builtin_return_address(0)));
  else race::stop(), __asan_report_load_n((void*)a, n);
}
void DLK_HOOK(__asan_report_store_n_noabort)(uintptr_t a, size_t n) {
  if (race::tracked(a, n)) race::track(a, n, race::WRITE, race::pc_of(__builtin_return_address(0)));
  else race::stop(), __asan_report_store_n((void*)a, n);
}
}
#undef DLK_HOOK
#endif

extern "C" void __dlk_atomic_access(void* address, size_t bytes, void* ret) {
  uintptr_t a = (uintptr_t)address;
  if (prof::g_recording) prof::access(address, bytes, prof::ATOMIC, ret);
  if (race::tracked(a, bytes)) {
    race::track(a, bytes, race::ATOMIC, race::pc_of(ret));
    return;
  }
#if DLK_ASAN
  if (__asan_region_is_poisoned(address, bytes)) {
    race::stop();
    __asan_report_store_n(address, bytes);
  }
#endif
}

extern "C" void __dlk_threadfence(void) { race::g_block_fenced = true; }
