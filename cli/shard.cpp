#include "shard.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <numeric>

#include "check.hpp"

namespace ringkv::cli {
namespace {

// A whole decimal number in [lo, hi], or nullopt.
std::optional<long long> parse_int(const std::string& s, long long lo, long long hi) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!(s[i] >= '0' && s[i] <= '9') && !(i == 0 && s[i] == '-' && s.size() > 1)) return std::nullopt;
  }
  const long long v = std::stoll(s);
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

std::string range(long long lo, long long hi) { return "from " + std::to_string(lo) + " to " + std::to_string(hi); }

}  // namespace

ShardSpec parse_shard(const std::string& text, const std::string& option) {
  const size_t slash = text.find('/');
  const std::string what = option + " \"" + text + "\": ";
  if (slash == std::string::npos) {
    throw InputError(what + "must be I/N, the I-th of N shards (N from 1 to " + std::to_string(kMaxShards) +
                     ", I from 1 to N), e.g. 2/7");
  }
  const auto n = parse_int(text.substr(slash + 1), 1, kMaxShards);
  if (!n) throw InputError(what + "the count N must be a whole number " + range(1, kMaxShards));
  const auto i = parse_int(text.substr(0, slash), 1, *n);
  if (!i) throw InputError(what + "the index I must be a whole number " + range(1, *n) + " (1-based)");
  return {static_cast<int>(*i), static_cast<int>(*n), option};
}

std::optional<ShardSpec> shard_from_environment(const std::function<const char*(const char*)>& getenv, int shard_count) {
  struct Convention {
    const char* index;
    const char* count;  // nullptr: Kubernetes, the count is given
    int base;           // the first index: 0 or 1
  };
  static const Convention conventions[] = {{"GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS", 0},
                                           {"JOB_COMPLETION_INDEX", nullptr, 0},
                                           {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", 0},
                                           {"CI_NODE_INDEX", "CI_NODE_TOTAL", 1},
                                           {"BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0}};
  for (const Convention& c : conventions) {
    const char* index_text = getenv(c.index);
    if (index_text == nullptr || *index_text == '\0') continue;
    // The count.
    long long count = 0;
    std::string count_name;
    if (c.count) {
      count_name = c.count;
      const char* count_text = getenv(c.count);
      if (count_text == nullptr || *count_text == '\0') {
        throw InputError(std::string(c.index) + " is set (" + index_text + ") but " + c.count +
                         " is not: both name the shard (or pass --shard I/N)");
      }
      const auto n = parse_int(count_text, 1, kMaxShards);
      if (!n) {
        throw InputError(std::string(c.count) + "=\"" + count_text + "\": must be a whole number " + range(1, kMaxShards));
      }
      count = *n;
    } else if (shard_count > 0) {
      count_name = "--shard-count";
      if (shard_count > kMaxShards) throw InputError("--shard-count " + std::to_string(shard_count) + ": must be " + range(1, kMaxShards));
      count = shard_count;
    } else {
      count_name = "RINGKV_SHARD_COUNT";
      const char* count_text = getenv("RINGKV_SHARD_COUNT");
      if (count_text == nullptr || *count_text == '\0') {
        throw InputError(std::string(c.index) + " is set (" + index_text +
                         ", a Kubernetes Indexed Job) but the number of shards is not: pass --shard-count N (the Job's "
                         "completions) or set RINGKV_SHARD_COUNT");
      }
      const auto n = parse_int(count_text, 1, kMaxShards);
      if (!n) throw InputError(std::string("RINGKV_SHARD_COUNT=\"") + count_text + "\": must be a whole number " + range(1, kMaxShards));
      count = *n;
    }
    // The index, by the convention's base (Slurm: from SLURM_ARRAY_TASK_MIN).
    long long base = c.base;
    if (std::string(c.index) == "SLURM_ARRAY_TASK_ID") {
      if (const char* min_text = getenv("SLURM_ARRAY_TASK_MIN"); min_text && *min_text) {
        const auto m = parse_int(min_text, 0, 1LL << 40);
        if (!m) throw InputError(std::string("SLURM_ARRAY_TASK_MIN=\"") + min_text + "\": must be a whole number >= 0");
        base = *m;
      }
    }
    const auto i = parse_int(index_text, base, base + count - 1);
    if (!i) {
      throw InputError(std::string(c.index) + "=\"" + index_text + "\": must be a whole number " +
                       range(base, base + count - 1) + " (" + (base == 1 ? "1-based" : "0-based") + ", " + count_name +
                       " = " + std::to_string(count) + ")");
    }
    return ShardSpec{static_cast<int>(*i - base + 1), static_cast<int>(count), std::string(c.index) + "/" + count_name};
  }
  return std::nullopt;
}

std::vector<int> assign_shards(const std::vector<double>& costs, int count) {
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<double> load(static_cast<size_t>(std::max(count, 1)), 0.0);
  std::vector<int> part(costs.size(), 1);
  for (size_t item : order) {
    const size_t least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[least] += costs[item];
    part[item] = static_cast<int>(least) + 1;
  }
  return part;
}

}  // namespace ringkv::cli
