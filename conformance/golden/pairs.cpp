// ringkv golden: the feature axes and their pairwise coverage (pairs.hpp).
#include "golden/pairs.hpp"

#include <algorithm>
#include <set>
#include <sstream>

namespace ringkv::golden {
namespace {

bool has(const std::set<std::string>& s, const std::string& x) { return s.count(x) > 0; }

// K and V storage: the stored formats' classes; f32 where a case lists fewer formats than it stores
// (none at all: both f32; one with k-v-dtypes-differ: the other one is f32).
std::vector<std::string> storage(const std::set<std::string>& c) {
  static const std::vector<std::pair<std::string, std::string>> formats{
      {"kv-f16", "f16"},           {"kv-bf16", "bf16"},         {"kv-fp8-e4m3", "fp8-e4m3"}, {"kv-fp8-e5m2", "fp8-e5m2"},
      {"int8-per_head", "int8-per_head"}, {"int8-q8_0", "int8-q8_0"}, {"int8-static", "int8-static"}};
  std::vector<std::string> out;
  for (const auto& [cls, value] : formats) {
    if (has(c, cls)) out.push_back(value);
  }
  if (out.empty() || (out.size() == 1 && has(c, "k-v-dtypes-differ"))) out.insert(out.begin(), "f32");
  return out;
}

std::vector<std::string> yes_no(const std::set<std::string>& c, const std::string& cls) {
  return {has(c, cls) ? "yes" : "no"};
}

}  // namespace

const std::vector<FeatureAxis>& feature_axes() {
  static const std::vector<FeatureAxis> axes{
      {"kv-storage", {"f32", "f16", "bf16", "fp8-e4m3", "fp8-e5m2", "int8-per_head", "int8-q8_0", "int8-static"}},
      {"sinks", {"no", "yes"}},
      {"sink-logits", {"no", "yes"}},
      {"softcap", {"no", "yes"}},
      {"softmax-scale", {"no", "yes"}},
      {"rope-style", {"neox", "gptj", "none"}},
      {"rope-scaling", {"none", "linear", "ntk"}},
      {"partial-rotary", {"no", "yes"}},
      {"per-layer-rope", {"no", "yes"}},
      {"several-windows", {"no", "yes"}},
      {"sliding-and-full", {"no", "yes"}},
      {"rollback", {"no", "yes"}},
      {"heads", {"mha", "gqa", "mqa"}},
      {"head-dim", {"other", "64", "128"}},
  };
  return axes;
}

std::vector<std::vector<std::string>> axis_values(const std::vector<std::string>& classes) {
  const std::set<std::string> c(classes.begin(), classes.end());
  std::vector<std::vector<std::string>> v;
  v.push_back(storage(c));
  v.push_back(yes_no(c, "sinks"));
  v.push_back(yes_no(c, "sink-logits"));
  v.push_back(yes_no(c, "softcap"));
  v.push_back(yes_no(c, "softmax-scale"));
  std::vector<std::string> style;
  for (const char* s : {"neox", "gptj", "none"}) {
    if (has(c, std::string("rope-") + s)) style.push_back(s);
  }
  v.push_back(style);
  std::vector<std::string> scaling;
  for (const char* s : {"linear", "ntk"}) {
    if (has(c, std::string("rope-") + s)) scaling.push_back(s);
  }
  if (scaling.empty()) scaling.push_back("none");
  v.push_back(scaling);
  v.push_back(yes_no(c, "partial-rotary"));
  v.push_back(yes_no(c, "per-layer-rope"));
  v.push_back(yes_no(c, "several-windows"));
  v.push_back(yes_no(c, "sliding-and-full"));
  bool rollback = false;
  for (const std::string& x : classes) rollback = rollback || x.rfind("rollback-", 0) == 0;
  v.push_back({rollback ? "yes" : "no"});
  std::vector<std::string> heads;
  for (const char* s : {"mha", "gqa", "mqa"}) {
    if (has(c, s)) heads.push_back(s);
  }
  v.push_back(heads);
  v.push_back({has(c, "head_dim-64") ? "64" : has(c, "head_dim-128") ? "128" : "other"});
  return v;
}

std::vector<ValuePair> pair_coverage(const std::vector<std::pair<std::string, std::vector<std::string>>>& cases) {
  const auto& axes = feature_axes();
  std::vector<std::vector<std::vector<std::string>>> values;
  for (const auto& [name, classes] : cases) values.push_back(axis_values(classes));
  std::vector<ValuePair> out;
  for (size_t a = 0; a < axes.size(); ++a) {
    for (size_t b = a + 1; b < axes.size(); ++b) {
      for (const std::string& va : axes[a].values) {
        for (const std::string& vb : axes[b].values) {
          ValuePair p{axes[a].name, va, axes[b].name, vb, {}};
          for (size_t i = 0; i < cases.size(); ++i) {
            const auto& x = values[i];
            if (std::count(x[a].begin(), x[a].end(), va) && std::count(x[b].begin(), x[b].end(), vb)) {
              p.cases.push_back(cases[i].first);
            }
          }
          out.push_back(std::move(p));
        }
      }
    }
  }
  return out;
}

std::string pair_gaps_markdown(const std::vector<std::pair<std::string, std::vector<std::string>>>& cases,
                               int min_cases) {
  const std::vector<ValuePair> pairs = pair_coverage(cases);
  size_t covered = 0;
  for (const ValuePair& p : pairs) covered += p.cases.size() >= static_cast<size_t>(min_cases) ? 1 : 0;
  std::ostringstream os;
  if (covered == pairs.size()) {
    os << "All " << pairs.size() << " value pairs of " << feature_axes().size() << " axes are held by at least "
       << min_cases << " cases.\n";
    return os.str();
  }
  os << covered << " of " << pairs.size() << " value pairs of " << feature_axes().size() << " axes are held by at least "
     << min_cases << " cases; the others, per pair of axes (value pair: cases holding it):\n\n";
  os << "| axes | value pairs held by fewer than " << min_cases << " cases |\n|---|---|\n";
  std::string current;
  std::vector<std::string> gaps;
  const auto flush = [&] {
    if (!gaps.empty()) {
      os << "| " << current << " | ";
      for (size_t i = 0; i < gaps.size(); ++i) os << (i ? ", " : "") << gaps[i];
      os << " |\n";
    }
    gaps.clear();
  };
  for (const ValuePair& p : pairs) {
    const std::string axes = "`" + p.axis_a + "` × `" + p.axis_b + "`";
    if (axes != current) {
      flush();
      current = axes;
    }
    if (p.cases.size() < static_cast<size_t>(min_cases)) {
      gaps.push_back(p.value_a + "/" + p.value_b + ": " + std::to_string(p.cases.size()));
    }
  }
  flush();
  return os.str();
}

}  // namespace ringkv::golden
