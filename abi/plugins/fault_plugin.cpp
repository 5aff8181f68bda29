// Fault-injection plugins: a reference engine that misbehaves in step 3 (the
// fourth step() call of an engine) of any engine whose config has
// max_tokens == kTrigger, and is correct otherwise. Built once per fault:
//   RINGKV_FAULT_crash  writes to a page it may not touch (SIGSEGV)
//   RINGKV_FAULT_abort  calls abort() (SIGABRT)
//   RINGKV_FAULT_hang   loops forever (the per-call timeout must kill it)
//   RINGKV_FAULT_oob    computes the step, then writes one float past the end of out
//   RINGKV_FAULT_oob_far     ... 200 floats past the end of out (beyond the guard band)
//   RINGKV_FAULT_oob_before  ... one float before the start of out
//   RINGKV_FAULT_writes_input  computes the step, then writes into its input k
//   RINGKV_FAULT_huge_alloc  allocates 64 GiB (run it only under a memory limit: --memory-limit)
//   RINGKV_FAULT_exit   calls _Exit(3) (a plugin that quits its process)
//   RINGKV_FAULT_nan    computes the step, then writes NaN into its first output
//   RINGKV_FAULT_leak   allocates and touches 4 MiB in EVERY step of every engine (armed or not) and
//                       never frees it: the host's resident-memory check must warn, or fail the case
//                       above --leak-limit
// The tests check that the failing case reports exactly that, and that the
// next case runs in a fresh worker.
#include <sys/mman.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include <limits>
#include <vector>

#include "export_engine.hpp"
#include "ringkv/reference_engine.hpp"

namespace {

constexpr int64_t kTrigger = 613;
constexpr int64_t kFaultStep = 3;

class FaultEngine final : public ringkv::Engine {
 public:
  explicit FaultEngine(const ringkv::Config& c) : inner_(ringkv::make_reference_engine(c)), armed_(c.max_tokens == kTrigger) {}

  ringkv::EngineInfo info() const override { return inner_->info(); }
  const ringkv::Config& config() const override { return inner_->config(); }
  void step(const ringkv::StepBatch& batch) override {
    const bool fault = armed_ && steps_++ == kFaultStep;
#if defined(RINGKV_FAULT_crash)
    if (fault) {  // a real invalid write (a page with no access), which no sanitizer intercepts as UB
      void* page = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      *static_cast<volatile int*>(page) = 42;
    }
#elif defined(RINGKV_FAULT_abort)
    if (fault) std::abort();
#elif defined(RINGKV_FAULT_hang)
    while (fault) std::this_thread::sleep_for(std::chrono::milliseconds(50));
#elif defined(RINGKV_FAULT_exit)
    if (fault) std::_Exit(3);
#elif defined(RINGKV_FAULT_leak)
    {  // every step: 4 MiB allocated, every page touched, and the pointer dropped
      constexpr size_t kLeak = size_t{4} << 20;
      auto* leaked = static_cast<volatile char*>(std::malloc(kLeak));
      for (size_t i = 0; leaked != nullptr && i < kLeak; i += 4096) leaked[i] = 1;
    }
#elif defined(RINGKV_FAULT_huge_alloc)
    if (fault) {  // a runaway allocation: under RLIMIT_AS it throws std::bad_alloc at once
      std::vector<char> huge(size_t{64} << 30);
      huge_sink_ += huge[huge.size() / 2];
    }
#endif
    inner_->step(batch);
#if defined(RINGKV_FAULT_nan)
    if (fault && !batch.appends.empty()) batch.appends[0].out[0] = std::numeric_limits<float>::quiet_NaN();
#endif
#if defined(RINGKV_FAULT_oob) || defined(RINGKV_FAULT_oob_far) || defined(RINGKV_FAULT_oob_before) || \
    defined(RINGKV_FAULT_writes_input)
    if (fault && !batch.appends.empty()) {
      const ringkv::SequenceStep& s = batch.appends[0];
      const ringkv::Config& c = inner_->config();
      const auto n = static_cast<ptrdiff_t>(c.layers.size()) * static_cast<ptrdiff_t>(s.n_tokens) *
                     static_cast<ptrdiff_t>(c.num_q_heads) * static_cast<ptrdiff_t>(c.head_dim);
#if defined(RINGKV_FAULT_oob)
      s.out[n] = 1.0f;  // one past the end
#elif defined(RINGKV_FAULT_oob_far)
      s.out[n + 200] = 1.0f;  // beyond the 64-float guard band
#elif defined(RINGKV_FAULT_oob_before)
      s.out[-1] = 1.0f;
#else
      const_cast<float*>(s.k)[5] += 1.0f;  // an engine that scales its keys in place
#endif
      (void)n;
    }
#endif
    (void)fault;
  }
  void reset(int sequence, int64_t p0) override { inner_->reset(sequence, p0); }
  std::optional<ringkv::CacheSnapshot> snapshot(int layer, int sequence) const override { return inner_->snapshot(layer, sequence); }
  size_t cache_bytes() const override { return inner_->cache_bytes(); }
  bool poison_empty_slots() override { return inner_->poison_empty_slots(); }

 private:
  std::unique_ptr<ringkv::Engine> inner_;
  bool armed_;
  int64_t steps_ = 0;
  [[maybe_unused]] char huge_sink_ = 0;
};

ringkv::abi::ExportSpec make_spec() {
  ringkv::abi::ExportSpec s;
  s.factory = ringkv::reference_engine_factory();
  s.factory.name = "fault";
  s.factory.create = [](const ringkv::Config& c) -> std::unique_ptr<ringkv::Engine> { return std::make_unique<FaultEngine>(c); };
  return s;
}

}  // namespace

RINGKV_EXPORT_ENGINE(make_spec)
