// Random golden sets (`ringkv golden generate --random`, issue 26 item 1): within capabilities that
// declare rollback, they carry the Rollback property's schedules, in the proportion the properties use,
// with every kind of rollback an engine judged through files must meet.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "golden/golden.hpp"
#include "property/properties.hpp"
#include "support/capabilities.hpp"
#include "support/case.hpp"

namespace ringkv::golden {
namespace {

using conformance::Case;
using conformance::RollbackPlan;
using conformance::ScheduleTracker;
using conformance::StepPlan;

// What the rollback steps of a set exercise, counted in cases (each case counts once per kind).
std::map<std::string, int> rollback_kinds(const std::vector<GoldenSpec>& set) {
  std::map<std::string, int> n;
  for (const GoldenSpec& g : set) {
    const Case& c = g.c;
    if (!ScheduleTracker::has_rollbacks(c)) continue;
    std::map<std::string, bool> seen{{"with rollbacks", true}};
    const Config& cfg = c.config;
    for (const LayerConfig& l : cfg.layers) {
      if (!conformance::is_sliding(l, cfg)) continue;
      if (l.sinks > 0) seen["sinks"] = true;
      if (l.rollback_reserve == 0) seen["reserve 0"] = true;
    }
    ScheduleTracker tracker(c);
    for (const StepPlan& st : c.steps) {
      if (st.rollbacks.empty()) {
        tracker.apply(st);
        continue;
      }
      if (!tracker.honoured(st)) {
        seen["refused"] = true;
        if (tracker.high_water(0, st.rollbacks[0].sequence) > tracker.held(st.rollbacks[0].sequence)) {
          seen["refused, repeated against H"] = true;
        }
        continue;
      }
      seen["honoured"] = true;
      if (st.rollbacks.size() >= 2) seen["several sequences in one step"] = true;
      for (const RollbackPlan& r : st.rollbacks) {
        const int64_t held = tracker.held(r.sequence), m = held - r.n_tokens;
        for (size_t l = 0; l < cfg.layers.size(); ++l) {
          const LayerConfig& lay = cfg.layers[l];
          if (!conformance::is_sliding(lay, cfg)) continue;
          const auto layer = static_cast<int>(l);
          if (tracker.high_water(layer, r.sequence) > held) seen["honoured, repeated against H"] = true;
          if (lay.sinks > 0 && m <= lay.sinks && held > lay.sinks) seen["into the sinks"] = true;
          if (lay.rollback_reserve == 0 && tracker.high_water(layer, r.sequence) > ring_capacity(lay, cfg.max_tokens)) {
            seen["honoured at reserve 0 after the wrap"] = true;
          }
          // The verify chunk appended in the same step crosses the wrap (the ring's last slot).
          const int64_t C = ring_capacity(lay, cfg.max_tokens), k = st.tokens[static_cast<size_t>(r.sequence)];
          if (k > 1 && C < cfg.max_tokens && m < C && m + k > C) seen["verify chunk across the wrap"] = true;
        }
      }
      tracker.apply(st);
    }
    for (const auto& [kind, yes] : seen) n[kind] += yes ? 1 : 0;
  }
  return n;
}

Capabilities rollback_caps(int64_t max_reserve) {
  Capabilities caps;  // every feature
  caps.rollback = true;
  caps.max_rollback_reserve = max_reserve;
  return caps;
}

// The proportion of the properties: cases of the rollback properties over all properties' cases.
int rollback_cases_expected(int n) {
  const auto& props = conformance::all_properties();
  int expected = 0;
  for (int i = 0; i < n; ++i) expected += props[static_cast<size_t>(i) % props.size()].options.rollbacks ? 1 : 0;
  return expected;
}

TEST(RandomSet, DrawsRollbackCasesOfEveryKindWhereTheCapabilitiesAllow) {
  const std::vector<GoldenSpec> set = random_golden_set(240, 7, rollback_caps(int64_t{1} << 30));
  const std::map<std::string, int> n = rollback_kinds(set);
  const auto count = [&](const char* kind) { return n.count(kind) ? n.at(kind) : 0; };
  EXPECT_EQ(rollback_cases_expected(240), 18) << "the properties' proportion is 1 rollback property in 13";
  // The Rollback property's generator draws a schedule without any rollback only rarely.
  EXPECT_GE(count("with rollbacks"), 15) << "of 240 cases, the 18 drawn as the Rollback property draws them";
  EXPECT_LE(count("with rollbacks"), rollback_cases_expected(240));
  for (const char* kind : {"honoured", "refused", "honoured, repeated against H", "refused, repeated against H", "sinks",
                           "into the sinks", "verify chunk across the wrap", "several sequences in one step",
                           "reserve 0", "honoured at reserve 0 after the wrap"}) {
    EXPECT_GE(count(kind), 1) << "no random case with a rollback of kind \"" << kind << "\"";
  }
  // And the committed classes of rollback are all there.
  std::map<std::string, int> classes;
  for (const GoldenSpec& g : set) {
    for (const std::string& c : g.classes) ++classes[c];
  }
  for (const char* c : {"rollback-before-wrap", "rollback-at-wrap", "rollback-across-wrap", "rollback-reserve-edge",
                        "rollback-refused", "rollback-repeated", "rollback-verify-partial", "rollback-batch",
                        "rollback-multi-layer"}) {
    EXPECT_GE(classes[c], 1) << c;
  }
}

// Any reserve: an engine that takes rollbacks but no reserve (Q = 0 only) still gets them.
TEST(RandomSet, DrawsRollbackCasesAtReserveZero) {
  const std::vector<GoldenSpec> set = random_golden_set(240, 3, rollback_caps(0));
  const std::map<std::string, int> n = rollback_kinds(set);
  const auto count = [&](const char* kind) { return n.count(kind) ? n.at(kind) : 0; };
  EXPECT_GE(count("with rollbacks"), 15);
  EXPECT_EQ(count("reserve 0"), count("with rollbacks"));
  for (const char* kind : {"honoured", "refused", "into the sinks", "honoured at reserve 0 after the wrap"}) {
    EXPECT_GE(count(kind), 1) << "no random case with a rollback of kind \"" << kind << "\"";
  }
}

// Without rollback in the capabilities, no case has a rollback or a reserve, and the set is the one
// such capabilities always got.
TEST(RandomSet, HasNoRollbackWithoutTheCapability) {
  Capabilities caps;
  caps.rollback = false;
  caps.max_rollback_reserve = 0;
  for (const GoldenSpec& g : random_golden_set(60, 7, caps)) {
    EXPECT_FALSE(ScheduleTracker::has_rollbacks(g.c)) << g.name;
    for (const LayerConfig& l : g.c.config.layers) EXPECT_EQ(l.rollback_reserve, 0) << g.name;
  }
}

}  // namespace
}  // namespace ringkv::golden
