// ringkv CLI: `ringkv check --shard I/N`. Which of N disjoint parts of the work this run does: from
// --shard, else from the index and count a runner sets (GoogleTest, Kubernetes Indexed Jobs, Slurm
// arrays, GitLab, Buildkite; docs/fleet.md), and the split itself, balanced by estimated cost.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ringkv::cli {

/// Shard `index` (1 .. count) of `count`; `source` says where it came from ("--shard", "GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS", ...).
struct ShardSpec {
  int index = 1;
  int count = 1;
  std::string source;
};

/// The largest shard count accepted.
constexpr int kMaxShards = 100000;

/// "I/N" with 1 <= I <= N <= kMaxShards; throws InputError naming `option` and the allowed range.
ShardSpec parse_shard(const std::string& text, const std::string& option = "--shard");

/// The shard the environment names, in this order (the first convention whose index variable is set
/// wins; docs/fleet.md):
///   GTEST_SHARD_INDEX (0-based) / GTEST_TOTAL_SHARDS
///   JOB_COMPLETION_INDEX (0-based, Kubernetes Indexed Jobs) / the count: `shard_count` (--shard-count),
///       else RINGKV_SHARD_COUNT
///   SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT (the index is TASK_ID - SLURM_ARRAY_TASK_MIN, 0 when
///       SLURM_ARRAY_TASK_MIN is unset)
///   CI_NODE_INDEX (1-based, GitLab) / CI_NODE_TOTAL
///   BUILDKITE_PARALLEL_JOB (0-based) / BUILDKITE_PARALLEL_JOB_COUNT
/// nullopt when none is set. A malformed or out-of-range value, or an index without its count, throws
/// InputError naming the variable and the allowed range. `getenv` is the lookup (tests pass their own).
std::optional<ShardSpec> shard_from_environment(const std::function<const char*(const char*)>& getenv, int shard_count);

/// Splits items of the given estimated costs into `count` parts: the longest first, each to the part
/// with the least cost so far (ties: the lower part, then the earlier item). Returns each item's part,
/// 1 .. count. Deterministic: the same costs give the same split on every machine.
std::vector<int> assign_shards(const std::vector<double>& costs, int count);

}  // namespace ringkv::cli
