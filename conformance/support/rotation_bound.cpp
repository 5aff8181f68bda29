#include "support/rotation_bound.hpp"

namespace ringkv::conformance {

double rotation_error_bound(double u_angle, int pair, double angle, double r) {
  // The angle p'·inv_freq_k in precision u: p' rounded, inv_freq_k from pow (or, as ggml does, from
  // k repeated multiplications by a rounded theta^(-2/R): 2k + 2 roundings) and the product, each
  // relative to the angle; cos, sin and the rotation arithmetic a few u absolutely (the 8). Then the
  // rotated f32 values: one f32 ulp each, which also covers a C library whose pow, cos or sin differs
  // in the last f64 bit; 2^-148 for pairs in the subnormal range.
  return (u_angle * ((2.0 * pair + 4.0) * std::fabs(angle) + 8.0) + 0x1p-23) * r + 0x1p-148;
}

void rotation_slack(const RopeConfig& rope, int D, int64_t position, double u_angle, const float* x, double* slack,
                    double scale) {
  for_each_rope_pair(
      rope, D, position,
      [&](int a, int b, int k, double angle) {
        slack[a] = slack[b] = u_angle * ((2.0 * k + 4.0) * std::fabs(angle) + 8.0) * scale * std::hypot(double(x[a]), double(x[b]));
      },
      [&](int d) { slack[d] = u_angle * 8.0 * scale * std::fabs(double(x[d])); });
}

void stored_k_slack(const RopeConfig& rope, int D, int64_t position, double u_angle, const float* x, double* slack,
                    double scale) {
  for_each_rope_pair(
      rope, D, position,
      [&](int a, int b, int k, double angle) {
        const double r = scale * std::hypot(double(x[a]), double(x[b]));
        slack[a] = slack[b] = u_angle * ((2.0 * k + 4.0) * std::fabs(angle) + 8.0) * r + (0x1p-23 + 0x1p-48) * r + 0x1p-149;
      },
      [&](int d) { slack[d] = u_angle * 8.0 * scale * std::fabs(double(x[d])); });
}

}  // namespace ringkv::conformance
