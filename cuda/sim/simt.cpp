// ringkv cuda-sim: the SIMT executor. See docs/cuda-sim.md.
//
// Scheme: the blocks of a launch run one after another (order drawn from the seed); the
// threads of a block are cooperative fibers on stacks of their own, switched by a dozen
// instructions of x86-64 assembly (callee-saved registers and the stack pointer; ucontext
// elsewhere, which costs a signal-mask system call per switch). A fiber runs until it
// reaches __syncthreads, __syncwarp or a shuffle, or exits; then the scheduler picks the
// next runnable fiber at random (the seed again). When none is runnable, the warps whose
// every lane waits at the same shuffle or __syncwarp exchange and resume, then a
// __syncthreads that every thread reached completes; anything else is divergence or a
// deadlock and fails the launch. Cooperative fibers keep every step deterministic for a
// seed and make a kernel's whole state inspectable between two switches, which threads
// of the operating system would not.
//
// Checks: the kernels' translation units are compiled with -fsanitize=thread, which
// calls __tsan_read<N>/__tsan_write<N> before every memory access; this file defines
// those hooks (the TSan runtime is never linked) and checks each access: shared memory
// (per-word writer, reader and barrier-epoch tags: races, reads never written, overruns
// of the dynamic allocation), global memory (the buffers the engine allocated, from an
// arena with gaps between buffers), and alignment.
#include "simt.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ringkv/error.hpp"
#include "sim_runtime.hpp"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

extern "C" {
extern char __start_ringkv_sim_shared[] __attribute__((weak));
extern char __stop_ringkv_sim_shared[] __attribute__((weak));
}

namespace ringkv::cuda::sim {

thread_local const ThreadView* tl_view = nullptr;

namespace {

constexpr size_t kStackBytes = size_t{256} << 10;
constexpr size_t kGuardBytes = 4096;
constexpr size_t kDeviceSmemLimit = 232448;  // 227 KiB: sm_90's opt-in maximum per block
constexpr size_t kDefaultSmemLimit = 48 * 1024;
constexpr size_t kDynReserve = size_t{512} << 10;  // the dynamic shared region with its guard zone

// ---------------------------------------------------------------- context switch
#if defined(__x86_64__)
extern "C" void ringkv_sim_switch(void** save_sp, void* load_sp);
extern "C" void ringkv_sim_trampoline();
asm(R"(
  .text
  .globl ringkv_sim_switch
  .type ringkv_sim_switch,@function
ringkv_sim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ringkv_sim_switch,.-ringkv_sim_switch
  .globl ringkv_sim_trampoline
  .type ringkv_sim_trampoline,@function
ringkv_sim_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size ringkv_sim_trampoline,.-ringkv_sim_trampoline
)");
#endif

/// splitmix64: the order of blocks and threads (cheap; statistical quality is not the point).
struct Rng {
  using result_type = uint64_t;
  uint64_t state = 0;
  void seed(uint64_t s) { state = s; }
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return UINT64_MAX; }
  uint64_t operator()() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(((*this)() >> 32) * n >> 32); }
};

/// Fisher-Yates with the Rng (std::shuffle's distribution costs more than the kernels' work).
template <class T>
void shuffle_with(std::vector<T>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(static_cast<uint32_t>(i))]);
}

enum class State { runnable, barrier, warp_op, exited };
enum class WarpOp { shuffle, syncwarp };

struct Fiber {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t ctx;
#endif
  ThreadView view;
  int tid = 0;
  State state = State::runnable;
  const void* site = nullptr;  // where it waits
  WarpOp op = WarpOp::shuffle;
  unsigned mask = 0;
  uint64_t bits = 0, result = 0;
  int arg = 0;
  bool is_xor = false;
  int width = 32;
};

/// Shadow of one 4-byte word of shared memory.
struct Word {
  uint32_t gen = 0;  // the block (generation) that last wrote it; another value: never written in this block
  int32_t writer = -1;
  uint32_t w_epoch = 0, w_wepoch = 0;
  const void* w_site = nullptr;
  int32_t reader = -1, reader_warp = -1;  // -2: several
  uint32_t r_epoch = UINT32_MAX, r_wepoch = 0;
  const void* r_site = nullptr;
};

struct Stack {
  char* base = nullptr;  // guard page at the bottom
};

struct Exec;
void fiber_main(Exec* ex);

struct Exec {
  const LaunchSpec* spec = nullptr;
  void (*body)(void*) = nullptr;
  void* closure = nullptr;
  std::vector<Fiber> fibers;
  std::vector<uint32_t> warp_epoch;
  uint32_t epoch = 0, gen = 0;
  int current = -1;
  unsigned block_index = 0;
#if defined(__x86_64__)
  void* sched_sp = nullptr;
#else
  ucontext_t sched_ctx;
#endif
  bool failed = false;
  std::string failure;
  Rng rng;
  // shared memory
  uintptr_t static_lo = 0, static_hi = 0;
  uintptr_t dyn_lo = 0;
  size_t dyn_bytes = 0;
  std::vector<Word> shadow;  // static words, then dynamic words
  // reads of words not yet written in this block, judged when the epoch ends: a write by another
  // thread before that is a race (reported then); none at all is a read of memory never written
  struct PendingRead {
    uintptr_t word;
    int tid;
    const void* site;
  };
  std::vector<PendingRead> pending;
};

