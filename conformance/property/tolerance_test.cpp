// The tolerance bound on its own (docs/tolerances.md): finite and non-negative everywhere.
#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace ringkv::conformance
