// ringkv golden: the feature axes of the golden set and their pairwise coverage (issue 35 item 3;
// docs/golden-format.md, "Pairwise coverage of the feature axes").
//
// A feature axis is one dimension in which an engine's kernel can differ (K and V storage, RoPE style,
// GQA ratio, ...); its values are read off a case's boundary classes (golden/classes.cpp), so the
// coverage is computed from the manifest alone. A case holds one or more values per axis (K and V
// storage; the RoPE styles of its layers), and it covers every pair of values it holds on two axes.
#pragma once

#include <string>
#include <vector>

#include "golden/golden.hpp"

namespace ringkv::golden {

struct FeatureAxis {
  std::string name;                 ///< e.g. "kv-storage"
  std::vector<std::string> values;  ///< e.g. {"f32", "f16", ...}
};

/// The axes, in a fixed order.
const std::vector<FeatureAxis>& feature_axes();

/// The values a case holds on each axis (index as feature_axes()), from its boundary classes.
std::vector<std::vector<std::string>> axis_values(const std::vector<std::string>& classes);

/// One value pair of two axes and the cases holding it.
struct ValuePair {
  std::string axis_a, value_a, axis_b, value_b;
  std::vector<std::string> cases;
};

/// Every value pair of every two axes (axis order, then value order), with the cases (name, classes)
/// holding it.
std::vector<ValuePair> pair_coverage(const std::vector<std::pair<std::string, std::vector<std::string>>>& cases);

/// The Markdown summary of docs/golden-format.md: per pair of axes, the value pairs held by fewer than
/// `min_cases` cases (`ringkv golden pairs`).
std::string pair_gaps_markdown(const std::vector<std::pair<std::string, std::vector<std::string>>>& cases,
                               int min_cases = 2);

/// The covering cases the catalogue adds to `base` (its other cases, classes derived) so that every value
/// pair of every two axes is held by at least `need` cases: small cases, one row of values each, chosen
/// greedily and deterministically (golden/covering.cpp; docs/golden-format.md §9.1).
std::vector<GoldenSpec> covering_cases(const std::vector<GoldenSpec>& base, int need = 2);

}  // namespace ringkv::golden
