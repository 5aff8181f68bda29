// Tests of the OCP fp8 formats of ringkv/quant.hpp.
//
// e4m3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; 0x7f/0xff
//       are NaN; largest finite 0x7e = 448; subnormals m * 2^-9.
// e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa bits; 0x7c/0xfc are +-inf,
//       0x7d..0x7f NaN; largest finite 0x7b = 57344; subnormals m * 2^-16.
// Encoding rounds to nearest, ties to the even code, and saturates to the
// largest finite value (also for +-inf).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

#include "ringkv/quant.hpp"

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Fp8Format {
  const char* name;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  uint8_t max_code;  // largest finite positive code
  double max_value;
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
};

/// The value of a code, from the textbook formula (written independently of quant.cpp).
/// Returns NaN for NaN codes and +-inf for e5m2's infinity codes.
double formula_value(const Fp8Format& f, uint8_t code) {
  const bool negative = (code & 0x80) != 0;
  const int e = (code >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int m = code & ((1 << f.mantissa_bits) - 1);
  const int e_all_ones = (1 << f.exponent_bits) - 1;
  const double mantissa_scale = std::pow(2.0, f.mantissa_bits);
  double magnitude;
  if (f.exponent_bits == 4 && e == e_all_ones && m == (1 << f.mantissa_bits) - 1) {
    return std::numeric_limits<double>::quiet_NaN();  // e4m3: S.1111.111
  } else if (f.exponent_bits == 5 && e == e_all_ones) {
    if (m != 0) return std::numeric_limits<double>::quiet_NaN();
    magnitude = std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    magnitude = (m / mantissa_scale) * std::pow(2.0, 1 - f.bias);
  } else {
    magnitude = (1.0 + m / mantissa_scale) * std::pow(2.0, e - f.bias);
  }
  return negative ? -magnitude : magnitude;
}

const Fp8Format kE4M3{"e4m3", 4, 3, 7, 0x7e, 448.0, &ringkv::fp8_e4m3_from_f32, &ringkv::f32_from_fp8_e4m3};
const Fp8Format kE5M2{"e5m2", 5, 2, 15, 0x7b, 57344.0, &ringkv::fp8_e5m2_from_f32, &ringkv::f32_from_fp8_e5m2};

bool is_nan_code(const Fp8Format& f, int code) { return std::isnan(formula_value(f, static_cast<uint8_t>(code))); }

/// Encodes and widens to int, so that failures print numbers, not characters.
int encode(const Fp8Format& f, float x) { return f.encode(x); }

// Readable names in failure messages.
[[maybe_unused]] void PrintTo(const Fp8Format& f, std::ostream* os) { *os << f.name; }

class Fp8 : public ::testing::TestWithParam<Fp8Format> {};

}  // namespace

