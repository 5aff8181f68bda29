// ringkv: precision profiles. Every engine declares how it computes; the
// tolerance bound (conformance/support/tolerance.hpp) takes the profile as input.
#pragma once

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

/// How an engine computes sliding-window attention.
struct PrecisionProfile {
  Precision q_dot = Precision::f32;        ///< precision of q when it enters q·k
  Precision k_storage = Precision::f32;    ///< what K is stored as (= the config's k dtype if exact)
  Precision v_storage = Precision::f32;    ///< what V is stored as (= the config's v dtype if exact)
  Precision accumulator = Precision::f32;  ///< accumulation of q·k, softmax sums and P·V
  Precision p_before_pv = Precision::f32;  ///< precision P is rounded to before P·V
  Precision output = Precision::f32;       ///< precision the output is rounded to
  Precision rope_angle = Precision::f64;   ///< precision of position·inv_freq, cos and sin

  bool operator==(const PrecisionProfile&) const = default;
};

std::string to_string(const PrecisionProfile& p);

}  // namespace ringkv
