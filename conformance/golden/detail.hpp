// ringkv golden: helpers shared by the files of the golden library (not installed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "golden/golden.hpp"
#include "ringkv/quant.hpp"
#include "support/case.hpp"
#include "support/show.hpp"

namespace ringkv::golden::detail {

using conformance::show_number;

constexpr int64_t k2p20 = int64_t{1} << 20;
constexpr int64_t k2p24 = int64_t{1} << 24;
constexpr int64_t k2p30 = int64_t{1} << 30;

template <typename T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

/// Rows and chunks of a case: they follow from the schedule alone (defined in record.cpp). Every
/// appended token is a row; a step the spec refuses (`refused`, from rollback_schedule) appends nothing.
void layout_rows(const conformance::Case& c, const std::vector<uint8_t>& refused, std::vector<GoldenRow>* rows,
                 std::vector<GoldenChunk>* chunks);

/// Golden format 2 (spec 1.1): validates the rollback events of a case's schedule and returns, per
/// step, 1 where the spec refuses it (§5.1.2), else 0 (all 0 for a case without rollbacks). Throws
/// ringkv::Error naming the field (case.steps[i].rollbacks[j].n_tokens, .stream, .sequence) where a
/// rollback takes back more than its sequence holds, reuses a stream, names a sequence outside the
/// batch or twice, meets a reset of its sequence, or where a refused step also resets or appends
/// (format 2 records a refused step with its rollbacks only). Defined in record.cpp.
std::vector<uint8_t> rollback_schedule(const conformance::Case& c);

/// Spec 1.2 (golden format §3.1): per row, -1 for an original row, else the first earlier row with the
/// same position and the same q, k and v in every layer (the same data stream, through the case's
/// shared_prefixes, and index): a shared prefix, or a stream a reset gives another sequence again at the
/// same start position. Defined in repeats.cpp.
std::vector<int32_t> repeat_rows(const conformance::Case& c, const std::vector<GoldenRow>& rows);

/// The __metadata__ 'repeats' value of a per-row repeat_of: a JSON array of runs [row, of, n] (rows
/// row .. row + n - 1 repeat rows of .. of + n - 1), "" when no row repeats. Defined in repeats.cpp.
std::string repeats_to_json(const std::vector<int32_t>& repeat_of);

/// Parses a __metadata__ 'repeats' value against g (rows and inputs read) and returns the per-row
/// repeat_of. Every run lies in [0, R), ascending, without overlap; each repeat names an earlier row
/// that is not itself a repeat, with the same position and bitwise-equal q, k and v in every layer.
/// Throws ringkv::Error naming the run, the rows and the tensor that differs, blaming the file (`src`).
std::vector<int32_t> read_repeats(const GoldenCase& g, const std::string& text, const std::string& src);

/// The one-layer rollback schedule of one sequence (rollback_d128_bf16, rollback_one_layer_*, and the
/// covering cases with rollback): 8 tokens, then rollbacks of 2 (honoured), 3 (refused: a key a later
/// query sees is overwritten in a ring of W 4 + reserve 2), 1 and 3 beside appends of 1, 2 and 1, each
/// re-appended token a fresh stream (10 ...).
inline std::vector<conformance::StepPlan> one_layer_rollback_steps() {
  const auto step = [](int64_t n, std::vector<conformance::RollbackPlan> rb = {}) {
    return conformance::StepPlan{{}, {n}, std::move(rb)};
  };
  using conformance::RollbackPlan;
  return {step(8), step(1, {RollbackPlan{0, 2, 10}}), step(0, {RollbackPlan{0, 3, 11}}),
          step(2, {RollbackPlan{0, 1, 12}}), step(2), step(1, {RollbackPlan{0, 3, 13}})};
}

/// The golden format version a case is written in: 2 (spec 1.1) with rollback events or a nonzero
/// rollback reserve in any layer, else 1 (byte-identical to the files written before format 2).
inline int format_version_of(const conformance::Case& c) {
  bool reserve = false;
  for (const LayerConfig& l : c.config.layers) reserve = reserve || l.rollback_reserve > 0;
  return conformance::ScheduleTracker::has_rollbacks(c) || reserve ? 2 : 1;
}

/// The dimensions of a case's tensors with R rows (docs/golden-format.md §3).
struct Dims {
  int64_t L, R, Hq, Hkv, D, T, B;
  int64_t k_spr, v_spr;
};

inline Dims dims_of(const conformance::Case& c, int64_t R) {
  const Config& cfg = c.config;
  return Dims{static_cast<int64_t>(cfg.layers.size()), R, cfg.num_q_heads, cfg.num_kv_heads, cfg.head_dim,
              static_cast<int64_t>(c.steps.size()), cfg.batch, scales_per_row(cfg.k_format, cfg.head_dim),
              scales_per_row(cfg.v_format, cfg.head_dim)};
}

inline size_t count(std::initializer_list<int64_t> dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

// Tokens per stream between resets: the max_tokens a schedule needs. Rollbacks (spec 1.1) count as
// honoured (a refused one would leave more tokens: cases with refusals set max_tokens themselves).
inline int64_t needed_max_tokens(const conformance::Case& c) {
  std::vector<int64_t> seen(static_cast<size_t>(c.config.batch), 0);
  int64_t most = 1;
  for (const conformance::StepPlan& st : c.steps) {
    for (const conformance::RollbackPlan& r : st.rollbacks) {
      int64_t& n = seen[static_cast<size_t>(r.sequence)];
      n = std::max<int64_t>(0, n - r.n_tokens);
    }
    for (const conformance::ResetPlan& r : st.resets) seen[static_cast<size_t>(r.sequence)] = 0;
    for (size_t s = 0; s < st.tokens.size(); ++s) {
      seen[s] += st.tokens[s];
      most = std::max(most, seen[s]);
    }
  }
  return most;
}

}  // namespace ringkv::golden::detail
