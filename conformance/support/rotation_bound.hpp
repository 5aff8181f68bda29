// ringkv conformance: how far an engine's RoPE may stray from spec §8's when it computes its angles
// in a precision coarser than f64 (its profile's rope_angle). Used by the RoPE verdict of the file
// exchange (golden/rope_verdict.hpp) and by the stored-K checks (snapshots, outputs files), so that a
// declared rope_angle loosens exactly these checks by exactly this much, and nothing else.
// Derivation: docs/golden-format.md §7.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ringkv/config.hpp"
#include "ringkv/rope.hpp"

namespace ringkv::conformance {

/// The error a rotated pair (or pass-through element) may have, with angles in a precision of unit
/// roundoff `u_angle`: (u_angle·((2k + 4)·|angle_k| + 8) + 2^-23)·r + 2^-148, where k is the pair's
/// index, angle_k spec §8's f64 angle, r = |(a, b)| of the pair (|x| and angle 0 for a pass-through
/// element; a rotation keeps r, so the unrotated or the rotated pair gives it).
double rotation_error_bound(double u_angle, int pair, double angle, double r);

/// Calls pair(a, b, k, angle_k) for every rotated pair of spec §8 at `position` (angle_k in f64) and
/// pass(d) for every element RoPE leaves alone.
template <class Pair, class Pass>
void for_each_rope_pair(const RopeConfig& rope, int D, int64_t position, Pair pair, Pass pass) {
  const int R = rope.style == RopeStyle::none ? 0 : rotary_dim(rope, D);
  const double theta = R > 0 ? rope_effective_theta(rope, R) : 0.0;
  const double scaled = rope_scaled_position(rope, position);
  std::vector<bool> in_pair(static_cast<size_t>(D), false);
  for (int k = 0; k < R / 2; ++k) {
    const RopePair p = rope_pair(rope.style, R, k);
    in_pair[static_cast<size_t>(p.a)] = in_pair[static_cast<size_t>(p.b)] = true;
    pair(p.a, p.b, k, scaled * std::pow(theta, -(2.0 * k) / double(R)));
  }
  for (int d = 0; d < D; ++d) {
    if (!in_pair[static_cast<size_t>(d)]) pass(d);
  }
}

/// How far a rotation with angles in precision `u_angle` may move each element of one row beyond spec
/// §8's rotation at `position`: the angle part of rotation_error_bound, u·((2k + 4)·|angle_k| + 8)·r,
/// for both elements of pair k, and 8u·|x| for pass-through elements. `x` is the row unrotated or
/// rotated (only pair norms enter); `scale` multiplies every r (above 1: room for storage rounding).
void rotation_slack(const RopeConfig& rope, int head_dim, int64_t position, double u_angle, const float* x, double* slack,
                    double scale = 1.0);

/// How far the f32 rotated K an engine stores may lie from the spec's (spec §8's rotation rounded to
/// f32), per element of one row, before storage rounding (support/stored_rule.hpp): rotation_slack's
/// angle part for angles of unit roundoff `u_angle` (0 for f64 angles), plus, for rotated elements, one
/// f32 step, (2^-23 + 2^-48)·r + 2^-149: two f64 rotations a few last bits apart (another C library's
/// sin and cos) can round to neighbouring f32 values. Elements RoPE leaves alone get the angle part.
void stored_k_slack(const RopeConfig& rope, int head_dim, int64_t position, double u_angle, const float* x, double* slack,
                    double scale = 1.0);

}  // namespace ringkv::conformance
