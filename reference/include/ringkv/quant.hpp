// ringkv: every rounding and quantisation formula of the spec (§10, §11), in
// one place. The ring engine and the oracle both use these, so they are tested
// on their own (conformance/unit/quant_test.cpp), f16 and bf16 exhaustively.
#pragma once

#include <cstdint>

#include "ringkv/config.hpp"
#include "ringkv/precision.hpp"

namespace ringkv {

// ---- IEEE half and bfloat16: round to nearest even, overflow to infinity ----
uint16_t f16_bits_from_f32(float x);
float f32_from_f16_bits(uint16_t h);
uint16_t bf16_bits_from_f32(float x);
float f32_from_bf16_bits(uint16_t h);
inline float round_to_f16(float x) { return f32_from_f16_bits(f16_bits_from_f32(x)); }
inline float round_to_bf16(float x) { return f32_from_bf16_bits(bf16_bits_from_f32(x)); }

// ---- OCP fp8: round to nearest even, saturating to the largest finite value ----
// e4m3 (max 448, no infinities, NaN = 0x7f/0xff); e5m2 (max 57344).
// NaN maps to NaN; the saturation follows vLLM/TensorRT-LLM's "satfinite" casts.
uint8_t fp8_e4m3_from_f32(float x);
float f32_from_fp8_e4m3(uint8_t b);
uint8_t fp8_e5m2_from_f32(float x);
float f32_from_fp8_e5m2(uint8_t b);

// ---- INT8 ----
/// Rounds r to the nearest integer (ties per `mode`) and clamps to [-127, 127].
int8_t int8_round_clamp(float r, Rounding mode);
/// Elements per INT8 group: head_dim for per_head, 32 for q8_0, head_dim for static_tensor.
int int8_group_size(Int8Scheme scheme, int head_dim);
/// INT8 scales stored per (token, kv head) row: D/G for per_head and q8_0, 0 for static_tensor.
int scales_per_row(const KvFormat& format, int head_dim);
/// The precision a storage dtype is (for precision profiles).
Precision precision_of(DType dtype);
/// Bytes per stored element of a format (4, 2, 2, 1, 1, 1).
int bytes_per_element(DType dtype);

/// One quantised group, as the spec computes it.
struct Int8Group {
  float divisor_scale;  ///< the scale the codes are computed against (spec: "s" or "d")
  float stored_scale;   ///< the scale used to dequantise (q8_0: f16(d), else = divisor_scale)
};

/// Quantises x[0..n) (one group) into codes; returns its scales.
Int8Group int8_quantise_group(const KvFormat& format, const float* x, int n, int8_t* codes);
/// x̂ = fl32(code * stored_scale).
inline float int8_dequantise(int8_t code, float stored_scale) {
  return static_cast<float>(code) * stored_scale;
}

/// Spec §11 tie window: r = x / s computed in f64; true iff r lies within
/// 2^-20 * |r| of a half-integer, where either neighbouring code is conformant.
bool int8_in_tie_window(float x, float divisor_scale);
/// Largest |x - x̂| the scheme allows for one element (spec §10, property 10):
/// half a code step, the ulp terms of the divisor and of the stored scale, and
/// for static_tensor the clipping of |x| > 127 * s.
double int8_element_bound(const KvFormat& format, float x, const Int8Group& group);

// ---- Rows: what a ring slot holds for one (token, kv head) ----
/// Encodes one row x[0..D) into `bytes` (D * bytes_per_element) and `scales`
/// (scales_per_row floats: the stored, dequantisation scales).
void encode_row(const KvFormat& format, int head_dim, const float* x, uint8_t* bytes, float* scales);
/// Decodes a row written by encode_row into f32 values.
void decode_row(const KvFormat& format, int head_dim, const uint8_t* bytes, const float* scales, float* out);
/// encode_row then decode_row: the value the spec says is stored.
void store_round_trip(const KvFormat& format, int head_dim, const float* x, float* out);

}  // namespace ringkv
