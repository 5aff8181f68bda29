// Tests of rotary position embedding (ringkv/rope.hpp, spec §8). Expected values
// are computed here with plain double formulas.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ringkv/config.hpp"
#include "ringkv/rope.hpp"

namespace {

using ringkv::RopeConfig;
using ringkv::RopeScaling;
using ringkv::RopeStyle;

RopeConfig rope(RopeStyle style, double theta = 10000.0, int rotary_dim = 0, RopeScaling scaling = RopeScaling::none,
                double factor = 1.0) {
  RopeConfig r;
  r.style = style;
  r.theta = theta;
  r.rotary_dim = rotary_dim;
  r.scaling = scaling;
  r.factor = factor;
  return r;
}

/// Rotates x at `position` with the library (rope_angles + rope_rotate), out of place.
std::vector<float> rotated(const RopeConfig& r, const std::vector<float>& x, int64_t position) {
  const int D = static_cast<int>(x.size());
  std::vector<double> c(x.size(), 0.0), s(x.size(), 0.0);
  ringkv::rope_angles(r, D, position, c.data(), s.data());
  std::vector<float> out(x.size(), -1234.0f);
  ringkv::rope_rotate(r, D, c.data(), s.data(), x.data(), out.data());
  return out;
}

std::vector<float> random_vector(std::mt19937& rng, int n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

double norm(const std::vector<float>& a) { return std::sqrt(dot(a, a)); }

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

/// Expected rotation of the pair (a, b) by angle t, in double.
void rotate_pair(double a, double b, double t, double* a_out, double* b_out) {
  *a_out = a * std::cos(t) - b * std::sin(t);
  *b_out = a * std::sin(t) + b * std::cos(t);
}

}  // namespace

TEST(Rope, AnglesForD4Position1Theta10000) {
  // R = 4: inv_freq_k = 10000^(-2k/4) = 1 and 0.01; angles at position 1 are 1 and 0.01.
  std::vector<double> c(2), s(2);
  ringkv::rope_angles(rope(RopeStyle::neox), 4, 1, c.data(), s.data());
  EXPECT_NEAR(c[0], std::cos(1.0), 1e-15);
  EXPECT_NEAR(s[0], std::sin(1.0), 1e-15);
  EXPECT_NEAR(c[1], std::cos(0.01), 1e-15);
  EXPECT_NEAR(s[1], std::sin(0.01), 1e-15);
}

TEST(Rope, NeoxPairsFirstHalfWithSecondHalf) {
  // neox pairs (x0, x2) with angle 1 and (x1, x3) with angle 0.01.
  const std::vector<float> x{1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> out = rotated(rope(RopeStyle::neox), x, 1);
  double e0, e1, e2, e3;
  rotate_pair(1.0, 3.0, 1.0, &e0, &e2);
  rotate_pair(2.0, 4.0, 0.01, &e1, &e3);
  EXPECT_NEAR(out[0], e0, 1e-6);
  EXPECT_NEAR(out[1], e1, 1e-6);
  EXPECT_NEAR(out[2], e2, 1e-6);
  EXPECT_NEAR(out[3], e3, 1e-6);
  // Rounded once to f32 from the f64 result: at most one f32 rounding away.
  EXPECT_EQ(out[0], static_cast<float>(e0));
  EXPECT_EQ(out[2], static_cast<float>(e2));
}

TEST(Rope, GptjPairsAdjacentElements) {
  // gptj pairs (x0, x1) with angle 1 and (x2, x3) with angle 0.01.
  const std::vector<float> x{1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> out = rotated(rope(RopeStyle::gptj), x, 1);
  double e0, e1, e2, e3;
  rotate_pair(1.0, 2.0, 1.0, &e0, &e1);
  rotate_pair(3.0, 4.0, 0.01, &e2, &e3);
  EXPECT_NEAR(out[0], e0, 1e-6);
  EXPECT_NEAR(out[1], e1, 1e-6);
  EXPECT_NEAR(out[2], e2, 1e-6);
  EXPECT_NEAR(out[3], e3, 1e-6);
  // And it differs from neox on the same input.
  EXPECT_FALSE(bitwise_equal(out, rotated(rope(RopeStyle::neox), x, 1)));
}

TEST(Rope, EveryPairOfALargerHeadMatchesTheFormula) {
  constexpr int D = 16;
  std::mt19937 rng(3);
  const std::vector<float> x = random_vector(rng, D);
  for (const RopeStyle style : {RopeStyle::neox, RopeStyle::gptj}) {
    const int64_t p = 12345;
    const std::vector<float> out = rotated(rope(style, 500000.0), x, p);
    for (int k = 0; k < D / 2; ++k) {
      const double t = static_cast<double>(p) * std::pow(500000.0, -2.0 * k / D);
      const int ia = style == RopeStyle::gptj ? 2 * k : k;
      const int ib = style == RopeStyle::gptj ? 2 * k + 1 : k + D / 2;
      double ea, eb;
      rotate_pair(x[static_cast<size_t>(ia)], x[static_cast<size_t>(ib)], t, &ea, &eb);
      EXPECT_NEAR(out[static_cast<size_t>(ia)], ea, 1e-5) << "k " << k;
      EXPECT_NEAR(out[static_cast<size_t>(ib)], eb, 1e-5) << "k " << k;
    }
  }
}

TEST(Rope, PartialRotaryLeavesDimsFromRUntouched) {
  // D = 8, R = 4: dims 0..3 rotate exactly as a D = 4 head; dims 4..7 pass through bit for bit.
  const std::vector<float> x{1.0f, 2.0f, 3.0f, 4.0f, -5.5f, 6.25f, -0.0f, 1e-30f};
  const std::vector<float> head4{1.0f, 2.0f, 3.0f, 4.0f};
  for (const RopeStyle style : {RopeStyle::neox, RopeStyle::gptj}) {
    const RopeConfig r = rope(style, 10000.0, 4);
    EXPECT_EQ(ringkv::rotary_dim(r, 8), 4);
    const std::vector<float> out = rotated(r, x, 1);
    const std::vector<float> want4 = rotated(rope(style), head4, 1);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(out[i], want4[i]) << i;
    for (size_t i = 4; i < 8; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(x[i])) << i;
    // The same in place.
    std::vector<float> in_place = x;
    std::vector<double> c(4), s(4);
    ringkv::rope_angles(r, 8, 1, c.data(), s.data());
    ringkv::rope_rotate(r, 8, c.data(), s.data(), in_place.data(), in_place.data());
    EXPECT_TRUE(bitwise_equal(in_place, out));
  }
}

TEST(Rope, PositionZeroIsTheIdentity) {
  std::mt19937 rng(5);
  const std::vector<float> x = random_vector(rng, 32);
  for (const RopeStyle style : {RopeStyle::none, RopeStyle::neox, RopeStyle::gptj}) {
    EXPECT_TRUE(bitwise_equal(rotated(rope(style), x, 0), x)) << ringkv::to_string(style);
    EXPECT_TRUE(bitwise_equal(rotated(rope(style, 1e6, 16), x, 0), x)) << ringkv::to_string(style);
    EXPECT_TRUE(bitwise_equal(rotated(rope(style, 10000.0, 0, RopeScaling::ntk, 4.0), x, 0), x));
  }
}

TEST(Rope, LinearScalingEqualsUnscaledAtPositionOverFactor) {
  std::mt19937 rng(11);
  const std::vector<float> x = random_vector(rng, 16);
  for (const double factor : {2.0, 4.0, 8.0, 3.0}) {
    const RopeConfig linear = rope(RopeStyle::neox, 10000.0, 0, RopeScaling::linear, factor);
    for (const int64_t m : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{123456}}) {
      const auto p = static_cast<int64_t>(factor) * m;
      EXPECT_EQ(ringkv::rope_scaled_position(linear, p), static_cast<double>(m));
      EXPECT_TRUE(bitwise_equal(rotated(linear, x, p), rotated(rope(RopeStyle::neox), x, m)))
          << "factor " << factor << " position " << p;
    }
  }
  // Non-multiples: p / factor in f64.
  const RopeConfig linear4 = rope(RopeStyle::gptj, 10000.0, 0, RopeScaling::linear, 4.0);
  EXPECT_EQ(ringkv::rope_scaled_position(linear4, 10), 2.5);
  EXPECT_EQ(ringkv::rope_scaled_position(rope(RopeStyle::neox), 10), 10.0);
  // ntk leaves the position alone.
  EXPECT_EQ(ringkv::rope_scaled_position(rope(RopeStyle::neox, 10000.0, 0, RopeScaling::ntk, 4.0), 10), 10.0);
}

TEST(Rope, NtkEffectiveTheta) {
  for (const int R : {4, 8, 64, 128}) {
    for (const double factor : {2.0, 4.0, 0.5}) {
      const RopeConfig ntk = rope(RopeStyle::neox, 10000.0, 0, RopeScaling::ntk, factor);
      const double want = 10000.0 * std::pow(factor, static_cast<double>(R) / (R - 2));
      EXPECT_NEAR(ringkv::rope_effective_theta(ntk, R), want, want * 1e-14) << "R " << R << " factor " << factor;
    }
  }
  EXPECT_EQ(ringkv::rope_effective_theta(rope(RopeStyle::neox, 10000.0), 64), 10000.0);
  EXPECT_EQ(ringkv::rope_effective_theta(rope(RopeStyle::neox, 10000.0, 0, RopeScaling::linear, 4.0), 64), 10000.0);
  // The rotation with ntk equals the unscaled rotation with theta' (rel. 1e-6 for rounding of theta').
  std::mt19937 rng(13);
  const std::vector<float> x = random_vector(rng, 8);
  const RopeConfig ntk = rope(RopeStyle::neox, 10000.0, 0, RopeScaling::ntk, 4.0);
  const RopeConfig plain = rope(RopeStyle::neox, ringkv::rope_effective_theta(ntk, 8));
  const std::vector<float> a = rotated(ntk, x, 777), b = rotated(plain, x, 777);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(a[i], b[i]) << i;
  // And it is not the unscaled one.
  EXPECT_FALSE(bitwise_equal(a, rotated(rope(RopeStyle::neox), x, 777)));
}

TEST(Rope, DotProductDependsOnlyOnRelativePosition) {
  std::mt19937 rng(17);
  for (const RopeStyle style : {RopeStyle::neox, RopeStyle::gptj}) {
    for (const int R : {64, 32}) {
      const RopeConfig r = rope(style, 10000.0, R);
      const std::vector<float> q = random_vector(rng, 64), k = random_vector(rng, 64);
      const double scale = norm(q) * norm(k);
      for (const int64_t a : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{300}}) {
        const double base = dot(rotated(r, q, a), rotated(r, k, 0));
        for (const int64_t p : {int64_t{1}, int64_t{1000}, int64_t{65536}, int64_t{1} << 24, int64_t{2147483000}}) {
          const double shifted = dot(rotated(r, q, p + a), rotated(r, k, p));
          EXPECT_NEAR(shifted, base, 1e-5 * scale)
              << ringkv::to_string(style) << " R " << R << " a " << a << " p " << p;
        }
      }
    }
  }
}

TEST(Rope, RotationPreservesTheNorm) {
  std::mt19937 rng(19);
  const std::vector<float> x = random_vector(rng, 128);
  for (const RopeStyle style : {RopeStyle::neox, RopeStyle::gptj}) {
    for (const int64_t p : {int64_t{1}, int64_t{99}, int64_t{1} << 30}) {
      EXPECT_NEAR(norm(rotated(rope(style), x, p)), norm(x), 1e-5 * norm(x));
    }
  }
}

TEST(Rope, InPlaceRotationEqualsOutOfPlace) {
  std::mt19937 rng(23);
  for (const RopeStyle style : {RopeStyle::none, RopeStyle::neox, RopeStyle::gptj}) {
    for (const int R : {0, 2, 6}) {
      const RopeConfig r = rope(style, 10000.0, R);
      const std::vector<float> x = random_vector(rng, 12);
      std::vector<double> c(12, 0.0), s(12, 0.0);
      ringkv::rope_angles(r, 12, 4242, c.data(), s.data());
      std::vector<float> out(12);
      ringkv::rope_rotate(r, 12, c.data(), s.data(), x.data(), out.data());
      std::vector<float> in_place = x;
      ringkv::rope_rotate(r, 12, c.data(), s.data(), in_place.data(), in_place.data());
      EXPECT_TRUE(bitwise_equal(in_place, out)) << ringkv::to_string(style) << " R " << R;
    }
  }
}

TEST(Rope, StyleNoneRotatesNothing) {
  const RopeConfig none = rope(RopeStyle::none, 10000.0, 4);
  EXPECT_EQ(ringkv::rotary_dim(none, 8), 0);
  std::mt19937 rng(29);
  const std::vector<float> x = random_vector(rng, 8);
  // rope_angles writes nothing for R = 0.
  std::vector<double> c(8, -7.0), s(8, -7.0);
  ringkv::rope_angles(none, 8, 99, c.data(), s.data());
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(c[i], -7.0);
    EXPECT_EQ(s[i], -7.0);
  }
  EXPECT_TRUE(bitwise_equal(rotated(none, x, 99), x));
  EXPECT_TRUE(bitwise_equal(rotated(none, x, 2147483647), x));
}

TEST(Rope, RotaryDimHelper) {
  EXPECT_EQ(ringkv::rotary_dim(rope(RopeStyle::neox), 64), 64);
  EXPECT_EQ(ringkv::rotary_dim(rope(RopeStyle::gptj, 10000.0, 32), 64), 32);
  EXPECT_EQ(ringkv::rotary_dim(rope(RopeStyle::none), 64), 0);
}

TEST(Rope, DifferentPositionsRotateDifferently) {
  std::mt19937 rng(31);
  const std::vector<float> x = random_vector(rng, 16);
  EXPECT_FALSE(bitwise_equal(rotated(rope(RopeStyle::neox), x, 5), rotated(rope(RopeStyle::neox), x, 6)));
}
