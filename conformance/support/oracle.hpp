// ringkv conformance: the float64 oracle. Full-history masked attention: it
// keeps every token of every (layer, sequence), applies the visibility rule
// as an explicit mask over all earlier tokens, and computes RoPE, scores and
// softmax in double. It shares only the config types and the rounding/INT8
// formulas (ringkv/quant.hpp) with the ring engine; its RoPE is its own.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ringkv/config.hpp"
#include "support/tolerance.hpp"

namespace ringkv::conformance {

/// What the spec says a cache stores for one token's K or V (all kv heads).
struct StoredRow {
  std::vector<float> value;     ///< [Hkv][D] decoded stored value
  std::vector<float> tie;       ///< [Hkv][D] one code step where an INT8 element is in the tie window, else 0
  std::vector<int8_t> codes;    ///< [Hkv][D] INT8 codes (int8 only)
  std::vector<float> scales;    ///< [Hkv][scales_per_row] stored scales (int8 only)
};

struct OracleToken {
  int64_t position = 0;
  StoredRow k, v;
  std::vector<float> k_rot;  ///< [Hkv][D] K rotated (spec §8, rounded once to f32), before storage
};

/// Expected output of one (layer, token, q head) and the inputs of its bound.
struct OracleOutput {
  std::vector<double> o;      ///< [D]
  ScoreStats score;
  std::vector<DimStats> dims;  ///< [D]
};

/// f64 RoPE of the oracle (independent of ringkv/rope.hpp): rotates x at a
/// (possibly scaled) position, returning double results.
void oracle_rope(const RopeConfig& rope, int head_dim, int64_t position, const float* x, double* out);

/// What the spec stores for one row: rounds/quantises x[0..D) and reports ties.
void oracle_store(const KvFormat& format, int head_dim, const float* x, float* value, float* tie, int8_t* codes,
                  float* scales);

/// One visible key of one kv head, as the f64 attention reads it.
struct KeyView {
  const float* k = nullptr;      ///< [D] stored (decoded) K
  const float* k_tie = nullptr;  ///< [D] one code step per INT8 element in the tie window, or null (none)
  const float* v = nullptr;      ///< [D] stored (decoded) V
  const float* v_tie = nullptr;  ///< [D] or null
  int64_t position = 0;          ///< true position (for the RoPE term of the bound)
};

/// Softmax attention in f64 of one query head (its rotated query q_rot[0..D) at true position
/// `query_position`) over exactly the given visible keys, with the softcap and the sink logit of
/// (layer, head), and the inputs of the bound. The oracle calls it over its full history; a check
/// that holds another engine's stored rows (the GPU tests) calls it over those.
OracleOutput attend_keys(const Config& config, int layer, int head, const double* q_rot, int64_t query_position,
                         const std::vector<KeyView>& keys);

class Oracle {
 public:
  explicit Oracle(Config config);

  void reset(int sequence, int64_t start_position);
  /// Spec 1.1 §5.1.1: forgets the last n tokens of a sequence in every layer (the caller decides
  /// that the spec honours it); later tokens attend as if they had never been appended.
  void rollback(int sequence, int64_t n);

  /// For large cases: compute outputs only for the (layer, sequence, token index) the filter
  /// accepts (the others get an empty OracleOutput::o). Keys are always kept.
  void set_query_filter(std::function<bool(int layer, int sequence, int64_t index)> filter) { filter_ = std::move(filter); }

  /// For long cases: after each append, release the stored rows of tokens no later query can see
  /// (index j with S <= j < H - W - Q, where H is the most tokens the (layer, sequence) has held since
  /// its reset and Q its rollback reserve: a rollback the spec honours never goes below H - Q), so
  /// that the oracle holds about what a spec ring holds, S + W + Q tokens per (layer, sequence), and
  /// no more. Their positions stay. A query that would see a released token throws std::logic_error
  /// (the oracle's own error, never an engine's). Off by default: snapshots compare against every row.
  void release_unreachable(bool on) { release_ = on; }

  /// Appends n tokens (tensors laid out as in ringkv::SequenceStep) and returns
  /// the expected outputs, [layers][n][Hq].
  std::vector<OracleOutput> append(int sequence, int64_t n, const float* q, const float* k, const float* v);

  /// Tokens of (layer, sequence) since its last reset.
  const std::vector<OracleToken>& history(int layer, int sequence) const {
    return history_[static_cast<size_t>(layer) * static_cast<size_t>(config_.batch) + static_cast<size_t>(sequence)];
  }
  int64_t start_position(int sequence) const { return p0_[static_cast<size_t>(sequence)]; }
  const Config& config() const { return config_; }

 private:
  OracleOutput attend(int layer, int sequence, int64_t i, const double* q_rot, int head) const;
  std::vector<OracleToken>& history_mut(int layer, int sequence) {
    return history_[static_cast<size_t>(layer) * static_cast<size_t>(config_.batch) + static_cast<size_t>(sequence)];
  }

  void release_old_rows(int layer, int sequence);

  Config config_;
  std::function<bool(int, int, int64_t)> filter_;
  bool release_ = false;
  std::vector<int64_t> p0_;
  std::vector<std::vector<OracleToken>> history_;  // [layer][sequence]
  std::vector<int64_t> high_water_;                // [layer][sequence]: most tokens held since the reset
  std::vector<int64_t> released_to_;               // [layer][sequence]: rows [S, released_to_) released
};

}  // namespace ringkv::conformance
