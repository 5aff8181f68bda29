// ringkv CLI: `ringkv report merge SHARD.json...`: the report of `ringkv check --shard I/N` runs merged
// into the report the unsharded run gives: its cases and properties in the unsharded order, the
// coverage verdict recomputed from every shard's classes (a class is judged if any shard judged it),
// the reasons, the verdict and the exit code. Shards that do not make one run (a shard missing or
// given twice, other options, golden sets, engines or work lists) are an error naming them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringkv::cli {

struct MergeOptions {
  std::vector<std::string> shards;  ///< the shards' JSON reports
  std::string json_file, junit_file, html_file;
  bool table = false;  ///< the text report with each engine's table per boundary class (--table)
};

/// Merges the shard reports (each a parsed `ringkv check --json` document; names: their files, for
/// messages). Throws InputError naming the shards that do not fit.
nlohmann::json merge_reports(const std::vector<nlohmann::json>& shards, const std::vector<std::string>& names);

/// `ringkv report merge`: reads, merges, prints the unsharded run's text report, writes the reports. Returns the exit code the unsharded run gives.
int run_report_merge(const MergeOptions& options);

/// The exit code of a JSON report: 1 failed, 2 an error and nothing failed, 0 passed.
int report_exit_code(const nlohmann::json& report);

}  // namespace ringkv::cli
