// ringkv: precision profiles. Every engine declares how it computes; the
// tolerance bound (conformance/support/tolerance.hpp) takes the profile as input.
#pragma once

#include <optional>
#include <string>

namespace ringkv {

/// A floating-point (or integer) format an engine computes or stores in.
enum class Precision { f64, f32, tf32, f16, bf16, fp8_e4m3, fp8_e5m2, int8 };

/// Unit roundoff u of a format: half an ulp at 1 (2^-53 for f64, 2^-24 for
/// f32, 2^-11 for f16 and tf32, 2^-8 for bf16, 2^-4 for e4m3, 2^-3 for e5m2).
/// int8 has no relative roundoff; it returns 0 and is handled by the int8 terms.
double unit_roundoff(Precision p);

const char* to_string(Precision p);
/// Parses a name produced by to_string; throws ConfigError otherwise.
Precision parse_precision(const std::string& name);

/// How q is quantised for the dot product, beyond rounding it to q_dot.
/// q8_0: blocks of 32 elements (of the rotated q, per head), scale d = max|q|/127 stored as
/// f16, codes round(q/d): what ggml does to q when K is q8_0 (its vec_dot_type).
enum class QueryQuant { none, q8_0 };

const char* to_string(QueryQuant q);

/// How an engine computes sliding-window attention.
///
/// The two accumulators: `qk_accumulator` is the precision of everything on the score side:
/// the sum over D in q·k, the scale, the softcap, the max subtraction, exp, and the softmax
/// denominator Σ exp(s - m) and the division by it (real kernels keep the running sum with the
/// scores, in f32, even when they accumulate P·V coarser). `pv_accumulator` is the precision
/// of the running sum Σ_j p_j v_j (ggml's CPU flash attention keeps it in f16 for f16 V).
struct PrecisionProfile {
  Precision q_dot = Precision::f32;           ///< precision of q when it enters q·k
  QueryQuant q_quant = QueryQuant::none;      ///< q quantised for q·k (after rounding to q_dot)
  std::optional<Precision> k_storage;         ///< what K is stored as; nullopt: as the config says
  std::optional<Precision> v_storage;         ///< what V is stored as; nullopt: as the config says
  Precision qk_accumulator = Precision::f32;  ///< q·k, the score arithmetic and the softmax denominator
  Precision pv_accumulator = Precision::f32;  ///< the P·V sum
  Precision p_before_pv = Precision::f32;     ///< precision P is rounded to before P·V
  Precision output = Precision::f32;          ///< precision the output is rounded to
  Precision rope_angle = Precision::f64;      ///< precision of position·inv_freq, cos and sin

  bool operator==(const PrecisionProfile&) const = default;
};

/// "as_configured" for nullopt, else the precision's name.
std::string storage_to_string(const std::optional<Precision>& storage);

std::string to_string(const PrecisionProfile& p);

}  // namespace ringkv
