// ringkv cuda: every storage encode and decode of spec §10, as __host__ __device__
// functions. Paired with reference/include/ringkv/quant.hpp: the unit tests
// (conformance/unit/cuda_quant_test.cpp) check these bit for bit against the
// reference's functions, f16 and bf16 over every f32 pattern of a wide sample,
// fp8 at every code and midpoint, INT8 over random and hand-made groups.
//
// The formats are plain integers here (FormatDesc), so that one struct travels
// to the device unchanged.
#pragma once

#include <cstdint>

#include "ringkv/cuda/hd.hpp"

namespace ringkv::cuda {

/// Storage dtype codes (ringkv::DType order).
enum : int { kF32 = 0, kF16 = 1, kBF16 = 2, kFp8E4M3 = 3, kFp8E5M2 = 4, kInt8 = 5 };
/// INT8 scheme codes (ringkv::Int8Scheme order).
enum : int { kPerHead = 0, kQ8_0 = 1, kStaticTensor = 2 };
/// INT8 rounding codes (ringkv::Rounding order).
enum : int { kNearestEven = 0, kHalfAway = 1 };

/// A K or V storage format, flattened for kernels (built by format_desc() in engine_core.cpp).
struct FormatDesc {
  int dtype = kF32;            ///< kF32 .. kInt8
  int int8_scheme = kPerHead;  ///< int8 only
  int rounding = kNearestEven; ///< int8 only
  float scale = 1.0f;          ///< fp8 and int8 static_tensor: the per-tensor scale s
  int bytes = 4;               ///< bytes per stored element
  int group = 0;               ///< int8: elements per scale group G (D, or 32 for q8_0)
  int scales_per_row = 0;      ///< int8 per_head and q8_0: D / G; else 0
};

// ---------------------------------------------------------------- f16 / bf16 (RNE, overflow to inf)

RINGKV_HD uint16_t f16_bits(float x) {
  const uint32_t u = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);                       // >= 65520: inf
  if (a >= 0x38800000u) {  // normal half
    uint32_t h = (a - 0x38000000u) >> 13;
    const uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  if (a <= 0x33000000u) return sign;  // <= 2^-25 rounds to zero
  const uint32_t e = a >> 23;         // subnormal half
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

RINGKV_HD float f16_value(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return float_of(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return float_of(sign | ((exp + 112u) << 23) | (man << 13));
  return float_of(sign | bits_of(mul_rn(static_cast<float>(man), 0x1p-24f)));  // exact
}

RINGKV_HD uint16_t bf16_bits(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

RINGKV_HD float bf16_value(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }

// ---------------------------------------------------------------- fp8 (OCP, RNE, saturating)

/// Encodes y with `mbits` mantissa bits and exponent bias `bias`; `max_code` is the largest
/// finite magnitude code, `nan_code` the NaN code. The sign of zero is kept.
RINGKV_HD uint8_t fp8_bits(float y, int mbits, int bias, int max_code, int nan_code) {
  if (is_nan_f32(y)) return static_cast<uint8_t>(nan_code);
  const uint32_t sign = (bits_of(y) >> 24) & 0x80u;
  const float a = fabs_f32(y);
  // Largest finite value: code max_code decoded.
  const int max_e = (max_code >> mbits) - bias;
  const int max_m = (1 << mbits) + (max_code & ((1 << mbits) - 1));
  const float max_value = float_of(static_cast<uint32_t>(127 + max_e - mbits) << 23) * static_cast<float>(max_m);
  if (a >= max_value) return static_cast<uint8_t>(sign | static_cast<uint32_t>(max_code));
  // Quantum of a's binade (or of the subnormal range): 2^(max(e, 1 - bias) - mbits).
  const int e_min = 1 - bias;
  int e = static_cast<int>((bits_of(a) >> 23) & 0xffu) - 127;  // a < 2^16 here; f32 subnormals read as e = -127
  if (e < e_min) e = e_min;
  const float inv_quantum = float_of(static_cast<uint32_t>(127 - (e - mbits)) << 23);  // 2^-(e - mbits), normal
  const float n = rint_f32(mul_rn(a, inv_quantum));  // a / quantum is exact (a power-of-two scaling)
  const uint32_t units = static_cast<uint32_t>(n);   // in [0, 2^(mbits+1)]
  uint32_t code;
  if (e == e_min && units < (1u << mbits)) {
    code = units;  // subnormal (or zero)
  } else {
    code = (static_cast<uint32_t>(e + bias) << mbits) + (units - (1u << mbits));  // carries into the exponent
  }
  return static_cast<uint8_t>(sign | code);
}

/// Decodes an fp8 code (e4m3: mbits 3, bias 7, NaN = S.1111.111; e5m2: mbits 2, bias 15, IEEE inf/NaN).
RINGKV_HD float fp8_value(uint8_t b, int mbits, int bias, bool ieee_specials) {
  const int ebits = 7 - mbits;
  const int e = (b >> mbits) & ((1 << ebits) - 1);
  const int m = b & ((1 << mbits) - 1);
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  if (ieee_specials && e == (1 << ebits) - 1) return m ? float_of(0x7fc00000u) : float_of(sign | 0x7f800000u);
  if (!ieee_specials && (b & 0x7f) == 0x7f) return float_of(0x7fc00000u);
  float mag;
  if (e == 0) {
    mag = static_cast<float>(m) * float_of(static_cast<uint32_t>(127 + 1 - bias - mbits) << 23);
  } else {
    mag = static_cast<float>((1 << mbits) + m) * float_of(static_cast<uint32_t>(127 + e - bias - mbits) << 23);
  }
  return float_of(sign | bits_of(mag));
}

RINGKV_HD uint8_t e4m3_bits(float y) { return fp8_bits(y, 3, 7, 0x7e, 0x7f); }
RINGKV_HD uint8_t e5m2_bits(float y) { return fp8_bits(y, 2, 15, 0x7b, 0x7e); }
RINGKV_HD float e4m3_value(uint8_t b) { return fp8_value(b, 3, 7, false); }
RINGKV_HD float e5m2_value(uint8_t b) { return fp8_value(b, 2, 15, true); }

// ---------------------------------------------------------------- INT8

/// Rounds r to an integer (ties per `rounding`) and clamps to [-127, 127] (spec §10.5).
RINGKV_HD int8_t int8_code(float r, int rounding) {
  float q = rounding == kHalfAway ? round_away_f32(r) : rint_f32(r);
  if (q > 127.0f) q = 127.0f;
  if (q < -127.0f) q = -127.0f;
  return static_cast<int8_t>(q);
}

/// The scales of one INT8 group with absolute maximum `amax` (spec §10.4).
struct Int8Scales {
  float divisor;     ///< s_div: per_head s, q8_0 d, static s; 0 for a zero group
  float multiplier;  ///< q8_0 and static: fl32(1/s_div), the codes use x * multiplier; per_head: 0 (x / s)
  float stored;      ///< s_stored: what the cache keeps and dequantises with
  bool zero;         ///< every code is 0
};

RINGKV_HD Int8Scales int8_scales(const FormatDesc& f, float amax) {
  Int8Scales s{0.0f, 0.0f, 0.0f, false};
  if (f.int8_scheme == kStaticTensor) {
    s.divisor = s.stored = f.scale;
    s.multiplier = div_rn(1.0f, f.scale);
    return s;
  }
  const float d = div_rn(amax, 127.0f);
  if (f.int8_scheme == kPerHead) {
    s.divisor = s.stored = d;
    s.zero = d == 0.0f;
    return s;
  }
  // q8_0: codes from x * fl32(1/d); stored f16(d); a zero group when d = 0 or 1/d overflows
  const float id = d == 0.0f ? 0.0f : div_rn(1.0f, d);
  if (d == 0.0f || is_inf_f32(id)) {
    s.zero = true;
    return s;
  }
  s.divisor = d;
  s.multiplier = id;
  s.stored = f16_value(f16_bits(d));
  return s;
}

/// The code of one element of a group with scales `s`.
RINGKV_HD int8_t int8_encode(const FormatDesc& f, const Int8Scales& s, float x) {
  if (s.zero) return 0;
  const float r = f.int8_scheme == kPerHead ? div_rn(x, s.divisor) : mul_rn(x, s.multiplier);
  return int8_code(r, f.rounding);
}

/// x̂ = fl32(code · s_stored).
RINGKV_HD float int8_value(int8_t code, float stored_scale) { return mul_rn(static_cast<float>(code), stored_scale); }

// ---------------------------------------------------------------- one element of a float format

/// Writes element i of a row in a float format (f32, f16, bf16, fp8) into `row`.
RINGKV_HD void encode_float_element(const FormatDesc& f, float x, uint8_t* row, int i) {
  switch (f.dtype) {
    case kF32: {
      const uint32_t u = bits_of(x);
      row[4 * i] = static_cast<uint8_t>(u);
      row[4 * i + 1] = static_cast<uint8_t>(u >> 8);
      row[4 * i + 2] = static_cast<uint8_t>(u >> 16);
      row[4 * i + 3] = static_cast<uint8_t>(u >> 24);
      return;
    }
    case kF16:
    case kBF16: {
      const uint16_t h = f.dtype == kF16 ? f16_bits(x) : bf16_bits(x);
      row[2 * i] = static_cast<uint8_t>(h);
      row[2 * i + 1] = static_cast<uint8_t>(h >> 8);
      return;
    }
    case kFp8E4M3: row[i] = e4m3_bits(div_rn(x, f.scale)); return;
    case kFp8E5M2: row[i] = e5m2_bits(div_rn(x, f.scale)); return;
    default: return;
  }
}

/// Decodes element i of a stored row (any format); `scales` are the row's stored scales.
RINGKV_HD float decode_element(const FormatDesc& f, const uint8_t* row, const float* scales, int i) {
  switch (f.dtype) {
    case kF32:
      return float_of(static_cast<uint32_t>(row[4 * i]) | (static_cast<uint32_t>(row[4 * i + 1]) << 8) |
                      (static_cast<uint32_t>(row[4 * i + 2]) << 16) | (static_cast<uint32_t>(row[4 * i + 3]) << 24));
    case kF16: return f16_value(static_cast<uint16_t>(row[2 * i] | (row[2 * i + 1] << 8)));
    case kBF16: return bf16_value(static_cast<uint16_t>(row[2 * i] | (row[2 * i + 1] << 8)));
    case kFp8E4M3: return mul_rn(e4m3_value(row[i]), f.scale);
    case kFp8E5M2: return mul_rn(e5m2_value(row[i]), f.scale);
    case kInt8: {
      const float s = f.int8_scheme == kStaticTensor ? f.scale : scales[i / f.group];
      return int8_value(static_cast<int8_t>(row[i]), s);
    }
    default: return 0.0f;
  }
}

/// Encodes a whole row x[0..D) (the serial order the plan and the unit tests use; the append
/// kernel computes the same values with one thread per element and a reduction for amax).
RINGKV_HD void encode_row(const FormatDesc& f, int D, const float* x, uint8_t* row, float* scales) {
  if (f.dtype != kInt8) {
    for (int i = 0; i < D; ++i) encode_float_element(f, x[i], row, i);
    return;
  }
  for (int g0 = 0; g0 < D; g0 += f.group) {
    float amax = 0.0f;
    for (int i = g0; i < g0 + f.group; ++i) amax = max_f32(amax, fabs_f32(x[i]));
    const Int8Scales s = int8_scales(f, amax);
    for (int i = g0; i < g0 + f.group; ++i) row[i] = static_cast<uint8_t>(int8_encode(f, s, x[i]));
    if (f.scales_per_row > 0) scales[g0 / f.group] = s.stored;
  }
}

/// Writes the NaN pattern of the format into element i (poison_empty_slots; INT8 code 127).
RINGKV_HD void poison_element(const FormatDesc& f, uint8_t* row, int i) {
  switch (f.dtype) {
    case kF32: encode_float_element(f, float_of(0x7fc00000u), row, i); return;
    case kF16: row[2 * i] = 0x00; row[2 * i + 1] = 0x7e; return;
    case kBF16: row[2 * i] = 0xc0; row[2 * i + 1] = 0x7f; return;
    case kFp8E4M3: row[i] = 0x7f; return;
    case kFp8E5M2: row[i] = 0x7e; return;
    default: row[i] = 0x7f; return;
  }
}

}  // namespace ringkv::cuda
