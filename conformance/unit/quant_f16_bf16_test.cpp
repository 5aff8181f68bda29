// Exhaustive tests of the IEEE half and bfloat16 conversions of ringkv/quant.hpp.
//
// f16_bits_from_f32 is compared, for every one of the 2^32 f32 bit patterns,
// against the compiler's own float -> _Float16 conversion (GCC on x86-64).
// bf16_bits_from_f32 is compared, for every pattern, against an independent
// implementation written here: it compares |x| in double with its two
// neighbouring bf16 values and picks the nearer, ties to the even code. A second
// independent one (frexp/ldexp spacing, slower) cross-checks it on a sample. The decoders are checked over all 65536 codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "ringkv/quant.hpp"

namespace {

__extension__ typedef _Float16 Half;

constexpr uint64_t kAllF32Patterns = uint64_t{1} << 32;

/// Mismatches found by one scan: a count and the first few, described.
struct ScanResult {
  uint64_t mismatches = 0;
  std::vector<std::string> first;

  void record(const std::string& what) {
    if (first.size() < 8) first.push_back(what);
    ++mismatches;
  }
  void merge(const ScanResult& other) {
    mismatches += other.mismatches;
    for (const std::string& s : other.first) {
      if (first.size() < 8) first.push_back(s);
    }
  }
  std::string report() const {
    std::string s = std::to_string(mismatches) + " mismatches";
    for (const std::string& f : first) s += "\n  " + f;
    return s;
  }
};

/// Runs scan(begin, end, stride, result) over [0, 2^32) split across two std::threads.
template <class Scan>
ScanResult scan_all_f32_patterns(Scan scan, uint64_t stride = 1) {
  ScanResult parts[2];
  std::thread low([&] { scan(uint64_t{0}, kAllF32Patterns / 2, stride, parts[0]); });
  std::thread high([&] { scan(kAllF32Patterns / 2, kAllF32Patterns, stride, parts[1]); });
  low.join();
  high.join();
  ScanResult all;
  all.merge(parts[0]);
  all.merge(parts[1]);
  return all;
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string describe_mismatch(uint32_t input, uint32_t got, uint32_t want) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "f32 %s (%.9g): got %s, want %s", hex(input).c_str(),
                static_cast<double>(std::bit_cast<float>(input)), hex(got).c_str(), hex(want).c_str());
  return buf;
}

bool f32_bits_are_nan(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }
bool f16_bits_are_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
bool bf16_bits_are_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0; }

// ---- the compiler's float -> _Float16 conversion ----

/// With F16C the compiler converts with vcvtps2ph (round to nearest even per MXCSR).
__attribute__((target("f16c"), noinline)) uint16_t compiler_f16_bits_f16c(float x) {
  const Half h = static_cast<Half>(x);
  return std::bit_cast<uint16_t>(h);
}

/// Without F16C it calls libgcc's soft-float __truncsfhf2 (correct, but ~40x slower).
__attribute__((noinline)) uint16_t compiler_f16_bits_soft(float x) {
  const Half h = static_cast<Half>(x);
  return std::bit_cast<uint16_t>(h);
}

float compiler_f32_from_f16_bits(uint16_t bits) {
  const Half h = std::bit_cast<Half>(bits);
  return static_cast<float>(h);
}

// Blocks of the exhaustive f16 scan: the compiler converts a whole block in one loop.
constexpr int kBlock = 1024;

__attribute__((target("f16c"))) void compiler_f16_block_f16c(const float* x, uint16_t* out) {
  for (int i = 0; i < kBlock; ++i) out[i] = std::bit_cast<uint16_t>(static_cast<Half>(x[i]));
}

void compiler_f16_block_soft(const float* x, uint16_t* out) {
  for (int i = 0; i < kBlock; ++i) out[i] = std::bit_cast<uint16_t>(static_cast<Half>(x[i]));
}

using F16BlockConversion = void (*)(const float*, uint16_t*);

