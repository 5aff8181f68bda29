// Tests of the scale cases' machinery (support/scale.hpp): the oracle that releases rows no later
// query sees gives the full-history oracle's outputs bit for bit; the sample holds every edge, chunk
// end and 2^24 position; the boundaries alone catch the window mutants; every tier's cases are valid.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "mutants/mutants.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/case.hpp"
#include "support/oracle.hpp"
#include "support/scale.hpp"

namespace ringkv::conformance {
namespace {

/// W 6, S 2, reserve 3, two layers (one global), two sequences: rollbacks at the reserve's limit and
/// one beyond it (refused), a chunk longer than W, a reset.
Case rollback_case() {
  Case c;
  LayerConfig sliding;
  sliding.window = 6;
  sliding.sinks = 2;
  sliding.rollback_reserve = 3;
  LayerConfig global;
  global.window = 60;
  c.config.layers = {sliding, global};
  c.config.num_q_heads = 4;
  c.config.num_kv_heads = 2;
  c.config.head_dim = 8;
  c.config.batch = 2;
  c.config.max_tokens = 60;
  c.config.k_format = KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
  c.seed = 77;
  c.steps = {StepPlan{{}, {9, 3}, {}},
             StepPlan{{}, {4, 1}, {{0, 3, 2}}},
             StepPlan{{}, {1, 2}, {{0, 3, 3}, {1, 1, 4}}},
             StepPlan{{}, {12, 1}, {}},
             StepPlan{{}, {1, 1}, {{0, 7, 5}}},  // beyond the reserve: refused, the step changes nothing
             StepPlan{{{1, 100, 6}}, {2, 5}, {{0, 2, 7}}},
             StepPlan{{}, {3, 1}, {}}};
  return c;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

TEST(OracleRelease, GivesTheFullHistorysOutputsBitForBitAndReleasesRows) {
  const Case c = rollback_case();
  const Config& cfg = c.config;
  Oracle full(cfg), lean(cfg);
  lean.release_unreachable(true);
  ScheduleTracker tracker(c);
  std::vector<int64_t> seen(2, 0);
  std::vector<int> stream = {0, 1};
  int refused = 0;
  int64_t compared = 0;
  for (const StepPlan& step : c.steps) {
    if (!tracker.honoured(step)) {
      ++refused;
      continue;
    }
    for (const RollbackPlan& r : step.rollbacks) {
      full.rollback(r.sequence, r.n_tokens);
      lean.rollback(r.sequence, r.n_tokens);
      seen[static_cast<size_t>(r.sequence)] -= r.n_tokens;
      stream[static_cast<size_t>(r.sequence)] = r.stream;
    }
    for (const ResetPlan& r : step.resets) {
      full.reset(r.sequence, r.start_position);
      lean.reset(r.sequence, r.start_position);
      seen[static_cast<size_t>(r.sequence)] = 0;
      stream[static_cast<size_t>(r.sequence)] = r.stream;
    }
    for (int s = 0; s < 2; ++s) {
      const int64_t n = step.tokens[static_cast<size_t>(s)];
      if (n == 0) continue;
      const size_t L = cfg.layers.size();
      std::vector<float> q(L * static_cast<size_t>(n * 4 * 8)), k(L * static_cast<size_t>(n * 2 * 8)), v(k.size());
      fill_chunk(c, Tensor::q, stream[static_cast<size_t>(s)], seen[static_cast<size_t>(s)], n, q.data());
      fill_chunk(c, Tensor::k, stream[static_cast<size_t>(s)], seen[static_cast<size_t>(s)], n, k.data());
      fill_chunk(c, Tensor::v, stream[static_cast<size_t>(s)], seen[static_cast<size_t>(s)], n, v.data());
      const std::vector<OracleOutput> a = full.append(s, n, q.data(), k.data(), v.data());
      const std::vector<OracleOutput> b = lean.append(s, n, q.data(), k.data(), v.data());
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i, ++compared) ASSERT_TRUE(same_bits(a[i].o, b[i].o)) << "output " << i;
      seen[static_cast<size_t>(s)] += n;
    }
    tracker.apply(step);
  }
  EXPECT_EQ(refused, 1);
  EXPECT_GT(compared, 100);
  // The sliding layer released rows (the global one none); the sinks stay.
  int released = 0;
  const std::vector<OracleToken>& hist = lean.history(0, 0);
  for (size_t j = 0; j < hist.size(); ++j) {
    if (hist[j].k.value.empty()) {
      ++released;
      EXPECT_GE(j, 2u) << "a sink was released";
    }
  }
  EXPECT_GT(released, 5);
  for (const OracleToken& t : lean.history(1, 0)) EXPECT_FALSE(t.k.value.empty());
}

TEST(OracleRelease, AQueryThatWouldSeeAReleasedRowIsTheOraclesOwnError) {
  const Case c = rollback_case();
  Oracle lean(c.config);
  lean.release_unreachable(true);
  std::vector<float> q(2 * 20 * 4 * 8), k(2 * 20 * 2 * 8), v(k.size());
  fill_chunk(c, Tensor::q, 0, 0, 20, q.data());
  fill_chunk(c, Tensor::k, 0, 0, 20, k.data());
  fill_chunk(c, Tensor::v, 0, 0, 20, v.data());
  lean.append(0, 20, q.data(), k.data(), v.data());
  lean.rollback(0, 10);  // beyond the reserve: the spec refuses it, so the oracle's rule does not cover it
  try {
    lean.append(0, 1, q.data(), k.data(), v.data());
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("was released but query"), std::string::npos) << e.what();
  }
}

const ScaleCase& ci_case(const std::string& shape) {
  static const std::vector<ScaleCase> cases = scale_cases(ScaleTier::ci);
  for (const ScaleCase& sc : cases) {
    if (sc.name == "scale/ci/" + shape) return sc;
  }
  throw std::logic_error("no ci case " + shape);
}

TEST(ScaleSample, HoldsEveryEdgeChunkEndAnd2p24PositionAndFewOthers) {
  const ScaleCase& sc = ci_case("gqa32x8_d128_w4096_f16_prefill");
  const std::vector<std::set<int64_t>> s = sample_scale_queries(sc.c, sc.sample_every);
  ASSERT_EQ(s.size(), 2u);  // one layer, two sequences
  const std::set<int64_t>& seq0 = s[0];
  // W edges (4095, 4096, 4097 inside the second chunk), chunk ends, the last token, 2^24 +- 1
  // (sequence 0 starts at 2^24 - 3000).
  for (int64_t i : {0, 1, 2599, 2600, 4095, 4096, 4097, 4299, 4300, 4303, 2999, 3000, 3001}) {
    EXPECT_TRUE(seq0.count(i)) << "index " << i;
  }
  EXPECT_FALSE(seq0.count(4304)) << "beyond the stream";
  EXPECT_LT(seq0.size(), 4304u / 20) << "the sample should be a few per cent";
  // About one in sample_every of the others, by hash (binomial: 67 expected, this seed draws fewer).
  EXPECT_GT(seq0.size(), 4304u / static_cast<size_t>(sc.sample_every) / 2) << "one in sample_every of the others";
  for (int64_t i : {0, 299, 300, 301, 302}) EXPECT_TRUE(s[1].count(i)) << "sequence 1, index " << i;
}

TEST(ScaleSample, FollowsRollbacksAndResets) {
  const ScaleCase& sc = ci_case("gqa64x8_d128_b32_q8_0_sinks_drafts");
  const std::vector<std::set<int64_t>> s = sample_scale_queries(sc.c, 1 << 30);
  const Config& cfg = sc.c.config;
  // Sequence 0 (even: drafts): prompt n, decode 1, verify 4, roll back 2 and append 1, decode 1, decode 1.
  const int64_t n = sc.c.steps[0].tokens[0];
  for (int64_t i : {int64_t{0}, n - 1, n, n + 1, n + 4, n + 3, n + 4, n + 5}) EXPECT_TRUE(s[0].count(i)) << i;
  // Sequence 3 reset to 2^24 - 2: its five tokens cover positions 2^24 - 1 .. 2^24 + 1.
  for (int64_t i : {0, 1, 2, 3, 4}) EXPECT_TRUE(s[3].count(i)) << "sequence 3 after its reset, index " << i;
  EXPECT_EQ(cfg.batch, 32);
}

/// A small case of the ci tier's first shape: the window edge inside a chunk, a chunk longer than
/// W crossing the wrap, sinks, positions across 2^24.
ScaleCase small_case() {
  ScaleCase sc;
  sc.name = "scale/test/small";
  Case& c = sc.c;
  LayerConfig l;
  l.window = 64;
  l.sinks = 2;
  l.rope.theta = 10000;
  c.config.layers = {l};
  c.config.num_q_heads = 8;
  c.config.num_kv_heads = 2;
  c.config.head_dim = 64;
  c.config.batch = 1;
  c.config.max_tokens = 200;
  c.config.start_positions = {(int64_t{1} << 24) - 100};
  c.data = DataMode::needle;
  c.seed = 5;
  c.steps = {StepPlan{{}, {50}, {}}, StepPlan{{}, {40}, {}}, StepPlan{{}, {90}, {}}, StepPlan{{}, {1}, {}},
             StepPlan{{}, {1}, {}}};
  sc.sample_every = int64_t{1} << 40;  // the boundaries alone
  return sc;
}

TEST(ScaleRun, TheBoundariesAloneCatchTheWindowMutantsAndPassTheReference) {
  const ScaleCase sc = small_case();
  const ScaleOutcome ref = run_scale_case(reference_engine_factory(), sc);
  EXPECT_TRUE(ref.passed) << ref.failure;
  EXPECT_LT(ref.queries_sampled, ref.queries_total / 4) << "the boundaries should be a sample";
  const std::set<std::string> window_bugs = {"window_plus_one", "window_minus_one", "sinks_evicted",
                                             "chunk_written_first", "attends_empty_slots", "rope_from_slot"};
  int caught = 0;
  for (const MutantInfo& m : all_mutants()) {
    if (!window_bugs.count(m.name)) continue;
    const ScaleOutcome o = run_scale_case(m.factory, sc);
    EXPECT_FALSE(o.passed) << m.name << " passed on the boundaries";
    EXPECT_FALSE(o.oracle_error) << m.name << ": " << o.failure;
    caught += o.passed ? 0 : 1;
  }
  EXPECT_EQ(caught, static_cast<int>(window_bugs.size()));
}

/// The scale shape for the controls: D 128, GQA 4 (or Hq / Hkv), W with sinks, a chunk of 700 and one
/// of 500 from 2^24 - 900, for W > 1024 one of W - 896 that crosses W, then decode; a second sequence
/// at position 0 beside it.
ScaleCase control_case(KvFormat kv, int64_t window = 1024, int Hq = 8, int Hkv = 2) {
  ScaleCase sc;
  sc.name = "scale/test/controls";
  LayerConfig l;
  l.window = window;
  l.sinks = 4;
  l.rope.theta = 500000;
  sc.c = shaped_case({l}, Hq, Hkv, 128, DataMode::needle, 9);
  Config& cfg = sc.c.config;
  const int64_t long_chunk = window > 1024 ? window - 896 : 0;
  cfg.batch = 2;
  cfg.max_tokens = 1300 + long_chunk;
  cfg.k_format = cfg.v_format = kv;
  cfg.start_positions = {(int64_t{1} << 24) - 900, 0};
  sc.c.steps = {StepPlan{{}, {700, 90}, {}}, StepPlan{{}, {500, 1}, {}}};
  if (long_chunk) sc.c.steps.push_back(StepPlan{{}, {long_chunk, 1}, {}});
  sc.c.steps.push_back(StepPlan{{}, {1, 1}, {}});
  sc.c.steps.push_back(StepPlan{{}, {1, 0}, {}});
  sc.sample_every = 8;
  return sc;
}

// Every control (a correct engine with other precision or summation order, declared) passes a case at
// the scale shape: the bounds, derived for the golden set's small shapes, hold at D 128 and a window of
// 1024 keys, in f16 and q8_0 storage.
TEST(ScaleRun, EveryControlPassesAtTheScaleShape) {
  int controls = 0;
  for (const KvFormat& kv : {KvFormat::of(DType::f16), KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away)}) {
    const ScaleCase sc = control_case(kv);
    for (const MutantInfo& m : all_mutants()) {
      if (!m.must_pass) continue;
      const ScaleOutcome o = run_scale_case(m.factory, sc);
      EXPECT_TRUE(o.passed) << m.name << " on " << sc.c.id() << ": " << o.failure;
      EXPECT_GT(o.queries_sampled, o.queries_total / 16) << m.name;
      ++controls;
    }
  }
  EXPECT_GE(controls, 2 * 8);
}

