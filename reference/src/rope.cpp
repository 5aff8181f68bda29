#include "ringkv/rope.hpp"

#include <cmath>

namespace ringkv {

double rope_effective_theta(const RopeConfig& rope, int R) {
  if (rope.scaling == RopeScaling::ntk) {
    return rope.theta * std::pow(rope.factor, static_cast<double>(R) / static_cast<double>(R - 2));
  }
  return rope.theta;
}

double rope_scaled_position(const RopeConfig& rope, int64_t position) {
  const double p = static_cast<double>(position);  // exact: positions are < 2^31
  return rope.scaling == RopeScaling::linear ? p / rope.factor : p;
}

void rope_angles(const RopeConfig& rope, int head_dim, int64_t position, double* cos_out, double* sin_out) {
  const int R = rotary_dim(rope, head_dim);
  const double theta = rope_effective_theta(rope, R);
  const double p = rope_scaled_position(rope, position);
  for (int k = 0; k < R / 2; ++k) {
    const double inv_freq = std::pow(theta, -(2.0 * k) / static_cast<double>(R));
    const double angle = p * inv_freq;
    cos_out[k] = std::cos(angle);
    sin_out[k] = std::sin(angle);
  }
}

void rope_rotate(const RopeConfig& rope, int head_dim, const double* c, const double* s, const float* in,
                 float* out) {
  const int R = rotary_dim(rope, head_dim);
  const int half = R / 2;
  for (int k = 0; k < half; ++k) {
    const auto [ia, ib] = rope_pair(rope.style, R, k);  // neox (k, k + R/2); gptj (2k, 2k + 1)
    const double a = in[ia];
    const double b = in[ib];
    out[ia] = static_cast<float>(a * c[k] - b * s[k]);
    out[ib] = static_cast<float>(a * s[k] + b * c[k]);
  }
  if (out != in) {
    for (int d = R; d < head_dim; ++d) out[d] = in[d];
  }
}

}  // namespace ringkv
