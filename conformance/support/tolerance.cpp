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
double storage_term(DType config_dtype, Precision declared) {
  double u = declared == precision_of(config_dtype) ? 0.0 : unit_roundoff(declared);
  if (config_dtype == DType::int8) u += 0x1p-22;  // a scale a few ulp away from the spec's
  return u;
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
  ctx.rope = c.layers[static_cast<size_t>(layer)].rope.style != RopeStyle::none;
  return ctx;
}

double score_error_bound(const BoundContext& ctx, const ScoreStats& s) {
  const PrecisionProfile& p = ctx.profile;
  const double u_acc = unit_roundoff(p.accumulator);
  const double u_q = unit_roundoff(p.q_dot);
  const double u_k = storage_term(ctx.k_dtype, p.k_storage);
  const double D = ctx.head_dim;
  // q·k: q rounded to its dot precision, K beyond its spec storage, D-term sum.
  double delta = ctx.tau * (u_q + u_k + kLambda * std::sqrt(D + 2.0) * u_acc) * s.max_abs_dot;
  // An INT8 key element inside the tie window may be one code step away.
  delta += ctx.tau * s.max_tie_dot;
  // Scale multiply, max subtraction and exp: a few roundings relative to |s|.
  delta += u_acc * (2.0 * s.max_abs_score + 4.0);
  if (ctx.softcap) delta += 4.0 * u_acc * *ctx.softcap;
  // RoPE angle p * inv_freq (and cos, sin, rotation) in the declared precision.
  if (ctx.rope) {
    delta += ctx.tau * 2.0 * unit_roundoff(p.rope_angle) * (s.max_angle + 8.0) * s.max_qk_norm;
  }
  return delta;
}

double output_bound(const BoundContext& ctx, const ScoreStats& s, const DimStats& d) {
  const PrecisionProfile& p = ctx.profile;
  const double u_acc = unit_roundoff(p.accumulator);
  const double u_p = unit_roundoff(p.p_before_pv);
  const double u_v = storage_term(ctx.v_dtype, p.v_storage);
  const double u_out = unit_roundoff(p.output);
  const double sqrt_n = std::sqrt(static_cast<double>(s.n_keys > 0 ? s.n_keys : 1));
  const double delta = score_error_bound(ctx, s);
  const double grow = std::expm1(2.0 * delta);  // |p^_j / p_j - 1| <= e^{2 delta} - 1; may be +inf
  const double e2d = grow + 1.0;
  double b = scaled(grow, d.spread);                                       // softmax weights moved
  b += scaled(e2d, d.tie_mass + u_v * d.abs_mass);                         // V beyond its spec storage
  b += scaled(e2d, ((kLambda * sqrt_n + 1.0) * u_acc + u_p) * d.abs_mass); // P rounding, P·V sum
  b += ((kLambda * sqrt_n + 2.0) * u_acc + u_out) * d.abs_out;             // denominator, output rounding
  // Gradual underflow: each weight (and each product, and the output) may lose up to
  // half a subnormal ulp absolutely, which no relative term covers.
  const double tiny = std::max(underflow_unit(p.accumulator), underflow_unit(p.p_before_pv));
  b += tiny * (static_cast<double>(s.n_keys) + 2.0) * (1.0 + d.max_abs_v) + underflow_unit(p.output);
  // Cap: any output that weighs the visible values with weights >= 0 summing to at most 1 lies
  // within [-max|v|, max|v|], so it is at most max|v| + |o| from the oracle's. A bound beyond
  // twice that says nothing more, and capping it keeps it finite (f32 RoPE angles at positions
  // near 2^31 make e^{2 delta} overflow).
  const double cap = kSafety * (d.max_abs_v + d.abs_out) + underflow_unit(p.output);
  return std::min(kSafety * b, cap);
}

}  // namespace ringkv::conformance