// A window of 4096: an f16 P·V sum stagnates (n·u_f16 = 2, docs/tolerances.md §3). Before the bound's
// stagnation term, the f16pv_engine control failed this very case (token 3121: |diff| 0.156 > bound
// 0.154, the sum stuck at 0.541 of 0.697), and at Hq 8 / Hkv 2 in f16 and q8_0 storage at 1.11 times the
// bound; the other controls passed those and run at W 1024 above. Hq 2 / Hkv 1 keeps it to 30 s.
TEST(ScaleRun, TheF16PvControlPassesWhereItsSumStagnates) {
  const MutantInfo* f16pv = nullptr;
  for (const MutantInfo& m : all_mutants()) {
    if (m.must_pass && std::string(m.name) == "f16pv_engine") f16pv = &m;
  }
  ASSERT_NE(f16pv, nullptr);
  const ScaleCase sc = control_case(KvFormat::of(DType::f16), 4096, 2, 1);
  const ScaleOutcome o = run_scale_case(f16pv->factory, sc);
  EXPECT_TRUE(o.passed) << sc.c.id() << ": " << o.failure;
}

TEST(ScaleCases, EveryTierIsValidNamedAndAtProductionShape) {
  std::set<std::string> names;
  for (ScaleTier t : {ScaleTier::ci, ScaleTier::host, ScaleTier::gpu, ScaleTier::gpu_long}) {
    EXPECT_EQ(parse_scale_tier(to_string(t)), t);
    const std::vector<ScaleCase> cases = scale_cases(t);
    EXPECT_FALSE(cases.empty()) << to_string(t);
    for (const ScaleCase& sc : cases) {
      EXPECT_EQ(sc.name.rfind(std::string("scale/") + to_string(t) + "/", 0), 0u) << sc.name;
      EXPECT_TRUE(names.insert(sc.name).second) << "twice: " << sc.name;
      EXPECT_NO_THROW(validate(sc.c.config)) << sc.name;
      EXPECT_NO_THROW(check_schedule(sc.c)) << sc.name;
      const Config& cfg = sc.c.config;
      EXPECT_EQ(cfg.num_kv_heads, 8) << sc.name;
      EXPECT_TRUE(cfg.num_q_heads == 32 || cfg.num_q_heads == 64) << sc.name;
      EXPECT_TRUE(cfg.head_dim == 128 || cfg.head_dim == 256) << sc.name;
      EXPECT_GE(cfg.layers[0].window, 4096) << sc.name;
    }
  }
  EXPECT_FALSE(parse_scale_tier("huge").has_value());
}

}  // namespace
}  // namespace ringkv::conformance
