// ringkv CLI: reading the JSON report (`ringkv check --json`), the report as data that the JUnit and
// HTML writers and `ringkv report merge` consume.
#pragma once

#include <nlohmann/json.hpp>

namespace ringkv::cli {

/// The elements of report[key]: an array, or an empty one where the key is absent (a report leaves
/// out "cases", "properties", ... when there are none).
inline const nlohmann::json& report_items(const nlohmann::json& report, const char* key) {
  static const nlohmann::json empty = nlohmann::json::array();
  const auto it = report.find(key);
  return it == report.end() || it->is_null() ? empty : *it;
}

}  // namespace ringkv::cli
