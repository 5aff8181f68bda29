// ringkv cuda: the portability layer of the __host__ __device__ functions.
//
// Every function that decides a result of the CUDA engine (slot of an index,
// visibility, RoPE, each encode and decode, split planning, the online softmax
// and the log-sum-exp merge) is written once, in the headers of this folder,
// and compiled by nvcc for the kernels and by the host compiler for the
// cuda-plan engine and the unit tests. These helpers make the arithmetic mean
// the same thing on both: exactly rounded operations that are never contracted
// into an FMA, and the same bit casts.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(RINGKV_HD)
// set by the host simulator (cuda/sim/simt.hpp): inlined into the kernels' translation units
#elif defined(__CUDACC__)
#define RINGKV_HD __host__ __device__ __forceinline__
#else
#define RINGKV_HD inline
#endif

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace ringkv::cuda {

RINGKV_HD uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

RINGKV_HD float float_of(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

// ---- f32, rounded to nearest even, one operation each (never fused) ----
RINGKV_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
/// a·b + c rounded once (a fused multiply-add).
RINGKV_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
RINGKV_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
RINGKV_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// ---- f64, the same ----
RINGKV_HD double dmul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
RINGKV_HD double ddiv_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
RINGKV_HD double dadd_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
RINGKV_HD double dsub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
/// f64 -> f32, round to nearest even.
RINGKV_HD float f32_rn(double x) {
#if defined(__CUDA_ARCH__)
  return __double2float_rn(x);
#else
  return static_cast<float>(x);
#endif
}

// ---- library functions: the C library on the host, CUDA's on the device ----
// exp and tanh may differ between the two in the last bit; the kernels' results
// are compared within tolerance for it. RoPE's cos and sin do not come from
// here: rope.hpp computes them with exactly rounded operations only, so host
// and device agree bit for bit (rope_sincos).
RINGKV_HD double rint_f64(double x) {
#if defined(__CUDA_ARCH__)
  return ::rint(x);
#else
  return std::nearbyint(x);
#endif
}
RINGKV_HD float exp_f32(float x) {
#if defined(__CUDA_ARCH__)
  return ::expf(x);
#else
  return std::exp(x);
#endif
}
RINGKV_HD float tanh_f32(float x) {
#if defined(__CUDA_ARCH__)
  return ::tanhf(x);
#else
  return std::tanh(x);
#endif
}
/// Nearest integer, ties to even (the default rounding mode on both sides).
RINGKV_HD float rint_f32(float x) {
#if defined(__CUDA_ARCH__)
  return ::rintf(x);
#else
  return std::nearbyint(x);
#endif
}
/// Nearest integer, ties away from zero (C's roundf).
RINGKV_HD float round_away_f32(float x) {
#if defined(__CUDA_ARCH__)
  return ::roundf(x);
#else
  return std::round(x);
#endif
}
RINGKV_HD float fabs_f32(float x) { return float_of(bits_of(x) & 0x7fffffffu); }
RINGKV_HD bool is_nan_f32(float x) { return (bits_of(x) & 0x7fffffffu) > 0x7f800000u; }
RINGKV_HD bool is_inf_f32(float x) { return (bits_of(x) & 0x7fffffffu) == 0x7f800000u; }
RINGKV_HD float max_f32(float a, float b) { return a > b ? a : b; }
RINGKV_HD float neg_inf_f32() { return float_of(0xff800000u); }

}  // namespace ringkv::cuda