TEST(Fp8Formula, KnownValues) {
  EXPECT_EQ(formula_value(kE4M3, 0x7e), 448.0);
  EXPECT_EQ(formula_value(kE4M3, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(formula_value(kE4M3, 0x08), std::ldexp(1.0, -6));
  EXPECT_EQ(formula_value(kE4M3, 0x38), 1.0);
  EXPECT_TRUE(std::isnan(formula_value(kE4M3, 0x7f)));
  EXPECT_TRUE(std::isnan(formula_value(kE4M3, 0xff)));
  EXPECT_EQ(formula_value(kE4M3, 0x78), 256.0);  // e = 15 is a normal exponent in e4m3
  EXPECT_EQ(formula_value(kE5M2, 0x7b), 57344.0);
  EXPECT_EQ(formula_value(kE5M2, 0x7c), std::numeric_limits<double>::infinity());
  EXPECT_EQ(formula_value(kE5M2, 0xfc), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(formula_value(kE5M2, 0x7d)));
  EXPECT_EQ(formula_value(kE5M2, 0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(formula_value(kE5M2, 0x3c), 1.0);
}

TEST_P(Fp8, DecodesEveryOneOf256CodesLikeTheFormula) {
  const Fp8Format& f = GetParam();
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const double want = formula_value(f, code);
    const float got = f.decode(code);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << f.name << " code " << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << f.name << " code " << c;
      EXPECT_EQ(std::signbit(got), (code & 0x80) != 0) << f.name << " code " << c;  // -0 for 0x80
    }
  }
}

TEST_P(Fp8, LargestFiniteAndNanCodes) {
  const Fp8Format& f = GetParam();
  EXPECT_EQ(static_cast<double>(f.decode(f.max_code)), f.max_value);
  EXPECT_EQ(static_cast<double>(f.decode(static_cast<uint8_t>(0x80 | f.max_code))), -f.max_value);
  int nan_codes = 0;
  for (int c = 0; c < 256; ++c) nan_codes += std::isnan(f.decode(static_cast<uint8_t>(c))) ? 1 : 0;
  EXPECT_EQ(nan_codes, f.exponent_bits == 4 ? 2 : 6) << f.name;
}

TEST_P(Fp8, EveryFiniteCodeRoundTrips) {
  const Fp8Format& f = GetParam();
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const double v = formula_value(f, code);
    if (!std::isfinite(v)) continue;
    EXPECT_EQ(encode(f, f.decode(code)), c) << f.name << " code " << c;
  }
}

TEST_P(Fp8, MidpointsOfAdjacentCodesRoundToEvenAndNeighboursRoundToTheNearer) {
  const Fp8Format& f = GetParam();
  for (int c = 0; c < f.max_code; ++c) {
    const double lo = formula_value(f, static_cast<uint8_t>(c));
    const double hi = formula_value(f, static_cast<uint8_t>(c + 1));
    const double mid_d = 0.5 * (lo + hi);
    const auto mid = static_cast<float>(mid_d);
    ASSERT_EQ(static_cast<double>(mid), mid_d) << "midpoint must be exact in f32";
    const int even = (c % 2 == 0) ? c : c + 1;
    for (const bool negative : {false, true}) {
      const float s = negative ? -1.0f : 1.0f;
      const int sign = negative ? 0x80 : 0;
      EXPECT_EQ(encode(f, s * mid), sign | even) << f.name << " midpoint of codes " << c << " and " << c + 1;
      EXPECT_EQ(encode(f, s * std::nextafter(mid, 0.0f)), sign | c) << f.name << " just below midpoint " << mid;
      EXPECT_EQ(encode(f, s * std::nextafter(mid, kInf)), sign | (c + 1)) << f.name << " just above midpoint " << mid;
      // Points a quarter of the way in from each end.
      EXPECT_EQ(encode(f, s * static_cast<float>(lo + 0.25 * (hi - lo))), sign | c) << f.name;
      EXPECT_EQ(encode(f, s * static_cast<float>(hi - 0.25 * (hi - lo))), sign | (c + 1)) << f.name;
    }
  }
}

TEST_P(Fp8, SaturatesToLargestFinite) {
  const Fp8Format& f = GetParam();
  const int max = f.max_code;
  const int neg_max = 0x80 | f.max_code;
  EXPECT_EQ(encode(f, 1e6f), max);
  EXPECT_EQ(encode(f, -1e6f), neg_max);
  EXPECT_EQ(encode(f, kInf), max);
  EXPECT_EQ(encode(f, -kInf), neg_max);
  EXPECT_EQ(encode(f, std::numeric_limits<float>::max()), max);
  EXPECT_EQ(encode(f, static_cast<float>(f.max_value)), max);
  EXPECT_EQ(encode(f, std::nextafter(static_cast<float>(f.max_value), kInf)), max);
  // Beyond the max by more than half a step still saturates (no infinity, no NaN).
  EXPECT_EQ(encode(f, static_cast<float>(f.max_value * 1.2)), max);
}

TEST_P(Fp8, NanEncodesToNan) {
  const Fp8Format& f = GetParam();
  EXPECT_TRUE(is_nan_code(f, encode(f, kNaN))) << f.name;
  EXPECT_TRUE(is_nan_code(f, encode(f, -kNaN))) << f.name;
  EXPECT_TRUE(std::isnan(f.decode(f.encode(kNaN)))) << f.name;
}

TEST_P(Fp8, ZerosAndTinyValues) {
  const Fp8Format& f = GetParam();
  const double smallest = formula_value(f, 0x01);
  EXPECT_EQ(encode(f, 0.0f), 0x00);
  EXPECT_EQ(encode(f, -0.0f), 0x80);
  EXPECT_EQ(encode(f, static_cast<float>(smallest)), 0x01);
  EXPECT_EQ(encode(f, static_cast<float>(smallest * 0.5)), 0x00);   // tie with 0: even
  EXPECT_EQ(encode(f, static_cast<float>(-smallest * 0.5)), 0x80);
  EXPECT_EQ(encode(f, static_cast<float>(smallest * 0.51)), 0x01);
  EXPECT_EQ(encode(f, static_cast<float>(smallest * 1.5)), 0x02);   // tie: even
  EXPECT_EQ(encode(f, std::numeric_limits<float>::denorm_min()), 0x00);
}

INSTANTIATE_TEST_SUITE_P(OcpFormats, Fp8, ::testing::Values(kE4M3, kE5M2),
                         [](const ::testing::TestParamInfo<Fp8Format>& p) { return std::string(p.param.name); });

TEST(Fp8E4M3, HandCases) {
  EXPECT_EQ(int{ringkv::fp8_e4m3_from_f32(448.0f)}, 0x7e);
  EXPECT_EQ(int{ringkv::fp8_e4m3_from_f32(416.0f)}, 0x7d);
  EXPECT_EQ(int{ringkv::fp8_e4m3_from_f32(432.0f)}, 0x7e);  // tie 416 / 448: even code 0x7e
  EXPECT_EQ(int{ringkv::fp8_e4m3_from_f32(464.0f)}, 0x7e);  // would round past the max: saturates
  EXPECT_EQ(int{ringkv::fp8_e4m3_from_f32(1.0f)}, 0x38);
  EXPECT_EQ(int{ringkv::fp8_e4m3_from_f32(-1.0f)}, 0xb8);
  EXPECT_EQ(int{ringkv::fp8_e4m3_from_f32(1.0625f)}, 0x38);  // tie 1 / 1.125: even 0x38
  EXPECT_EQ(int{ringkv::fp8_e4m3_from_f32(1.1875f)}, 0x3a);  // tie 1.125 / 1.25: even 0x3a
  EXPECT_EQ(int{ringkv::fp8_e4m3_from_f32(0x1p-9f)}, 0x01);
  EXPECT_EQ(ringkv::f32_from_fp8_e4m3(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(ringkv::f32_from_fp8_e4m3(0x7f)));
  EXPECT_TRUE(std::isnan(ringkv::f32_from_fp8_e4m3(0xff)));
}

TEST(Fp8E5M2, HandCases) {
  EXPECT_EQ(int{ringkv::fp8_e5m2_from_f32(57344.0f)}, 0x7b);
  EXPECT_EQ(int{ringkv::fp8_e5m2_from_f32(61440.0f)}, 0x7b);  // midpoint to the would-be 65536: saturates
  EXPECT_EQ(int{ringkv::fp8_e5m2_from_f32(1.0f)}, 0x3c);
  EXPECT_EQ(int{ringkv::fp8_e5m2_from_f32(1.125f)}, 0x3c);    // tie 1 / 1.25: even
  EXPECT_EQ(int{ringkv::fp8_e5m2_from_f32(1.375f)}, 0x3e);    // tie 1.25 / 1.5: even
  EXPECT_EQ(int{ringkv::fp8_e5m2_from_f32(0x1p-16f)}, 0x01);
  EXPECT_EQ(ringkv::f32_from_fp8_e5m2(0x7c), kInf);
  EXPECT_EQ(ringkv::f32_from_fp8_e5m2(0xfc), -kInf);
  EXPECT_TRUE(std::isnan(ringkv::f32_from_fp8_e5m2(0x7d)));
  EXPECT_TRUE(std::isnan(ringkv::f32_from_fp8_e5m2(0xfe)));
}
