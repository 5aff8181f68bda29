// ringkv conformance: runs a Case on an engine and on the oracle, step by
// step, and compares every output within the bound (and, optionally, the ring
// contents exactly). Properties are built on this.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ringkv/engine.hpp"
#include "support/case.hpp"

namespace ringkv::conformance {

struct TokenKey {
  int stream = 0;
  int64_t index = 0;  ///< token index within the stream
  auto operator<=>(const TokenKey&) const = default;
};

struct TokenRecord {
  int step = 0, sequence = 0;
  int64_t position = 0;
  std::vector<float> got;        ///< [layers][Hq][D] engine output
  std::vector<double> expected;  ///< [layers][Hq][D] oracle output
  std::vector<double> bound;     ///< [layers][Hq][D] allowed |got - expected|
};

struct RunOptions {
  bool oracle = true;           ///< run the oracle (expected values and bounds in the records)
  bool compare_oracle = true;   ///< every output within the bound of the oracle's (needs oracle)
  bool check_ring = false;      ///< after each step, snapshots equal the spec ring exactly
  bool poison = false;          ///< after each step, poison empty slots with NaN
  bool reverse_appends = false; ///< list each step's appends in reverse sequence order
  /// Return after the first step with a failure (the records then end there): what a property
  /// needs, which only reports the first failure; a failing shrink candidate stops early.
  bool stop_at_failure = false;
  /// Record cache_bytes() at construction and at the end (two more calls; a plugin's are round trips).
  bool cache_bytes = true;
  std::function<void(int step, Engine&)> after_step;  ///< called after each step
  /// Large cases: the oracle computes (and the run compares) only these queries (token index since
  /// the sequence's reset).
  std::function<bool(int layer, int sequence, int64_t index)> sample_queries;
  /// false: keep no TokenRecord (RunResult::tokens stays empty) and let the oracle release rows no
  /// later query sees (Oracle::release_unreachable), so that host memory follows the ring, not the
  /// case's length (the scale cases). Needs check_ring false (snapshots compare every row).
  bool keep_records = true;
};

struct RunResult {
  std::map<TokenKey, TokenRecord> tokens;
  std::string failure;        ///< first failure, empty if every check passed
  double worst_ratio = 0;     ///< max |got - expected| / bound over all outputs
  int64_t outputs_checked = 0;
  EngineInfo info;
  size_t cache_bytes_initial = 0, cache_bytes_final = 0;
  bool ok() const { return failure.empty(); }
};

RunResult run_case(const EngineFactory& factory, const Case& c, const RunOptions& options = {});

struct CompareOptions {
  bool bitwise = false;    ///< deterministic engines: the same bits
  bool oracle_gap = true;  ///< allow |oracle_A - oracle_B| on top of both bounds (false for metamorphic checks)
  std::function<bool(const TokenKey&)> select;  ///< only these tokens (default all both runs have)
  std::function<bool(int layer)> select_layer;  ///< only these layers (default all)
};

/// Compares the outputs of two runs of the same config shape on the tokens
/// both have: bit-identical if `bitwise`, else |A - B| within both runs'
/// bounds (plus the oracles' difference if `oracle_gap`). Returns the first
/// difference, or "" if none.
std::string compare_runs(const RunResult& a, const RunResult& b, const Config& config, const CompareOptions& options);

}  // namespace ringkv::conformance