thread_local Exec* tl_exec = nullptr;
thread_local std::vector<Stack> tl_stacks;
thread_local char* tl_dyn = nullptr;
thread_local uint32_t tl_gen = 0;
thread_local cudaError_t tl_last_error = cudaSuccess;
thread_local uint64_t tl_launches = 0;

std::mutex g_attr_mutex;
std::unordered_map<const void*, int> g_max_dyn;  // cudaFuncAttributeMaxDynamicSharedMemorySize per kernel
std::atomic<uint64_t> g_seed{0x5eed};
std::atomic<bool> g_seed_set{false};

// ---------------------------------------------------------------- symbolization
std::string where(const void* pc) {
  if (pc == nullptr) return "?";
  Dl_info info{};
  if (dladdr(pc, &info) == 0 || info.dli_fname == nullptr) return "?";
  auto addr = reinterpret_cast<uintptr_t>(pc) - 1;  // inside the call instruction
  const auto* ehdr = static_cast<const Elf64_Ehdr*>(info.dli_fbase);
  if (ehdr != nullptr && ehdr->e_type == ET_DYN) addr -= reinterpret_cast<uintptr_t>(info.dli_fbase);
  std::string file = info.dli_fname;
  if (file.empty() || file.find('\'') != std::string::npos) return "?";
  char cmd[4096];
  std::snprintf(cmd, sizeof cmd, "addr2line -C -f -i -e '%s' 0x%" PRIxPTR " 2>/dev/null", file.c_str(), addr);
  std::string out;
  if (FILE* f = popen(cmd, "r")) {
    char line[2048];
    std::vector<std::string> lines;
    while (std::fgets(line, sizeof line, f)) {
      std::string s(line);
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      lines.push_back(s);
    }
    pclose(f);
    // pairs of (function, file:line), innermost first
    for (size_t i = 0; i + 1 < lines.size(); i += 2) {
      std::string loc = lines[i + 1];
      const auto slash = loc.rfind('/');
      if (slash != std::string::npos) loc = loc.substr(slash + 1);
      const auto disc = loc.find(" (discriminator");
      if (disc != std::string::npos) loc = loc.substr(0, disc);
      std::string fn = lines[i];
      for (size_t p; (p = fn.find("(anonymous namespace)::")) != std::string::npos;) fn.erase(p, 23);
      if (fn.rfind("void ", 0) == 0) fn.erase(0, 5);
      const auto paren = fn.find('(');
      if (paren != std::string::npos) fn = fn.substr(0, paren);
      if (loc.rfind("simt.hpp:", 0) == 0 && i + 2 < lines.size()) continue;  // the intrinsic's own frame
      if (!out.empty()) out += " <- ";
      out += loc + " (" + fn + ")";
    }
  }
  if (out.empty()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s+0x%" PRIxPTR, info.dli_sname ? info.dli_sname : "?", addr);
    return buf;
  }
  return out;
}

std::string who(const Exec& ex, int tid) {
  return "block " + std::to_string(ex.block_index) + " thread " + std::to_string(tid) + " (warp " +
         std::to_string(tid / 32) + " lane " + std::to_string(tid % 32) + ")";
}

void switch_to_scheduler(Exec& ex) {
  Fiber& f = ex.fibers[static_cast<size_t>(ex.current)];
#if defined(__x86_64__)
  ringkv_sim_switch(&f.sp, ex.sched_sp);
#else
  swapcontext(&f.ctx, &ex.sched_ctx);
#endif
  tl_view = &ex.fibers[static_cast<size_t>(ex.current)].view;
}

/// Records the first failure and leaves the fiber for good (its stack is abandoned).
[[noreturn]] void fail_in_fiber(Exec& ex, const std::string& what, const void* site) {
  if (!ex.failed) {
    ex.failed = true;
    ex.failure = who(ex, ex.current) + ": " + what + " at " + where(site);
  }
  for (;;) switch_to_scheduler(ex);
}

void fail_block(Exec& ex, const std::string& what) {
  if (!ex.failed) {
    ex.failed = true;
    ex.failure = "block " + std::to_string(ex.block_index) + ": " + what;
  }
}

// ---------------------------------------------------------------- global memory: the arena
struct Range {
  size_t size = 0;      // what was asked for
  size_t capacity = 0;  // what the range holds
  bool live = false;
};

struct Arena {
  std::mutex mutex;
  char* base = nullptr;
  size_t reserved = 0, used = 0;
  std::map<uintptr_t, Range> ranges;
  std::atomic<uint64_t> version{1};
};
Arena& arena() {
  static Arena a;
  return a;
}
constexpr size_t kArenaBytes = size_t{32} << 30;
std::atomic<uintptr_t> g_arena_lo{0};  // the arena's extent, set once (the hooks read it without a lock)
constexpr size_t kArenaGap = 256;  // bytes between two buffers: an overrun lands in no buffer

struct Cache {
  uintptr_t lo = 0, hi = 0;
  uint64_t version = 0;
};
thread_local Cache tl_cache;

// ---------------------------------------------------------------- shared memory checks
Word* shared_word(Exec& ex, uintptr_t a) {
  if (a >= ex.static_lo && a < ex.static_hi) return &ex.shadow[(a - ex.static_lo) / 4];
  const size_t static_words = (ex.static_hi - ex.static_lo + 3) / 4;
  return &ex.shadow[static_words + (a - ex.dyn_lo) / 4];
}

