// ringkv conformance: the per-output error bound. The ONE function every
// comparison of an engine's output against the oracle uses. Derivation and
// the meaning of every term: docs/tolerances.md.
#pragma once

#include <cstdint>
#include <optional>

#include "ringkv/config.hpp"
#include "ringkv/precision.hpp"

namespace ringkv::conformance {

/// Per (layer, token, q head): aggregates over the visible keys j, from the oracle.
struct ScoreStats {
  int64_t n_keys = 0;          ///< visible keys, plus 1 for a learned sink logit
  double max_abs_dot = 0;      ///< max_j sum_d |q_d| |k_jd|   (q rotated, unrounded; k as stored)
  double max_abs_score = 0;    ///< max_j |s_j| (after softcap; includes the sink logit)
  double max_tie_dot = 0;      ///< max_j sum_d |q_d| tie_k_jd (tie_k = one code step inside the INT8 tie window, else 0)
  double max_qk_norm = 0;      ///< ||q|| * max_j ||k_j||
  double max_angle = 0;        ///< largest |scaled position| of the query and its keys (0 without RoPE)
};

/// Per (layer, token, q head, dim d).
struct DimStats {
  double spread = 0;    ///< sum_j p_j |v_jd - o_d|  (+ p_sink |o_d| for a learned sink logit)
  double abs_mass = 0;  ///< sum_j p_j |v_jd|
  double tie_mass = 0;  ///< sum_j p_j tie_v_jd
  double abs_out = 0;   ///< |o_d|
  double max_abs_v = 0; ///< max_j |v_jd| (for the underflow term)
};

/// What the bound needs to know about the config and the engine.
struct BoundContext {
  double tau = 1;                 ///< softmax scale
  int head_dim = 1;
  std::optional<double> softcap;
  PrecisionProfile profile;       ///< declared by the engine
  DType k_dtype = DType::f32, v_dtype = DType::f32;  ///< what the config asks to store
  Int8Scheme k_int8_scheme = Int8Scheme::per_head;   ///< for INT8 K
  bool rope = false;
};

BoundContext make_bound_context(const Config& config, int layer, const PrecisionProfile& profile);

/// Largest |engine - oracle| allowed for one output element.
double output_bound(const BoundContext& ctx, const ScoreStats& score, const DimStats& dim);

/// Half the smallest subnormal of a format (2^-150 for f32): the absolute error of an underflowed result.
double underflow_unit(Precision p);

/// Bound on |sum_d (q^_d - q_d) k_jd| for q quantised to q8_0 blocks (QueryQuant::q8_0); the score
/// term is tau times it (docs/tolerances.md §2a).
double q8_0_query_error(const ScoreStats& score);

/// Bound on sum_d |q_d| |k^_d - k_d| when K is rotated with angles coarser than f64 (rope_angle) and
/// stored in a lossy format: an element may round to the neighbour of the spec's (docs/tolerances.md §2b).
double k_neighbour_error(const BoundContext& ctx, const ScoreStats& score);

/// The logit error bound Delta of docs/tolerances.md (exposed for tests and reports).
double score_error_bound(const BoundContext& ctx, const ScoreStats& score);

}  // namespace ringkv::conformance
