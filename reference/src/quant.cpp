#include "ringkv/quant.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

namespace ringkv {

// ---------------------------------------------------------------- f16 / bf16

uint16_t f16_bits_from_f32(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {  // NaN: quiet, keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to infinity
  if (a >= 0x38800000u) {  // normal half: rebias the exponent (127 -> 15), round 13 bits away
    uint32_t h = (a - 0x38000000u) >> 13;
    const uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into the exponent correctly
    return static_cast<uint16_t>(sign | h);
  }
  if (a <= 0x33000000u) return sign;  // <= 2^-25 (a tie with 0) rounds to zero
  // Subnormal half: value / 2^-24 = mantissa * 2^(e - 126).
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // in [14, 24]
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float f32_from_f16_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1fu) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (man << 13);
  } else {
    // zero or subnormal: man * 2^-24, exact in f32
    const float v = static_cast<float>(man) * 0x1p-24f;
    u = sign | std::bit_cast<uint32_t>(v);
  }
  return std::bit_cast<float>(u);
}

uint16_t bf16_bits_from_f32(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);  // nearest even; overflow reaches infinity
  return static_cast<uint16_t>(rounded >> 16);
}

float f32_from_bf16_bits(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// ---------------------------------------------------------------- fp8

namespace {

// Decodes an 8-bit float with `mbits` mantissa bits and exponent bias `bias`.
double decode_minifloat(uint8_t b, int mbits, int bias) {
  const int ebits = 7 - mbits;
  const int e = (b >> mbits) & ((1 << ebits) - 1);
  const int m = b & ((1 << mbits) - 1);
  const double mag = e == 0 ? std::ldexp(static_cast<double>(m), 1 - bias - mbits)
                            : std::ldexp(static_cast<double>((1 << mbits) + m), e - bias - mbits);
  return (b & 0x80) ? -mag : mag;
}

struct Fp8Table {
  std::array<float, 128> positive{};  // value of code c for c in [0, count)
  int count = 0;                      // codes 0 .. count-1 are finite and increasing
};

Fp8Table make_table(int mbits, int bias, int finite_codes) {
  Fp8Table t;
  t.count = finite_codes;
  for (int c = 0; c < finite_codes; ++c) t.positive[static_cast<size_t>(c)] = static_cast<float>(decode_minifloat(static_cast<uint8_t>(c), mbits, bias));
  return t;
}

const Fp8Table& e4m3_table() {
  static const Fp8Table t = make_table(3, 7, 0x7f);  // 0x7f is NaN; max 0x7e = 448
  return t;
}
const Fp8Table& e5m2_table() {
  static const Fp8Table t = make_table(2, 15, 0x7c);  // 0x7c is infinity; max 0x7b = 57344
  return t;
}

// Round to nearest, ties to the even code, saturating at the largest finite value.
uint8_t encode_fp8(const Fp8Table& t, float x, uint8_t nan_code) {
  if (std::isnan(x)) return nan_code;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  const auto* begin = t.positive.data();
  const auto* end = begin + t.count;
  if (a >= static_cast<double>(end[-1])) return static_cast<uint8_t>(sign | (t.count - 1));
  const auto* hi = std::upper_bound(begin, end, static_cast<float>(a),
                                    [](float v, float e) { return v < e; });  // first value > a
  // a is a float, so compare it exactly against the (double) midpoint.
  const int hi_code = static_cast<int>(hi - begin);
  const int lo_code = hi_code - 1;
  const double lo = t.positive[static_cast<size_t>(lo_code)];
  const double up = t.positive[static_cast<size_t>(hi_code)];
  if (a == lo) return static_cast<uint8_t>(sign | lo_code);
  const double mid = 0.5 * (lo + up);
  int code;
  if (a < mid) code = lo_code;
  else if (a > mid) code = hi_code;
  else code = (lo_code % 2 == 0) ? lo_code : hi_code;
  return static_cast<uint8_t>(sign | code);
}

}  // namespace

uint8_t fp8_e4m3_from_f32(float x) { return encode_fp8(e4m3_table(), x, 0x7f); }
float f32_from_fp8_e4m3(uint8_t b) {
  if ((b & 0x7f) == 0x7f) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(decode_minifloat(b, 3, 7));
}
uint8_t fp8_e5m2_from_f32(float x) { return encode_fp8(e5m2_table(), x, 0x7e); }
float f32_from_fp8_e5m2(uint8_t b) {
  const int e = (b >> 2) & 0x1f;
  if (e == 0x1f) {
    if ((b & 0x3) != 0) return std::numeric_limits<float>::quiet_NaN();
    return (b & 0x80) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(decode_minifloat(b, 2, 15));
}

// ---------------------------------------------------------------- int8

int8_t int8_round_clamp(float r, Rounding mode) {
  const double x = r;  // exact
  double q;
  if (mode == Rounding::half_away) {
    q = std::round(x);
  } else {
    const double f = std::floor(x);
    const double frac = x - f;  // exact for |x| < 2^52
    if (frac > 0.5) q = f + 1.0;
    else if (frac < 0.5) q = f;
    else q = (std::fmod(f, 2.0) == 0.0) ? f : f + 1.0;
  }
  q = std::clamp(q, -127.0, 127.0);
  return static_cast<int8_t>(q);
}

int int8_group_size(Int8Scheme scheme, int head_dim) { return scheme == Int8Scheme::q8_0 ? 32 : head_dim; }

int scales_per_row(const KvFormat& f, int head_dim) {
  if (f.dtype != DType::int8 || f.int8_scheme == Int8Scheme::static_tensor) return 0;
  return head_dim / int8_group_size(f.int8_scheme, head_dim);
}

Precision precision_of(DType d) {
  switch (d) {
    case DType::f32: return Precision::f32;
    case DType::f16: return Precision::f16;
    case DType::bf16: return Precision::bf16;
    case DType::fp8_e4m3: return Precision::fp8_e4m3;
    case DType::fp8_e5m2: return Precision::fp8_e5m2;
    case DType::int8: return Precision::int8;
  }
  return Precision::f32;
}

int bytes_per_element(DType d) {
  switch (d) {
    case DType::f32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
    case DType::int8: return 1;
  }
  return 4;
}

Int8Group int8_quantise_group(const KvFormat& f, const float* x, int n, int8_t* codes) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  switch (f.int8_scheme) {
    case Int8Scheme::per_head: {
      const float s = amax / 127.0f;
      for (int i = 0; i < n; ++i) codes[i] = s == 0.0f ? int8_t{0} : int8_round_clamp(x[i] / s, f.rounding);
      return {s, s};
    }
    case Int8Scheme::q8_0: {
      const float d = amax / 127.0f;
      const float id = d == 0.0f ? 0.0f : 1.0f / d;
      if (d == 0.0f || std::isinf(id)) {  // a zero group (or one too small for 1/d): codes 0, scale 0
        for (int i = 0; i < n; ++i) codes[i] = 0;
        return {0.0f, 0.0f};
      }
      for (int i = 0; i < n; ++i) codes[i] = int8_round_clamp(x[i] * id, f.rounding);
      return {d, round_to_f16(d)};
    }
    case Int8Scheme::static_tensor: {
      const float s = f.scale;
      const float inv = 1.0f / s;
      for (int i = 0; i < n; ++i) codes[i] = int8_round_clamp(x[i] * inv, f.rounding);
      return {s, s};
    }
  }
  return {0.0f, 0.0f};
}

bool int8_in_tie_window(float x, float divisor_scale) {
  if (divisor_scale == 0.0f || !std::isfinite(divisor_scale)) return false;
  const double r = static_cast<double>(x) / static_cast<double>(divisor_scale);
  const double dist = std::fabs(r - (std::floor(r) + 0.5));
  return dist <= 0x1p-20 * std::fabs(r);
}

double int8_element_bound(const KvFormat& f, float x, const Int8Group& g) {
  const double u = 0x1p-24;
  const double ax = std::fabs(static_cast<double>(x));
  const double s = g.divisor_scale;
  const double st = g.stored_scale;
  if (s == 0.0) return ax;  // zero group: x̂ = 0
  // static_tensor only: |x| beyond the code range is clipped to +-127 * s.
  const double clip = f.int8_scheme == Int8Scheme::static_tensor ? std::max(0.0, ax - 127.5 * s) : 0.0;
  // Half a code step; clipping; the f32 evaluation of the divisor (x / s or x * fl(1/s));
  // the stored scale's distance from the divisor (q8_0's f16) and the dequantising multiply;
  // an element inside the tie window may take the other code (2^-20 |x|); a subnormal scale
  // carries an absolute error of up to half its ulp 2^-149 in each of 127 code steps.
  const double bound = 0.5 * s + clip + 2.0 * u * ax + 127.0 * std::fabs(s - st) + 127.0 * st * u +
                       0x1p-20 * ax + 128.0 * 0x1p-149;
  return bound * (1.0 + 0x1p-20);
}

// ---------------------------------------------------------------- rows

void encode_row(const KvFormat& f, int D, const float* x, uint8_t* bytes, float* scales) {
  switch (f.dtype) {
    case DType::f32:
      std::memcpy(bytes, x, sizeof(float) * static_cast<size_t>(D));
      return;
    case DType::f16:
      for (int i = 0; i < D; ++i) {
        const uint16_t h = f16_bits_from_f32(x[i]);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
      return;
    case DType::bf16:
      for (int i = 0; i < D; ++i) {
        const uint16_t h = bf16_bits_from_f32(x[i]);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
      return;
    case DType::fp8_e4m3:
      for (int i = 0; i < D; ++i) bytes[i] = fp8_e4m3_from_f32(x[i] / f.scale);
      return;
    case DType::fp8_e5m2:
      for (int i = 0; i < D; ++i) bytes[i] = fp8_e5m2_from_f32(x[i] / f.scale);
      return;
    case DType::int8: {
      const int G = int8_group_size(f.int8_scheme, D);
      auto* codes = reinterpret_cast<int8_t*>(bytes);
      for (int g = 0; g * G < D; ++g) {
        const Int8Group grp = int8_quantise_group(f, x + g * G, G, codes + g * G);
        if (f.int8_scheme != Int8Scheme::static_tensor) scales[g] = grp.stored_scale;
      }
      return;
    }
  }
}

void decode_row(const KvFormat& f, int D, const uint8_t* bytes, const float* scales, float* out) {
  switch (f.dtype) {
    case DType::f32:
      std::memcpy(out, bytes, sizeof(float) * static_cast<size_t>(D));
      return;
    case DType::f16:
      for (int i = 0; i < D; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        out[i] = f32_from_f16_bits(h);
      }
      return;
    case DType::bf16:
      for (int i = 0; i < D; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        out[i] = f32_from_bf16_bits(h);
      }
      return;
    case DType::fp8_e4m3:
      for (int i = 0; i < D; ++i) out[i] = f32_from_fp8_e4m3(bytes[i]) * f.scale;
      return;
    case DType::fp8_e5m2:
      for (int i = 0; i < D; ++i) out[i] = f32_from_fp8_e5m2(bytes[i]) * f.scale;
      return;
    case DType::int8: {
      const auto* codes = reinterpret_cast<const int8_t*>(bytes);
      const int G = int8_group_size(f.int8_scheme, D);
      for (int i = 0; i < D; ++i) {
        const float s = f.int8_scheme == Int8Scheme::static_tensor ? f.scale : scales[i / G];
        out[i] = int8_dequantise(codes[i], s);
      }
      return;
    }
  }
}

void store_round_trip(const KvFormat& f, int D, const float* x, float* out) {
  uint8_t bytes[4 * 1024];
  float scales[1024 / 32 + 1];
  encode_row(f, D, x, bytes, scales);
  decode_row(f, D, bytes, scales, out);
}

}  // namespace ringkv
