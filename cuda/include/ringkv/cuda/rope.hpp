// ringkv cuda: RoPE from true positions (spec §8) as __host__ __device__ functions.
// Paired with reference/include/ringkv/rope.hpp. The inverse frequencies
// inv_freq_k = pow(θ', -(2k)/R) depend only on the layer, so the engine computes
// them once on the host with the reference's own code (rope_inv_freq in
// engine_core.cpp) and the kernels read them from a table: the angle
// fl64(p' · inv_freq_k) and the rotation are then the reference's operations,
// exactly rounded and never fused.
//
// cos and sin (rope_sincos) are computed here from exactly rounded f64
// operations only, so the host (cuda-plan) and the device get the same bits,
// and the kernels need no local memory (CUDA's own double sin/cos keep a
// Payne-Hanek scratch array there). They are within about one f64 ulp of the C
// library's, which the reference uses; a last-bit difference changes a rotated
// f32 element only when the f64 value lies within 2^-53 of an f32 rounding
// boundary (about one element in 5·10^8). Spec §8 and §11.1 compare rotated
// vectors within tolerance for exactly this reason.
#pragma once

#include <cstdint>

#include "ringkv/cuda/hd.hpp"

namespace ringkv::cuda {

/// RoPE style codes (ringkv::RopeStyle order).
enum : int { kRopeNone = 0, kRopeNeox = 1, kRopeGptj = 2 };

/// One layer's RoPE, flattened for kernels.
struct RopeDesc {
  int style = kRopeNone;        ///< kRopeNone, kRopeNeox, kRopeGptj
  int rotary_dim = 0;           ///< R (0 for none)
  bool linear = false;          ///< linear scaling: p' = fl64(p / factor)
  double factor = 1.0;          ///< the linear factor
  const double* inv_freq = nullptr;  ///< [R/2] pow(θ', -(2k)/R), host- or device-resident like the kernel
};

/// p' of spec §8.
RINGKV_HD double rope_scaled_position(const RopeDesc& r, int64_t position) {
  const double p = static_cast<double>(position);  // exact below 2^53
  return r.linear ? ddiv_rn(p, r.factor) : p;
}

/// angle_k = fl64(p' · inv_freq_k).
RINGKV_HD double rope_angle(double scaled_position, double inv_freq) { return dmul_rn(scaled_position, inv_freq); }

/// Largest |angle| rope_sincos reduces exactly (the engine rejects layers whose angles can exceed it).
constexpr double kRopeMaxAngle = 0x1p40;

namespace detail {

/// (s, e) with s + e = a + b exactly (Knuth's two-sum).
RINGKV_HD void two_sum(double a, double b, double* s, double* e) {
  const double sum = dadd_rn(a, b);
  const double bb = dsub_rn(sum, a);
  *e = dadd_rn(dsub_rn(a, dsub_rn(sum, bb)), dsub_rn(b, bb));
  *s = sum;
}

/// sin(r + t) for |r| <= ~pi/4, |t| <= ulp(r): Taylor series to r^17 (truncation below 2^-60).
RINGKV_HD double sin_kernel(double r, double t) {
  const double z = dmul_rn(r, r);
  double poly = 0x1.952c77030ad4ap-49;                    // 1/17!
  poly = dsub_rn(0x1.ae7f3e733b81fp-41, dmul_rn(z, poly));  // 1/15! - z/17!
  poly = dsub_rn(0x1.6124613a86d09p-33, dmul_rn(z, poly));  // 1/13! - ...
  poly = dsub_rn(0x1.ae64567f544e4p-26, dmul_rn(z, poly));  // 1/11!
  poly = dsub_rn(0x1.71de3a556c734p-19, dmul_rn(z, poly));  // 1/9!
  poly = dsub_rn(0x1.a01a01a01a01ap-13, dmul_rn(z, poly));  // 1/7!
  poly = dsub_rn(0x1.1111111111111p-7, dmul_rn(z, poly));   // 1/5!
  poly = dsub_rn(0x1.5555555555555p-3, dmul_rn(z, poly));   // 1/3! - z/5! + ...
  const double small = dsub_rn(dmul_rn(t, dsub_rn(1.0, dmul_rn(0.5, z))), dmul_rn(dmul_rn(z, r), poly));
  return dadd_rn(r, small);
}

/// cos(r + t), same domain: 1 - z/2 compensated, Taylor series to r^16.
RINGKV_HD double cos_kernel(double r, double t) {
  const double z = dmul_rn(r, r);
  double poly = 0x1.ae7f3e733b81fp-45;                     // 1/16!
  poly = dsub_rn(0x1.93974a8c07c9dp-37, dmul_rn(z, poly));  // 1/14! - z/16!
  poly = dsub_rn(0x1.1eed8eff8d898p-29, dmul_rn(z, poly));  // 1/12!
  poly = dsub_rn(0x1.27e4fb7789f5cp-22, dmul_rn(z, poly));  // 1/10!
  poly = dsub_rn(0x1.a01a01a01a01ap-16, dmul_rn(z, poly));  // 1/8!
  poly = dsub_rn(0x1.6c16c16c16c17p-10, dmul_rn(z, poly));  // 1/6!
  poly = dsub_rn(0x1.5555555555555p-5, dmul_rn(z, poly));   // 1/4! - z/6! + ...
  const double hz = dmul_rn(0.5, z);
  const double w = dsub_rn(1.0, hz);
  const double corr = dadd_rn(dsub_rn(dsub_rn(1.0, w), hz), dsub_rn(dmul_rn(dmul_rn(z, z), poly), dmul_rn(r, t)));
  return dadd_rn(w, corr);
}

}  // namespace detail

/// sin and cos of an angle with |angle| < kRopeMaxAngle: r = angle − k·π/2 in double-double
/// (π/2 in thirteen 13-bit pieces, so every k·piece is exact for k < 2^40, plus a tail), then
/// the Taylor kernels on r and the quadrant k mod 4.
RINGKV_HD void rope_sincos(double angle, double* sin_out, double* cos_out) {
  const double k = rint_f64(dmul_rn(angle, 0x1.45f306dc9c883p-1));  // angle · 2/π
  double hi = angle, lo = 0.0;
  const double pio2[14] = {0x1.921p+0,   0x1.f6ap-13,   0x1.11p-26,   0x1.68cp-39,   0x1.1a6p-54,
                           0x1.319p-69,  0x1.145p-82,   0x1.80dp-95,  0x1.839p-108, 0x1.44ap-121,
                           0x1.024p-135, 0x1.c11p-148,  0x1.4cfp-164, 0x1.31d0082efa98fp-177};
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int i = 0; i < 14; ++i) {
    double s, e;
    detail::two_sum(hi, -dmul_rn(k, pio2[i]), &s, &e);  // s + e = hi − k·piece exactly
    detail::two_sum(s, dadd_rn(lo, e), &hi, &lo);       // renormalise: |lo| <= ulp(hi) / 2
  }
  const double sn = detail::sin_kernel(hi, lo), cs = detail::cos_kernel(hi, lo);
  const int64_t q = static_cast<int64_t>(k) & 3;  // two's complement: k mod 4 for negative k too
  *sin_out = q == 0 ? sn : q == 1 ? cs : q == 2 ? -sn : -cs;
  *cos_out = q == 0 ? cs : q == 1 ? -sn : q == 2 ? -cs : sn;
}

