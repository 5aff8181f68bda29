// ringkv: rotary position embedding from true positions (spec §8).
// Angle, cos, sin and rotation in float64 with no FMA contraction, rounded once to f32.
#pragma once

#include <cstdint>

#include "ringkv/config.hpp"

namespace ringkv {

/// theta actually used: theta, or theta * factor^(R/(R-2)) for ntk scaling.
double rope_effective_theta(const RopeConfig& rope, int rotary_dim);
/// The position the angle is computed from: p, or p / factor for linear scaling.
double rope_scaled_position(const RopeConfig& rope, int64_t position);

/// The two elements RoPE rotates together as its pair k < R/2: neox (k, k + R/2), gptj (2k, 2k + 1).
struct RopePair {
  int a, b;
};
inline RopePair rope_pair(RopeStyle style, int rotary_dim, int k) {
  return style == RopeStyle::gptj ? RopePair{2 * k, 2 * k + 1} : RopePair{k, k + rotary_dim / 2};
}

/// cos and sin of the R/2 angles of a position: angle_k = pos' * theta'^(-(2k)/R).
/// `cos_out` and `sin_out` hold rotary_dim/2 values.
void rope_angles(const RopeConfig& rope, int head_dim, int64_t position, double* cos_out, double* sin_out);

/// Rotates one head vector x[0..D) with precomputed angles (from rope_angles)
/// into out[0..D) (f64 arithmetic, rounded once to f32). Dims >= R pass through.
/// `in` and `out` may alias.
void rope_rotate(const RopeConfig& rope, int head_dim, const double* cos_in, const double* sin_in,
                 const float* in, float* out);

}  // namespace ringkv