std::string shared_name(const Exec& ex, uintptr_t a) {
  char buf[128];
  if (a >= ex.static_lo && a < ex.static_hi) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(a), &info) != 0 && info.dli_sname != nullptr) {
      std::snprintf(buf, sizeof buf, "static __shared__ '%s' + %zu bytes", info.dli_sname,
                    static_cast<size_t>(a - reinterpret_cast<uintptr_t>(info.dli_saddr)));
    } else {
      std::snprintf(buf, sizeof buf, "static __shared__ byte %zu", static_cast<size_t>(a - ex.static_lo));
    }
  } else {
    std::snprintf(buf, sizeof buf, "dynamic shared byte %zu of %zu", static_cast<size_t>(a - ex.dyn_lo), ex.dyn_bytes);
  }
  return buf;
}

bool ordered(const Exec& ex, int other, int other_warp, uint32_t other_wepoch, int me) {
  if (other == me) return true;
  const int warp = me / 32;
  return other_warp == warp && ex.warp_epoch[static_cast<size_t>(warp)] > other_wepoch;
}

void shared_access(Exec& ex, uintptr_t a, size_t n, bool write, const void* pc) {
  const int me = ex.current;
  const int warp = me / 32;
  const uint32_t wep = ex.warp_epoch[static_cast<size_t>(warp)];
  for (uintptr_t w = a & ~uintptr_t{3}; w < a + n; w += 4) {
    Word& s = *shared_word(ex, w);
    const bool written = s.gen == ex.gen;  // tagged in this block
    if (!written) {
      s = Word{};
      s.gen = ex.gen;  // tagged, yet unwritten (writer -1)
      s.w_epoch = UINT32_MAX;
    }
    if (!write && s.writer < 0) ex.pending.push_back(Exec::PendingRead{w, me, pc});
    if (!write) {
      if (s.w_epoch == ex.epoch && !ordered(ex, s.writer, s.writer / 32, s.w_wepoch, me)) {
        fail_in_fiber(ex,
                      "shared-memory race: read of " + shared_name(ex, w) + " written by thread " +
                          std::to_string(s.writer) + " at " + where(s.w_site) + " with no barrier between",
                      pc);
      }
      if (s.r_epoch != ex.epoch) {
        s.reader = me, s.reader_warp = warp, s.r_epoch = ex.epoch, s.r_wepoch = wep, s.r_site = pc;
      } else {
        if (s.reader != me) s.reader = -2;
        if (s.reader_warp != warp) s.reader_warp = -2;
        s.r_wepoch = std::min(s.r_wepoch, wep);
      }
      continue;
    }
    if (s.writer >= 0 && s.w_epoch == ex.epoch && !ordered(ex, s.writer, s.writer / 32, s.w_wepoch, me)) {
      fail_in_fiber(ex,
                    "shared-memory race: write of " + shared_name(ex, w) + " also written by thread " +
                        std::to_string(s.writer) + " at " + where(s.w_site) + " with no barrier between",
                    pc);
    }
    if (s.r_epoch == ex.epoch && s.reader != me &&
        !(s.reader_warp == warp && ex.warp_epoch[static_cast<size_t>(warp)] > s.r_wepoch)) {
      const std::string readers = (s.reader == -2 ? std::string("other threads") : "thread " + std::to_string(s.reader)) +
                                  (s.writer < 0 ? " (before anything was written there)" : "");
      fail_in_fiber(ex,
                    "shared-memory race: write of " + shared_name(ex, w) + " read by " + readers + " at " +
                        where(s.r_site) + " with no barrier between",
                    pc);
    }
    s.gen = ex.gen, s.writer = me, s.w_epoch = ex.epoch, s.w_wepoch = wep, s.w_site = pc;
    s.r_epoch = UINT32_MAX, s.reader = -1, s.reader_warp = -1;
  }
}

void global_access(Exec& ex, uintptr_t a, size_t n, const void* pc) {
  Arena& ar = arena();
  const uint64_t v = ar.version.load(std::memory_order_acquire);
  if (tl_cache.version == v && a >= tl_cache.lo && a + n <= tl_cache.hi) return;
  std::string bad;
  {
    std::lock_guard<std::mutex> lock(ar.mutex);
    auto it = ar.ranges.upper_bound(a);
    if (it == ar.ranges.begin()) {
      bad = "global access of " + std::to_string(n) + " bytes before the first buffer of the engine";
    } else {
      --it;
      const uintptr_t lo = it->first;
      const Range& r = it->second;
      if (!r.live) {
        bad = "global access of " + std::to_string(n) + " bytes into a released buffer (byte " + std::to_string(a - lo) + ")";
      } else if (a + n > lo + r.size) {
        bad = "out-of-bounds global access: " + std::to_string(n) + " bytes at byte " + std::to_string(a - lo) +
              " of a " + std::to_string(r.size) + "-byte buffer (" + std::to_string(a + n - (lo + r.size)) +
              " bytes past its end)";
      } else {
        tl_cache = Cache{lo, lo + r.size, v};
        return;
      }
    }
  }
  fail_in_fiber(ex, bad, pc);
}

