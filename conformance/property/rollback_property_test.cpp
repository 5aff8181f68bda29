// The Rollback property's generator (support/generators.cpp gen_rollback_case) against the scenarios
// issue 15 lists: over the fixed cases the mutant check runs, every one of them must occur, so that a
// mutant that is wrong in only one of them is still put to the test. The property itself runs in
// reference_properties_test.cpp (RapidCheck, with shrinking) and, with its mutants, in
// conformance/mutants/mutant_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "property/properties.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/capabilities.hpp"
#include "support/case.hpp"

namespace ringkv::conformance {
namespace {

// The scenarios of one case, following layer 0 (a sliding layer with the case's reserve) step by step;
// the tokens held and the high-water mark H (spec 1.1 §5.1.2) come from the spec's ScheduleTracker.
std::vector<std::string> scenarios(const Case& c) {
  std::vector<std::string> out;
  const auto tag = [&](const std::string& t) {
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  };
  const Config& cfg = c.config;
  const LayerConfig& l0 = cfg.layers[0];
  const int64_t S = l0.sinks, W = l0.window, C = ring_capacity(l0, cfg.max_tokens);
  for (size_t l = 1; l < cfg.layers.size(); ++l) {
    if (ScheduleTracker::has_rollbacks(c)) tag(is_sliding(cfg.layers[l], cfg) ? "multi-layer sliding" : "multi-layer global");
  }
  const auto B = static_cast<size_t>(cfg.batch);
  std::vector<bool> rolled_before(B, false);
  ScheduleTracker tracker(c);
  for (const StepPlan& st : c.steps) {
    const bool honoured = tracker.honoured(st);
    int rolling = 0;
    std::vector<int64_t> counts;
    for (const RollbackPlan& rb : st.rollbacks) {
      const int64_t held = tracker.held(rb.sequence), H = tracker.high_water(0, rb.sequence);
      const int64_t m = held - rb.n_tokens;
      const int64_t lo = std::max(S, m - W + 1);
      const bool sees_keys = lo <= m - 1 && is_sliding(l0, cfg);
      if (!honoured) tag("refused");
      if (sees_keys && lo + (C - S) == H) tag("at the reserve's edge");
      if (sees_keys && lo + (C - S) == H - 1) tag("one past the reserve's edge");
      if (H > held) tag(honoured ? "repeated, honoured" : "repeated, refused");
      bool by_length = true;  // what a rule counting from the current length would say
      for (const LayerConfig& l : cfg.layers) by_length = by_length && layer_honours_rollback(l, cfg.max_tokens, m, held);
      if (!honoured && by_length) tag("refused by H, honoured by the length");
      if (!honoured) continue;
      if (H < C) tag("before the wrap");
      if (H == C || m == C) tag("at the wrap");
      if (m < C && H > C) tag("across the wrap");
      if (m > C) tag("after the wrap");
      ++rolling;
      counts.push_back(rb.n_tokens);
    }
    if (!honoured) continue;  // a refused step changes nothing
    std::sort(counts.begin(), counts.end());
    if (rolling >= 2 && counts.front() != counts.back()) tag("different counts in one batch");
    // The tokens each sequence holds once the step's rollbacks and resets are done, before its appends.
    std::vector<int64_t> held(B);
    for (size_t s = 0; s < B; ++s) held[s] = tracker.held(static_cast<int>(s));
    for (const RollbackPlan& rb : st.rollbacks) {
      held[static_cast<size_t>(rb.sequence)] -= rb.n_tokens;
      rolled_before[static_cast<size_t>(rb.sequence)] = true;
    }
    for (const ResetPlan& r : st.resets) {
      const auto s = static_cast<size_t>(r.sequence);
      if (rolled_before[s]) tag("rollback, then a reset");
      held[s] = 0;
      rolled_before[s] = false;
    }
    for (size_t s = 0; s < B; ++s) {
      const int64_t n = st.tokens[s];
      if (n > W && rolled_before[s]) tag("a chunk longer than W after a rollback");
      if (n > 1 && rolled_before[s] && held[s] + n > C) tag("a verify chunk across the wrap");
    }
    tracker.apply(st);
  }
  return out;
}

TEST(RollbackGenerator, CoversEveryScenarioOfTheIssueInTheFixedCases) {
  const Capabilities caps = ReferenceEngine::capabilities();
  const std::vector<PropertyInfo>& props = all_properties();
  size_t k = 0;
  while (k < props.size() && std::string(props[k].name) != "Rollback") ++k;
  ASSERT_LT(k, props.size()) << "no property named Rollback";
  std::map<std::string, int> seen;
  for (int i = 0; i < 100; ++i) {
    const Case c = fixed_case(caps, props[k], k, i);
    ASSERT_EQ(capability_gap(caps, c), "") << c.id();
    for (const std::string& t : scenarios(c)) ++seen[t];
  }
  std::string report;
  for (const auto& [t, n] : seen) report += "  " + t + ": " + std::to_string(n) + " cases\n";
  std::printf("[rollback] scenarios over 100 fixed cases:\n%s", report.c_str());
  for (const char* t : {"before the wrap", "at the wrap", "across the wrap", "after the wrap", "at the reserve's edge",
                        "one past the reserve's edge", "refused", "repeated, honoured", "repeated, refused",
                        "refused by H, honoured by the length",
                        "rollback, then a reset", "a chunk longer than W after a rollback",
                        "a verify chunk across the wrap", "different counts in one batch", "multi-layer global",
                        "multi-layer sliding"}) {
    EXPECT_GE(seen[t], 3) << "the Rollback property's fixed cases put \"" << t << "\" to the engine in only "
                          << seen[t] << " of 100 cases\n" << report;
  }
}

TEST(RollbackGenerator, EngineWithoutRollbackGetsSpec1CasesOnly) {
  Capabilities caps;  // rollback = false by default
  const PropertyInfo& p = property("Rollback");
  for (int i = 0; i < 50; ++i) {
    const Case c = fixed_case(caps, p, 12, i);
    EXPECT_FALSE(ScheduleTracker::has_rollbacks(c)) << c.id();
    for (const LayerConfig& l : c.config.layers) EXPECT_EQ(l.rollback_reserve, 0) << c.id();
    EXPECT_EQ(capability_gap(caps, c), "") << c.id();
  }
}

}  // namespace
}  // namespace ringkv::conformance
