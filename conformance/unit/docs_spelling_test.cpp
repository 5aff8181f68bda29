// The documents spell every enumerated config value exactly as the JSON parser and the reports do
// (to_string of reference/src/config.cpp): the INT8 scheme table and the rounding list of
// docs/spec.md §10, and no other spelling anywhere in the docs.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "ringkv/config.hpp"

namespace ringkv {
namespace {

std::string read_doc(const std::string& name) {
  std::ifstream in(std::string(RINGKV_SOURCE_DIR) + "/docs/" + name);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string section(const std::string& doc, const std::string& from, const std::string& to) {
  const size_t a = doc.find(from), b = doc.find(to, a);
  return a == std::string::npos ? std::string() : doc.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

TEST(DocsSpelling, Int8SchemeTableMatchesTheParser) {
  const std::string table = section(read_doc("spec.md"), "### 10.4 INT8", "**Zero codes.**");
  ASSERT_FALSE(table.empty());
  std::set<std::string> in_doc;
  const std::regex row(R"(\n\| `([a-z0-9_]+)`( \(default\))? \|)");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), row); it != std::sregex_iterator(); ++it) {
    in_doc.insert((*it)[1]);
  }
  const std::set<std::string> parser{to_string(Int8Scheme::per_head), to_string(Int8Scheme::q8_0),
                                     to_string(Int8Scheme::static_tensor)};
  EXPECT_EQ(in_doc, parser);
}

TEST(DocsSpelling, RoundingListMatchesTheParser) {
  const std::string list = section(read_doc("spec.md"), "### 10.5 Rounding to a code", "### 10.6");
  ASSERT_FALSE(list.empty());
  std::set<std::string> in_doc;
  const std::regex item(R"(\n- `([a-z_]+)`)");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), item); it != std::sregex_iterator(); ++it) {
    in_doc.insert((*it)[1]);
  }
  EXPECT_EQ(in_doc, (std::set<std::string>{to_string(Rounding::nearest_even), to_string(Rounding::half_away)}));
}

TEST(DocsSpelling, NoDocumentUsesAnotherSpelling) {
  // The C++ enumerator names may appear only as C++ (Int8Scheme::..., Rounding::...); stable
  // boundary-class names such as int8-half_away are identifiers of their own.
  const std::regex other(R"((^|[^:\w-])(static_tensor|nearest_even|half_away|nearest-even|half-away)\b)");
  for (const char* doc : {"spec.md", "golden-format.md", "engine-abi.md", "tolerances.md"}) {
    const std::string text = read_doc(doc);
    ASSERT_FALSE(text.empty()) << doc;
    std::smatch m;
    EXPECT_FALSE(std::regex_search(text, m, other)) << doc << " spells a value \"" << m[2] << "\"";
  }
}

}  // namespace
}  // namespace ringkv
