// The mutant check: the property suite, at its default number of cases and
// with fixed seeds (no shrinking, so it cannot flake), kills every mutant,
// while the correct engine and the controls pass the very same cases.
//
// Run the full kill matrix (which property kills which mutant, how often) with
//   ringkv_mutant_tests --gtest_also_run_disabled_tests --gtest_filter='*KillMatrix*'
#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <vector>
#include <cstdio>
#include <stdexcept>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "mutants/mutants.hpp"
#include "property/properties.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/oracle.hpp"
#include "support/rng.hpp"
#include "support/tolerance.hpp"
#include "support/runner.hpp"

namespace ringkv::conformance {
namespace {

constexpr int kDefaultCases = 100;  // RapidCheck's default max_success

Case fixed_case(const PropertyInfo& p, size_t property_index, int i) {
  return conformance::fixed_case(ReferenceEngine::capabilities(), p, property_index, i);
}

PropertyVerdict run_one(const PropertyInfo& p, const EngineFactory& f, const Case& c) {
  return run_property_once(p, f, c);
}

struct Kill {
  std::string property;
  int case_index = 0;
  std::string case_id, message;
};

// Case by case, every property in turn, until one fails.
std::optional<Kill> hunt(const EngineFactory& f, int cases) {
  const auto& props = all_properties();
  for (int i = 0; i < cases; ++i) {
    for (size_t k = 0; k < props.size(); ++k) {
      const Case c = fixed_case(props[k], k, i);
      const PropertyVerdict v = run_one(props[k], f, c);
      if (v.failed) return Kill{props[k].name, i, c.id(), v.message};
    }
  }
  return std::nullopt;
}

}  // namespace

// gtest prints a parameter with this instead of its bytes.
void PrintTo(const MutantInfo& m, std::ostream* os) { *os << m.name; }

namespace {

class Mutant : public ::testing::TestWithParam<MutantInfo> {};

bool is_fp8_saturation_mutant(const MutantInfo& m) {
  const std::string n = m.name;
  return n == "fp8_e4m3_overflow_to_nan" || n == "fp8_e5m2_overflow_to_inf";
}

TEST_P(Mutant, IsKilledByThePropertySuite) {
  const MutantInfo& m = GetParam();
  const std::optional<Kill> kill = hunt(m.factory, kDefaultCases);
  if (m.must_pass) {
    ASSERT_FALSE(kill.has_value()) << m.name << " (" << m.bug << ") must pass but failed " << kill->property
                                   << " on case " << kill->case_index << ": " << kill->case_id << "\n"
                                   << kill->message.substr(0, 2000);
    std::printf("[control] %-24s passes all %zu properties x %d cases\n", m.name, all_properties().size(),
                kDefaultCases);
    return;
  }
  ASSERT_TRUE(kill.has_value()) << "mutant " << m.name << " (" << m.bug << ") survived " << kDefaultCases
                                << " cases of every property";
  std::printf("[killed] %-24s by %-20s at case %3d: %s\n", m.name, kill->property.c_str(), kill->case_index,
              kill->case_id.c_str());
}

INSTANTIATE_TEST_SUITE_P(All, Mutant, ::testing::ValuesIn(all_mutants()),
                         [](const ::testing::TestParamInfo<MutantInfo>& p) { return std::string(p.param.name); });
// The spec 1.1 rollback mutants: the Rollback property must kill each (the others never see a rollback).
INSTANTIATE_TEST_SUITE_P(Rollback, Mutant, ::testing::ValuesIn(rollback_mutants()),
                         [](const ::testing::TestParamInfo<MutantInfo>& p) { return std::string(p.param.name); });

// The serving mutants (issue 35, spec 1.2 §5): what an engine shares between sequences. BatchIsolation's
// identical-prefix variant (a prefix shared within a step, re-sent after a reset) must kill each.
INSTANTIATE_TEST_SUITE_P(Serving, Mutant, ::testing::ValuesIn(serving_mutants()),
                         [](const ::testing::TestParamInfo<MutantInfo>& p) { return std::string(p.param.name); });

// The interaction mutants (issue 26 item 6): bugs where two features meet in one score, angle or stored value.
// The two fp8 saturation mutants are judged by the committed goldens only: the case generators draw fp8
// scales of 1, 0.25 and 2 (conformance/support/generators.cpp), at which the generated data never comes near
// 448 or 57344 times the scale, so no property case saturates (measured: both survive 100 cases of every
// property). InteractionCoverage below keeps that statement true.
std::vector<MutantInfo> property_killed_interaction_mutants() {
  std::vector<MutantInfo> out;
  for (const MutantInfo& m : interaction_mutants()) {
    if (!is_fp8_saturation_mutant(m)) out.push_back(m);
  }
  return out;
}
INSTANTIATE_TEST_SUITE_P(Interaction, Mutant, ::testing::ValuesIn(property_killed_interaction_mutants()),
                         [](const ::testing::TestParamInfo<MutantInfo>& p) { return std::string(p.param.name); });

// The statement above: the fp8 saturation mutants survive the property suite (when a generator starts to
// draw saturating fp8 scales, this fails: move them into the instantiation above).
TEST(InteractionCoverage, Fp8SaturationMutantsAreJudgedByTheGoldensOnly) {
  int n = 0;
  for (const MutantInfo& m : interaction_mutants()) {
    if (!is_fp8_saturation_mutant(m)) continue;
    ++n;
    const std::optional<Kill> kill = hunt(m.factory, kDefaultCases);
    EXPECT_FALSE(kill.has_value()) << m.name << " is now killed by " << kill->property
                                   << ": judge it in the Interaction instantiation";
  }
  EXPECT_EQ(n, 2);
}

// The correct engine passes the same fixed cases (so a kill above is the mutant's bug, not the case).
TEST(ReferenceControl, PassesTheFixedCases) {
  const std::optional<Kill> kill = hunt(reference_engine_factory(), kDefaultCases);
  ASSERT_FALSE(kill.has_value()) << "the reference engine failed " << kill->property << " on case "
                                 << kill->case_index << ": " << kill->case_id << "\n" << kill->message.substr(0, 4000);
}

// The needles make an off-by-one window move the output by O(1) even at W = 4096 and under
// an f16 engine's bound, where random data would move it by about |v| / W.
TEST(LargeWindow, NeedlesExposeOffByOneWindowsUnderTheF16Bound) {
  Case c;
  const int64_t W = 4096;
  c.config.layers = {LayerConfig{W, 4, RopeConfig{}}};
  c.config.num_q_heads = 1;
  c.config.num_kv_heads = 1;
  c.config.head_dim = 64;
  c.config.max_tokens = W + 4 + 4;
  c.config.start_positions = {1 << 20};
  c.data = DataMode::needle;
  c.seed = 4096;
  for (int64_t done = 0; done < c.config.max_tokens;) {  // prefill chunks, then decode steps at the boundary
    const int64_t n = done + 1024 < W ? 1024 : 1;
    c.steps.push_back(StepPlan{{}, {n}});
    done += n;
  }
  const std::vector<int64_t> targets = needle_targets(c, 0);
  RunOptions o;
  o.sample_queries = [&](int, int, int64_t i) {
    return i < 4 || i == W / 2 || std::find(targets.begin(), targets.end(), i) != targets.end();
  };
  const auto find = [](const char* name) {
    for (const MutantInfo& m : all_mutants()) {
      if (std::string(name) == m.name) return m.factory;
    }
    throw std::logic_error(name);
  };
  const RunResult good = run_case(find("f16_engine"), c, o);
  EXPECT_TRUE(good.ok()) << good.failure;
  std::printf("[large] f16_engine at W = %lld: %lld sampled outputs, worst error %.3g of the bound\n",
              static_cast<long long>(W), static_cast<long long>(good.outputs_checked), good.worst_ratio);
  for (const char* bad : {"window_plus_one_f16", "window_minus_one_f16", "sinks_evicted_f16"}) {
    const RunResult r = run_case(find(bad), c, o);
    EXPECT_FALSE(r.ok()) << bad << " passed at W = 4096 under the f16 bound";
    std::printf("[large] %-22s at W = %lld: worst error %.3g x the bound: %s\n", bad, static_cast<long long>(W),
                r.worst_ratio, r.failure.substr(0, 160).c_str());
  }
}

// A needle case of one layer, window W and 4 sinks at p0, prefilled in chunks of 1024, then decode
// steps over the last boundaries; the oracle samples the boundary queries (and a few others).
struct NeedleRun {
  Case c;
  RunOptions o;
};

NeedleRun needle_case(int64_t W, int64_t p0, DataMode data = DataMode::needle) {
  NeedleRun r;
  Case& c = r.c;
  c.config.layers = {LayerConfig{W, 4, RopeConfig{}}};
  c.config.num_q_heads = 1;
  c.config.num_kv_heads = 1;
  c.config.head_dim = 64;
  c.config.max_tokens = W + 4 + 4;
  c.config.start_positions = {p0};
  c.data = data;
  c.seed = static_cast<uint64_t>(W);
  for (int64_t done = 0; done < c.config.max_tokens;) {
    const int64_t n = done + 1024 < W ? 1024 : 1;
    c.steps.push_back(StepPlan{{}, {n}});
    done += n;
  }
  const std::vector<int64_t> targets = needle_targets(c, 0);
  r.o.sample_queries = [=](int, int, int64_t i) {
    return i < 4 || i == W / 2 || i >= W || std::find(targets.begin(), targets.end(), i) != targets.end();
  };
  return r;
}

// Each named profile of profiles/ (but the reference's own): an engine with those numerics that
// declares it passes at W = 1 ... 4096 (the property suite covers the small windows, this the large
// ones), and off-by-one windows and evicted sinks in the same numerics still fail under its bound.
// f32 RoPE angles are run at p0 = 0: at 2^20 their honest bound is too wide to see a window
// (the RoPE verdict of golden-format §7 separates that question).
TEST(NamedProfiles, ControlsPassAndStructuralMutantsDieAtLargeWindows) {
  for (const std::string& profile : numerics_profiles()) {
    const int64_t p0 = profile == "f32-rope-angles" ? 0 : int64_t{1} << 20;
    for (const int64_t W : {int64_t{256}, int64_t{512}, int64_t{4096}}) {
      const NeedleRun n = needle_case(W, p0);
      if (W != 512) {
        const RunResult good = run_case(in_numerics("reference", profile), n.c, n.o);
        EXPECT_TRUE(good.ok()) << profile << " control at W = " << W << ": " << good.failure.substr(0, 600);
        std::printf("[profile] %-22s W = %4lld control: worst error %.3g of the bound\n", profile.c_str(),
                    static_cast<long long>(W), good.worst_ratio);
      }
      if (W != 512) continue;
      for (const char* bad : {"window_plus_one", "window_minus_one", "sinks_evicted"}) {
        const RunResult r = run_case(in_numerics(bad, profile), n.c, n.o);
        // q8_0-dot's honest bound (tolerances.md §2a) is wide on the needles' long keys: the attention
        // check alone sees W + 1 there, W - 1 and evicted sinks only the ring checks (the test below).
        if (profile != "q8_0-dot" || std::string(bad) == "window_plus_one") {
          EXPECT_FALSE(r.ok()) << bad << " in " << profile << " numerics passed at W = " << W << " under its bound";
        }
        std::printf("[profile] %-22s W = %4lld %-16s: worst error %.3g x the bound\n", profile.c_str(),
                    static_cast<long long>(W), bad, r.worst_ratio);
      }
    }
  }
}

// The same structural mutants at small windows: the property suite kills each in every numerics.
TEST(NamedProfiles, PropertySuiteKillsStructuralMutantsInEveryNumerics) {
  for (const std::string& profile : numerics_profiles()) {
    for (const char* bad : {"window_plus_one", "window_minus_one", "sinks_evicted"}) {
      const std::optional<Kill> kill = hunt(in_numerics(bad, profile), kDefaultCases);
      EXPECT_TRUE(kill.has_value()) << bad << " in " << profile << " numerics survived the property suite";
      if (kill) std::printf("[killed] %-16s @ %-22s by %-20s at case %d\n", bad, profile.c_str(), kill->property.c_str(),
                            kill->case_index);
    }
  }
}

// Issue 9's finding: ggml's CPU flash attention accumulates P·V in f16. Declared as a typical f16
// engine (f16-compute-f32-acc, one f32 accumulator) it fails once the window holds enough keys;
// declared honestly (f16-pv-accumulation, the P·V accumulator split from q·k's) it passes. The
// error grows like sqrt(W) when the values share a sign (real activations; the generators' values
// are centred, where it does not grow), so this case draws v in [0, 1): one query over W f16 keys.
TEST(NamedProfiles, F16PvAccumulationNeedsItsOwnAccumulator) {
  const auto worst_ratio = [](int64_t W, const std::string& declared) {
    Config c;
    c.layers = {LayerConfig{W, 0, RopeConfig{RopeStyle::none}}};
    c.num_q_heads = c.num_kv_heads = 1;
    c.head_dim = 64;
    c.max_tokens = W;
    c.k_format.dtype = c.v_format.dtype = DType::f16;
    const int D = c.head_dim;
    std::vector<float> q(static_cast<size_t>(W * D)), k(q.size()), v(q.size()), out(q.size());
    CounterRng rng(static_cast<uint64_t>(W));
    for (size_t i = 0; i < q.size(); ++i) {
      q[i] = static_cast<float>(rng.uniform() - 0.5);
      k[i] = static_cast<float>(rng.uniform() - 0.5);
      v[i] = static_cast<float>(rng.uniform());
    }
    const std::unique_ptr<Engine> e = in_numerics("reference", "f16-pv-accumulation", declared).create(c);
    const SequenceStep chunk{0, W, q.data(), k.data(), v.data(), out.data()};
    e->step(StepBatch{{}, std::span<const SequenceStep>(&chunk, 1)});
    // The oracle over the W stored keys, for the last query.
    std::vector<float> ks(q.size()), vs(q.size()), kt(q.size()), vt(q.size()), scales(1);
    std::vector<int8_t> codes(static_cast<size_t>(D));
    std::vector<KeyView> keys;
    for (int64_t j = 0; j < W; ++j) {
      const size_t o = static_cast<size_t>(j * D);
      oracle_store(c.k_format, D, k.data() + o, ks.data() + o, kt.data() + o, codes.data(), scales.data());
      oracle_store(c.v_format, D, v.data() + o, vs.data() + o, vt.data() + o, codes.data(), scales.data());
      keys.push_back(KeyView{ks.data() + o, kt.data() + o, vs.data() + o, vt.data() + o, j});
    }
    const float* q_last = q.data() + static_cast<size_t>((W - 1) * D);
    const std::vector<double> q_rot(q_last, q_last + D);
    const OracleOutput want = attend_keys(c, 0, 0, q_rot.data(), W - 1, keys);
    const BoundContext ctx = make_bound_context(c, 0, e->info().precision);
    double worst = 0;
    for (int d = 0; d < D; ++d) {
      const double err = std::fabs(static_cast<double>(out[static_cast<size_t>((W - 1) * D + d)]) - want.o[static_cast<size_t>(d)]);
      worst = std::max(worst, err / output_bound(ctx, want.score, want.dims[static_cast<size_t>(d)]));
    }
    return worst;
  };
  for (const int64_t W : {int64_t{16}, int64_t{64}, int64_t{1024}}) {
    const double typical = worst_ratio(W, "f16-compute-f32-acc"), honest = worst_ratio(W, "");
    std::printf("[f16 P.V] W = %4lld: worst error %.3g x the typical f16 bound, %.3g x the f16-pv-accumulation bound\n",
                static_cast<long long>(W), typical, honest);
    EXPECT_LE(honest, 1.0) << "W = " << W;
    if (W >= 64) {
      EXPECT_GT(typical, 1.0) << "W = " << W << ": f16 P.V accumulation passed the typical f16 bound";
    }
  }
}

// Which property kills which mutant: every property on the first N fixed cases.
TEST(MutantReport, DISABLED_KillMatrix) {
  const int cases = std::getenv("RINGKV_MATRIX_CASES") ? std::atoi(std::getenv("RINGKV_MATRIX_CASES")) : 20;
  const auto& props = all_properties();
  std::printf("%-24s", "mutant \\ property");
  for (const PropertyInfo& p : props) std::printf(" %.6s", p.name);
  std::printf("\n");
  // RINGKV_MATRIX_MUTANTS=rollback (or serving): those mutants only; unset: all of them.
  const char* only_env = std::getenv("RINGKV_MATRIX_MUTANTS");
  const std::string only = only_env ? only_env : "";
  std::vector<MutantInfo> mutants = only.empty() ? all_mutants() : std::vector<MutantInfo>{};
  if (only.empty() || only == "rollback") mutants.insert(mutants.end(), rollback_mutants().begin(), rollback_mutants().end());
  if (only.empty()) mutants.insert(mutants.end(), interaction_mutants().begin(), interaction_mutants().end());
  if (only.empty() || only == "serving") mutants.insert(mutants.end(), serving_mutants().begin(), serving_mutants().end());
  for (const MutantInfo& m : mutants) {
    std::printf("%-24s", m.name);
    for (size_t k = 0; k < props.size(); ++k) {
      int kills = 0;
      for (int i = 0; i < cases; ++i) kills += run_one(props[k], m.factory, fixed_case(props[k], k, i)).failed ? 1 : 0;
      std::printf(" %6d", kills);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("(kills out of %d fixed cases per property)\n", cases);
}

}  // namespace
}  // namespace ringkv::conformance
