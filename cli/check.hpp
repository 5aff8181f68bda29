// ringkv CLI: `ringkv check`, the main job.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringkv::cli {

/// Bad arguments or unreadable input (exit code 2).
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CheckOptions {
  std::vector<std::string> engines;  ///< empty: every built-in engine
  std::string golden_dir;
  bool properties = false;
  bool no_golden = false;  ///< properties only
  int cases = 100;
  uint64_t seed = 1;
  /// Shrink budget per property in seconds (0: no shrinking; infinity: shrink to the end).
  double shrink_time = 60;
  /// Non-empty: run only the property case this replay token names (implies --properties).
  std::string replay;
  std::string filter, exclude, xfail_file;
  /// Classes (regex over class names) that must be judged; empty: the default, the structural
  /// classes within each engine's capabilities, for runs without --filter/--exclude.
  std::string require_classes;
  std::string outputs_dir, profile_file;
  /// File exchange: the engine's capabilities file (default: capabilities.json in outputs_dir, if any).
  std::string capabilities_file;
  int timeout_ms = 60000;
  int64_t memory_limit_mib = 0;  ///< plugins: the worker's RLIMIT_AS in MiB; 0 = none (abi::PluginOptions)
  /// plugins: growth of the worker's resident memory beyond the declared caches that fails the case, in
  /// MiB; 0 = none (abi::PluginOptions::leak_limit_mib; a growth beyond its slack is a warning)
  int64_t leak_limit_mib = 256;
  std::string junit_file, json_file;
  bool quiet = false;
  /// The text report: also the table per boundary class of each engine, each case's RoPE verdict and
  /// every property's line, before the report (--table, --verbose). JSON and JUnit are the same either way.
  bool table = false;
  /// Parallel workers for golden cases and property shards (>= 1; the CLI's default: default_jobs()).
  /// The report is the same for any number. --replay runs one job.
  int jobs = 1;
  /// Internal (`ringkv check --jobs N` runs each property shard in a process of its own): run only
  /// this property on the one engine, and print its outcome as JSON on stdout instead of a report.
  std::string property_shard;
  /// --shard I/N: run only the I-th of N disjoint parts of the work (cli/shard.hpp); "" reads the
  /// runner's environment (shard_from_environment), and without one the run is whole.
  std::string shard;
  /// The number of shards where the environment gives only an index (Kubernetes' JOB_COMPLETION_INDEX).
  int shard_count = 0;
  /// Write the report as one self-contained HTML page.
  std::string html_file;
  /// --scale TIER: also run the tier's production-shape cases (support/scale.hpp) on every in-process
  /// or plugin engine; "" none.
  std::string scale;
};

/// The default of --jobs: the number of cores (std::thread::hardware_concurrency), at least 1.
int default_jobs();

/// Runs the check; returns the exit code (0 passed, 1 failed).
int run_check(const CheckOptions& options);

/// `ringkv golden list`: one line per case (name, level, features). With a capabilities file
/// (docs/golden-format.md §10), only the cases an engine with those capabilities should run, then a
/// comment line with the count; `level` ("core", "feature" or "") keeps only that level.
std::string list_golden(const std::string& golden_dir, const std::string& capabilities_file, const std::string& level);

/// `ringkv golden describe`: config, schedule and classes of one case.
std::string describe_golden(const std::string& golden_dir, const std::string& name_or_path);

}  // namespace ringkv::cli
