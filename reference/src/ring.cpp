#include "ringkv/ring.hpp"

#include <algorithm>

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

size_t RingKvCache::footprint_bytes() const {
  return k_.size() + v_.size() + sizeof(float) * (k_scales_.size() + v_scales_.size()) +
         sizeof(int64_t) * positions_.size();
}

}  // namespace ringkv
