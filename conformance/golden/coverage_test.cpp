// The golden set as "spec 1 core" plus features (issue 14): what each kind of engine is judged on.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "golden/coverage.hpp"
#include "golden/golden.hpp"
#include "golden/pairs.hpp"
#include "support/capabilities.hpp"

namespace ringkv::golden {
namespace {

const std::vector<GoldenSpec>& set() {
  static const std::vector<GoldenSpec> s = golden_set();
  return s;
}

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

TEST(Coverage, EveryDerivedClassIsInTheCatalogue) {
  for (const GoldenSpec& s : set()) {
    for (const std::string& c : s.classes) EXPECT_NO_THROW(class_info(c)) << s.name << " carries unknown class " << c;
  }
}

// A case is core exactly when the core capabilities run it: the class levels and capability_gap agree.
TEST(Coverage, CoreCasesAreExactlyThoseTheCoreRuns) {
  const Capabilities core = conformance::core_capabilities();
  for (const GoldenSpec& s : set()) {
    const bool runs = conformance::capability_gap(core, s.c).empty();
    const bool is_core = std::string(case_level(s.classes)) == "core";
    EXPECT_EQ(runs, is_core) << s.name << ": level " << case_level(s.classes) << ", core gap \""
                             << conformance::capability_gap(core, s.c) << "\"";
  }
}

// For each capability set of the matrix, every class that set can express is judged by >= 2 cases.
TEST(Coverage, EachCapabilitySetIsJudgedOnEveryClassItCanExpress) {
  for (const auto& [name, caps] : matrix_capability_sets()) {
    const std::map<std::string, int> n = cases_per_class(caps, set());
    for (const ClassInfo& c : class_catalogue()) {
      if (!class_not_applicable(caps, c.name).empty()) continue;
      EXPECT_GE(n.at(c.name), 2) << "capability set \"" << name << "\" can express " << c.name << " but runs "
                                 << n.at(c.name) << " case(s) of it";
    }
  }
}

// Kernel libraries take only head dims 64/128 and f16/bf16: every structural class has a core case at
// head dim 128 and one at 64, each with f16 or bf16 K/V.
TEST(Coverage, EveryStructuralClassHasCoreCasesAtHeadDims64And128InHalfPrecision) {
  for (const ClassInfo& c : class_catalogue()) {
    if (!c.structural) continue;
    int core = 0, d128 = 0, d64 = 0;
    for (const GoldenSpec& s : set()) {
      if (!has(s.classes, c.name) || std::string(case_level(s.classes)) != "core") continue;
      ++core;
      const DType k = s.c.config.k_format.dtype;
      const bool half = k == DType::f16 || k == DType::bf16;
      d128 += half && s.c.config.head_dim == 128;
      d64 += half && s.c.config.head_dim == 64;
    }
    EXPECT_GE(core, 2) << c.name << ": core cases";
    EXPECT_GE(d128, 1) << c.name << ": core cases at head dim 128 with f16/bf16 K/V";
    EXPECT_GE(d64, 1) << c.name << ": core cases at head dim 64 with f16/bf16 K/V";
  }
}

// The capability profiles real engines have (issue 26 item 5): model code that starts every sequence
// at position 0 (transformers, mlx-lm: no settable start position), one format for K and V, bf16
// only, no sinks, one sequence. Each is judged by the committed set on every structural class it can
// express, resets included (a reset to position 0 is one such an engine can do).
std::vector<std::pair<std::string, Capabilities>> engine_profiles() {
  std::vector<std::pair<std::string, Capabilities>> out;
  const auto start_at_0 = [](Capabilities c) {
    c.settable_p0 = false;
    return c;
  };
  Capabilities bf16 = conformance::core_capabilities({DType::bf16});  // bf16 K/V only, no f32
  Capabilities bf16_kernels = bf16;
  bf16_kernels.head_dims = {64, 128};
  Capabilities one_sequence = conformance::core_capabilities();
  one_sequence.max_batch = 1;
  Capabilities one_format;
  one_format.kv_formats_differ = false;
  Capabilities no_sinks;
  no_sinks.sinks = false;
  out.emplace_back("core, start at 0 (transformers, mlx-lm)", start_at_0(conformance::core_capabilities()));
  out.emplace_back("core f32, start at 0", start_at_0(conformance::core_capabilities({DType::f32})));
  out.emplace_back("core bf16 d64/128, start at 0", start_at_0(bf16_kernels));
  out.emplace_back("core, one sequence, start at 0", start_at_0(one_sequence));
  out.emplace_back("everything, start at 0", start_at_0(Capabilities{}));
  out.emplace_back("one format for K and V", one_format);
  out.emplace_back("core bf16 only", bf16);
  out.emplace_back("core bf16 d64/128", bf16_kernels);
  out.emplace_back("no sinks", no_sinks);
  out.emplace_back("core, one sequence", one_sequence);
  return out;
}

TEST(Coverage, EveryEngineProfileIsJudgedOnEveryStructuralClassItCanExpress) {
  for (const auto& [name, caps] : engine_profiles()) {
    const std::map<std::string, int> n = cases_per_class(caps, set());
    for (const ClassInfo& c : class_catalogue()) {
      if (!c.structural || !class_not_applicable(caps, c.name).empty()) continue;
      EXPECT_GE(n.at(c.name), 1) << "profile \"" << name << "\" can express " << c.name << " but no committed case of it "
                                 << "is within the profile";
    }
  }
}

TEST(Coverage, ApplicabilityFollowsTheDeclaredCapabilities) {
  Capabilities c = conformance::core_capabilities({DType::bf16});
  c.max_batch = 1;
  c.min_window = 2;
  c.head_dims = {128};
  EXPECT_EQ(class_not_applicable(c, "batch-mixed"), "max_batch 1");
  EXPECT_EQ(class_not_applicable(c, "sit-out"), "max_batch 1");
  EXPECT_EQ(class_not_applicable(c, "W=1"), "min_window > 1");
  EXPECT_EQ(class_not_applicable(c, "head_dim-64"), "no head dim 64");
  EXPECT_EQ(class_not_applicable(c, "kv-f16"), "no f16 K/V");
  EXPECT_EQ(class_not_applicable(c, "sinks"), "no sink tokens");
  EXPECT_EQ(class_not_applicable(c, "several-windows"), "max_sliding_windows 1");
  EXPECT_EQ(class_not_applicable(c, "t=W+1"), "");
  EXPECT_EQ(class_not_applicable(c, "kv-bf16"), "");
  EXPECT_EQ(class_not_applicable(Capabilities{}, "k-v-dtypes-differ"), "");
}

// Issue 26: the reason is what keeps the engine out. One that cannot set a start position cannot start at
// 2^20, whatever its max_position; one layer rules out several windows and per-layer RoPE.
TEST(Coverage, TheReasonIsWhatKeepsTheEngineOut) {
  Capabilities fixed_start = conformance::core_capabilities({DType::f32});
  fixed_start.settable_p0 = false;
  fixed_start.max_position = (int64_t{1} << 31) - 1;
  for (const char* k : {"pos-2^20", "pos-2^24", "pos-2^31", "reset-p0-down", "reset-p0-up"}) {
    EXPECT_EQ(class_not_applicable(fixed_start, k), "start positions not settable") << k;
  }
  Capabilities short_positions = conformance::core_capabilities({DType::f32});
  short_positions.max_position = (int64_t{1} << 20) - 1;
  EXPECT_EQ(class_not_applicable(short_positions, "pos-2^20"), "max_position < 2^20");
  EXPECT_EQ(class_not_applicable(short_positions, "pos-2^31"), "max_position < 2^30");
  Capabilities one_layer = conformance::core_capabilities({DType::f32});
  one_layer.max_layers = 1;
  one_layer.per_layer_rope = true;
  one_layer.max_sliding_windows = 4;
  EXPECT_EQ(class_not_applicable(one_layer, "several-windows"), "max_layers 1");
  EXPECT_EQ(class_not_applicable(one_layer, "per-layer-rope"), "max_layers 1");
  one_layer.max_layers = 2;
  EXPECT_EQ(class_not_applicable(one_layer, "several-windows"), "");
  EXPECT_EQ(class_not_applicable(one_layer, "per-layer-rope"), "");
}

TEST(Coverage, ClassesAreJudgedNotApplicableOrNotJudged) {
  Capabilities c = conformance::core_capabilities();
  c.max_batch = 1;
  const std::vector<CaseCoverageInput> cases{{{"t=W+1", "gqa"}, true}, {{"t=W+1", "mqa"}, true}, {{"mha"}, false}};
  for (const ClassCoverage& k : class_coverage(c, cases)) {
    if (k.name == "t=W+1") {
      EXPECT_EQ(k.status, Coverage::judged);
      EXPECT_EQ(k.cases_judged, 2);
    } else if (k.name == "gqa") {
      EXPECT_EQ(k.cases_judged, 1);
    } else if (k.name == "mha") {
      EXPECT_EQ(k.status, Coverage::not_judged) << "a case that was not compared judges nothing";
    } else if (k.name == "batch-mixed" || k.name == "sinks") {
      EXPECT_EQ(k.status, Coverage::not_applicable) << k.name;
      EXPECT_FALSE(k.why.empty());
    } else if (k.name == "t=W") {
      EXPECT_EQ(k.status, Coverage::not_judged);
    }
  }
}

// The text of docs/golden-format.md between two markers ("" when either is missing).
std::string golden_format_between(const std::string& begin, const std::string& end) {
  std::ifstream in(std::string(RINGKV_SOURCE_DIR) + "/docs/golden-format.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const size_t a = doc.find(begin), b = doc.find(end);
  return a == std::string::npos || b == std::string::npos || b < a ? "" : doc.substr(a + begin.size(), b - a - begin.size());
}

// docs/golden-format.md shows the matrix this code computes, between its markers.
TEST(Coverage, TheMatrixInGoldenFormatIsCurrent) {
  EXPECT_EQ(golden_format_between("<!-- coverage matrix: generated by `ringkv golden matrix` -->\n", "<!-- end of matrix -->"),
            coverage_matrix_markdown(set()))
      << "regenerate it: ringkv golden matrix";
}

// Pairwise coverage of the feature axes (issue 35 item 3, pairs.hpp): computed from the committed
// manifest's classes, which are the catalogue's derived classes (so a regenerated set changes it only
// through its cases), and shown in docs/golden-format.md between its markers.
std::vector<std::pair<std::string, std::vector<std::string>>> manifest_cases() {
  std::vector<std::pair<std::string, std::vector<std::string>>> cases;
  for (const ManifestEntry& e : read_manifest(std::string(RINGKV_SOURCE_DIR) + "/golden")) cases.emplace_back(e.name, e.classes);
  return cases;
}

TEST(Pairs, TheManifestsAxisValuesAreTheCataloguesOwn) {
  const auto cases = manifest_cases();  // in name order; the catalogue's own order differs
  ASSERT_EQ(cases.size(), set().size());
  for (const GoldenSpec& spec : set()) {
    const auto it = std::find_if(cases.begin(), cases.end(), [&](const auto& c) { return c.first == spec.name; });
    ASSERT_NE(it, cases.end()) << spec.name << " is not in the manifest";
    EXPECT_EQ(axis_values(it->second), axis_values(derive_classes(spec.c))) << spec.name;
  }
}

// Every axis value is one a case can hold, and each case holds at least one value per axis.
TEST(Pairs, EveryCaseHoldsKnownValuesOnEveryAxis) {
  const auto& axes = feature_axes();
  for (const auto& [name, classes] : manifest_cases()) {
    const auto v = axis_values(classes);
    ASSERT_EQ(v.size(), axes.size());
    for (size_t a = 0; a < axes.size(); ++a) {
      EXPECT_FALSE(v[a].empty()) << name << " holds no value on " << axes[a].name;
      for (const std::string& x : v[a]) EXPECT_TRUE(has(axes[a].values, x)) << name << ": " << axes[a].name << " " << x;
    }
  }
}

// A case covers exactly the pairs of the values it holds: a K f16 / V int8-q8_0 case with sinks covers
// f16/yes and int8-q8_0/yes on kv-storage x sinks and neither /no.
TEST(Pairs, ACaseCoversThePairsOfItsValues) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> one{
      {"x", {"kv-f16", "int8-q8_0", "k-v-dtypes-differ", "sinks", "rope-neox", "gqa"}}};
  int held = 0;
  for (const ValuePair& p : pair_coverage(one)) {
    if (p.axis_a != "kv-storage" || p.axis_b != "sinks") continue;
    const bool want = (p.value_a == "f16" || p.value_a == "int8-q8_0") && p.value_b == "yes";
    EXPECT_EQ(p.cases.size(), want ? 1u : 0u) << p.value_a << "/" << p.value_b;
    held += want ? 1 : 0;
  }
  EXPECT_EQ(held, 2);
  EXPECT_EQ(axis_values({"kv-bf16", "k-v-dtypes-differ"})[0], (std::vector<std::string>{"f32", "bf16"}));
  EXPECT_EQ(axis_values({})[0], (std::vector<std::string>{"f32"}));
}

// The covering array (issue 35 item 3): every value pair of every two axes is held by at least two
// committed cases, computed from the manifest alone.
TEST(Pairs, EveryValuePairIsHeldByTwoCommittedCases) {
  const auto pairs = pair_coverage(manifest_cases());
  ASSERT_EQ(pairs.size(), 654u);  // 14 axes (a new axis or value changes the count: regenerate the set)
  for (const ValuePair& p : pairs) {
    EXPECT_GE(p.cases.size(), 2u) << p.axis_a << " " << p.value_a << " x " << p.axis_b << " " << p.value_b
                                  << ": held by " << p.cases.size() << " case(s)";
  }
}

// The covering cases hold the values of their rows, and without them the set has gaps (so they are the
// ones that close them); they are small: 9 or 14 tokens of one sequence from position 0.
TEST(Pairs, TheCoveringCasesCloseTheGapsOfTheOthers) {
  std::vector<std::pair<std::string, std::vector<std::string>>> others, covering;
  for (const GoldenSpec& g : set()) {
    (g.name.rfind("pairwise_", 0) == 0 ? covering : others).emplace_back(g.name, g.classes);
  }
  ASSERT_FALSE(covering.empty());
  size_t short_without = 0;
  for (const ValuePair& p : pair_coverage(others)) short_without += p.cases.size() < 2 ? 1 : 0;
  EXPECT_GT(short_without, 0u);
  for (const GoldenSpec& g : set()) {
    if (g.name.rfind("pairwise_", 0) != 0) continue;
    EXPECT_EQ(g.c.config.batch, 1) << g.name;
    EXPECT_LE(g.c.config.max_tokens, 40) << g.name;
    EXPECT_EQ(start_position(g.c.config, 0), 0) << g.name;
  }
}

TEST(Pairs, TheGapsInGoldenFormatAreCurrent) {
  EXPECT_EQ(golden_format_between("<!-- pairs: generated by `ringkv golden pairs` -->\n", "<!-- end of pairs -->"),
            pair_gaps_markdown(manifest_cases()))
      << "regenerate it with `ringkv golden pairs`";
}

}  // namespace
}  // namespace ringkv::golden
