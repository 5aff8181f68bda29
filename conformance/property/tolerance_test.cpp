// The tolerance bound on its own (docs/tolerances.md): finite and non-negative everywhere.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <vector>

#include "mutants/mutants.hpp"
#include "ringkv/quant.hpp"
#include "support/rng.hpp"
#include "support/tolerance.hpp"

namespace ringkv::conformance {
namespace {

// Found by an outside engine declaring rope_angle = f32 at positions near 2^31: the exponential
// term overflowed and was multiplied by a zero spread, so the bound was NaN and even the
// oracle's own output failed ("|diff| 0 > bound -nan").
TEST(ToleranceBound, FiniteWhenTheExponentialOverflows) {
  Config c;
  c.layers = {LayerConfig{8, 0, RopeConfig{}}};
  c.head_dim = 16;
  PrecisionProfile p;
  p.rope_angle = Precision::f32;
  const BoundContext ctx = make_bound_context(c, 0, p);
  ScoreStats s;
  s.n_keys = 8;
  s.max_abs_dot = 4;
  s.max_abs_score = 1;
  s.max_qk_norm = 64;
  s.max_angle = std::ldexp(1.0, 31) - 1;
  ASSERT_TRUE(std::isinf(std::expm1(2.0 * score_error_bound(ctx, s))));
  DimStats d;  // every visible value equal: no spread, no ties
  d.abs_mass = 0.5;
  d.abs_out = 0.5;
  d.max_abs_v = 0.5;
  const double b = output_bound(ctx, s, d);
  EXPECT_TRUE(std::isfinite(b)) << b;
  EXPECT_GE(b, 0.0);
  EXPECT_LE(b, 2.0 * (d.max_abs_v + d.abs_out) + 1e-30);  // the cap
  EXPECT_GE(b, d.max_abs_v + d.abs_out);                  // and vacuous, as it should be there
}

TEST(ToleranceBound, UnchangedBelowTheCap) {
  Config c;
  c.layers = {LayerConfig{8, 0, RopeConfig{}}};
  c.head_dim = 16;
  const BoundContext ctx = make_bound_context(c, 0, PrecisionProfile{});
  ScoreStats s;
  s.n_keys = 8;
  s.max_abs_dot = 4;
  s.max_abs_score = 1;
  s.max_qk_norm = 4;
  s.max_angle = 100;
  DimStats d;
  d.spread = 0.3;
  d.abs_mass = 0.5;
  d.abs_out = 0.2;
  d.max_abs_v = 1.0;
  const double b = output_bound(ctx, s, d);
  EXPECT_GT(b, 0.0);
  EXPECT_LT(b, 1e-5);  // an f32 bound on unit data: far below the cap of 2.4
}

Config one_layer(int D, bool rope) {
  Config c;
  c.layers = {LayerConfig{8, 0, RopeConfig{rope ? RopeStyle::neox : RopeStyle::none}}};
  c.head_dim = D;
  return c;
}

ScoreStats unit_stats() {
  ScoreStats s;
  s.n_keys = 64;
  s.max_abs_dot = 4;
  s.max_abs_score = 1;
  s.max_qk_norm = 8;
  s.max_angle = 100;
  return s;
}

DimStats unit_dim() {
  DimStats d;
  d.spread = 0.3;
  d.abs_mass = 0.5;
  d.abs_out = 0.2;
  d.max_abs_v = 1.0;
  return d;
}

// Profile 2: the P·V accumulator widens the P·V term only, the q·k accumulator the score error.
TEST(ToleranceBound, SplitAccumulatorsWidenTheirOwnTerms) {
  const Config c = one_layer(64, false);
  const ScoreStats s = unit_stats();
  const DimStats d = unit_dim();
  PrecisionProfile pv;
  pv.pv_accumulator = Precision::f16;
  const BoundContext base = make_bound_context(c, 0, PrecisionProfile{}), with_pv = make_bound_context(c, 0, pv);
  EXPECT_EQ(score_error_bound(with_pv, s), score_error_bound(base, s));
  // docs/tolerances.md §3: 2·e^{2Δ}·((λ√n + 1)·(u_pv - u_f32) + (n·u_pv)² - (n·u_f32)²)·M_d more
  const double lambda = 4, sqrt_n = 8, n = 64;
  const double e2d = std::exp(2 * score_error_bound(base, s));
  const double stagnation = (n * 0x1p-11) * (n * 0x1p-11) - (n * 0x1p-24) * (n * 0x1p-24);
  EXPECT_NEAR(output_bound(with_pv, s, d) - output_bound(base, s, d),
              2 * e2d * ((lambda * sqrt_n + 1) * (0x1p-11 - 0x1p-24) + stagnation) * d.abs_mass +
                  2 * (0x1p-25 - 0x1p-150) * 66 * 2,
              1e-12);
  PrecisionProfile qk;
  qk.qk_accumulator = Precision::f16;
  EXPECT_GT(score_error_bound(make_bound_context(c, 0, qk), s), 100 * score_error_bound(base, s));
}

// Stagnation (docs/tolerances.md §3): the systematic term min(1, n·u)² of a sum's accumulator. It
// is nothing for f32 at n = 4096, four times the random walk for an f16 P·V sum at n = 1024, and
// from n·u = 1 on (n = 2048 in f16) the whole M_d: the f16 P·V bound then reaches its cap.
TEST(ToleranceBound, StagnationTermGrowsWithNTimesU) {
  const Config c = one_layer(64, false);
  DimStats d = unit_dim();
  d.abs_out = 0;  // the P·V term alone (with the spread's)
  PrecisionProfile pv;
  pv.pv_accumulator = Precision::f16;
  const BoundContext base = make_bound_context(c, 0, PrecisionProfile{}), with_pv = make_bound_context(c, 0, pv);
  const auto pv_term = [&](const BoundContext& ctx, int64_t n) {
    ScoreStats s = unit_stats();
    s.n_keys = n;
    const double e2d = std::exp(2 * score_error_bound(ctx, s));
    // Subtract all but the P·V sum's term: the weights moved, the underflow units.
    const double tiny = ctx.profile.pv_accumulator == Precision::f16 ? 0x1p-25 : 0x1p-150;
    return output_bound(ctx, s, d) / 2 - std::expm1(2 * score_error_bound(ctx, s)) * d.spread -
           tiny * (static_cast<double>(n) + 2) * 2 - e2d * 0x1p-24 * d.abs_mass;
  };
  const auto random_walk = [](int64_t n, double u) { return (4 * std::sqrt(static_cast<double>(n)) + 1) * u; };
  // f32 at n = 4096: (n·u)² = 2^-24, a 256th of λ√n·u.
  EXPECT_NEAR(pv_term(base, 4096) / unit_dim().abs_mass, random_walk(4096, 0x1p-24) * (1 + 1.0 / 256), 1e-9);
  EXPECT_LT(0x1p-24, random_walk(4096, 0x1p-24) / 250);
  // f16 at n = 1024: (1024/2048)² = 1/4, about four times λ√n·u.
  const double e2d = std::exp(2 * score_error_bound(with_pv, unit_stats()));
  EXPECT_NEAR(pv_term(with_pv, 1024), e2d * (random_walk(1024, 0x1p-11) + 0.25) * d.abs_mass, 1e-9);
  // f16 at n = 4096: the term is M_d (not n·u·M_d = 2·M_d), and the bound is capped.
  ScoreStats s = unit_stats();
  s.n_keys = 4096;
  EXPECT_NEAR(pv_term(with_pv, 4096) / d.abs_mass, e2d * (random_walk(4096, 0x1p-11) + 1.0), 1e-9);
  d.max_abs_v = 0.5;
  EXPECT_EQ(output_bound(with_pv, s, d), 2 * 0.5 + 0x1p-150);
}

// q8_0 quantisation of q adds its own term to the score error, and only when declared.
TEST(ToleranceBound, QueryQuantisationAddsItsTerm) {
  const Config c = one_layer(64, false);
  const ScoreStats s = unit_stats();
  PrecisionProfile q8;
  q8.q_quant = QueryQuant::q8_0;
  const BoundContext base = make_bound_context(c, 0, PrecisionProfile{}), ctx = make_bound_context(c, 0, q8);
  EXPECT_NEAR(score_error_bound(ctx, s) - score_error_bound(base, s), ctx.tau * q8_0_query_error(s), 1e-15);
  EXPECT_GT(q8_0_query_error(s), 4.0 / 254.0 * s.max_qk_norm);  // λ half code steps
}

// The q8_0 term holds for ggml's own quantiser: random queries (with outlier elements, as real
// activations have) and keys, every block length and scale down to f16's normal range.
RC_GTEST_PROP(ToleranceBound, QueryQuantisationTermHoldsForGgmlsQuantiser, ()) {
  const int D = *rc::gen::element(32, 64, 96, 128, 256);
  const double amp = std::ldexp(1.0, *rc::gen::inRange(-4, 6));
  CounterRng rng(*rc::gen::arbitrary<uint64_t>());
  std::vector<float> q(static_cast<size_t>(D)), k(q.size());
  for (size_t d = 0; d < q.size(); ++d) {
    q[d] = static_cast<float>(amp * (rng.uniform() * 2 - 1) * (rng.below(16) == 0 ? 8 : 1));
    k[d] = static_cast<float>(rng.uniform() * 2 - 1);
  }
  std::vector<float> qh = q;
  quantise_q8_0_as_ggml(qh.data(), D);
  double err = 0, abs_dot = 0, qq = 0, kk = 0;
  for (size_t d = 0; d < q.size(); ++d) {
    err += (double(qh[d]) - double(q[d])) * double(k[d]);
    abs_dot += std::fabs(double(q[d]) * double(k[d]));
    qq += double(q[d]) * double(q[d]);
    kk += double(k[d]) * double(k[d]);
  }
  ScoreStats s;
  s.max_abs_dot = abs_dot;
  s.max_qk_norm = std::sqrt(qq * kk);
  RC_ASSERT(std::fabs(err) <= q8_0_query_error(s));
}

// RoPE angles coarser than f64 with lossy K: one step of K's format per element, nothing for f32
// K or for f64 angles.
TEST(ToleranceBound, InexactRotationOfLossyKeys) {
  Config c = one_layer(64, true);
  const ScoreStats s = unit_stats();
  PrecisionProfile f32_angles;
  f32_angles.rope_angle = Precision::f32;
  EXPECT_EQ(k_neighbour_error(make_bound_context(c, 0, f32_angles), s), 0.0);  // f32 K
  c.k_format.dtype = DType::bf16;
  EXPECT_EQ(k_neighbour_error(make_bound_context(c, 0, PrecisionProfile{}), s), 0.0);  // f64 angles
  EXPECT_EQ(k_neighbour_error(make_bound_context(c, 0, f32_angles), s), 2 * 0x1p-8 * s.max_abs_dot);
  c.k_format.dtype = DType::int8;
  c.k_format.int8_scheme = Int8Scheme::q8_0;
  EXPECT_GT(k_neighbour_error(make_bound_context(c, 0, f32_angles), s), std::sqrt(64.0) / 127 * s.max_qk_norm);
  c.layers[0].rope.style = RopeStyle::none;
  EXPECT_EQ(k_neighbour_error(make_bound_context(c, 0, f32_angles), s), 0.0);
}

}  // namespace
}  // namespace ringkv::conformance
