// Tests of the INT8 schemes of ringkv/quant.hpp, with expected codes written out by hand.
//
//   per_head:      s = fl32(amax / 127), code = round(fl32(x / s)), x̂ = code * s
//   q8_0:          d = fl32(amax / 127), code = round(fl32(x * fl32(1 / d))), x̂ = code * f16(d)
//   static_tensor: s from the config,    code = clamp(round(fl32(x * fl32(1 / s)))), x̂ = code * s
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ringkv/config.hpp"
#include "ringkv/quant.hpp"

namespace {

using ringkv::DType;
using ringkv::Int8Group;
using ringkv::Int8Scheme;
using ringkv::KvFormat;
using ringkv::Rounding;

constexpr Rounding kRne = Rounding::nearest_even;
constexpr Rounding kAway = Rounding::half_away;


/// Quantises one group, returning the codes as ints (readable failures).
struct Quantised {
  Int8Group group;
  std::vector<int> codes;
};
Quantised quantise(const KvFormat& f, const std::vector<float>& x) {
  std::vector<int8_t> codes(x.size(), int8_t{99});
  Quantised q;
  q.group = ringkv::int8_quantise_group(f, x.data(), static_cast<int>(x.size()), codes.data());
  q.codes.assign(codes.begin(), codes.end());
  return q;
}

/// x padded with zeros to n elements.
std::vector<float> padded_f(std::vector<float> x, size_t n) {
  x.resize(n, 0.0f);
  return x;
}
std::vector<int> padded_i(std::vector<int> x, size_t n) {
  x.resize(n, 0);
  return x;
}

/// Rounding written independently of quant.cpp: nearbyint (default mode: ties to
/// even) or std::round (ties away), then clamp.
int independent_round(float r, Rounding mode) {
  const double q = mode == kRne ? std::nearbyint(static_cast<double>(r)) : std::round(static_cast<double>(r));
  return static_cast<int>(std::clamp(q, -127.0, 127.0));
}

/// Encodes and decodes a row through encode_row / decode_row.
std::vector<float> encode_decode(const KvFormat& f, const std::vector<float>& x, std::vector<uint8_t>* bytes_out = nullptr,
                                 std::vector<float>* scales_out = nullptr) {
  const int D = static_cast<int>(x.size());
  std::vector<uint8_t> bytes(x.size() * static_cast<size_t>(ringkv::bytes_per_element(f.dtype)));
  std::vector<float> scales(static_cast<size_t>(ringkv::scales_per_row(f, D)) + 1, -7.0f);
  ringkv::encode_row(f, D, x.data(), bytes.data(), scales.data());
  std::vector<float> out(x.size(), -99.0f);
  ringkv::decode_row(f, D, bytes.data(), scales.data(), out.data());
  scales.pop_back();
  if (bytes_out) *bytes_out = bytes;
  if (scales_out) *scales_out = scales;
  return out;
}

std::vector<float> times(const std::vector<int>& codes, float s) {
  std::vector<float> out;
  for (int c : codes) out.push_back(static_cast<float>(c) * s);
  return out;
}

}  // namespace

// ---------------------------------------------------------------- rounding

TEST(Int8RoundClamp, HandTable) {
  struct Row {
    float r;
    int rne, away;
  };
  const Row rows[] = {
      {0.0f, 0, 0},       {-0.0f, 0, 0},      {0.5f, 0, 1},        {-0.5f, 0, -1},     {1.5f, 2, 2},
      {-1.5f, -2, -2},    {2.5f, 2, 3},       {-2.5f, -2, -3},     {3.5f, 4, 4},       {-3.5f, -4, -4},
      {1.4999999f, 1, 1}, {1.5000001f, 2, 2}, {-2.4999998f, -2, -2}, {126.5f, 126, 127}, {-126.5f, -126, -127},
      {127.0f, 127, 127}, {127.5f, 127, 127}, {-127.5f, -127, -127}, {128.0f, 127, 127}, {1000.0f, 127, 127},
      {-1e30f, -127, -127}, {std::numeric_limits<float>::infinity(), 127, 127},
      {-std::numeric_limits<float>::infinity(), -127, -127},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(int{ringkv::int8_round_clamp(row.r, kRne)}, row.rne) << "r = " << row.r;
    EXPECT_EQ(int{ringkv::int8_round_clamp(row.r, kAway)}, row.away) << "r = " << row.r;
  }
}

// ---------------------------------------------------------------- per_head

TEST(Int8PerHead, UnitScaleWithExactTies) {
  const std::vector<float> x{127.0f, 2.5f, -2.5f, 1.5f, 0.5f, -0.5f, -126.4f, 3.49f};
  // amax = 127 -> s = 1 exactly; x / s = x.
  const Quantised rne = quantise(KvFormat::int8(Int8Scheme::per_head, kRne), x);
  EXPECT_EQ(rne.group.divisor_scale, 1.0f);
  EXPECT_EQ(rne.group.stored_scale, 1.0f);
  EXPECT_EQ(rne.codes, (std::vector<int>{127, 2, -2, 2, 0, 0, -126, 3}));
  const Quantised away = quantise(KvFormat::int8(Int8Scheme::per_head, kAway), x);
  EXPECT_EQ(away.codes, (std::vector<int>{127, 3, -3, 2, 1, -1, -126, 3}));
}