void scan_f16(F16BlockConversion reference, uint64_t begin, uint64_t end, uint64_t stride, ScanResult& result) {
  float x[kBlock];
  uint16_t want[kBlock];
  for (uint64_t first = begin; first < end; first += stride * kBlock) {
    int n = 0;
    for (; n < kBlock && first + static_cast<uint64_t>(n) * stride < end; ++n) {
      x[n] = std::bit_cast<float>(static_cast<uint32_t>(first + static_cast<uint64_t>(n) * stride));
    }
    for (int k = n; k < kBlock; ++k) x[k] = 0.0f;
    reference(x, want);
    for (int k = 0; k < n; ++k) {
      const auto u = std::bit_cast<uint32_t>(x[k]);
      const uint16_t got = ringkv::f16_bits_from_f32(x[k]);
      if (f32_bits_are_nan(u)) {
        // NaN in: only a quiet NaN of the same sign is required (spec §10.2).
        const bool quiet = (got & 0x0200u) != 0;
        if (!f16_bits_are_nan(got) || !quiet || ((got >> 15) != (u >> 31))) {
          result.record(describe_mismatch(u, got, 0x7e00u));
        }
        continue;
      }
      if (got != want[k]) result.record(describe_mismatch(u, got, want[k]));
    }
  }
}

// ---- two independent bf16 roundings (neither uses the add-0x7fff trick of the library) ----

/// By frexp/ldexp: the spacing of bf16 values around |x|, the two multiples of it
/// around |x| in double, the nearer one, ties to the even multiple. Slow (libm
/// calls): used on a sample, and to cross-check the fast one below.
uint16_t frexp_bf16_bits(float x) {
  const double ax = std::fabs(static_cast<double>(x));
  const uint16_t sign = std::signbit(x) ? uint16_t{0x8000} : uint16_t{0};
  if (std::isinf(x)) return static_cast<uint16_t>(sign | 0x7f80u);
  if (ax == 0.0) return sign;
  int e = 0;
  (void)std::frexp(ax, &e);  // ax = m * 2^e, m in [0.5, 1)
  // bf16 keeps 8 significant bits; below 2^-126 (e <= -126) the spacing stays 2^-133.
  const int spacing_exp = std::max(e, -125) - 8;
  const double spacing = std::ldexp(1.0, spacing_exp);
  const double n_lo = std::floor(ax / spacing);  // exact: ax / spacing is a power-of-two scaling
  const double lo = n_lo * spacing;
  const double hi = lo + spacing;
  const double below = ax - lo, above = hi - ax;  // both exact in double
  double rounded;
  if (below < above) rounded = lo;
  else if (above < below) rounded = hi;
  else rounded = std::fmod(n_lo, 2.0) == 0.0 ? lo : hi;
  // Overflow: anything that rounds to 2^128 or beyond is infinity.
  if (rounded >= std::ldexp(1.0, 128)) return static_cast<uint16_t>(sign | 0x7f80u);
  const auto bits = std::bit_cast<uint32_t>(static_cast<float>(rounded));  // exact: a bf16 value
  return static_cast<uint16_t>(sign | (bits >> 16));
}

/// By explicit comparison of |x| with its two neighbouring bf16 values lo (toward
/// zero, code lo_code) and hi (the next one up; 2^128 above the largest finite),
/// in double: the nearer one, ties to the code with an even last bit.
uint32_t nearer_bf16_code(double ax, double lo, double hi, uint32_t lo_code) {
  const double below = ax - lo, above = hi - ax;  // exact in double
  if (below < above) return lo_code;
  if (above < below) return lo_code + 1u;
  return (lo_code % 2u == 0u) ? lo_code : lo_code + 1u;  // lo_code + 1 = 0x7f80 is infinity
}

