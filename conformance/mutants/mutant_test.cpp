// The mutant check: the property suite, at its default number of cases and
// with fixed seeds (no shrinking, so it cannot flake), kills every mutant,
// while the correct engine and the controls pass the very same cases.
//
// Run the full kill matrix (which property kills which mutant, how often) with
//   ringkv_mutant_tests --gtest_also_run_disabled_tests --gtest_filter='*KillMatrix*'
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "mutants/mutants.hpp"
#include "property/properties.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/rng.hpp"
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
  o.sample_queries = [&](int, int64_t i) {
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

// Which property kills which mutant: every property on the first N fixed cases.
TEST(MutantReport, DISABLED_KillMatrix) {
  const int cases = std::getenv("RINGKV_MATRIX_CASES") ? std::atoi(std::getenv("RINGKV_MATRIX_CASES")) : 20;
  const auto& props = all_properties();
  std::printf("%-24s", "mutant \\ property");
  for (const PropertyInfo& p : props) std::printf(" %.6s", p.name);
  std::printf("\n");
  for (const MutantInfo& m : all_mutants()) {
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