// ---------------------------------------------------------------- host memory a kernel may touch
struct Segment {
  uintptr_t lo, hi;
};
/// The loaded objects' segments (code, constants, static data): reads of tables and of the
/// simulator's own variables. Collected once.
const std::vector<Segment>& static_segments() {
  static const std::vector<Segment> segs = [] {
    std::vector<Segment> v;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const auto& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD) continue;
            const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
            static_cast<std::vector<Segment>*>(out)->push_back(Segment{lo, lo + ph.p_memsz});
          }
          return 0;
        },
        &v);
    std::sort(v.begin(), v.end(), [](const Segment& a, const Segment& b) { return a.lo < b.lo; });
    return v;
  }();
  return segs;
}

bool in_range(uintptr_t a, size_t n, const void* lo, size_t bytes) {
  const auto l = reinterpret_cast<uintptr_t>(lo);
  return a >= l && a + n <= l + bytes;
}

/// An access outside shared and device memory: the thread's own stack, the launch's arguments,
/// the executor's view of threadIdx and friends, static data; anything else is host memory a
/// GPU kernel cannot reach (a host pointer among its arguments) or another thread's stack.
void host_access(Exec& ex, uintptr_t a, size_t n, bool write, const void* pc) {
  const size_t me = static_cast<size_t>(ex.current);
  const uintptr_t my_lo = reinterpret_cast<uintptr_t>(tl_stacks[me].base) + kGuardBytes;
  if (a >= my_lo && a + n <= my_lo + kStackBytes) return;
  const LaunchSpec& s = *ex.spec;
  if (in_range(a, n, s.args, s.args_bytes) || in_range(a, n, s.closure, s.closure_bytes)) return;
  if (in_range(a, n, &tl_view, sizeof tl_view) ||
      in_range(a, n, ex.fibers.data(), ex.fibers.size() * sizeof(Fiber))) {
    return;
  }
  const std::vector<Segment>& segs = static_segments();
  auto it = std::upper_bound(segs.begin(), segs.end(), a, [](uintptr_t x, const Segment& g) { return x < g.lo; });
  if (it != segs.begin() && a + n <= std::prev(it)->hi) return;
  for (size_t t = 0; t < ex.fibers.size(); ++t) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(tl_stacks[t].base) + kGuardBytes;
    if (a >= lo && a < lo + kStackBytes) {
      fail_in_fiber(ex, std::string(write ? "store to" : "load from") + " the local memory of thread " + std::to_string(t), pc);
    }
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, a);
  fail_in_fiber(ex,
                std::string(write ? "store to" : "load from") + " host memory (" + std::to_string(n) + " bytes at " + buf +
                    "), in no buffer of the engine: a host pointer in a kernel?",
                pc);
}

inline void access(void* p, size_t n, bool write, bool may_be_unaligned, const void* pc) {
  Exec* ex = tl_exec;
  if (ex == nullptr || ex->current < 0 || ex->failed) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  const bool in_static = a >= ex->static_lo && a < ex->static_hi;
  const bool in_dyn = a >= ex->dyn_lo && a < ex->dyn_lo + kDynReserve;
  const uintptr_t lo = g_arena_lo.load(std::memory_order_relaxed);
  const bool in_global = lo != 0 && a >= lo && a < lo + kArenaBytes;
  if (!in_static && !in_dyn && !in_global) return host_access(*ex, a, n, write, pc);
  if (!may_be_unaligned && n > 1 && a % n != 0) {
    fail_in_fiber(*ex, "misaligned " + std::to_string(n) + "-byte " + (write ? "store" : "load") + " (address % " +
                           std::to_string(n) + " = " + std::to_string(a % n) + ")",
                  pc);
  }
  if (in_global) return global_access(*ex, a, n, pc);
  if (in_dyn && a + n > ex->dyn_lo + ex->dyn_bytes) {
    fail_in_fiber(*ex,
                  "out-of-bounds dynamic shared memory " + std::string(write ? "store" : "load") + ": " +
                      std::to_string(n) + " bytes at byte " + std::to_string(a - ex->dyn_lo) + " of the launch's " +
                      std::to_string(ex->dyn_bytes) + " bytes",
                  pc);
  }
  if (in_static && a + n > ex->static_hi) {
    fail_in_fiber(*ex, "out-of-bounds static shared memory access", pc);
  }
  shared_access(*ex, a, n, write, pc);
}

// ---------------------------------------------------------------- fibers and scheduling
void fiber_main(Exec* ex) {
  ex->body(ex->closure);
  Fiber& f = ex->fibers[static_cast<size_t>(ex->current)];
  f.state = State::exited;
  for (;;) switch_to_scheduler(*ex);
}

#if !defined(__x86_64__)
void fiber_entry_uc(unsigned lo, unsigned hi) {
  fiber_main(reinterpret_cast<Exec*>((uintptr_t{hi} << 32) | lo));
}
#endif

char* stack_of(size_t i) {
  while (tl_stacks.size() <= i) {
    void* m = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) throw Error("cuda-sim: cannot map a fiber stack");
    mprotect(m, kGuardBytes, PROT_NONE);  // an overflowing fiber faults instead of corrupting its neighbour
    tl_stacks.push_back(Stack{static_cast<char*>(m)});
  }
  return tl_stacks[i].base;
}