/// The neighbours of a bf16 magnitude code (0 .. 0x7f7f) as doubles.
double bf16_value(uint32_t code) { return static_cast<double>(std::bit_cast<float>(code << 16)); }
double bf16_next_up(uint32_t lo_code) { return lo_code == 0x7f7fu ? 0x1p128 : bf16_value(lo_code + 1u); }

uint16_t neighbour_bf16_bits(float x) {
  const auto u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = u & 0x80000000u;
  const uint32_t mag = u & 0x7fffffffu;
  if (mag == 0x7f800000u) return static_cast<uint16_t>((sign | mag) >> 16);
  const uint32_t lo_code = mag >> 16;
  const double ax = static_cast<double>(std::bit_cast<float>(mag));
  const uint32_t code = nearer_bf16_code(ax, bf16_value(lo_code), bf16_next_up(lo_code), lo_code);
  return static_cast<uint16_t>((sign >> 16) | code);
}

void scan_bf16_oracles_agree(uint64_t begin, uint64_t end, uint64_t stride, ScanResult& result) {
  for (uint64_t i = begin; i < end; i += stride) {
    const auto u = static_cast<uint32_t>(i);
    if (f32_bits_are_nan(u)) continue;
    const float x = std::bit_cast<float>(u);
    const uint16_t a = neighbour_bf16_bits(x), b = frexp_bf16_bits(x);
    if (a != b) result.record(describe_mismatch(u, a, b));
  }
}

/// Scans [begin, end) (multiples of 2^16) in blocks that share their top 16 bits,
/// and so their two neighbouring bf16 values; each element is compared on its own.
void scan_bf16(uint64_t begin, uint64_t end, uint64_t /*stride*/, ScanResult& result) {
  for (uint64_t top = begin >> 16; top < (end >> 16); ++top) {
    const auto sign_and_code = static_cast<uint32_t>(top);
    const uint32_t lo_code = sign_and_code & 0x7fffu;
    const uint16_t sign = static_cast<uint16_t>(sign_and_code & 0x8000u);
    const bool inf_or_nan = (lo_code & 0x7f80u) == 0x7f80u;
    const double lo = inf_or_nan ? 0.0 : bf16_value(lo_code);
    const double hi = inf_or_nan ? 0.0 : bf16_next_up(lo_code);
    for (uint32_t low = 0; low < 65536u; ++low) {
      const uint32_t u = (sign_and_code << 16) | low;
      const float x = std::bit_cast<float>(u);
      const uint16_t got = ringkv::bf16_bits_from_f32(x);
      if (f32_bits_are_nan(u)) {
        // NaN in: only a quiet NaN is required (spec §10.2).
        if (!bf16_bits_are_nan(got) || (got & 0x0040u) == 0) result.record(describe_mismatch(u, got, 0x7fc0u));
        continue;
      }
      uint16_t want;
      if (inf_or_nan) {
        want = static_cast<uint16_t>(u >> 16);  // +-infinity
      } else {
        const double ax = static_cast<double>(std::bit_cast<float>(u & 0x7fffffffu));
        want = static_cast<uint16_t>(sign | nearer_bf16_code(ax, lo, hi, lo_code));
      }
      if (got != want) result.record(describe_mismatch(u, got, want));
    }
  }
}

uint16_t f16_of(float x) { return ringkv::f16_bits_from_f32(x); }

}  // namespace

// ---------------------------------------------------------------- f16 encode

TEST(F16FromF32, HardwareAndSoftCompilerConversionsAgreeOnASample) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  // The exhaustive test uses the F16C path when present; make sure it is the same
  // conversion as the compiler's portable one.
  for (uint64_t i = 0; i < kAllF32Patterns; i += 4093) {
    const auto u = static_cast<uint32_t>(i);
    if (f32_bits_are_nan(u)) continue;
    const float x = std::bit_cast<float>(u);
    ASSERT_EQ(compiler_f16_bits_f16c(x), compiler_f16_bits_soft(x)) << hex(u);
  }
}