TEST(Int8PerHead, ScaleTwoWithExactTies) {
  const std::vector<float> x{5.0f, -5.0f, 3.0f, 1.0f, -1.0f, -254.0f, 7.0f, 0.0f};
  // amax = 254 -> s = 2 exactly; x / s = 2.5, -2.5, 1.5, 0.5, -0.5, -127, 3.5, 0.
  const std::vector<int> want_rne{2, -2, 2, 0, 0, -127, 4, 0};
  const std::vector<int> want_away{3, -3, 2, 1, -1, -127, 4, 0};
  const Quantised rne = quantise(KvFormat::int8(Int8Scheme::per_head, kRne), x);
  EXPECT_EQ(rne.group.divisor_scale, 2.0f);
  EXPECT_EQ(rne.group.stored_scale, 2.0f);
  EXPECT_EQ(rne.codes, want_rne);
  EXPECT_EQ(quantise(KvFormat::int8(Int8Scheme::per_head, kAway), x).codes, want_away);

  std::vector<float> scales;
  EXPECT_EQ(encode_decode(KvFormat::int8(Int8Scheme::per_head, kRne), x, nullptr, &scales),
            (std::vector<float>{4, -4, 4, 0, 0, -254, 8, 0}));
  EXPECT_EQ(scales, (std::vector<float>{2.0f}));
  EXPECT_EQ(encode_decode(KvFormat::int8(Int8Scheme::per_head, kAway), x),
            (std::vector<float>{6, -6, 4, 2, -2, -254, 8, 0}));
}

TEST(Int8PerHead, AllZeroGroupHasZeroScaleAndDecodesToZero) {
  for (const Rounding r : {kRne, kAway}) {
    const KvFormat f = KvFormat::int8(Int8Scheme::per_head, r);
    const std::vector<float> x{0.0f, -0.0f, 0.0f, -0.0f};
    const Quantised q = quantise(f, x);
    EXPECT_EQ(q.group.divisor_scale, 0.0f);
    EXPECT_EQ(q.group.stored_scale, 0.0f);
    EXPECT_EQ(q.codes, (std::vector<int>{0, 0, 0, 0}));
    for (float v : encode_decode(f, x)) {
      EXPECT_FALSE(std::isnan(v));
      EXPECT_EQ(v, 0.0f);
    }
  }
}

TEST(Int8PerHead, DividesByTheScale) {
  // Find a group {amax, x} whose code differs between fl32(x / s) and fl32(x * fl32(1 / s)):
  // per_head must use the division.
  int found = 0;
  for (const float amax : {100.0f, 3.0f, 0.7f, 12.3f, 1000.1f}) {
    const float s = amax / 127.0f;
    const float inv = 1.0f / s;
    for (int k = -127; k < 127 && found < 4; ++k) {
      float x = static_cast<float>((k + 0.5) * static_cast<double>(s));
      x = std::nextafter(std::nextafter(x, -1e30f), -1e30f);
      for (int step = 0; step < 5; ++step, x = std::nextafter(x, 1e30f)) {
        if (std::fabs(x) > amax) continue;
        for (const Rounding mode : {kRne, kAway}) {
          const int by_division = independent_round(x / s, mode);
          const int by_reciprocal = independent_round(x * inv, mode);
          if (by_division == by_reciprocal) continue;
          ++found;
          const Quantised q = quantise(KvFormat::int8(Int8Scheme::per_head, mode), {amax, x});
          EXPECT_EQ(q.group.divisor_scale, s);
          EXPECT_EQ(q.codes[1], by_division) << "amax " << amax << " x " << x;
        }
      }
    }
  }
  EXPECT_GT(found, 0) << "no distinguishing case found";
}

// ---------------------------------------------------------------- q8_0

TEST(Int8Q80, HeadDim32OneGroupWithExactTies) {
  const std::vector<float> x = padded_f({127.0f, 2.5f, -2.5f, 1.5f, 0.5f, -0.5f, -126.4f, 3.49f}, 32);
  const Quantised rne = quantise(KvFormat::int8(Int8Scheme::q8_0, kRne), x);
  EXPECT_EQ(rne.group.divisor_scale, 1.0f);
  EXPECT_EQ(rne.group.stored_scale, 1.0f);
  EXPECT_EQ(rne.codes, padded_i({127, 2, -2, 2, 0, 0, -126, 3}, 32));
  const Quantised away = quantise(KvFormat::int8(Int8Scheme::q8_0, kAway), x);
  EXPECT_EQ(away.codes, padded_i({127, 3, -3, 2, 1, -1, -126, 3}, 32));

  std::vector<float> scales;
  EXPECT_EQ(encode_decode(KvFormat::int8(Int8Scheme::q8_0, kAway), x, nullptr, &scales),
            times(padded_i({127, 3, -3, 2, 1, -1, -126, 3}, 32), 1.0f));
  EXPECT_EQ(scales, (std::vector<float>{1.0f}));
}