void start_fiber(Exec& ex, Fiber& f, size_t i) {
  char* base = stack_of(i);
  char* top = base + kGuardBytes + kStackBytes;
#if defined(__x86_64__)
  auto* sp = reinterpret_cast<uintptr_t*>(top - 56);
  sp[0] = 0;                                                  // r15
  sp[1] = 0;                                                  // r14
  sp[2] = reinterpret_cast<uintptr_t>(&fiber_main);           // r13: the entry
  sp[3] = reinterpret_cast<uintptr_t>(&ex);                   // r12: its argument
  sp[4] = 0;                                                  // rbx
  sp[5] = 0;                                                  // rbp
  sp[6] = reinterpret_cast<uintptr_t>(&ringkv_sim_trampoline);  // ret
  f.sp = sp;
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = base + kGuardBytes;
  f.ctx.uc_stack.ss_size = kStackBytes;
  f.ctx.uc_link = nullptr;
  const auto p = reinterpret_cast<uintptr_t>(&ex);
  makecontext(&f.ctx, reinterpret_cast<void (*)()>(&fiber_entry_uc), 2, static_cast<unsigned>(p),
              static_cast<unsigned>(p >> 32));
#endif
}

void resume(Exec& ex, int tid) {
  ex.current = tid;
  Fiber& f = ex.fibers[static_cast<size_t>(tid)];
  tl_view = &f.view;
#if defined(__x86_64__)
  ringkv_sim_switch(&ex.sched_sp, f.sp);
#else
  swapcontext(&ex.sched_ctx, &f.ctx);
#endif
  ex.current = -1;
  tl_view = nullptr;
}

std::string site_of(const Fiber& f) {
  switch (f.state) {
    case State::barrier: return "__syncthreads at " + where(f.site);
    case State::warp_op: return std::string(f.op == WarpOp::shuffle ? "a shuffle" : "__syncwarp") + " at " + where(f.site);
    case State::exited: return "exit";
    default: return "running";
  }
}

/// The reads of this epoch that found their word never written: still unwritten (or written only
/// by the reader itself, later) is a read of uninitialised shared memory.
bool judge_pending(Exec& ex) {
  for (const auto& r : ex.pending) {
    const Word& s = *shared_word(ex, r.word);
    if (s.gen != ex.gen || s.writer < 0 || s.writer == r.tid) {
      ex.current = r.tid;
      const std::string what = "read of shared memory never written in this block (" + shared_name(ex, r.word) + ")";
      ex.failed = true;
      ex.failure = who(ex, r.tid) + ": " + what + " at " + where(r.site);
      ex.current = -1;
      return false;
    }
  }
  ex.pending.clear();
  return true;
}

/// Completes what can complete when no fiber is runnable; false when nothing could (a failure
/// is recorded then, unless every thread has exited).
bool complete(Exec& ex) {
  const int n = static_cast<int>(ex.fibers.size());
  bool progress = false;
  // warps whose every lane named in the mask waits at the same warp operation
  for (int w0 = 0; w0 < n; w0 += 32) {
    int waiting = -1;
    for (int l = w0; l < std::min(n, w0 + 32); ++l) {
      if (ex.fibers[static_cast<size_t>(l)].state == State::warp_op) {
        waiting = l;
        break;
      }
    }
    if (waiting < 0) continue;
    const Fiber& lead = ex.fibers[static_cast<size_t>(waiting)];
    bool ready = true;
    for (int lane = 0; lane < 32; ++lane) {
      const int t = w0 + lane;
      const bool named = (lead.mask >> lane) & 1u;
      if (t >= n) {
        if (named) {
          fail_block(ex, "thread " + std::to_string(lead.tid) + ": " +
                             (lead.op == WarpOp::shuffle ? "shuffle" : "__syncwarp") + " at " + where(lead.site) +
                             " names lane " + std::to_string(lane) + ", absent (block of " + std::to_string(n) +
                             " threads)");
          return false;
        }
        continue;
      }
      const Fiber& f = ex.fibers[static_cast<size_t>(t)];
      if (f.state == State::warp_op) {
        if (f.site != lead.site || f.op != lead.op || f.mask != lead.mask) {
          fail_block(ex, "warp " + std::to_string(w0 / 32) + " diverged: thread " + std::to_string(lead.tid) + " waits at " +
                             site_of(lead) + " (mask 0x" + [&] { char b[16]; std::snprintf(b, 16, "%08x", lead.mask); return std::string(b); }() +
                             "), thread " + std::to_string(t) + " at " + site_of(f));
          return false;
        }
        if (!named) {
          fail_block(ex, "thread " + std::to_string(t) + " executes " + site_of(f) + " outside its own mask");
          return false;
        }
      } else if (named) {
        if (f.state == State::exited) {
          fail_block(ex, "thread " + std::to_string(lead.tid) + " waits at " + site_of(lead) + " for lane " +
                             std::to_string(lane) + " (thread " + std::to_string(t) + "), which has exited");
          return false;
        }
        ready = false;  // still running, or at a barrier: decided below
      }
    }
    if (!ready) continue;
    for (int lane = 0; lane < 32 && w0 + lane < n; ++lane) {
      Fiber& f = ex.fibers[static_cast<size_t>(w0 + lane)];
      if (f.state != State::warp_op) continue;
      if (f.op == WarpOp::shuffle) {
        const int src = f.is_xor ? ((lane ^ f.arg) & 31) : (f.arg & 31);
        const Fiber& s = ex.fibers[static_cast<size_t>(w0 + src)];
        if (!((lead.mask >> src) & 1u) || s.state != State::warp_op) {
          fail_block(ex, "thread " + std::to_string(w0 + lane) + ": shuffle at " + where(f.site) + " reads lane " +
                             std::to_string(src) + ", outside the mask");
          return false;
        }
        f.result = s.bits;
      }
    }
    if (lead.op == WarpOp::syncwarp) ++ex.warp_epoch[static_cast<size_t>(w0 / 32)];
    for (int lane = 0; lane < 32 && w0 + lane < n; ++lane) {
      Fiber& f = ex.fibers[static_cast<size_t>(w0 + lane)];
      if (f.state == State::warp_op) f.state = State::runnable;
    }
    progress = true;
  }
  if (progress) return true;
  // the block barrier
  int at = -1, exited = -1, other = -1;
  for (int t = 0; t < n; ++t) {
    const State s = ex.fibers[static_cast<size_t>(t)].state;
    if (s == State::barrier && at < 0) at = t;
    if (s == State::exited && exited < 0) exited = t;
    if (s == State::warp_op && other < 0) other = t;
  }
  if (at < 0 && other < 0) {  // every thread has exited
    judge_pending(ex);
    return false;
  }
  if (at >= 0 && other < 0 && exited < 0) {
    const Fiber& a = ex.fibers[static_cast<size_t>(at)];
    for (int t = 0; t < n; ++t) {
      const Fiber& f = ex.fibers[static_cast<size_t>(t)];
      if (f.site != a.site) {
        fail_block(ex, "barrier divergence: thread " + std::to_string(at) + " waits at __syncthreads at " + where(a.site) +
                           ", thread " + std::to_string(t) + " at another __syncthreads at " + where(f.site));
        return false;
      }
    }
    if (!judge_pending(ex)) return false;
    ++ex.epoch;
    for (auto& f : ex.fibers) f.state = State::runnable;
    return true;
  }
  if (at >= 0 && exited >= 0) {
    fail_block(ex, "barrier divergence: thread " + std::to_string(at) + " waits at " + site_of(ex.fibers[static_cast<size_t>(at)]) +
                       " that thread " + std::to_string(exited) + " never reaches (it has exited)");
    return false;
  }
  if (at >= 0) {
    fail_block(ex, "divergence: thread " + std::to_string(at) + " waits at " + site_of(ex.fibers[static_cast<size_t>(at)]) +
                       " while thread " + std::to_string(other) + " waits at " + site_of(ex.fibers[static_cast<size_t>(other)]));
    return false;
  }
  const Fiber& o = ex.fibers[static_cast<size_t>(other)];
  fail_block(ex, "deadlock: thread " + std::to_string(other) + " waits at " + site_of(o) +
                     (exited >= 0 ? " for lanes that have exited" : " that its warp never completes"));
  return false;
}

