// Spec 1.1 rollback through the runner (support/runner.cpp), with shrinking: generated verify-then-
// accept schedules (chunks of k + 1 tokens, a accepted, the rest rolled back in the next step
// together with the next chunk), rollbacks beyond the reserve (honoured or refused as §5.1.2 says),
// repeated rollbacks against the high-water mark, resets, batches and a second (global or sliding)
// layer. The runner checks every output against the oracle, the ring after every step against the
// spec ring (rolled-back slots empty), and that the engine refuses exactly the steps the spec
// refuses. Planted bugs show that each part of the check can fail.
//
// Next (issue 15): this becomes a property of all_properties() with its mutants in the catalogue.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "mutants/mutants.hpp"
#include "ringkv/error.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/case.hpp"
#include "support/runner.hpp"

namespace ringkv::conformance {
namespace {

/// A rollback schedule for a small config; `rollback_beyond` adds rollbacks of up to W + Q + 2 tokens.
Case rollback_case(bool rollback_beyond) {
  Case c;
  Config& cfg = c.config;
  const int64_t S = *rc::gen::inRange<int64_t>(0, 3);
  const int64_t W = *rc::gen::inRange<int64_t>(1, 9);
  const int64_t Q = *rc::gen::inRange<int64_t>(0, 5);
  const int layers = *rc::gen::inRange(1, 3);
  cfg.layers.resize(static_cast<size_t>(layers));
  cfg.max_tokens = *rc::gen::inRange<int64_t>(S + W + 4, S + W + Q + 40);
  for (LayerConfig& l : cfg.layers) {
    l.window = W;
    l.sinks = S;
    l.rollback_reserve = Q;
  }
  if (layers == 2) {
    // a global layer (rolls back too) or a second sliding window with its own reserve
    const bool global = *rc::gen::arbitrary<bool>();
    cfg.layers[1].window = global ? cfg.max_tokens : std::max<int64_t>(1, W / 2);
    cfg.layers[1].sinks = global ? 0 : S;
    cfg.layers[1].rollback_reserve = global ? 0 : *rc::gen::inRange<int64_t>(0, 3);
  }
  const int heads = *rc::gen::element(1, 2);
  cfg.num_kv_heads = heads;
  cfg.num_q_heads = heads * *rc::gen::element(1, 2);
  cfg.head_dim = *rc::gen::element(4, 8);
  cfg.batch = *rc::gen::inRange(1, 4);
  const int fmt = *rc::gen::inRange(0, 3);
  cfg.k_format = cfg.v_format = fmt == 0   ? KvFormat::of(DType::f32)
                                : fmt == 1 ? KvFormat::of(DType::bf16)
                                           : KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
  c.seed = *rc::gen::inRange<uint64_t>(1, 1000);

  ScheduleTracker tracker(c);
  int next_stream = cfg.batch;
  std::vector<int64_t> pending(static_cast<size_t>(cfg.batch), 0);  // drafts of the last verify chunk
  const int steps = *rc::gen::inRange(4, 30);
  for (int st = 0; st < steps; ++st) {
    StepPlan plan;
    plan.tokens.assign(static_cast<size_t>(cfg.batch), 0);
    for (int s = 0; s < cfg.batch; ++s) {
      const auto su = static_cast<size_t>(s);
      const int64_t held = tracker.held(s);
      const int what = *rc::gen::inRange(0, 10);
      if (what == 0 && held > 0) {  // reset
        plan.resets.push_back({s, *rc::gen::inRange<int64_t>(0, 50), next_stream++});
        pending[su] = 0;
        plan.tokens[su] = std::min<int64_t>(cfg.max_tokens, *rc::gen::inRange<int64_t>(1, 4));
        continue;
      }
      int64_t back = 0;
      if (pending[su] > 0) {
        back = *rc::gen::inRange<int64_t>(0, pending[su] + 1);  // reject the last `back` drafts
      } else if (rollback_beyond && held > 0 && what <= 2) {
        back = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(held, W + Q + 2) + 1);
      }
      if (back > 0) plan.rollbacks.push_back({s, back, next_stream++});
      const int64_t k = *rc::gen::inRange<int64_t>(0, 4);  // drafts of the next verify chunk
      const int64_t room = cfg.max_tokens - (held - back);
      plan.tokens[su] = std::min(room, what == 9 ? 0 : k + 1);
      pending[su] = std::max<int64_t>(0, plan.tokens[su] - 1);
    }
    if (!tracker.honoured(plan)) {
      // A refused step: put it alone (its rollbacks only) so that the schedule goes on as it was.
      StepPlan refused;
      refused.tokens.assign(static_cast<size_t>(cfg.batch), 0);
      refused.rollbacks = plan.rollbacks;
      c.steps.push_back(refused);
      std::fill(pending.begin(), pending.end(), 0);
      continue;
    }
    tracker.apply(plan);
    c.steps.push_back(plan);
  }
  return c;
}

RunOptions checked() {
  RunOptions o;
  o.check_ring = true;
  o.stop_at_failure = true;
  return o;
}

RC_GTEST_PROP(RollbackProperty, ReferenceMatchesTheOracleAndRefusesExactlyWhatTheSpecRefuses, ()) {
  const Case c = rollback_case(*rc::gen::arbitrary<bool>());
  const RunResult r = run_case(reference_engine_factory(), c, checked());
  ScheduleTracker t(c);
  bool refusal = false;
  for (const StepPlan& st : c.steps) {
    if (t.honoured(st)) {
      t.apply(st);
    } else {
      refusal = true;
    }
  }
  RC_TAG(ScheduleTracker::has_rollbacks(c) ? "with rollbacks" : "without", refusal ? "a refused step" : "none refused");
  if (!r.ok()) RC_LOG() << r.failure << "\n" << c.describe();
  RC_ASSERT(r.ok());
}

// ---- planted bugs: each must make the runner fail on some generated case ----

class HonoursEverything : public ReferenceEngine {  // never refuses: a silent no-op after the wrap
 public:
  using ReferenceEngine::ReferenceEngine;
 protected:
  void check_rollbacks(const StepBatch&) const override {}
};

class RefusesFromCurrentLength : public ReferenceEngine {  // forgets the high-water mark
 public:
  using ReferenceEngine::ReferenceEngine;
 protected:
  void check_rollbacks(const StepBatch& batch) const override {
    for (const SequenceRollback& rb : batch.rollbacks) {
      const int64_t held = tokens_seen(rb.sequence), m = held - rb.n_tokens;
      for (const LayerConfig& l : config_.layers) {
        if (!layer_honours_rollback(l, config_.max_tokens, m, held)) throw StepError("refused (from the length)");
      }
    }
  }
};

class KeepsRolledBackSlots : public ReferenceEngine {  // positions restored, slots not emptied
 public:
  using ReferenceEngine::ReferenceEngine;
 protected:
  void roll_back(int sequence, int64_t m) override {
    // Only the counts go back: the slots of removed tokens keep their positions and values.
    for (size_t l = 0; l < config_.layers.size(); ++l) {
      int64_t& H = high_water(static_cast<int>(l), sequence);
      H = high_water_after_rollback(config_.layers[l], m, H);
    }
    seen_mut(sequence) = m;
  }
};

template <class Mutant>
EngineFactory factory_of(const char* name) {
  EngineFactory f = reference_engine_factory();
  f.name = name;
  f.create = [](const Config& c) -> std::unique_ptr<Engine> { return std::make_unique<Mutant>(c); };
  return f;
}

/// Whether some of 200 generated cases makes the runner fail the factory's engine.
template <class Mutant>
bool caught(const char* name) {
  const EngineFactory f = factory_of<Mutant>(name);
  for (int seed = 0; seed < 200; ++seed) {
    const Case c = rc::gen::exec([] { return rollback_case(true); })(rc::Random(static_cast<uint64_t>(seed) + 1), 40).value();
    if (!run_case(f, c, checked()).ok()) return true;
  }
  return false;
}

/// Whether all of 200 generated cases pass on the factory's engine (the first failure otherwise).
std::string first_failure(const EngineFactory& f) {
  for (int seed = 0; seed < 200; ++seed) {
    const Case c = rc::gen::exec([] { return rollback_case(true); })(rc::Random(static_cast<uint64_t>(seed) + 1), 40).value();
    const RunResult r = run_case(f, c, checked());
    if (!r.ok()) return r.failure + "\n" + c.describe();
  }
  return "";
}

TEST(RollbackProperty, CorrectEnginesInOtherOrdersAndPrecisionsPass) {
  // The controls of the mutant catalogue: the reference summing in reversed or varying slot order,
  // and in the numerics of real engines' profiles (f16/bf16 compute, f16 P.V, f32 RoPE angles,
  // q8_0 dot), each declaring them. Rollback changes no bound: they all pass.
  int controls = 0;
  for (const MutantInfo& m : all_mutants()) {
    if (!m.must_pass) continue;
    ++controls;
    EngineFactory f = m.factory;
    f.capabilities.rollback = true;  // they are the reference underneath: rollback included
    f.capabilities.max_rollback_reserve = int64_t{1} << 30;
    EXPECT_EQ(first_failure(f), "") << m.name;
  }
  EXPECT_GE(controls, 5);
}

TEST(RollbackProperty, PlantedBugsFail) {
  EXPECT_TRUE(caught<HonoursEverything>("honours-everything"));
  EXPECT_TRUE(caught<RefusesFromCurrentLength>("refuses-from-current-length"));
  EXPECT_TRUE(caught<KeepsRolledBackSlots>("keeps-rolled-back-slots"));
}

}  // namespace
}  // namespace ringkv::conformance
