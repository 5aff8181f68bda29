// The one rule every exact cache check judges a stored row by (support/stored_rule.hpp; docs/
// tolerances.md §2c): exact where nothing is declared, within each side's rounding (plus slack) where
// the engine declares a storage or a rotation that changes the bits, and never further.
#include "support/stored_rule.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <vector>

#include "ringkv/quant.hpp"

namespace ringkv::conformance {
namespace {

constexpr int D = 4;

// A float of either sign with a 24-bit significand, its exponent drawn across p's range, from below
// its smallest subnormal to its largest finite value.
float gen_value(Precision p) {
  int lo = -151, hi = 127;
  switch (p) {
    case Precision::f16: lo = -26; hi = 15; break;
    case Precision::bf16: lo = -135; hi = 127; break;
    case Precision::fp8_e4m3: lo = -11; hi = 8; break;
    case Precision::fp8_e5m2: lo = -18; hi = 15; break;
    default: break;
  }
  const int e = *rc::gen::inRange(lo, hi + 1);
  // A third each: any significand, one just below the next power of two, one just above this one
  // (where the spacing changes and rounding lands on a power of two).
  const int where = *rc::gen::inRange(0, 3);
  const uint32_t off = *rc::gen::inRange<uint32_t>(0, 1u << 18);
  const uint32_t m = where == 0 ? *rc::gen::inRange<uint32_t>(0, 1u << 23) : where == 1 ? (1u << 23) - 1 - off : off;
  const float x = std::ldexp(1.0f + static_cast<float>(m) * 0x1p-23f, e);
  return *rc::gen::arbitrary<bool>() ? -x : x;
}

// The next float after x away from (or towards) zero.
float next_away(float x) { return std::nextafter(x, x < 0 ? -INFINITY : INFINITY); }

float round_to(Precision p, float x) {
  switch (p) {
    case Precision::f16: return round_to_f16(x);
    case Precision::bf16: return round_to_bf16(x);
    case Precision::fp8_e4m3: return f32_from_fp8_e4m3(fp8_e4m3_from_f32(x));
    case Precision::fp8_e5m2: return f32_from_fp8_e5m2(fp8_e5m2_from_f32(x));
    default: return x;
  }
}

// The next value of format p after v, up or down: the next code of the sign-magnitude encoding.
float neighbour(Precision p, float v, bool up) {
  if (p == Precision::f32) return std::nextafter(v, up ? INFINITY : -INFINITY);
  uint32_t c = 0, sign = 0;
  switch (p) {
    case Precision::f16: c = f16_bits_from_f32(v); sign = 0x8000; break;
    case Precision::bf16: c = bf16_bits_from_f32(v); sign = 0x8000; break;
    case Precision::fp8_e4m3: c = fp8_e4m3_from_f32(v); sign = 0x80; break;
    default: c = fp8_e5m2_from_f32(v); sign = 0x80; break;
  }
  bool neg = (c & sign) != 0;
  uint32_t mag = c & ~sign;
  if (up != neg) {
    ++mag;  // away from zero
  } else if (mag == 0) {
    neg = !neg;  // through zero
    mag = 1;
  } else {
    --mag;
  }
  c = mag | (neg ? sign : 0);
  switch (p) {
    case Precision::f16: return f32_from_f16_bits(static_cast<uint16_t>(c));
    case Precision::bf16: return f32_from_bf16_bits(static_cast<uint16_t>(c));
    case Precision::fp8_e4m3: return f32_from_fp8_e4m3(static_cast<uint8_t>(c));
    default: return f32_from_fp8_e5m2(static_cast<uint8_t>(c));
  }
}

// The neighbour of v (a value of format p) one step further from x than v (up when v == x).
float neighbour_away_from(Precision p, float v, float x) { return neighbour(p, v, v >= x); }

std::optional<StoredMismatch> judge(const StoredRule& rule, const std::vector<float>& want, const std::vector<float>& got,
                                    const std::vector<uint8_t>* tie = nullptr, const std::vector<int8_t>* wc = nullptr,
                                    const std::vector<int8_t>* gc = nullptr, const float* scale = nullptr) {
  StoredRowView w{want.data(), wc ? wc->data() : nullptr, scale, tie ? tie->data() : nullptr};
  StoredRowView g{got.data(), gc ? gc->data() : nullptr, scale, nullptr};
  int64_t checked = 0;
  return compare_stored_row(rule, D, 0, true, w, g, &checked);
}

TEST(StoredRule, ExactWhereNothingIsDeclared) {
  const StoredRule rule = stored_rule(KvFormat::of(DType::f32), std::nullopt);
  EXPECT_FALSE(rule.relaxed);
  const std::vector<float> want{0.5f, -1.25f, 3.0f, 0.0f};
  EXPECT_FALSE(judge(rule, want, want));
  std::vector<float> got = want;
  got[2] = next_away(got[2]);  // one f32 ulp
  const auto m = judge(rule, want, got);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->what, "stored K");
  EXPECT_EQ(m->dim, 2);
  EXPECT_NE(m->text.find("K[head 0][dim 2] stores"), std::string::npos) << m->text;
  got = want;
  got[3] = -0.0f;  // an f32 zero's sign is stored bits
  EXPECT_TRUE(judge(rule, want, got));
  // A declared storage equal to the config's changes nothing.
  EXPECT_FALSE(stored_rule(KvFormat::of(DType::f16), Precision::f16).relaxed);
}

TEST(StoredRule, Int8ZeroSignTieWindowAndCodes) {
  KvFormat f = KvFormat::of(DType::int8);
  f.int8_scheme = Int8Scheme::per_head;
  const StoredRule rule = stored_rule(f, Precision::bf16);  // a declared storage leaves INT8 exact
  EXPECT_FALSE(rule.relaxed);
  const float scale = 0.25f;
  const std::vector<int8_t> wc{2, -4, 0, 7};
  std::vector<float> want;
  for (int8_t c : wc) want.push_back(int8_dequantise(c, scale));
  const std::vector<uint8_t> tie{0, 1, 0, 0};
  std::vector<float> got = want;
  got[2] = -0.0f;  // spec §10.4: a zero code's sign carries nothing
  EXPECT_FALSE(judge(rule, want, got, &tie, &wc, &wc, &scale));
  std::vector<int8_t> gc = wc;
  gc[1] = -3;  // inside the tie window: the other code is conformant
  got = want;
  got[1] = int8_dequantise(gc[1], scale);
  EXPECT_FALSE(judge(rule, want, got, &tie, &wc, &gc, &scale));
  gc[1] = -2;  // two codes away: not
  got[1] = int8_dequantise(gc[1], scale);
  auto m = judge(rule, want, got, &tie, &wc, &gc, &scale);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->what, "K code");
  gc = wc;
  gc[0] = 3;  // outside the tie window, one code away
  got = want;
  got[0] = int8_dequantise(gc[0], scale);
  m = judge(rule, want, got, &tie, &wc, &gc, &scale);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->what, "K code");
  EXPECT_EQ(m->dim, 0);
  // A scale one f32 ulp off is a different stored scale.
  const float other = next_away(scale);
  StoredRowView w{want.data(), wc.data(), &scale, tie.data()}, g{want.data(), wc.data(), &other, nullptr};
  m = compare_stored_row(rule, D, 0, true, w, g, nullptr);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->what, "K scale");
}

