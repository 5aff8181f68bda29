// Spec 1.1 rollback with a reserve as a RapidCheck property of any engine factory: the schedule
// generator and its run through the runner (outputs against the oracle, the ring against the spec
// ring, refusals). Used by the cuda-plan properties (property/cuda_plan_properties_test.cpp) and the
// GPU tests (gpu/gpu_test.cpp), so that the CUDA engine runs exactly what cuda-plan runs.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ringkv/config.hpp"
#include "ringkv/engine.hpp"
#include "support/case.hpp"
#include "support/runner.hpp"

namespace ringkv::conformance {

/// Speculative decoding around the wrap of rings with a reserve: a prefill, then rounds in which
/// each sequence rolls back some drafts of its last verify chunk and appends the next chunk of
/// 1 to 5 tokens (1: a fused decode step), now and then rolls back further than its drafts (honoured
/// or refused by the spec; a refused step is kept, whole, and must change nothing) or is reset. The
/// head shapes select each decode kernel's plan: the warp kernel with 2 or 4 heads per warp (D = 64,
/// bf16 or INT8) and the block kernel (D = 8 f32, D = 16 f16).
inline Case reserve_schedule() {
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

inline void run_reserve_schedule(const EngineFactory& f, bool poison) {
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

}  // namespace ringkv::conformance
