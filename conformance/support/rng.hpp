// ringkv conformance: the in-house counter-based RNG. Every input value is a
// pure function of its coordinates, so a case reproduces bit for bit with any
// standard library, and re-chunking a stream does not change its data.
#pragma once

#include <cstdint>

namespace ringkv::conformance {

/// splitmix64's finaliser: a bijective 64-bit mixer.
uint64_t mix64(uint64_t x);

/// Hash of a coordinate tuple (order matters).
uint64_t hash_coords(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0, uint64_t e = 0,
                     uint64_t f = 0);

/// Uniform in [0, 1) with 53 random bits.
double unit_double(uint64_t bits);
/// Uniform in [-1, 1), exactly representable in f32 (24 random bits).
float symmetric_float(uint64_t bits);

/// A small sequential generator for choices (also counter-based: state advances by a constant).
class CounterRng {
 public:
  explicit CounterRng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ull); }
  /// Uniform integer in [0, n), n >= 1 (modulo of 64 random bits; bias < n / 2^64).
  uint64_t below(uint64_t n) { return next() % n; }
  double uniform() { return unit_double(next()); }

 private:
  uint64_t state_;
};

}  // namespace ringkv::conformance