void run_block(Exec& ex) {
  const unsigned n = ex.spec->block;
  ex.fibers.assign(n, Fiber{});
  ex.warp_epoch.assign((n + 31) / 32, 0);
  ex.epoch = 0;
  ex.pending.clear();
  ex.gen = ++tl_gen;
  if (ex.gen == 0) {  // wrapped: forget every tag
    for (auto& w : ex.shadow) w = Word{};
    ex.gen = ++tl_gen;
  }
  for (unsigned t = 0; t < n; ++t) {
    Fiber& f = ex.fibers[t];
    f.tid = static_cast<int>(t);
    f.view.thread = uint3{t, 0, 0};
    f.view.block = uint3{ex.block_index, 0, 0};
    f.view.block_dim = dim3{n, 1, 1};
    f.view.grid_dim = dim3{ex.spec->grid, 1, 1};
    start_fiber(ex, f, t);
  }
  std::vector<int> runnable;
  runnable.reserve(n);
  for (;;) {
    runnable.clear();
    for (unsigned t = 0; t < n; ++t) {
      if (ex.fibers[t].state == State::runnable) runnable.push_back(static_cast<int>(t));
    }
    if (runnable.empty()) {
      if (!complete(ex)) return;
      continue;
    }
    // every runnable fiber once, in an order drawn from the seed
    shuffle_with(runnable, ex.rng);
    for (int t : runnable) {
      resume(ex, t);
      if (ex.failed) return;
    }
  }
}

Fiber& me_or_die(const char* what) {
  Exec* ex = tl_exec;
  if (ex == nullptr || ex->current < 0) {
    std::fprintf(stderr, "cuda-sim: %s outside a simulated launch\n", what);
    std::abort();
  }
  return ex->fibers[static_cast<size_t>(ex->current)];
}

}  // namespace

// ---------------------------------------------------------------- intrinsics
void syncthreads() {
  const void* pc = __builtin_return_address(0);
  Fiber& f = me_or_die("__syncthreads");
  f.state = State::barrier;
  f.site = pc;
  switch_to_scheduler(*tl_exec);
}

void syncwarp(unsigned mask) {
  const void* pc = __builtin_return_address(0);
  Fiber& f = me_or_die("__syncwarp");
  if (!((mask >> (f.tid % 32)) & 1u)) fail_in_fiber(*tl_exec, "__syncwarp with a mask that excludes the calling lane", pc);
  f.state = State::warp_op;
  f.op = WarpOp::syncwarp;
  f.mask = mask;
  f.site = pc;
  switch_to_scheduler(*tl_exec);
}