// Rounding to p moves x by at most storage_rounding(p, 1, stored, x), measured from the stored value,
// which is half the spacing there.
RC_GTEST_PROP(StoredRule, StorageRoundingBoundsEveryRounding, ()) {
  const Precision p = *rc::gen::element(Precision::f16, Precision::bf16, Precision::fp8_e4m3, Precision::fp8_e5m2);
  const double max = p == Precision::f16 ? 65504 : p == Precision::fp8_e4m3 ? 448 : p == Precision::fp8_e5m2 ? 57344 : 3e38;
  const float x = gen_value(p);
  RC_PRE(std::fabs(x) < max);
  const float v = round_to(p, x);
  const double bound = storage_rounding(p, 1.0, v, x);
  RC_ASSERT(std::fabs(double(v) - double(x)) <= bound);
  // And no more: exactly half the spacing between v and its neighbour on x's side.
  if (v != x) RC_ASSERT(bound == std::fabs(double(neighbour(p, v, x > v)) - double(v)) / 2);
}

// Declared bf16 storage on an f32 config: bf16(x) against the spec's f32(x) passes, for any x; the
// bf16 neighbour one step further from x fails.
RC_GTEST_PROP(StoredRule, DeclaredStorageAllowsItsRoundingAndNoMore, ()) {
  const Precision p = *rc::gen::element(Precision::f16, Precision::bf16, Precision::fp8_e4m3);
  const double max = p == Precision::f16 ? 60000 : p == Precision::fp8_e4m3 ? 400 : 3e38;
  const float x = gen_value(p);
  RC_PRE(std::fabs(x) < max);
  const StoredRule rule = stored_rule(KvFormat::of(DType::f32), p);
  RC_ASSERT(rule.relaxed);
  const std::vector<float> want(D, x);
  std::vector<float> got(D, round_to(p, x));
  RC_ASSERT(!judge(rule, want, got));
  got[1] = neighbour_away_from(p, got[1], x);
  RC_PRE(std::isfinite(got[1]) && got[1] != round_to(p, x));
  const auto m = judge(rule, want, got);
  RC_ASSERT(m.has_value());
  RC_ASSERT(m->dim == 1);
}

// A rotation slack s: the stored value may move by s plus one rounding of each side, not by more.
RC_GTEST_PROP(StoredRule, SlackLoosensByItselfOnly, ()) {
  const DType dt = *rc::gen::element(DType::f32, DType::f16, DType::bf16);
  const KvFormat f = KvFormat::of(dt);
  const Precision p = precision_of(dt);
  const float x = static_cast<float>(*rc::gen::inRange(1, 4000)) / 1024.0f;
  const double s = x * 0x1p-12;
  std::vector<double> slack(D, s);
  StoredRule rule = stored_rule(f, std::nullopt);
  rule.relaxed = true;
  rule.slack = slack.data();
  rule.why = "the declared rope_angle";
  const std::vector<float> want(D, round_to(p, x));
  std::vector<float> got(D, round_to(p, static_cast<float>(x + s)));  // x' = x + s, stored
  RC_ASSERT(!judge(rule, want, got));
  // Three steps of the format beyond that: further than the slack plus half a step on each side.
  float far = got[3];
  for (int i = 0; i < 3; ++i) far = neighbour_away_from(p, far, -1.0f);
  got[3] = far;
  const auto m = judge(rule, want, got);
  RC_ASSERT(m.has_value());
  RC_ASSERT(m->dim == 3);
  RC_ASSERT(m->text.find("for the declared rope_angle") != std::string::npos);
}

}  // namespace
}  // namespace ringkv::conformance
