// docs/spec.md and docs/golden-format.md give one ring and one version rule (issue 26 item 3): the
// formulas are read out of both documents and compared, and the writer follows the version rule.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "golden/golden.hpp"
#include "golden/safetensors.hpp"

namespace ringkv::golden {
namespace {

std::string doc(const char* name) {
  std::ifstream in(std::string(RINGKV_SOURCE_DIR) + "/docs/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

// Every match of `pattern` in `text`, with a layer's reserve written Q (golden-format also says
// rollback_reserve) and runs of spaces and line breaks as one space.
std::set<std::string> formulas(const std::string& text, const std::string& pattern) {
  std::set<std::string> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    std::string f = std::regex_replace(it->str(), std::regex("\\s+"), " ");
    out.insert(std::regex_replace(f, std::regex("rollback_reserve"), "Q"));
  }
  return out;
}

const char* const kCapacity = "min\\(S \\+ W[^,]*,\\s*max_tokens\\)";
const char* const kSlotMap = "S \\+ \\(*\\(j − S\\) mod (\\([^)\n]*\\)|[A-Za-z]+)\\)?";

TEST(DocsAgree, GoldenFormatGivesTheSpecsRingCapacityAndSlotMap) {
  const std::string spec = doc("spec.md"), golden = doc("golden-format.md");
  const std::set<std::string> capacity{"min(S + W + Q, max_tokens)"};
  EXPECT_EQ(formulas(spec, kCapacity), capacity) << "docs/spec.md §3 and its glossary";
  EXPECT_EQ(formulas(golden, kCapacity), capacity) << "docs/golden-format.md §6 and §12";
  // The slot map of a non-sink token: the spec's general form (and its wrap-only form), and the
  // golden format's, which must be the general one.
  const std::set<std::string> spec_slots = formulas(spec, kSlotMap);
  EXPECT_EQ(spec_slots.count("S + ((j − S) mod (C − S))"), 1u) << ::testing::PrintToString(spec_slots);
  const std::set<std::string> golden_slots = formulas(golden, kSlotMap);
  EXPECT_EQ(golden_slots, (std::set<std::string>{"S + ((j − S) mod (C − S))"}));
}

// One version rule: spec 1.1 (golden format 2) for a case with a rollback or a nonzero reserve.
TEST(DocsAgree, ARollbackOrANonzeroReserveMakesASpec11Case) {
  const auto flat = [](const std::string& text) { return std::regex_replace(text, std::regex("\\s+"), " "); };
  EXPECT_NE(flat(doc("spec.md")).find("**spec 1.1** for a case that uses a rollback or a nonzero reserve (golden "
                                      "format 2"), std::string::npos);
  EXPECT_NE(flat(doc("golden-format.md")).find("a case with rollback events (spec 1.1 §5.1) or a nonzero "
                                               "`rollback_reserve` in any layer (spec 1.1 §3) is format 2"),
            std::string::npos);
  // The writer: a reserve without any rollback is format 2, spec 1.1, and reads back.
  GoldenSpec s;
  for (const GoldenSpec& g : golden_set()) {
    if (g.name == "rollback_at_wrap") s = g;
  }
  ASSERT_EQ(s.name, "rollback_at_wrap");
  for (conformance::StepPlan& st : s.c.steps) st.rollbacks.clear();
  ASSERT_GT(s.c.config.layers[0].rollback_reserve, 0);
  const StFile f = golden_to_safetensors(make_golden(s));
  EXPECT_EQ(f.metadata.at("golden_format_version"), "2");
  EXPECT_EQ(f.metadata.at("spec_version"), "1.1");
  EXPECT_EQ(golden_from_safetensors(f).format_version(), 2);
  // Without the reserve it is a spec 1 case again.
  for (LayerConfig& l : s.c.config.layers) l.rollback_reserve = 0;
  EXPECT_EQ(golden_to_safetensors(make_golden(s)).metadata.at("golden_format_version"), "1");
}

}  // namespace
}  // namespace ringkv::golden