uint64_t shuffle(unsigned mask, uint64_t bits, int arg, bool is_xor, int width) {
  const void* pc = __builtin_return_address(0);
  Fiber& f = me_or_die("a shuffle");
  Exec& ex = *tl_exec;
  if (width != 32) fail_in_fiber(ex, "shuffle with width " + std::to_string(width) + " (the simulator models 32)", pc);
  if (!((mask >> (f.tid % 32)) & 1u)) fail_in_fiber(ex, "shuffle with a mask that excludes the calling lane", pc);
  f.state = State::warp_op;
  f.op = WarpOp::shuffle;
  f.mask = mask;
  f.bits = bits;
  f.arg = arg;
  f.is_xor = is_xor;
  f.width = width;
  f.site = pc;
  switch_to_scheduler(ex);
  return ex.fibers[static_cast<size_t>(ex.current)].result;
}

void check_vector(const void* p, size_t bytes, bool write) {
  if (reinterpret_cast<uintptr_t>(p) % bytes == 0) return;
  Exec* ex = tl_exec;
  if (ex == nullptr || ex->current < 0) return;
  fail_in_fiber(*ex,
                "misaligned " + std::to_string(bytes) + "-byte vector " + (write ? "store" : "load") + " (address % " +
                    std::to_string(bytes) + " = " + std::to_string(reinterpret_cast<uintptr_t>(p) % bytes) + ")",
                __builtin_return_address(0));
}

void check_ldg(const void* p, size_t bytes, size_t align) {
  if (reinterpret_cast<uintptr_t>(p) % align == 0) return;
  Exec* ex = tl_exec;
  if (ex == nullptr || ex->current < 0) return;
  fail_in_fiber(*ex,
                "misaligned __ldg of " + std::to_string(bytes) + " bytes (address % " + std::to_string(align) + " = " +
                    std::to_string(reinterpret_cast<uintptr_t>(p) % align) + ")",
                __builtin_return_address(0));
}

void set_max_dynamic_smem(const void* kernel, int bytes) {
  std::lock_guard<std::mutex> lock(g_attr_mutex);
  g_max_dyn[kernel] = bytes;
}

cudaError_t last_error() {
  const cudaError_t e = tl_last_error;
  tl_last_error = cudaSuccess;
  return e;
}

void* dynamic_shared() {
  Exec* ex = tl_exec;
  return ex != nullptr ? reinterpret_cast<void*>(ex->dyn_lo) : nullptr;
}

cudaError_t run_launch(const LaunchSpec& spec, void (*body)(void*), void* closure) {
  const std::string name = std::string("cuda-sim: ") + spec.kernel + " (launched at " +
                           [&] { std::string f = spec.file; const auto s = f.rfind('/'); return s == std::string::npos ? f : f.substr(s + 1); }() +
                           ":" + std::to_string(spec.line) + ", " + std::to_string(spec.grid) + " blocks of " +
                           std::to_string(spec.block) + " threads, " + std::to_string(spec.smem) + " bytes of dynamic shared memory)";
  if (spec.block == 0 || spec.block > 1024 || spec.grid == 0 || spec.grid > 0x7fffffffu) {
    throw Error(name + ": invalid launch configuration");
  }
  if (spec.smem > kDeviceSmemLimit) {
    throw Error(name + ": dynamic shared memory of " + std::to_string(spec.smem) + " bytes exceeds the device's " +
                std::to_string(kDeviceSmemLimit));
  }
  if (spec.smem > kDefaultSmemLimit) {
    std::lock_guard<std::mutex> lock(g_attr_mutex);
    const auto it = g_max_dyn.find(spec.fn);
    if (it == g_max_dyn.end() || static_cast<size_t>(it->second) < spec.smem) {
      throw Error(name + ": dynamic shared memory above 48 KiB without cudaFuncSetAttribute("
                  "cudaFuncAttributeMaxDynamicSharedMemorySize) of at least " + std::to_string(spec.smem) + " bytes");
    }
  }
  if (tl_exec != nullptr) throw Error(name + ": a launch inside a launch");
  // Static __shared__ variables exist once per process: launches from several threads (the CLI's
  // --jobs workers) run one at a time.
  static std::mutex launch_mutex;
  std::lock_guard<std::mutex> one_at_a_time(launch_mutex);
  if (tl_dyn == nullptr) {
    void* m = mmap(nullptr, kDynReserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw Error("cuda-sim: cannot map the dynamic shared region");
    tl_dyn = static_cast<char*>(m);
  }
  Exec ex;
  ex.spec = &spec;
  ex.body = body;
  ex.closure = closure;
  const uint64_t seed = launch_seed() + 0x9e3779b97f4a7c15ull * ++tl_launches;
  ex.rng.seed(seed);
  ex.static_lo = reinterpret_cast<uintptr_t>(__start_ringkv_sim_shared);
  ex.static_hi = reinterpret_cast<uintptr_t>(__stop_ringkv_sim_shared);
  ex.dyn_lo = reinterpret_cast<uintptr_t>(tl_dyn);
  ex.dyn_bytes = spec.smem;
  ex.shadow.assign((ex.static_hi - ex.static_lo + 3) / 4 + (spec.smem + 3) / 4, Word{});
  // garbage in shared memory at the start of every block, as on a device
  std::memset(tl_dyn, 0xcd, std::min(kDynReserve, spec.smem + 256));
  std::vector<unsigned> order(spec.grid);
  for (unsigned b = 0; b < spec.grid; ++b) order[b] = b;
  shuffle_with(order, ex.rng);
  tl_exec = &ex;
  for (unsigned b : order) {
    ex.block_index = b;
    try {
      run_block(ex);
    } catch (...) {
      tl_exec = nullptr;
      tl_view = nullptr;
      throw;
    }
    if (ex.failed) break;
  }
  tl_exec = nullptr;
  tl_view = nullptr;
  if (ex.failed) {
    char s[32];
    std::snprintf(s, sizeof s, "%" PRIu64, launch_seed());
    throw Error(name + ": " + ex.failure + " (seed " + s + ")");
  }
  return cudaSuccess;
}

// ---------------------------------------------------------------- runtime API for the backend
void set_seed(uint64_t seed) {
  g_seed.store(seed);
  g_seed_set.store(true);
}

uint64_t launch_seed() {
  if (!g_seed_set.load()) {
    if (const char* s = std::getenv("RINGKV_SIM_SEED")) {
      g_seed.store(std::strtoull(s, nullptr, 0));
    }
    g_seed_set.store(true);
  }
  return g_seed.load();
}

void* arena_allocate(size_t bytes) {
  Arena& ar = arena();
  std::lock_guard<std::mutex> lock(ar.mutex);
  if (ar.base == nullptr) {
    void* m = mmap(nullptr, kArenaBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) throw Error("cuda-sim: cannot reserve the device memory arena");
    ar.base = static_cast<char*>(m);
    ar.reserved = kArenaBytes;
    g_arena_lo.store(reinterpret_cast<uintptr_t>(m));
    ar.used = kArenaGap;
  }
  const size_t need = std::max<size_t>(bytes, 1);
  for (auto& [lo, r] : ar.ranges) {  // first fit among released buffers
    if (!r.live && r.capacity >= need) {
      r.live = true;
      r.size = bytes;
      std::memset(reinterpret_cast<void*>(lo), 0, bytes);
      ar.version.fetch_add(1);
      return reinterpret_cast<void*>(lo);
    }
  }
  const size_t cap = (need + 255) / 256 * 256;
  if (ar.used + cap + kArenaGap > ar.reserved) {
    throw Error("cuda-sim: allocating " + std::to_string(bytes) + " bytes failed (device arena exhausted)");
  }
  char* p = ar.base + ar.used;
  ar.used += cap + kArenaGap;
  ar.ranges[reinterpret_cast<uintptr_t>(p)] = Range{bytes, cap, true};
  ar.version.fetch_add(1);
  return p;  // fresh pages are zero
}

bool arena_contains(const void* p, size_t bytes) {
  Arena& ar = arena();
  std::lock_guard<std::mutex> lock(ar.mutex);
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = ar.ranges.upper_bound(a);
  if (it == ar.ranges.begin()) return false;
  --it;
  return it->second.live && a + bytes <= it->first + it->second.size;
}

void arena_release(void* p) noexcept {
  if (p == nullptr) return;
  Arena& ar = arena();
  std::lock_guard<std::mutex> lock(ar.mutex);
  const auto it = ar.ranges.find(reinterpret_cast<uintptr_t>(p));
  if (it == ar.ranges.end()) return;
  it->second.live = false;
  ar.version.fetch_add(1);
  if (it->second.capacity >= (size_t{1} << 20)) madvise(p, it->second.capacity, MADV_DONTNEED);
}

}  // namespace ringkv::cuda::sim

