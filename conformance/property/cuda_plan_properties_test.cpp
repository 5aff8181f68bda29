// The property suite instantiated for the CUDA engine's plan on the host:
// cuda-plan (fused split-K decode, the cuBLAS path for chunks) and
// cuda-plan-cublas (the cuBLAS path for every step). They run the launches the
// kernels run (cuda/src/plan_backend.cpp), so these tests are the CPU proof of
// the kernels' logic. RapidCheck's default 100 cases each. Spec 1.1: speculative-decoding
// schedules with a rollback reserve, through the runner (outputs, rings, refusals).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "property/properties.hpp"
#include "ringkv/cuda_engine.hpp"
#include "support/case.hpp"
#include "support/runner.hpp"
#include "support/show.hpp"

namespace ringkv::conformance {
namespace {

const EngineFactory& fused() {
  static const EngineFactory f = cuda::plan_engine_factory();
  return f;
}
const EngineFactory& cublas() {
  static const EngineFactory f = cuda::plan_cublas_engine_factory();
  return f;
}

void run_property(const EngineFactory& f, const char* name) {
  const PropertyInfo& p = property(name);
  const Case c = *gen_case(f.capabilities, p.options);
  p.run(f, c);
}

#define RINGKV_PLAN_PROPERTY(Name)                                          \
  RC_GTEST_PROP(CudaPlanEngine, Name, ()) { run_property(fused(), #Name); } \
  RC_GTEST_PROP(CudaPlanCublasEngine, Name, ()) { run_property(cublas(), #Name); }

RINGKV_PLAN_PROPERTY(OracleEquality)
RINGKV_PLAN_PROPERTY(RingHoldsVisibleSet)
RINGKV_PLAN_PROPERTY(ConstantMemory)
RINGKV_PLAN_PROPERTY(ChunkingInvariance)
RINGKV_PLAN_PROPERTY(BatchIsolation)
RINGKV_PLAN_PROPERTY(ResetIsFresh)
RINGKV_PLAN_PROPERTY(RopeRelativity)
RINGKV_PLAN_PROPERTY(BoundaryIdentities)
RINGKV_PLAN_PROPERTY(GqaEqualsMha)
RINGKV_PLAN_PROPERTY(Int8Storage)
RINGKV_PLAN_PROPERTY(Poisoning)
RINGKV_PLAN_PROPERTY(LayerIndependence)

TEST(CudaPlanEngine, EveryPropertyIsInstantiated) { EXPECT_EQ(all_properties().size(), 12u); }

// ---- spec 1.1: rollback with a reserve ----

/// Speculative decoding around the wrap of rings with a reserve: a prefill, then rounds in which
/// each sequence rolls back some drafts of its last verify chunk and appends the next chunk of
/// 1 to 5 tokens (1: a fused decode step), now and then rolls back further than its drafts (honoured
/// or refused by the spec; a refused step is kept, whole, and must change nothing) or is reset. The
/// head shapes select each decode kernel's plan: the warp kernel with 2 or 4 heads per warp (D = 64,
/// bf16 or INT8) and the block kernel (D = 8 f32, D = 16 f16).
Case reserve_schedule() {
  Case c;
  Config& cfg = c.config;
  const int64_t S = *rc::gen::inRange<int64_t>(0, 4), W = *rc::gen::inRange<int64_t>(1, 40);
  const int64_t Q = *rc::gen::inRange<int64_t>(0, 12);
  cfg.max_tokens = *rc::gen::inRange<int64_t>(S + W + 2, S + W + Q + 80);
  cfg.layers.resize(*rc::gen::inRange<size_t>(1, 3));
  for (size_t l = 0; l < cfg.layers.size(); ++l) {
    LayerConfig& layer = cfg.layers[l];
    const bool global = l > 0 && *rc::gen::arbitrary<bool>();
    layer.sinks = l == 0 ? S : *rc::gen::inRange<int64_t>(0, 3);
    layer.window = l == 0 ? W : global ? cfg.max_tokens : *rc::gen::inRange<int64_t>(1, W + 1);
    layer.rollback_reserve = l == 0 || global ? (global ? 0 : Q) : *rc::gen::inRange<int64_t>(0, 6);
    layer.rope.style = *rc::gen::element(RopeStyle::none, RopeStyle::neox, RopeStyle::gptj);
  }
  struct Shape { int hq, hkv, d; KvFormat kv; };
  const Shape shape = *rc::gen::element(Shape{2, 2, 8, KvFormat::of(DType::f32)},
                                        Shape{4, 2, 16, KvFormat::of(DType::f16)},
                                        Shape{4, 2, 64, KvFormat::of(DType::bf16)},
                                        Shape{8, 2, 64, KvFormat::int8(Int8Scheme::q8_0, Rounding::nearest_even)});
  cfg.num_q_heads = shape.hq;
  cfg.num_kv_heads = shape.hkv;
  cfg.head_dim = shape.d;
  cfg.k_format = cfg.v_format = shape.kv;
  cfg.batch = *rc::gen::inRange(1, 3);
  c.seed = *rc::gen::inRange<uint64_t>(1, 1u << 20);

  ScheduleTracker tracker(c);
  const auto B = static_cast<size_t>(cfg.batch);
  int stream = cfg.batch;
  std::vector<int64_t> drafts(B, 0);
  StepPlan prefill;
  for (size_t s = 0; s < B; ++s) prefill.tokens.push_back(*rc::gen::inRange<int64_t>(1, cfg.max_tokens / 2 + 2));
  tracker.apply(prefill);
  c.steps.push_back(prefill);
  const int rounds = *rc::gen::inRange(5, 45);
  for (int round = 0; round < rounds; ++round) {
    StepPlan st;
    std::vector<int64_t> next_drafts(B, 0);
    for (size_t s = 0; s < B; ++s) {
      const auto seq = static_cast<int>(s);
      const int64_t held = tracker.held(seq);
      const int event = *rc::gen::inRange(0, 12);
      int64_t back = drafts[s] > 0 ? *rc::gen::inRange<int64_t>(0, drafts[s] + 1) : 0;
      if (event == 0 && held > 0) {
        st.resets.push_back({seq, *rc::gen::inRange<int64_t>(0, 1000), stream++});
        back = 0;
      } else if (event == 1 && held > 0) {
        back = *rc::gen::inRange<int64_t>(1, std::min(held, W + Q + 3) + 1);  // beyond the drafts
      }
      if (back > 0) st.rollbacks.push_back({seq, back, stream++});
      const int64_t room = cfg.max_tokens - (event == 0 ? 0 : held - back);
      const int64_t n = std::min(room, *rc::gen::inRange<int64_t>(event == 11 ? 0 : 1, 6));
      st.tokens.push_back(n);
      next_drafts[s] = std::max<int64_t>(n - 1, 0);
    }
    c.steps.push_back(st);
    if (!tracker.honoured(st)) continue;  // the engine must refuse it and change nothing
    tracker.apply(st);
    drafts = next_drafts;
  }
  return c;
}

void run_reserve_schedule(const EngineFactory& f, bool poison) {
  const Case c = reserve_schedule();
  RunOptions o;
  o.check_ring = !poison;  // the spec ring's values of empty slots are not the poison's
  o.poison = poison;
  o.stop_at_failure = true;
  const RunResult r = run_case(f, c, o);
  ScheduleTracker t(c);
  bool refused = false, wrapped = false;
  const int64_t C = ring_capacity(c.config.layers[0], c.config.max_tokens);
  for (const StepPlan& st : c.steps) {
    if (!t.honoured(st)) {
      refused = true;
      continue;
    }
    t.apply(st);
    for (int s = 0; s < c.config.batch; ++s) wrapped = wrapped || t.held(s) > C;
  }
  RC_TAG(refused ? "a refused step" : "none refused", wrapped ? "wrapped" : "not wrapped");
  if (!r.ok()) RC_LOG() << r.failure << "\n" << c.describe();
  RC_ASSERT(r.ok());
}

RC_GTEST_PROP(CudaPlanEngine, RollbackWithReserveMatchesTheOracleAndTheSpecRing, ()) {
  run_reserve_schedule(fused(), false);
}
RC_GTEST_PROP(CudaPlanCublasEngine, RollbackWithReserveMatchesTheOracleAndTheSpecRing, ()) {
  run_reserve_schedule(cublas(), false);
}
RC_GTEST_PROP(CudaPlanEngine, RollbackWithReserveNeverReadsAnEmptiedSlot, ()) { run_reserve_schedule(fused(), true); }

}  // namespace
}  // namespace ringkv::conformance
