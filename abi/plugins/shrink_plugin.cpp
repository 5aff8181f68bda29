// libringkv_plugin_shrink_<bug>.so: test plugins for the properties' shrink (`ringkv check
// --shrink-time`). Each is a reference engine with one bug: the two bugs of issue 16, whose
// shrink through the worker never ended (the generator's rare options shrank in, see
// docs/performance.md), and a slow engine for the budget test. Built per bug, picked by a
// compile definition:
//   RINGKV_SHRINK_reset_clears_neighbour   a reset of sequence s also clears the ring of
//                                          sequence (s + 1) % batch (its tokens are lost)
//   RINGKV_SHRINK_slot_from_append_count   token j goes to the slot of the sequence's append
//                                          count (tokens appended since the engine was made,
//                                          which a reset does not clear), not of its index j
//                                          since the reset: after a reset the sinks rotate away
//   RINGKV_SHRINK_slow                     attends W - 1 keys (found at the first case), and
//                                          takes 500 ms to make an engine (a device context, a
//                                          JIT): its shrink takes about 7 s, far beyond a 2 s
//                                          budget (the budget test's fixture)
// None of them is a shipped mutant (conformance/mutants/): they exist for the CLI tests and
// the shrink benchmark (cli/shrink_bench.cpp).
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "export_engine.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/reference_engine.hpp"

namespace {

using ringkv::Config;
using ringkv::ReferenceEngine;

#if defined(RINGKV_SHRINK_reset_clears_neighbour)
class ResetClearsNeighbour final : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void clear_sequence(int sequence) override {
    ReferenceEngine::clear_sequence(sequence);
    const int other = (sequence + 1) % config_.batch;
    for (size_t l = 0; l < config_.layers.size(); ++l) ring_mut(static_cast<int>(l), other).reset();
  }
  const char* engine_name() const override { return "shrink:reset_clears_neighbour"; }
};
using BuggyEngine = ResetClearsNeighbour;

#elif defined(RINGKV_SHRINK_slow)
class SlowWindowMinusOne final : public ReferenceEngine {
 public:
  explicit SlowWindowMinusOne(Config c) : ReferenceEngine(std::move(c)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }

 protected:
  bool attends(int layer, int64_t i, int64_t j) const override {
    const ringkv::LayerConfig& L = config_.layers[static_cast<size_t>(layer)];
    return j <= i && (j < L.sinks || j > i - (L.window - 1));
  }
  const char* engine_name() const override { return "shrink:slow_window_minus_one"; }
};
using BuggyEngine = SlowWindowMinusOne;

#elif defined(RINGKV_SHRINK_slot_from_append_count)
class SlotFromAppendCount final : public ReferenceEngine {
 public:
  explicit SlotFromAppendCount(Config c) : ReferenceEngine(std::move(c)), appended_(static_cast<size_t>(config_.batch), 0) {}

  void step(const ringkv::StepBatch& batch) override {
    ReferenceEngine::step(batch);
    for (const ringkv::SequenceStep& a : batch.appends) appended_[static_cast<size_t>(a.sequence)] += a.n_tokens;
  }

 protected:
  // Writes each token as the reference does, then moves what it wrote to the slot of the append
  // count and puts back what the right slot held before.
  void process_chunk(int layer, int sequence, int64_t n, const float* q, const float* k, const float* v,
                     float* out) override {
    const int64_t qs = int64_t{config_.num_q_heads} * config_.head_dim;
    const int64_t kvs = int64_t{config_.num_kv_heads} * config_.head_dim;
    const int64_t first = seen_of(sequence);
    ringkv::RingKvCache& ring = ring_mut(layer, sequence);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t right = ring.geometry().slot_of(first + t);
      const int64_t wrong = ring.geometry().slot_of(appended_[static_cast<size_t>(sequence)] + t);
      if (right == wrong) {
        write_token(layer, sequence, first + t, k + t * kvs, v + t * kvs);
      } else {
        const Saved before = save(ring, right);
        write_token(layer, sequence, first + t, k + t * kvs, v + t * kvs);
        restore(ring, wrong, save(ring, right));
        restore(ring, right, before);
      }
      attend_token(layer, sequence, first + t, q + t * qs, out + t * qs);
    }
  }
  const char* engine_name() const override { return "shrink:slot_from_append_count"; }

 private:
  struct Saved {
    int64_t position = 0;
    std::vector<uint8_t> k, v;
    std::vector<float> ks, vs;
  };
  Saved save(const ringkv::RingKvCache& ring, int64_t slot) const {
    const int H = config_.num_kv_heads, D = config_.head_dim;
    const auto kb = static_cast<size_t>(D * ringkv::bytes_per_element(ring.k_format().dtype));
    const auto vb = static_cast<size_t>(D * ringkv::bytes_per_element(ring.v_format().dtype));
    const auto ksn = static_cast<size_t>(ringkv::scales_per_row(ring.k_format(), D));
    const auto vsn = static_cast<size_t>(ringkv::scales_per_row(ring.v_format(), D));
    Saved s;
    s.position = ring.position(slot);
    for (int h = 0; h < H; ++h) {
      s.k.insert(s.k.end(), ring.k_bytes(slot, h), ring.k_bytes(slot, h) + kb);
      s.v.insert(s.v.end(), ring.v_bytes(slot, h), ring.v_bytes(slot, h) + vb);
      s.ks.insert(s.ks.end(), ring.k_scales(slot, h), ring.k_scales(slot, h) + ksn);
      s.vs.insert(s.vs.end(), ring.v_scales(slot, h), ring.v_scales(slot, h) + vsn);
    }
    return s;
  }
  static void restore(ringkv::RingKvCache& ring, int64_t slot, const Saved& s) {
    const auto H = static_cast<size_t>(ring.num_kv_heads());
    const size_t kb = s.k.size() / H, vb = s.v.size() / H, ksn = s.ks.size() / H, vsn = s.vs.size() / H;
    for (size_t h = 0; h < H; ++h) {
      const int hi = static_cast<int>(h);
      if (kb) std::memcpy(ring.k_bytes(slot, hi), s.k.data() + h * kb, kb);
      if (vb) std::memcpy(ring.v_bytes(slot, hi), s.v.data() + h * vb, vb);
      if (ksn) std::memcpy(ring.k_scales(slot, hi), s.ks.data() + h * ksn, ksn * sizeof(float));
      if (vsn) std::memcpy(ring.v_scales(slot, hi), s.vs.data() + h * vsn, vsn * sizeof(float));
    }
    ring.set_position(slot, s.position);
  }

  std::vector<int64_t> appended_;  // [sequence] tokens appended since construction (resets do not clear it)
};
using BuggyEngine = SlotFromAppendCount;

#else
#error "define one of RINGKV_SHRINK_reset_clears_neighbour, RINGKV_SHRINK_slot_from_append_count, RINGKV_SHRINK_slow"
#endif

ringkv::abi::ExportSpec make_spec() {
  ringkv::abi::ExportSpec s;
  s.factory = ringkv::reference_engine_factory();
  s.factory.name = "shrink-test";
  s.factory.create = [](const Config& c) -> std::unique_ptr<ringkv::Engine> { return std::make_unique<BuggyEngine>(c); };
  return s;
}

}  // namespace

RINGKV_EXPORT_ENGINE(make_spec)
