// ringkv conformance: how one stored row of K or V (one token, one kv head) is judged against the
// spec's (spec §11.1; docs/tolerances.md §2c). One rule for every exact cache check: the properties'
// snapshot check (support/runner.cpp), the goldens' snapshot check and an outputs file's stored cache
// (golden/compare.cpp).
//
// Exact: same bits; an INT8 zero of either sign (spec §10.4); inside the INT8 tie window, one code
// step either way. Relaxed, where the engine's declaration or the comparison allows the stored bits
// to differ (angles coarser than f64 on a RoPE layer's K; a declared fixed storage other than the
// config's dtype; a golden's K with RoPE, whose f64 sin/cos may differ across C libraries in the
// last bit): the engine stores e(x'), the spec c(x), with |x' - x| <= slack, so
//   |e(x') - c(x)| <= slack + err_e + err_c,
// err the rounding error of each side's storage (floats: half the spacing at the stored value, on
// the side of the other; INT8: half the row's or group's scale); INT8 scales within their own
// rounding plus slack/127 (the amax moves by at most the slack), codes within
// 1 + ceil((slack + 127.5·|sg - sw|) / sg) of the spec's (sg, sw: the engine's and the spec's step).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ringkv/config.hpp"
#include "ringkv/precision.hpp"

namespace ringkv::conformance {

/// One stored row (one token, one kv head) as an engine or the spec holds it.
struct StoredRowView {
  const float* value = nullptr;   ///< [D] decoded stored values
  const int8_t* codes = nullptr;  ///< [D] INT8 codes; nullptr: not given (the values are still judged)
  const float* scales = nullptr;  ///< [scales_per_row] INT8 scales; nullptr: not given
  const uint8_t* tie = nullptr;   ///< spec side only, INT8: [D] nonzero inside the tie window; nullptr: none
};

/// How a row is judged.
struct StoredRule {
  KvFormat format;                    ///< the config's format: what the spec stored
  std::optional<Precision> storage;   ///< the engine's declared float storage, where it differs from format's
  bool relaxed = false;               ///< within each side's rounding (plus slack) instead of exact
  const double* slack = nullptr;      ///< [D] how far the engine's x' may lie from the spec's x
                                      ///< (support/rotation_bound.hpp); nullptr: 0
  std::string why;                    ///< what relaxes it, for messages ("the declared rope_angle", ...)
};

/// The first element that breaks the rule.
struct StoredMismatch {
  std::string what;  ///< "K scale", "K code", "stored K" (V likewise)
  int dim = -1;      ///< the element (a dim, or a scale group)
  double expected = 0, got = 0, bound = 0;
  std::string text;  ///< "K[head h][dim d] stores g, spec says w (format), ..."
};

/// The rule for `format` under an engine's declared storage (its profile's k_storage or v_storage):
/// where that names a float format other than format's dtype, judged in it (relaxed, slack 0); else
/// exact. INT8 formats stay exact (a declared storage does not change their codes). Callers relax
/// further (a slack, a golden's K with RoPE) by setting the fields.
StoredRule stored_rule(const KvFormat& format, const std::optional<Precision>& declared);

/// How far the value x that rounded to `stored` in `p` (fp8: `scale`·fp8(x/scale)) may lie from it on
/// the side of `toward`: half the spacing between `stored` and its neighbour there (at least half the
/// smallest step). 0 for f64.
double storage_rounding(Precision p, double scale, double stored, double toward);

/// Compares one row of `D` elements of kv head `head`; `checked` counts every scale, code and value
/// compared. nullopt: the row obeys the rule.
std::optional<StoredMismatch> compare_stored_row(const StoredRule& rule, int D, int head, bool is_k,
                                                 const StoredRowView& want, const StoredRowView& got, int64_t* checked);

}  // namespace ringkv::conformance