TEST(F16FromF32, ExhaustiveOverAllF32PatternsMatchesCompilerFloat16) {
  const bool f16c = __builtin_cpu_supports("f16c");
  const F16BlockConversion reference = f16c ? &compiler_f16_block_f16c : &compiler_f16_block_soft;
  // The soft conversion is too slow for 2^32 calls in the time budget: sample instead.
  const uint64_t stride = f16c ? 1 : 61;
  if (!f16c) std::printf("note: no F16C, checking every %llu-th f32 pattern only\n", static_cast<unsigned long long>(stride));
  const ScanResult r = scan_all_f32_patterns(
      [reference](uint64_t begin, uint64_t end, uint64_t s, ScanResult& out) { scan_f16(reference, begin, end, s, out); },
      stride);
  EXPECT_EQ(r.mismatches, 0u) << r.report();
}

TEST(F16FromF32, NamedCases) {
  EXPECT_EQ(f16_of(0.0f), 0x0000u);
  EXPECT_EQ(f16_of(-0.0f), 0x8000u);
  EXPECT_EQ(f16_of(1.0f), 0x3c00u);
  EXPECT_EQ(f16_of(-2.0f), 0xc000u);
  EXPECT_EQ(f16_of(65504.0f), 0x7bffu);                 // largest finite half
  EXPECT_EQ(f16_of(65519.99f), 0x7bffu);                // just below the midpoint to infinity
  EXPECT_EQ(f16_of(65520.0f), 0x7c00u);                 // the midpoint: ties to even = infinity
  EXPECT_EQ(f16_of(-65520.0f), 0xfc00u);
  EXPECT_EQ(f16_of(1e10f), 0x7c00u);
  EXPECT_EQ(f16_of(std::numeric_limits<float>::infinity()), 0x7c00u);
  EXPECT_EQ(f16_of(-std::numeric_limits<float>::infinity()), 0xfc00u);
  EXPECT_EQ(f16_of(0x1p-14f), 0x0400u);                 // smallest normal
  EXPECT_EQ(f16_of(0x1p-24f), 0x0001u);                 // smallest subnormal
  EXPECT_EQ(f16_of(-0x1p-24f), 0x8001u);
  EXPECT_EQ(f16_of(0x1p-25f), 0x0000u);                 // tie between 0 and 2^-24: even = 0
  EXPECT_EQ(f16_of(-0x1p-25f), 0x8000u);
  EXPECT_EQ(f16_of(std::nextafter(0x1p-25f, 1.0f)), 0x0001u);  // just above the tie
  EXPECT_EQ(f16_of(3.0f * 0x1p-26f), 0x0001u);          // 0.75 * 2^-24 -> 2^-24
  EXPECT_EQ(f16_of(3.0f * 0x1p-25f), 0x0002u);          // 1.5 * 2^-24: tie, even = 2 * 2^-24
  EXPECT_EQ(f16_of(5.0f * 0x1p-25f), 0x0002u);          // 2.5 * 2^-24: tie, even = 2 * 2^-24
  EXPECT_EQ(f16_of(1.0f + 0x1p-11f), 0x3c00u);          // tie: even = 1
  EXPECT_EQ(f16_of(1.0f + 3.0f * 0x1p-11f), 0x3c02u);   // tie: even = 1 + 2^-9
  EXPECT_EQ(f16_of(std::numeric_limits<float>::denorm_min()), 0x0000u);
  EXPECT_TRUE(f16_bits_are_nan(f16_of(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(f16_bits_are_nan(f16_of(std::bit_cast<float>(0x7f800001u))));  // signalling, low payload
  EXPECT_TRUE(f16_bits_are_nan(f16_of(std::bit_cast<float>(0xff800001u))));
  EXPECT_EQ(f16_of(std::bit_cast<float>(0xff800001u)) & 0x8000u, 0x8000u);
}

TEST(F16FromF32, RoundToF16Helper) {
  EXPECT_EQ(ringkv::round_to_f16(65519.99f), 65504.0f);
  EXPECT_EQ(ringkv::round_to_f16(0.1f), 0.0999755859375f);
  EXPECT_TRUE(std::isinf(ringkv::round_to_f16(65520.0f)));
  EXPECT_TRUE(std::signbit(ringkv::round_to_f16(-0.0f)));
}

// ---------------------------------------------------------------- f16 decode

TEST(F32FromF16, ExhaustiveOverAll65536HalfPatternsMatchesCompilerFloat16) {
  int mismatches = 0;
  for (uint32_t b = 0; b < 65536u; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float got = ringkv::f32_from_f16_bits(h);
    const float want = compiler_f32_from_f16_bits(h);
    if (f16_bits_are_nan(h)) {
      if (!std::isnan(got) || std::signbit(got) != std::signbit(want)) {
        ++mismatches;
        ADD_FAILURE() << "half " << hex(h) << ": want a NaN of the same sign, got " << got;
      }
      continue;
    }
    if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want)) {
      if (++mismatches <= 8) ADD_FAILURE() << "half " << hex(h) << ": got " << got << ", want " << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(F32FromF16, NamedCases) {
  EXPECT_EQ(ringkv::f32_from_f16_bits(0x7bffu), 65504.0f);
  EXPECT_EQ(ringkv::f32_from_f16_bits(0x0001u), 0x1p-24f);
  EXPECT_EQ(ringkv::f32_from_f16_bits(0x03ffu), 1023.0f * 0x1p-24f);
  EXPECT_EQ(ringkv::f32_from_f16_bits(0x0400u), 0x1p-14f);
  EXPECT_EQ(ringkv::f32_from_f16_bits(0x3c00u), 1.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(ringkv::f32_from_f16_bits(0x8000u)), 0x80000000u);
  EXPECT_EQ(ringkv::f32_from_f16_bits(0x7c00u), std::numeric_limits<float>::infinity());
  EXPECT_EQ(ringkv::f32_from_f16_bits(0xfc00u), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(ringkv::f32_from_f16_bits(0x7e00u)));
  EXPECT_TRUE(std::isnan(ringkv::f32_from_f16_bits(0x7c01u)));
}

TEST(F16RoundTrip, EveryNonNanHalfSurvivesDecodeThenEncode) {
  for (uint32_t b = 0; b < 65536u; ++b) {
    const auto h = static_cast<uint16_t>(b);
    if (f16_bits_are_nan(h)) continue;
    ASSERT_EQ(ringkv::f16_bits_from_f32(ringkv::f32_from_f16_bits(h)), h) << hex(h);
  }
}

// ---------------------------------------------------------------- bf16

TEST(Bf16FromF32, IndependentImplementationsSelfCheck) {
  for (auto* oracle : {&neighbour_bf16_bits, &frexp_bf16_bits}) {
    EXPECT_EQ(oracle(1.0f), 0x3f80u);
    EXPECT_EQ(oracle(1.0f + 0x1p-8f), 0x3f80u);         // tie: even
    EXPECT_EQ(oracle(1.0f + 3.0f * 0x1p-8f), 0x3f82u);  // tie: even
    EXPECT_EQ(oracle(std::numeric_limits<float>::max()), 0x7f80u);
    EXPECT_EQ(oracle(-std::numeric_limits<float>::infinity()), 0xff80u);
    EXPECT_EQ(oracle(std::numeric_limits<float>::denorm_min()), 0x0000u);
    EXPECT_EQ(oracle(0x1p-133f), 0x0001u);
    EXPECT_EQ(oracle(-0x1p-126f), 0x8080u);
    EXPECT_EQ(oracle(-0.0f), 0x8000u);
  }
}

TEST(Bf16FromF32, TheTwoIndependentImplementationsAgreeOnASample) {
  const ScanResult r = scan_all_f32_patterns(&scan_bf16_oracles_agree, 509);
  EXPECT_EQ(r.mismatches, 0u) << r.report();
}

TEST(Bf16FromF32, ExhaustiveOverAllF32PatternsMatchesIndependentRounding) {
  const ScanResult r = scan_all_f32_patterns(&scan_bf16);
  EXPECT_EQ(r.mismatches, 0u) << r.report();
}

TEST(Bf16FromF32, NamedCases) {
  using ringkv::bf16_bits_from_f32;
  EXPECT_EQ(bf16_bits_from_f32(0.0f), 0x0000u);
  EXPECT_EQ(bf16_bits_from_f32(-0.0f), 0x8000u);
  EXPECT_EQ(bf16_bits_from_f32(1.0f), 0x3f80u);
  EXPECT_EQ(bf16_bits_from_f32(std::bit_cast<float>(0x3f808000u)), 0x3f80u);  // tie, even down
  EXPECT_EQ(bf16_bits_from_f32(std::bit_cast<float>(0x3f818000u)), 0x3f82u);  // tie, even up
  EXPECT_EQ(bf16_bits_from_f32(std::bit_cast<float>(0x3f808001u)), 0x3f81u);
  EXPECT_EQ(bf16_bits_from_f32(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7fu);  // largest finite
  EXPECT_EQ(bf16_bits_from_f32(std::bit_cast<float>(0x7f7f8000u)), 0x7f80u);  // tie to infinity
  EXPECT_EQ(bf16_bits_from_f32(std::numeric_limits<float>::max()), 0x7f80u);
  EXPECT_EQ(bf16_bits_from_f32(-std::numeric_limits<float>::max()), 0xff80u);
  EXPECT_EQ(bf16_bits_from_f32(std::numeric_limits<float>::infinity()), 0x7f80u);
  EXPECT_EQ(bf16_bits_from_f32(std::bit_cast<float>(0x00008000u)), 0x0000u);  // subnormal tie: even
  EXPECT_EQ(bf16_bits_from_f32(std::bit_cast<float>(0x00018000u)), 0x0002u);
  EXPECT_TRUE(bf16_bits_are_nan(bf16_bits_from_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(bf16_bits_are_nan(bf16_bits_from_f32(std::bit_cast<float>(0x7f800001u))));  // payload in low bits
  EXPECT_TRUE(bf16_bits_are_nan(bf16_bits_from_f32(std::bit_cast<float>(0xffffffffu))));
}

TEST(F32FromBf16, ExhaustiveOverAll65536Patterns) {
  int mismatches = 0;
  for (uint32_t b = 0; b < 65536u; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float got = ringkv::f32_from_bf16_bits(h);
    const int e = (h >> 7) & 0xff, m = h & 0x7f;
    const double mag = e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134);
    if (e == 0xff) {
      const bool ok = m == 0 ? (std::isinf(got) && std::signbit(got) == ((h & 0x8000u) != 0))
                             : (std::isnan(got) && std::signbit(got) == ((h & 0x8000u) != 0));
      if (!ok && ++mismatches <= 8) ADD_FAILURE() << "bf16 " << hex(h) << ": got " << got;
      continue;
    }
    const double want = (h & 0x8000u) ? -mag : mag;
    if (static_cast<double>(got) != want || std::signbit(got) != ((h & 0x8000u) != 0)) {
      if (++mismatches <= 8) ADD_FAILURE() << "bf16 " << hex(h) << ": got " << got << ", want " << want;
    }
    // Decode then encode is the identity on every non-NaN code.
    if (ringkv::bf16_bits_from_f32(got) != h && ++mismatches <= 8) ADD_FAILURE() << "round trip of " << hex(h);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(F32FromBf16, RoundToBf16Helper) {
  EXPECT_EQ(ringkv::round_to_bf16(1.0f + 0x1p-9f), 1.0f);
  EXPECT_EQ(ringkv::round_to_bf16(3.14159265f), 3.140625f);
  EXPECT_TRUE(std::signbit(ringkv::round_to_bf16(-0.0f)));
}