TEST(Int8Q80, HeadDim64TwoGroupsWithTheirOwnScales) {
  // Group 0: amax 127 -> d = 1. Group 1: amax 254 -> d = 2, 1/d = 0.5 exactly.
  std::vector<float> x = padded_f({127.0f, 2.5f, -2.5f, 1.5f, 0.5f, -0.5f, -126.4f, 3.49f}, 32);
  const std::vector<float> g1 = padded_f({5.0f, -5.0f, 3.0f, 1.0f, -1.0f, -254.0f, 7.0f, 0.0f}, 32);
  x.insert(x.end(), g1.begin(), g1.end());

  std::vector<int> want_rne = padded_i({127, 2, -2, 2, 0, 0, -126, 3}, 32);
  const std::vector<int> want_rne_1 = padded_i({2, -2, 2, 0, 0, -127, 4, 0}, 32);
  want_rne.insert(want_rne.end(), want_rne_1.begin(), want_rne_1.end());
  std::vector<int> want_away = padded_i({127, 3, -3, 2, 1, -1, -126, 3}, 32);
  const std::vector<int> want_away_1 = padded_i({3, -3, 2, 1, -1, -127, 4, 0}, 32);
  want_away.insert(want_away.end(), want_away_1.begin(), want_away_1.end());

  for (const Rounding mode : {kRne, kAway}) {
    const KvFormat f = KvFormat::int8(Int8Scheme::q8_0, mode);
    std::vector<uint8_t> bytes;
    std::vector<float> scales;
    const std::vector<float> decoded = encode_decode(f, x, &bytes, &scales);
    std::vector<int> codes;
    for (uint8_t b : bytes) codes.push_back(static_cast<int8_t>(b));
    const std::vector<int>& want = mode == kRne ? want_rne : want_away;
    EXPECT_EQ(codes, want);
    EXPECT_EQ(scales, (std::vector<float>{1.0f, 2.0f}));
    std::vector<float> want_decoded = times(std::vector<int>(want.begin(), want.begin() + 32), 1.0f);
    const std::vector<float> want_decoded_1 = times(std::vector<int>(want.begin() + 32, want.end()), 2.0f);
    want_decoded.insert(want_decoded.end(), want_decoded_1.begin(), want_decoded_1.end());
    EXPECT_EQ(decoded, want_decoded);
  }
}

TEST(Int8Q80, AllZeroGroupNextToANonZeroGroup) {
  std::vector<float> x = padded_f({-127.0f, 63.5f}, 32);  // d = 1; 63.5 is a tie
  x.resize(64, 0.0f);                                  // group 1 all zero
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  const std::vector<float> decoded = encode_decode(KvFormat::int8(Int8Scheme::q8_0, kRne), x, &bytes, &scales);
  EXPECT_EQ(scales, (std::vector<float>{1.0f, 0.0f}));
  EXPECT_EQ(static_cast<int8_t>(bytes[0]), -127);
  EXPECT_EQ(static_cast<int8_t>(bytes[1]), 64);
  for (size_t i = 2; i < 64; ++i) EXPECT_EQ(bytes[i], 0u) << i;
  for (size_t i = 32; i < 64; ++i) {
    EXPECT_FALSE(std::isnan(decoded[i]));
    EXPECT_EQ(decoded[i], 0.0f);
  }
  const Quantised zero = quantise(KvFormat::int8(Int8Scheme::q8_0, kAway), std::vector<float>(32, 0.0f));
  EXPECT_EQ(zero.group.divisor_scale, 0.0f);
  EXPECT_EQ(zero.group.stored_scale, 0.0f);
  EXPECT_EQ(zero.codes, std::vector<int>(32, 0));
}

TEST(Int8Q80, GroupTooSmallForTheReciprocalIsAZeroGroup) {
  // amax = 1e-38: d = fl32(amax / 127) ~ 7.9e-41 <= 2^-128, so fl32(1 / d) is infinite (spec §10.4).
  const std::vector<float> x = padded_f({1e-38f, -5e-39f, 3e-39f}, 32);
  ASSERT_TRUE(std::isinf(1.0f / (1e-38f / 127.0f)));
  for (const Rounding mode : {kRne, kAway}) {
    const Quantised q = quantise(KvFormat::int8(Int8Scheme::q8_0, mode), x);
    EXPECT_EQ(q.group.divisor_scale, 0.0f);
    EXPECT_EQ(q.group.stored_scale, 0.0f);
    EXPECT_EQ(q.codes, std::vector<int>(32, 0));
    for (float v : encode_decode(KvFormat::int8(Int8Scheme::q8_0, mode), x)) EXPECT_EQ(v, 0.0f);
  }
  // Just above the limit (d = 2^-127 > 2^-128): a normal group.
  const Quantised q = quantise(KvFormat::int8(Int8Scheme::q8_0, kRne), padded_f({127.0f * 0x1p-127f}, 32));
  EXPECT_EQ(q.group.divisor_scale, 0x1p-127f);
  EXPECT_EQ(q.codes[0], 127);
}