// ---------------------------------------------------------------- the instrumentation's entry points
// GCC's -fsanitize=thread calls these before every load and store of the kernels' translation
// units; no TSan runtime is linked: these are the simulator's checks.
#define RINGKV_SIM_HOOK(N)                                                                      \
  extern "C" void __tsan_read##N(void* p) {                                                     \
    ringkv::cuda::sim::access(p, N, false, false, __builtin_return_address(0));                 \
  }                                                                                             \
  extern "C" void __tsan_write##N(void* p) {                                                    \
    ringkv::cuda::sim::access(p, N, true, false, __builtin_return_address(0));                  \
  }                                                                                             \
  extern "C" void __tsan_unaligned_read##N(void* p) {                                           \
    ringkv::cuda::sim::access(p, N, false, true, __builtin_return_address(0));                  \
  }                                                                                             \
  extern "C" void __tsan_unaligned_write##N(void* p) {                                          \
    ringkv::cuda::sim::access(p, N, true, true, __builtin_return_address(0));                   \
  }                                                                                             \
  extern "C" void __tsan_volatile_read##N(void* p) {                                            \
    ringkv::cuda::sim::access(p, N, false, false, __builtin_return_address(0));                 \
  }                                                                                             \
  extern "C" void __tsan_volatile_write##N(void* p) {                                           \
    ringkv::cuda::sim::access(p, N, true, false, __builtin_return_address(0));                  \
  }
RINGKV_SIM_HOOK(1)
RINGKV_SIM_HOOK(2)
RINGKV_SIM_HOOK(4)
RINGKV_SIM_HOOK(8)
RINGKV_SIM_HOOK(16)
#undef RINGKV_SIM_HOOK
extern "C" void __tsan_read_range(void* p, unsigned long n) {
  ringkv::cuda::sim::access(p, n, false, true, __builtin_return_address(0));
}
extern "C" void __tsan_write_range(void* p, unsigned long n) {
  ringkv::cuda::sim::access(p, n, true, true, __builtin_return_address(0));
}
extern "C" void __tsan_init() {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit() {}
extern "C" void __tsan_vptr_update(void*, void*) {}
extern "C" void __tsan_vptr_read(void*) {}
