// ringkv conformance: production-shape scale cases (issue 28 item 4). Generated from seeds on the
// runner, never committed: head counts, head dims, windows, batches, chunk lengths and positions that
// engines serve, where the golden set's small shapes cannot reach the bugs of scale (many splits to
// merge, large strides, long windows, wide batches at mixed lengths).
//
// They are judged by the float64 oracle on a sample of queries (sample_scale_queries): every boundary
// of every layer and sequence, plus a fixed fraction of the rest. The oracle keeps only the rows a
// later query can still see (Oracle::release_unreachable) and the runner keeps no per-token records,
// so host memory follows the ring, not the case's length. docs/scale.md has the tiers, the sampling
// argument and the measured time and memory.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ringkv/engine.hpp"
#include "support/case.hpp"

namespace ringkv::conformance {

/// ci: minutes on a 2-core CPU runner against the reference (run by CI); host: a 24 GB CPU machine,
/// longer windows, global layers; gpu and gpu-long: GPU runners (scripts/gpu-ci.sh), windows of
/// 32768 and 131072.
enum class ScaleTier { ci, host, gpu, gpu_long };

/// "ci", "host", "gpu", "gpu-long".
const char* to_string(ScaleTier tier);
/// The tier a name gives, or nullopt.
std::optional<ScaleTier> parse_scale_tier(const std::string& name);
/// The names, comma-separated, for error messages.
std::string scale_tier_names();

struct ScaleCase {
  std::string name;  ///< "scale/<tier>/<shape>": stable, what --filter matches
  std::string what;  ///< one line: the model it stands for and what it stresses
  Case c;
  /// One query in `sample_every` outside the boundaries is sampled (chosen by a hash of the seed).
  int64_t sample_every = 64;
};

/// The cases of a tier, in a fixed order (the same on every machine).
std::vector<ScaleCase> scale_cases(ScaleTier tier);

/// The sampled queries of each (layer, sequence), [L][B], as token indices since the sequence's
/// reset: in every chunk the schedule appends, the layer's edges it crosses (0, 1, S - 1, S, S + 1,
/// W - 1, W, W + 1, S + W - 1, S + W, S + W + 1, the ring's wrap C - 1, C, C + 1 and C + W for
/// C = S + W + Q, the needle targets), its first and last token (so the first token after a
/// rollback or reset, and the last of every stream), the tokens at positions 2^24 - 1, 2^24 and
/// 2^24 + 1, and one in `every` of the others by hash.
std::vector<std::set<int64_t>> sample_scale_queries(const Case& c, int64_t every);

struct ScaleOutcome {
  bool passed = false;
  std::string failure;         ///< the first output beyond its bound, or what the engine threw
  bool oracle_error = false;   ///< the failure is the oracle's own (never the engine's)
  double worst_ratio = 0;
  int64_t outputs_checked = 0;  ///< sampled (step, sequence, q head, dim) outputs compared
  int64_t queries_total = 0;    ///< (layer, token, q head) rows the engine computed
  int64_t queries_sampled = 0;  ///< of those, the rows the oracle computed and the run compared
  double seconds = 0;           ///< wall time of the run (engine and oracle)
};

/// Runs a scale case on an engine: the engine computes every output, the oracle the sampled ones.
ScaleOutcome run_scale_case(const EngineFactory& factory, const ScaleCase& sc);

}  // namespace ringkv::conformance