TEST(Int8Q80, ScaleIsStoredAsF16OfTheDivisor) {
  // amax = 100: d = fl32(100/127) = 0.78740157..., not a half value.
  const std::vector<float> x = padded_f({100.0f, -37.0f, 12.5f, 0.001f}, 32);
  const Quantised q = quantise(KvFormat::int8(Int8Scheme::q8_0, kRne), x);
  EXPECT_EQ(q.group.divisor_scale, 100.0f / 127.0f);
  EXPECT_EQ(q.group.stored_scale, ringkv::round_to_f16(q.group.divisor_scale));
  EXPECT_NE(q.group.stored_scale, q.group.divisor_scale);
  std::vector<float> scales;
  const std::vector<float> decoded = encode_decode(KvFormat::int8(Int8Scheme::q8_0, kRne), x, nullptr, &scales);
  EXPECT_EQ(scales, (std::vector<float>{q.group.stored_scale}));
  for (size_t i = 0; i < 32; ++i) {
    EXPECT_EQ(decoded[i], static_cast<float>(q.codes[i]) * q.group.stored_scale) << i;
  }
  // Hand codes: x * fl32(1/d) = 127, -46.99, 15.875, 0.00127.
  EXPECT_EQ(q.codes[0], 127);
  EXPECT_EQ(q.codes[1], -47);
  EXPECT_EQ(q.codes[2], 16);
  EXPECT_EQ(q.codes[3], 0);
}

TEST(Int8Q80, MultipliesByTheRoundedReciprocal) {
  // Find a group {amax, x} whose code differs between fl32(x / d) and fl32(x * fl32(1 / d)):
  // q8_0 must use the reciprocal.
  int found = 0;
  for (const float amax : {100.0f, 3.0f, 0.7f, 12.3f, 1000.1f}) {
    const float d = amax / 127.0f;
    const float id = 1.0f / d;
    for (int k = -127; k < 127 && found < 4; ++k) {
      float x = static_cast<float>((k + 0.5) * static_cast<double>(d));
      x = std::nextafter(std::nextafter(x, -1e30f), -1e30f);
      for (int step = 0; step < 5; ++step, x = std::nextafter(x, 1e30f)) {
        if (std::fabs(x) > amax) continue;
        for (const Rounding mode : {kRne, kAway}) {
          const int by_division = independent_round(x / d, mode);
          const int by_reciprocal = independent_round(x * id, mode);
          if (by_division == by_reciprocal) continue;
          ++found;
          const Quantised q = quantise(KvFormat::int8(Int8Scheme::q8_0, mode), padded_f({amax, x}, 32));
          EXPECT_EQ(q.group.divisor_scale, d);
          EXPECT_EQ(q.codes[1], by_reciprocal) << "amax " << amax << " x " << x;
        }
      }
    }
  }
  EXPECT_GT(found, 0) << "no distinguishing case found";
}

TEST(Int8Q80, LargestFiniteF16Scale) {
  // d = 65504 is the largest half: stored exactly. d = 65519 rounds down to 65504.
  const Quantised q = quantise(KvFormat::int8(Int8Scheme::q8_0, kRne), padded_f({127.0f * 65504.0f}, 32));
  EXPECT_EQ(q.group.divisor_scale, 65504.0f);
  EXPECT_EQ(q.group.stored_scale, 65504.0f);
  const Quantised q2 = quantise(KvFormat::int8(Int8Scheme::q8_0, kRne), padded_f({127.0f * 65519.0f}, 32));
  EXPECT_EQ(q2.group.divisor_scale, 65519.0f);
  EXPECT_EQ(q2.group.stored_scale, 65504.0f);
}

