#include "support/tolerance.hpp"

#include "ringkv/quant.hpp"

#include <algorithm>
#include <cmath>

namespace ringkv::conformance {
namespace {

constexpr double kLambda = 4.0;  // probabilistic rounding-error multiplier (docs/tolerances.md §2)
constexpr double kSafety = 2.0;  // overall factor for second-order terms


// a·b, with 0 when b is 0 even if a is infinite (a bound term that has nothing to scale).
double scaled(double a, double b) { return b == 0.0 ? 0.0 : a * b; }

// Relative error of stored values beyond what the spec defines as exact.
double storage_term(DType config_dtype, const std::optional<Precision>& declared) {
  double u = !declared || *declared == precision_of(config_dtype) ? 0.0 : unit_roundoff(*declared);
  if (config_dtype == DType::int8) u += 0x1p-22;  // a scale a few ulp away from the spec's
  return u;
}

// The systematic error of summing n terms in unit roundoff u, relative to the sum of their
// magnitudes: min(1, n·u)², the terms within an ulp of the running sum (a fraction min(1, n·u) of
// them if their sizes spread evenly), each off by at most u, and never more than the worst case
// min(1, n·u) (docs/tolerances.md §3, "The P·V accumulator").
double stagnation(double n, double u) {
  const double r = std::min(1.0, n * u);
  return r * r;
}

}  // namespace

double underflow_unit(Precision p) {
  switch (p) {
    case Precision::f64: return std::ldexp(1.0, -1075);
    case Precision::f32: return std::ldexp(1.0, -150);
    case Precision::tf32: return std::ldexp(1.0, -150);  // tf32 keeps f32's exponent range
    case Precision::f16: return std::ldexp(1.0, -25);
    case Precision::bf16: return std::ldexp(1.0, -134);
    case Precision::fp8_e4m3: return std::ldexp(1.0, -10);
    case Precision::fp8_e5m2: return std::ldexp(1.0, -17);
    case Precision::int8: return 0.0;
  }
  return 0.0;
}

BoundContext make_bound_context(const Config& c, int layer, const PrecisionProfile& profile) {
  BoundContext ctx;
  ctx.tau = softmax_scale(c);
  ctx.head_dim = c.head_dim;
  ctx.softcap = c.softcap;
  ctx.profile = profile;
  ctx.k_dtype = c.k_format.dtype;
  ctx.v_dtype = c.v_format.dtype;
  ctx.k_int8_scheme = c.k_format.int8_scheme;
  ctx.rope = c.layers[static_cast<size_t>(layer)].rope.style != RopeStyle::none;
  return ctx;
}

double q8_0_query_error(const ScoreStats& s) {
  // q^_d - q_d = r_d + c_d (f16(d) - d): r_d the code rounding, |r_d| <= d (1/2 + 127·2^-23) <=
  // max|q| (1/254 + 2^-23) (127 f32 ulps of x·(1/d) can move a code across a tie), and the f16 scale,
  // relative 2^-11 on each |c_d d| <= |q_d| + |r_d| (docs/tolerances.md §2a).
  constexpr double kCode = 1.0 / 254.0 + 0x1p-23;
  const double rounding = kLambda * kCode * s.max_qk_norm;  // sum_d r_d k_d, independent r_d (as §2's sums)
  const double scale = 0x1p-11 * (s.max_abs_dot + std::sqrt(32.0) * kCode * s.max_qk_norm);
  return rounding + scale;
}

double k_neighbour_error(const BoundContext& ctx, const ScoreStats& s) {
  if (!ctx.rope || ctx.profile.rope_angle == Precision::f64) return 0.0;
  switch (ctx.k_dtype) {
    case DType::f32: return 0.0;  // K is the rotated f32 value itself: the RoPE term covers it
    case DType::f16:
    case DType::bf16:
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
      // The neighbour is one ulp away: at most 2u|k_d| (normal range; docs/tolerances.md §2b).
      return 2.0 * unit_roundoff(precision_of(ctx.k_dtype)) * s.max_abs_dot;
    case DType::int8:
      // One code step, the group's scale <= f16(max|k|/127) <= ||k||inf/127 (1 + 2^-11), so
      // sum_d |q_d| step <= ||q||_1 ||k||inf / 127 <= sqrt(D) ||q|| ||k|| / 127. A static scale has no
      // such relation to k: not covered (docs/tolerances.md §9).
      if (ctx.k_int8_scheme == Int8Scheme::static_tensor) return 0.0;
      return std::sqrt(static_cast<double>(ctx.head_dim)) / 127.0 * (1.0 + std::ldexp(1.0, -11)) * s.max_qk_norm;
  }
  return 0.0;
}

double score_error_bound(const BoundContext& ctx, const ScoreStats& s) {
  const PrecisionProfile& p = ctx.profile;
  const double u_qk = unit_roundoff(p.qk_accumulator);
  const double u_q = unit_roundoff(p.q_dot);
  const double u_k = storage_term(ctx.k_dtype, p.k_storage);
  const double D = ctx.head_dim;
  // q·k: q rounded to its dot precision, K beyond its spec storage, D-term sum.
  double delta = ctx.tau * (u_q + u_k + kLambda * std::sqrt(D + 2.0) * u_qk) * s.max_abs_dot;
  // An INT8 key element inside the tie window may be one code step away.
  delta += ctx.tau * s.max_tie_dot;
  // q quantised to q8_0 blocks for the dot product (ggml with q8_0 K).
  if (p.q_quant == QueryQuant::q8_0) delta += ctx.tau * q8_0_query_error(s);
  // Scale multiply, max subtraction and exp: a few roundings relative to |s|.
  delta += u_qk * (2.0 * s.max_abs_score + 4.0);
  if (ctx.softcap) delta += 4.0 * u_qk * *ctx.softcap;
  // RoPE angle p * inv_freq (and cos, sin, rotation) in the declared precision.
  // Per vector the angle is off by u·θ from the position converted, u·θ from inv_freq's rounding and
  // u·θ from the product (docs/tolerances.md §2b).
  if (ctx.rope) {
    delta += ctx.tau * 2.0 * unit_roundoff(p.rope_angle) * (3.0 * s.max_angle + 8.0) * s.max_qk_norm;
    // K so rotated and then stored in a lossy format may round to the neighbour of the spec's value.
    delta += ctx.tau * k_neighbour_error(ctx, s);
  }
  return delta;
}

double output_bound(const BoundContext& ctx, const ScoreStats& s, const DimStats& d) {
  const PrecisionProfile& p = ctx.profile;
  const double u_qk = unit_roundoff(p.qk_accumulator);
  const double u_pv = unit_roundoff(p.pv_accumulator);
  const double u_p = unit_roundoff(p.p_before_pv);
  const double u_v = storage_term(ctx.v_dtype, p.v_storage);
  const double u_out = unit_roundoff(p.output);
  const double n = static_cast<double>(s.n_keys > 0 ? s.n_keys : 1);
  const double sqrt_n = std::sqrt(n);
  const double delta = score_error_bound(ctx, s);
  const double grow = std::expm1(2.0 * delta);  // |p^_j / p_j - 1| <= e^{2 delta} - 1; may be +inf
  const double e2d = grow + 1.0;
  double b = scaled(grow, d.spread);                                       // softmax weights moved
  b += scaled(e2d, d.tie_mass + u_v * d.abs_mass);                         // V beyond its spec storage
  // The sums' roundings: a random walk (λ√n) while the terms span many ulps of the running sum, and
  // stagnation, terms lost or rounded alike once they are within an ulp of it (docs/tolerances.md §3).
  b += scaled(e2d, ((kLambda * sqrt_n + 1.0) * u_pv + stagnation(n, u_pv) + u_p) * d.abs_mass);  // P·V sum
  b += ((kLambda * sqrt_n + 2.0) * u_qk + stagnation(n, u_qk) + u_out) * d.abs_out;  // denominator, output
  // Gradual underflow: each weight (and each product, and the output) may lose up to
  // half a subnormal ulp absolutely, which no relative term covers.
  const double tiny =
      std::max({underflow_unit(p.qk_accumulator), underflow_unit(p.pv_accumulator), underflow_unit(p.p_before_pv)});
  b += tiny * (static_cast<double>(s.n_keys) + 2.0) * (1.0 + d.max_abs_v) + underflow_unit(p.output);
  // Cap: any output that weighs the visible values with weights >= 0 summing to at most 1 lies
  // within [-max|v|, max|v|], so it is at most max|v| + |o| from the oracle's. A bound beyond
  // twice that says nothing more, and capping it keeps it finite (f32 RoPE angles at positions
  // near 2^31 make e^{2 delta} overflow).
  const double cap = kSafety * (d.max_abs_v + d.abs_out) + underflow_unit(p.output);
  return std::min(kSafety * b, cap);
}

}  // namespace ringkv::conformance