/// The two dims pair k rotates: neox (k, k + R/2), gptj (2k, 2k + 1).
RINGKV_HD void rope_pair(int style, int rotary_dim, int k, int* ia, int* ib) {
  if (style == kRopeGptj) {
    *ia = 2 * k;
    *ib = 2 * k + 1;
  } else {
    *ia = k;
    *ib = k + rotary_dim / 2;
  }
}

/// a' = fl32(fl64(a·c) − fl64(b·s)), b' = fl32(fl64(a·s) + fl64(b·c)).
RINGKV_HD void rope_rotate_pair(float a, float b, double c, double s, float* a_out, float* b_out) {
  const double da = a, db = b;
  *a_out = f32_rn(dsub_rn(dmul_rn(da, c), dmul_rn(db, s)));
  *b_out = f32_rn(dadd_rn(dmul_rn(da, s), dmul_rn(db, c)));
}

/// Rotates x[0..D) in place at `position` (dims >= R pass through): the serial form the plan
/// and the unit tests use; the append kernel rotates one pair per thread with the same calls.
RINGKV_HD void rope_rotate_row(const RopeDesc& r, int64_t position, float* x) {
  if (r.style == kRopeNone) return;
  const double p = rope_scaled_position(r, position);
  for (int k = 0; k < r.rotary_dim / 2; ++k) {
    const double angle = rope_angle(p, r.inv_freq[k]);
    int ia, ib;
    rope_pair(r.style, r.rotary_dim, k, &ia, &ib);
    double sn, cs;
    rope_sincos(angle, &sn, &cs);
    rope_rotate_pair(x[ia], x[ib], cs, sn, &x[ia], &x[ib]);
  }
}

}  // namespace ringkv::cuda