TEST(Int8Q80, ScaleOverflowingF16IsStoredAsInfinity) {
  // amax = 127 * 70000 -> d = 70000 > 65504: f16(d) = +inf.
  const std::vector<float> x = padded_f({8890000.0f, -8890000.0f, 0.0f, 1e6f}, 32);
  const Quantised q = quantise(KvFormat::int8(Int8Scheme::q8_0, kRne), x);
  EXPECT_EQ(q.group.divisor_scale, 70000.0f);
  EXPECT_EQ(q.group.stored_scale, std::numeric_limits<float>::infinity());
  EXPECT_EQ(q.codes[0], 127);
  EXPECT_EQ(q.codes[1], -127);
  EXPECT_EQ(q.codes[2], 0);
  EXPECT_EQ(q.codes[3], 14);  // 1e6 / 70000 = 14.29
  std::vector<float> scales;
  const std::vector<float> decoded = encode_decode(KvFormat::int8(Int8Scheme::q8_0, kRne), x, nullptr, &scales);
  EXPECT_EQ(scales[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(decoded[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(decoded[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(decoded[2]));  // 0 * inf
  EXPECT_EQ(decoded[3], std::numeric_limits<float>::infinity());
  // d = 65520 is the f16 midpoint to infinity: ties to even = infinity.
  const Quantised q3 = quantise(KvFormat::int8(Int8Scheme::q8_0, kRne), padded_f({127.0f * 65520.0f}, 32));
  EXPECT_EQ(q3.group.divisor_scale, 65520.0f);
  EXPECT_EQ(q3.group.stored_scale, std::numeric_limits<float>::infinity());
}

// ---------------------------------------------------------------- static_tensor

TEST(Int8Static, HalfScaleWithTiesAndClamp) {
  // s = 0.5, 1/s = 2 exactly: x * 2 = 2.5, -2.5, 1.5, 200, -200, 127.5, 127, 0.5, 128.
  const std::vector<float> x{1.25f, -1.25f, 0.75f, 100.0f, -100.0f, 63.75f, 63.5f, 0.25f, 64.0f};
  const Quantised rne = quantise(KvFormat::int8(Int8Scheme::static_tensor, kRne, 0.5f), x);
  EXPECT_EQ(rne.group.divisor_scale, 0.5f);
  EXPECT_EQ(rne.group.stored_scale, 0.5f);
  EXPECT_EQ(rne.codes, (std::vector<int>{2, -2, 2, 127, -127, 127, 127, 0, 127}));
  const Quantised away = quantise(KvFormat::int8(Int8Scheme::static_tensor, kAway, 0.5f), x);
  EXPECT_EQ(away.codes, (std::vector<int>{3, -3, 2, 127, -127, 127, 127, 1, 127}));

  std::vector<float> scales;
  EXPECT_EQ(encode_decode(KvFormat::int8(Int8Scheme::static_tensor, kRne, 0.5f), x, nullptr, &scales),
            (std::vector<float>{1.0f, -1.0f, 1.0f, 63.5f, -63.5f, 63.5f, 63.5f, 0.0f, 63.5f}));
  EXPECT_TRUE(scales.empty());
  EXPECT_EQ(encode_decode(KvFormat::int8(Int8Scheme::static_tensor, kAway, 0.5f), x),
            (std::vector<float>{1.5f, -1.5f, 1.0f, 63.5f, -63.5f, 63.5f, 63.5f, 0.5f, 63.5f}));
}

TEST(Int8Static, ClampBoundaryAt127AndAHalfSteps) {
  // s = 2: |x| > 127.5 * 2 = 255 clips to +-127; 253 -> 126.5 is a tie.
  const std::vector<float> x{253.0f, 255.0f, 256.0f, 1e9f, -1e9f, -255.0f, -253.0f};
  EXPECT_EQ(quantise(KvFormat::int8(Int8Scheme::static_tensor, kRne, 2.0f), x).codes,
            (std::vector<int>{126, 127, 127, 127, -127, -127, -126}));
  EXPECT_EQ(quantise(KvFormat::int8(Int8Scheme::static_tensor, kAway, 2.0f), x).codes,
            (std::vector<int>{127, 127, 127, 127, -127, -127, -127}));
}

TEST(Int8Static, AllZeroGroupKeepsTheConfiguredScale) {
  const Quantised q = quantise(KvFormat::int8(Int8Scheme::static_tensor, kRne, 0.25f), {0.0f, -0.0f, 0.0f});
  EXPECT_EQ(q.group.divisor_scale, 0.25f);
  EXPECT_EQ(q.codes, (std::vector<int>{0, 0, 0}));
  for (float v : encode_decode(KvFormat::int8(Int8Scheme::static_tensor, kRne, 0.25f), {0.0f, -0.0f, 0.0f, 0.0f})) {
    EXPECT_EQ(v, 0.0f);
  }
}

TEST(Int8Static, MultipliesByTheRoundedReciprocal) {
  int found = 0;
  for (const float s : {3.0f, 0.3f, 7.0f, 0.7f, 1.1f, 0.09f, 5.5f}) {
    const float inv = 1.0f / s;
    for (int k = -127; k < 127 && found < 4; ++k) {
      float x = static_cast<float>((k + 0.5) * static_cast<double>(s));
      x = std::nextafter(std::nextafter(x, -1e30f), -1e30f);
      for (int step = 0; step < 5; ++step, x = std::nextafter(x, 1e30f)) {
        for (const Rounding mode : {kRne, kAway}) {
          const int by_division = independent_round(x / s, mode);
          const int by_reciprocal = independent_round(x * inv, mode);
          if (by_division == by_reciprocal) continue;
          ++found;
          EXPECT_EQ(quantise(KvFormat::int8(Int8Scheme::static_tensor, mode, s), {x}).codes[0], by_reciprocal)
              << "s " << s << " x " << x;
        }
      }
    }
  }
  EXPECT_GT(found, 0) << "no distinguishing case found";
}

// ---------------------------------------------------------------- tie window

TEST(Int8TieWindow, TrueNearHalfIntegersOnly) {
  using ringkv::int8_in_tie_window;
  EXPECT_TRUE(int8_in_tie_window(2.5f, 1.0f));
  EXPECT_TRUE(int8_in_tie_window(-2.5f, 1.0f));
  EXPECT_TRUE(int8_in_tie_window(0.5f, 1.0f));
  EXPECT_TRUE(int8_in_tie_window(127.5f, 1.0f));
  EXPECT_TRUE(int8_in_tie_window(5.0f, 2.0f));                      // 2.5
  EXPECT_TRUE(int8_in_tie_window(2.5f + 2e-6f, 1.0f));              // within 2^-20 * 2.5 = 2.4e-6
  EXPECT_TRUE(int8_in_tie_window(2.5f - 2e-6f, 1.0f));
  EXPECT_FALSE(int8_in_tie_window(2.5f + 3e-6f, 1.0f));             // just outside
  EXPECT_FALSE(int8_in_tie_window(2.51f, 1.0f));
  EXPECT_FALSE(int8_in_tie_window(2.0f, 1.0f));
  EXPECT_FALSE(int8_in_tie_window(0.0f, 1.0f));
  EXPECT_FALSE(int8_in_tie_window(-3.0f, 1.0f));
  EXPECT_FALSE(int8_in_tie_window(2.5f, 0.0f));                     // zero group
  EXPECT_FALSE(int8_in_tie_window(2.5f, std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(int8_in_tie_window(2.5f, std::numeric_limits<float>::quiet_NaN()));
  // A scale that is not a power of two: x = fl32(2.5 * 0.1f) is within the window.
  EXPECT_TRUE(int8_in_tie_window(2.5f * 0.1f, 0.1f));
  EXPECT_FALSE(int8_in_tie_window(2.7f * 0.1f, 0.1f));
}

// ---------------------------------------------------------------- element bound

namespace {

struct BoundCheck {
  int checked = 0;
  int violations = 0;
  std::string first;
};

void check_bound_on_group(const KvFormat& f, const std::vector<float>& x, BoundCheck& out) {
  std::vector<int8_t> codes(x.size());
  const Int8Group g = ringkv::int8_quantise_group(f, x.data(), static_cast<int>(x.size()), codes.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const float xhat = ringkv::int8_dequantise(codes[i], g.stored_scale);
    const double err = std::fabs(static_cast<double>(x[i]) - static_cast<double>(xhat));
    const double bound = ringkv::int8_element_bound(f, x[i], g);
    ++out.checked;
    if (!(err <= bound)) {
      if (out.violations++ == 0) {
        out.first = ringkv::to_string(f) + ": x = " + std::to_string(x[i]) + " (" +
                    std::to_string(std::bit_cast<uint32_t>(x[i])) + " bits), x̂ = " + std::to_string(xhat) +
                    ", err " + std::to_string(err) + " > bound " + std::to_string(bound);
      }
    }
  }
}

}  // namespace

TEST(Int8ElementBound, HoldsForRandomGroupsOfEveryScheme) {
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Rounding mode : {kRne, kAway}) {
    // Magnitudes from tiny (but normal scales) to large (q8_0 kept below f16 overflow).
    for (const float magnitude : {1e-30f, 1e-6f, 1e-3f, 0.37f, 1.0f, 3.0f, 1000.0f, 1e6f}) {
      for (const Int8Scheme scheme : {Int8Scheme::per_head, Int8Scheme::q8_0}) {
        const KvFormat f = KvFormat::int8(scheme, mode);
        BoundCheck result;
        for (int trial = 0; trial < 200; ++trial) {
          std::vector<float> x(64);
          for (float& v : x) v = magnitude * (trial % 2 == 0 ? normal(rng) : uniform(rng));
          // Plant exact or near ties against the group's own scale.
          float amax = 0.0f;
          for (float v : x) amax = std::max(amax, std::fabs(v));
          const float s = amax / 127.0f;
          x[7] = s * 2.5f;
          x[9] = -s * 100.5f;
          check_bound_on_group(f, std::vector<float>(x.begin(), x.begin() + 32), result);
          check_bound_on_group(f, x, result);
        }
        EXPECT_EQ(result.violations, 0) << result.first;
        EXPECT_GT(result.checked, 0);
      }
    }
    for (const float scale : {0.01f, 0.3f, 1.0f, 3.7f, 250.0f}) {
      const KvFormat f = KvFormat::int8(Int8Scheme::static_tensor, mode, scale);
      BoundCheck result;
      for (int trial = 0; trial < 200; ++trial) {
        std::vector<float> x(64);
        // Up to twice the clip level, so that some elements clip.
        for (float& v : x) v = 255.0f * scale * uniform(rng);
        x[3] = scale * 2.5f;
        x[4] = scale * -126.5f;
        check_bound_on_group(f, x, result);
      }
      EXPECT_EQ(result.violations, 0) << result.first;
    }
  }
}

TEST(Int8ElementBound, HoldsWhenThePerHeadScaleIsSubnormal) {
  // amax = 190 * 2^-149 (a subnormal f32, accepted as K/V input): s = fl32(amax / 127)
  // = fl32(1.496 * 2^-149) = 2^-149, so x / s = 190 clamps to code 127 and
  // x̂ = 127 * 2^-149: |x - x̂| = 63 * 2^-149, far above half a step.
  for (const Rounding mode : {kRne, kAway}) {
    const KvFormat f = KvFormat::int8(Int8Scheme::per_head, mode);
    const float x0 = 190.0f * std::numeric_limits<float>::denorm_min();
    BoundCheck result;
    check_bound_on_group(f, {x0, 0.0f, -x0 * 0.5f, 0.0f}, result);
    EXPECT_EQ(result.violations, 0) << result.first;
  }
}

TEST(Int8ElementBound, HalfAStepAloneIsNotEnoughForQ80) {
  // q8_0 dequantises with f16(d) != d: pick d just below 1 + 2^-11 so that f16(d) = 1,
  // and an element at 126.45 steps. x̂ = 126 * 1, |x - x̂| = 0.45 d + 126 (d - 1) > d / 2.
  const float target_d = 1.0f + 0x1p-11f - 0x1p-20f;
  const float amax = 127.0f * target_d;
  const float d = amax / 127.0f;
  const float x1 = 126.45f * d;
  const std::vector<float> x = padded_f({amax, x1}, 32);
  const KvFormat f = KvFormat::int8(Int8Scheme::q8_0, kRne);
  std::vector<int8_t> codes(32);
  const Int8Group g = ringkv::int8_quantise_group(f, x.data(), 32, codes.data());
  ASSERT_EQ(g.divisor_scale, d);
  ASSERT_EQ(g.stored_scale, 1.0f);  // f16(d) = 1 != d
  ASSERT_EQ(codes[1], 126);
  const float x1hat = ringkv::int8_dequantise(codes[1], g.stored_scale);
  const double err = std::fabs(static_cast<double>(x1) - static_cast<double>(x1hat));
  EXPECT_GT(err, 0.5 * static_cast<double>(g.divisor_scale)) << "plain s/2 must be violated here";
  EXPECT_LE(err, ringkv::int8_element_bound(f, x1, g)) << "the scheme's bound must still hold";
}

TEST(Int8ElementBound, StaticClipTermAndZeroGroup) {
  const KvFormat f = KvFormat::int8(Int8Scheme::static_tensor, kRne, 0.5f);
  const Int8Group g{0.5f, 0.5f};
  // |x| = 100 > 127.5 * 0.5: x̂ = 63.5, err = 36.5 = clip (36.25) + s/2 (0.25).
  EXPECT_GE(ringkv::int8_element_bound(f, 100.0f, g), 36.5);
  EXPECT_LT(ringkv::int8_element_bound(f, 100.0f, g), 36.5 + 1e-3);
  EXPECT_LT(ringkv::int8_element_bound(f, 10.0f, g), 0.26);
  const KvFormat ph = KvFormat::int8(Int8Scheme::per_head, kRne);
  EXPECT_EQ(ringkv::int8_element_bound(ph, -3.0f, Int8Group{0.0f, 0.0f}), 3.0);
}

// ---------------------------------------------------------------- rows, every dtype

namespace {

std::vector<KvFormat> every_format() {
  std::vector<KvFormat> fs;
  for (const DType d : {DType::f32, DType::f16, DType::bf16}) {
    KvFormat f;
    f.dtype = d;
    fs.push_back(f);
  }
  KvFormat e4;
  e4.dtype = DType::fp8_e4m3;
  e4.scale = 0.5f;
  fs.push_back(e4);
  KvFormat e5;
  e5.dtype = DType::fp8_e5m2;
  e5.scale = 2.0f;
  fs.push_back(e5);
  for (const Rounding r : {kRne, kAway}) {
    fs.push_back(KvFormat::int8(Int8Scheme::per_head, r));
    fs.push_back(KvFormat::int8(Int8Scheme::q8_0, r));
    fs.push_back(KvFormat::int8(Int8Scheme::static_tensor, r, 0.05f));
  }
  return fs;
}

}  // namespace

TEST(Rows, EncodeDecodeAndStoreRoundTripAgreeForEveryDtype) {
  constexpr int D = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const KvFormat& f : every_format()) {
    SCOPED_TRACE(ringkv::to_string(f));
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(D);
      for (float& v : x) v = normal(rng);
      x[5] = 0.0f;
      x[6] = -0.0f;
      const size_t bpe = static_cast<size_t>(ringkv::bytes_per_element(f.dtype));
      const size_t spr = static_cast<size_t>(ringkv::scales_per_row(f, D));
      // Guards after the row and the scales must stay untouched.
      std::vector<uint8_t> bytes(D * bpe + 8, 0xab);
      std::vector<float> scales(spr + 2, -7.0f);
      ringkv::encode_row(f, D, x.data(), bytes.data(), scales.data());
      for (size_t i = D * bpe; i < bytes.size(); ++i) EXPECT_EQ(bytes[i], 0xab) << "byte guard " << i;
      for (size_t i = spr; i < scales.size(); ++i) EXPECT_EQ(scales[i], -7.0f) << "scale guard " << i;

      std::vector<float> decoded(D, -99.0f), stored(D, -98.0f);
      ringkv::decode_row(f, D, bytes.data(), scales.data(), decoded.data());
      ringkv::store_round_trip(f, D, x.data(), stored.data());
      for (int i = 0; i < D; ++i) {
        const auto k = static_cast<size_t>(i);
        ASSERT_EQ(std::bit_cast<uint32_t>(decoded[k]), std::bit_cast<uint32_t>(stored[k])) << "element " << i;
        float want = 0.0f;
        switch (f.dtype) {
          case DType::f32: want = x[k]; break;
          case DType::f16: {
            uint16_t h;
            std::memcpy(&h, bytes.data() + 2 * k, 2);
            EXPECT_EQ(h, ringkv::f16_bits_from_f32(x[k]));
            want = ringkv::round_to_f16(x[k]);
            break;
          }
          case DType::bf16: {
            uint16_t h;
            std::memcpy(&h, bytes.data() + 2 * k, 2);
            EXPECT_EQ(h, ringkv::bf16_bits_from_f32(x[k]));
            want = ringkv::round_to_bf16(x[k]);
            break;
          }
          case DType::fp8_e4m3:
            EXPECT_EQ(bytes[k], ringkv::fp8_e4m3_from_f32(x[k] / f.scale));
            want = ringkv::f32_from_fp8_e4m3(bytes[k]) * f.scale;
            break;
          case DType::fp8_e5m2:
            EXPECT_EQ(bytes[k], ringkv::fp8_e5m2_from_f32(x[k] / f.scale));
            want = ringkv::f32_from_fp8_e5m2(bytes[k]) * f.scale;
            break;
          case DType::int8: {
            const int G = ringkv::int8_group_size(f.int8_scheme, D);
            const int g = i / G;
            std::vector<int8_t> codes(static_cast<size_t>(G));
            const Int8Group grp = ringkv::int8_quantise_group(f, x.data() + g * G, G, codes.data());
            const int8_t code = codes[static_cast<size_t>(i - g * G)];
            EXPECT_EQ(static_cast<int8_t>(bytes[k]), code);
            if (f.int8_scheme != Int8Scheme::static_tensor) {
              EXPECT_EQ(scales[static_cast<size_t>(g)], grp.stored_scale);
            }
            want = ringkv::int8_dequantise(code, grp.stored_scale);
            break;
          }
        }
        EXPECT_EQ(std::bit_cast<uint32_t>(decoded[k]), std::bit_cast<uint32_t>(want)) << "element " << i;
      }
    }
  }
}

TEST(Rows, ScalesPerRowBytesPerElementAndGroupSize) {
  EXPECT_EQ(ringkv::bytes_per_element(DType::f32), 4);
  EXPECT_EQ(ringkv::bytes_per_element(DType::f16), 2);
  EXPECT_EQ(ringkv::bytes_per_element(DType::bf16), 2);
  EXPECT_EQ(ringkv::bytes_per_element(DType::fp8_e4m3), 1);
  EXPECT_EQ(ringkv::bytes_per_element(DType::fp8_e5m2), 1);
  EXPECT_EQ(ringkv::bytes_per_element(DType::int8), 1);

  EXPECT_EQ(ringkv::int8_group_size(Int8Scheme::per_head, 96), 96);
  EXPECT_EQ(ringkv::int8_group_size(Int8Scheme::q8_0, 96), 32);
  EXPECT_EQ(ringkv::int8_group_size(Int8Scheme::static_tensor, 96), 96);

  EXPECT_EQ(ringkv::scales_per_row(KvFormat::int8(Int8Scheme::per_head, kRne), 64), 1);
  EXPECT_EQ(ringkv::scales_per_row(KvFormat::int8(Int8Scheme::per_head, kRne), 7), 1);
  EXPECT_EQ(ringkv::scales_per_row(KvFormat::int8(Int8Scheme::q8_0, kRne), 32), 1);
  EXPECT_EQ(ringkv::scales_per_row(KvFormat::int8(Int8Scheme::q8_0, kAway), 64), 2);
  EXPECT_EQ(ringkv::scales_per_row(KvFormat::int8(Int8Scheme::q8_0, kRne), 1024), 32);
  EXPECT_EQ(ringkv::scales_per_row(KvFormat::int8(Int8Scheme::static_tensor, kRne, 0.5f), 64), 0);
  for (const DType d : {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2}) {
    KvFormat f;
    f.dtype = d;
    f.int8_scheme = Int8Scheme::q8_0;  // ignored for non-int8 dtypes
    EXPECT_EQ(ringkv::scales_per_row(f, 64), 0) << ringkv::to_string(d);
  }
}

TEST(Rows, LargestRowRoundTripsForEveryDtype) {
  constexpr int D = 1024;
  std::vector<float> x(D);
  for (int i = 0; i < D; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 17) - 8.0f;
  for (const KvFormat& f : every_format()) {
    std::vector<float> a(D), b(D);
    ringkv::store_round_trip(f, D, x.data(), a.data());
    const std::vector<float> via_rows = encode_decode(f, x);
    EXPECT_EQ(a, via_rows) << ringkv::to_string(f);
  }
}
