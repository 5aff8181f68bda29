// ringkv CLI: one `ringkv check` run as data, stage by stage (check.cpp: inputs, engines, the work list,
// goldens and properties, coverage, the reports), and its text report, which `ringkv report merge`
// prints too, from a run read back from the merged JSON report (run_from_report).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "coverage_verdict.hpp"
#include "golden/golden.hpp"
#include "property_runner.hpp"
#include "ringkv/engine.hpp"
#include "shard.hpp"
#include "support/profiles.hpp"
#include "support/scale.hpp"
#ifdef RINGKV_HAVE_ABI
#include "plugin_engine.hpp"
#endif

namespace ringkv::cli {

struct CaseResult {
  std::string engine, name, id;
  std::vector<std::string> classes;
  /// error: the case's golden file is unusable (corrupt, unreadable): no verdict on the engine.
  enum class Status { passed, failed, skipped, xfail, xpass, error } status = Status::passed;
  double worst_ratio = 0;
  int64_t outputs = 0;
  std::string detail;  // failure or skip reason
  std::string reproduce;
  std::string profile, profile_source;       // the profile the outputs were judged under (JSON), and whence
  std::optional<golden::RopeVerdict> rope;   // RoPE checked apart from attention, where there is a verdict
  std::vector<std::string> warnings;         // not a failure: a plugin's worker grew beyond its cache (a leak?)
};

inline const char* status_name(CaseResult::Status s) {
  switch (s) {
    case CaseResult::Status::passed: return "passed";
    case CaseResult::Status::failed: return "failed";
    case CaseResult::Status::skipped: return "skipped";
    case CaseResult::Status::xfail: return "xfail";
    case CaseResult::Status::xpass: return "xpass";
    case CaseResult::Status::error: return "error";
  }
  return "?";
}

/// A word for a POSIX shell, single-quoted (the reproduce lines).
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

struct EngineUnderTest {
  std::string label;  // as given on the command line
  EngineFactory factory;  // its capabilities are the engine's declaration (file exchange: the capabilities file's)
  bool external_outputs = false;
  std::string unavailable;  // non-empty: a built-in engine this machine cannot run (listed as skipped)
  bool qk_rotated_by_ringkv = false;  // a plugin with wants_rotated_qk: ringkv rotates q and k for it
  std::string capabilities_source;    // file exchange: the capabilities file ("" without one)
  bool per_job = false;  // a plugin: each job opens its own (its own worker process; one Plugin serves one call at a time)
  std::vector<std::string> declaration_warnings = {};  // found at load (plugin_declaration.hpp), with the verdict
#ifdef RINGKV_HAVE_ABI
  std::shared_ptr<abi::Plugin> plugin = nullptr;  // a plugin: the one opened for the report
#endif
};

// One item of the work list: a golden case (entry) or a property (name) on an engine, its estimated
// cost in seconds, and the shard (1 .. N) that runs it.
struct WorkItem {
  size_t engine;
  const golden::ManifestEntry* entry;  // nullptr: a property or a scale case
  std::string name;
  double cost;
  int shard;
  int scale = -1;  // >= 0: this scale case of CheckRun::scale_cases
};

// The state of one run: what each stage reads and what it adds, in the order run_check runs them.
struct CheckRun {
  explicit CheckRun(const CheckOptions& o) : opt(o), progress(!o.quiet) {}
  const CheckOptions& opt;
  bool progress;
  // inputs: the filters, the expected failures, the golden cases selected, the profiles, the required classes
  std::regex keep, drop;
  std::vector<std::regex> xfails;
  bool properties = false;
  std::vector<golden::ManifestEntry> selected;
  size_t golden_cases = 0;  // selected.size(): what the report says it judged each engine on
  std::vector<conformance::ScaleCase> scale_cases;  // --scale: the tier's cases --filter/--exclude keep
  std::string set_generator;  // a random set: the command that regenerates it (for reproduce lines)
  conformance::ProfileSet external_profiles;
  std::optional<std::regex> required;
  bool require_default = false;
  // engines
  std::vector<EngineUnderTest> engines;
  std::set<std::string> unloadable;  // plugins that could not be loaded (their `unavailable` says why)
  // the work: every item with its shard, and this run's shard
  int jobs = 1;
  ShardSpec shard;
  std::vector<WorkItem> work;
  // results, in work-list order
  std::vector<CaseResult> results;
  std::vector<std::pair<std::string, PropertyOutcome>> props;
  // the verdict
  std::map<std::string, EngineCoverage> coverage;
  bool failed = false;
  int errors = 0;  // unusable golden files and engines that could not be loaded
  std::vector<std::string> reasons;
};

/// Stage 6, the report on stdout: failures first with their reproduce lines, then a verdict per engine
/// and the verdict line (with --table, the table per boundary class and every property before).
void print_text_report(const CheckRun& run);

/// A run read back from a JSON report (`ringkv check --json`, or `ringkv report merge`'s): what
/// print_text_report reads. `opt` receives the run's options from the report's shard header (its
/// `table` is left as it is); the run refers to it.
CheckRun run_from_report(const nlohmann::json& report, CheckOptions& opt);

}  // namespace ringkv::cli
