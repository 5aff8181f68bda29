#include "ringkv/ring.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "ringkv/quant.hpp"

namespace ringkv {

RingKvCache::RingKvCache(RingGeometry geometry, int num_kv_heads, int head_dim, KvFormat k_format,
                         KvFormat v_format)
    : geometry_(geometry),
      num_kv_heads_(num_kv_heads),
      head_dim_(head_dim),
      k_format_(k_format),
      v_format_(v_format),
      k_row_bytes_(static_cast<size_t>(head_dim) * static_cast<size_t>(bytes_per_element(k_format.dtype))),
      v_row_bytes_(static_cast<size_t>(head_dim) * static_cast<size_t>(bytes_per_element(v_format.dtype))),
      k_row_scales_(static_cast<size_t>(scales_per_row(k_format, head_dim))),
      v_row_scales_(static_cast<size_t>(scales_per_row(v_format, head_dim))) {
  const size_t rows = static_cast<size_t>(geometry.capacity) * static_cast<size_t>(num_kv_heads);
  positions_.assign(static_cast<size_t>(geometry.capacity), kEmpty);
  k_.assign(rows * k_row_bytes_, 0);
  v_.assign(rows * v_row_bytes_, 0);
  k_scales_.assign(rows * k_row_scales_, 0.0f);
  v_scales_.assign(rows * v_row_scales_, 0.0f);
}

void RingKvCache::reset() { std::fill(positions_.begin(), positions_.end(), kEmpty); }

void RingKvCache::decode_k(int64_t slot, int head, float* out) const {
  decode_row(k_format_, head_dim_, k_bytes(slot, head), k_scales(slot, head), out);
}

void RingKvCache::decode_v(int64_t slot, int head, float* out) const {
  decode_row(v_format_, head_dim_, v_bytes(slot, head), v_scales(slot, head), out);
}

namespace {
// Writes a NaN of the format into every element of a row of n elements.
void fill_nan(const KvFormat& f, uint8_t* bytes, float* scales, int n, int n_scales) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  switch (f.dtype) {
    case DType::f32:
      for (int i = 0; i < n; ++i) std::memcpy(bytes + 4 * i, &nan, 4);
      break;
    case DType::f16:
    case DType::bf16: {
      const uint16_t h = f.dtype == DType::f16 ? 0x7e00 : 0x7fc0;
      for (int i = 0; i < n; ++i) std::memcpy(bytes + 2 * i, &h, 2);
      break;
    }
    case DType::fp8_e4m3:
      std::fill(bytes, bytes + n, uint8_t{0x7f});
      break;
    case DType::fp8_e5m2:
      std::fill(bytes, bytes + n, uint8_t{0x7e});
      break;
    case DType::int8:  // code 127: NaN through a NaN scale; 127 * s for static_tensor
      std::fill(bytes, bytes + n, uint8_t{0x7f});
      break;
  }
  std::fill(scales, scales + n_scales, nan);
}
}  // namespace

void RingKvCache::poison_empty_slots() {
  for (int64_t slot = 0; slot < capacity(); ++slot) {
    if (position(slot) != kEmpty) continue;
    for (int h = 0; h < num_kv_heads_; ++h) {
      fill_nan(k_format_, k_bytes(slot, h), k_scales(slot, h), head_dim_, static_cast<int>(k_row_scales_));
      fill_nan(v_format_, v_bytes(slot, h), v_scales(slot, h), head_dim_, static_cast<int>(v_row_scales_));
    }
  }
}

size_t RingKvCache::footprint_bytes() const {
  return k_.size() + v_.size() + sizeof(float) * (k_scales_.size() + v_scales_.size()) +
         sizeof(int64_t) * positions_.size();
}

}  // namespace ringkv
