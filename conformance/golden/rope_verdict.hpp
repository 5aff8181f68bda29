// ringkv golden: RoPE checked apart from attention (docs/golden-format.md §7).
//
// An engine that hands back its rotated q and k (outputs-file tensors "q_rot", "k_rot") gets two
// answers instead of one: (a) its rotation against the float64 rotation of spec §8, with a bound of
// its own, and (b) its attention against the oracle recomputed from its own rotated values, with the
// output bound's RoPE term off, so window, sink, ring and reset structure is judged tightly at every
// position whatever the angle precision. Without them the output bound carries the RoPE term, and
// rope_dominance() says where that term swamped the rest.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "golden/golden.hpp"
#include "support/oracle.hpp"
#include "support/rotation_bound.hpp"

namespace ringkv::golden {

// The rotation bound lives in support/rotation_bound.hpp (the snapshot check uses it too).
using conformance::rotation_error_bound;
using conformance::rotation_slack;

/// (a) The engine's rotated q [L][R][Hq][D] and k [L][R][Hkv][D] against the f64 rotation of spec §8
/// of the case's raw q and k: "conformant" (within rotation_error_bound at u = 2^-53), "within the
/// declared rope_angle only" (within it at the declared precision), or failed. Fills the worst
/// angle-equivalent error, where it occurs, and `line`.
RopeVerdict check_rotation(const GoldenCase& g, const std::vector<float>& q_rot, const std::vector<float>& k_rot,
                           Precision declared_angle);

/// (b) The oracle recomputed from an engine's own rotated values: its k_rot stored as spec §10 says
/// (conformance::oracle_store), the case's v likewise, and conformance::attend_keys over the keys
/// spec §2 makes visible to each row.
class RotatedOracle {
 public:
  RotatedOracle(const GoldenCase& g, const std::vector<float>& q_rot, const std::vector<float>& k_rot);
  /// Expected output and bound inputs of (layer, row, q head), from the engine's q_rot.
  conformance::OracleOutput attend(int layer, int64_t row, int head) const;
  /// What the spec stores for K given the engine's k_rot, laid out like GoldenCase::k_stored.
  const GoldenStored& k_stored() const { return k_; }

 private:
  const GoldenCase& g_;
  const std::vector<float>& q_rot_;
  GoldenStored k_, v_;
  std::vector<float> k_tie_, v_tie_;       ///< one code step per INT8 element in the tie window
  /// The rows of a row's sequence since its reset, by token index, itself last (the latest row of each
  /// index: rollbacks re-append). Computed for one row at a time (a scale case has too many rows to keep
  /// every row's history) and kept for the next call.
  const std::vector<int64_t>& history(int64_t row) const;
  mutable std::vector<int64_t> hist_;
  mutable int64_t hist_row_ = -1;
};

/// (b) on the (layer, row)s `judged` keeps (all when empty): every q head's output in `o.out` against
/// `oracle`, the bound's RoPE term off; the counts go to v (tight_*), the first failure to `tight`.
/// Defined in compare.cpp.
void check_attention_tightly(const GoldenCase& g, const GoldenOutputs& o, const PrecisionProfile& profile,
                             const RotatedOracle& oracle, const std::function<bool(int layer, int64_t row)>& judged,
                             RopeVerdict* v, GoldenOutcome* tight);

/// Without rotated values: counts the (layer, row, q head) whose score bound's RoPE term exceeds all
/// its other terms under `profile` (kind not_checked; zero where no layer has RoPE).
RopeVerdict rope_dominance(const GoldenCase& g, const PrecisionProfile& profile);

/// The verdict for an engine that took q and k rotated by ringkv (ABI wants_rotated_qk).
RopeVerdict rotated_by_ringkv_verdict();

/// Sets v->line from the verdict's fields (and, for a checked rotation, the tight attention counts).
void describe_rope_verdict(RopeVerdict* v, Precision declared_angle);

}  // namespace ringkv::golden
