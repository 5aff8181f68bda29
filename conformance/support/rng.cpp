#include "support/rng.hpp"

#include <initializer_list>

namespace ringkv::conformance {

uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

uint64_t hash_coords(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f) {
  uint64_t h = mix64(seed ^ 0x52494e474b56ull);  // "RINGKV"
  for (uint64_t v : {a, b, c, d, e, f}) h = mix64(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
  return h;
}

double unit_double(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1p-53; }

float symmetric_float(uint64_t bits) {
  const auto k = static_cast<int32_t>(bits >> 40) - (1 << 23);  // 24 bits, in [-2^23, 2^23)
  return static_cast<float>(k) * 0x1p-23f;
}

}  // namespace ringkv::conformance
