// ringkv CLI: the coverage verdict of one engine (was every required class judged?), from its classes'
// coverage (golden/coverage.hpp). `ringkv check` computes it from its cases; `ringkv report merge`
// from the classes of every shard (a class is judged if any shard judged it).
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/coverage.hpp"

namespace ringkv::cli {

// What one engine was judged on, and whether the required classes were.
struct EngineCoverage {
  std::vector<golden::ClassCoverage> classes;
  std::vector<std::string> missing;  // required classes that went unjudged, with why
  int core_judged = 0, core_applicable = 0, features_judged = 0, features_applicable = 0;
  std::string line;  // "core 32 of 32 classes judged; features: ..."
};

/// The verdict on `classes` (every class of the catalogue, in order). `required`: what
/// --require-classes names; else, with `require_default`, the structural classes the engine can
/// express; else nothing is required (a filtered run).
EngineCoverage coverage_verdict(std::vector<golden::ClassCoverage> classes, const std::optional<std::regex>& required,
                                bool require_default);

/// What to do about a required class that went unjudged, said with every such failure (issue 26).
std::string not_judged_advice(bool external_outputs);

/// The core classes not applicable to an engine's declaration: non-empty when it declares less than
/// the spec 1 core. The storage formats (f32, f16, bf16) and the head dims do not count.
std::vector<std::string> below_core(const EngineCoverage& cov);

/// The reason a run fails when required classes of an engine went unjudged (`require_classes`: the
/// --require-classes regex, "" for the default).
std::string missing_classes_reason(const std::string& engine, const EngineCoverage& cov, const std::string& require_classes,
                                   bool external_outputs);

/// An engine's entry in the JSON report's "coverage", and its classes read back (`ringkv report merge`;
/// throws std::exception on a malformed entry).
nlohmann::json coverage_to_json(const std::string& engine, const EngineCoverage& cov);
std::vector<golden::ClassCoverage> classes_from_json(const nlohmann::json& entry);

}  // namespace ringkv::cli
