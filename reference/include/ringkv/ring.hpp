// ringkv: the ring KV cache of one (layer, sequence) (spec §3).
//
// Capacity C = min(S + W, max_tokens) slots. Token j (counted from the last
// reset) lives in slot j if j < S (a sink, never overwritten), otherwise in
// slot S + ((j - S) mod W). Every slot records the true position of the token
// it holds, or kEmpty. Storage is contiguous [slot][kv_head][dim] encoded
// bytes plus [slot][kv_head][scales_per_row] float scales, allocated once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ringkv/config.hpp"

namespace ringkv {

/// Which slot a token goes to. A spec ring uses {S, W, min(S + W, max_tokens)}.
struct RingGeometry {
  int64_t sinks = 0;     ///< S
  int64_t window = 1;    ///< W
  int64_t capacity = 1;  ///< C slots

  /// Slot of token j (j >= 0 counted from the last reset).
  int64_t slot_of(int64_t token_index) const {
    if (token_index < sinks) return token_index;
    const int64_t ring = capacity - sinks;  // slots that rotate (W, or fewer if max_tokens caps C)
    return sinks + (token_index - sinks) % ring;
  }
};

class RingKvCache {
 public:
  static constexpr int64_t kEmpty = -1;

  RingKvCache(RingGeometry geometry, int num_kv_heads, int head_dim, KvFormat k_format,
              KvFormat v_format);

  const RingGeometry& geometry() const { return geometry_; }
  int64_t capacity() const { return geometry_.capacity; }
  int num_kv_heads() const { return num_kv_heads_; }
  int head_dim() const { return head_dim_; }
  const KvFormat& k_format() const { return k_format_; }
  const KvFormat& v_format() const { return v_format_; }

  /// Marks every slot empty. Stored bytes are left as they are: the positions decide.
  void reset();

  /// True position held by a slot, or kEmpty.
  int64_t position(int64_t slot) const { return positions_[static_cast<size_t>(slot)]; }
  void set_position(int64_t slot, int64_t position) { positions_[static_cast<size_t>(slot)] = position; }

  /// Encoded K/V bytes of (slot, kv head): head_dim * bytes_per_element bytes.
  uint8_t* k_bytes(int64_t slot, int head) { return k_.data() + row_offset(slot, head, k_row_bytes_); }
  uint8_t* v_bytes(int64_t slot, int head) { return v_.data() + row_offset(slot, head, v_row_bytes_); }
  const uint8_t* k_bytes(int64_t slot, int head) const { return k_.data() + row_offset(slot, head, k_row_bytes_); }
  const uint8_t* v_bytes(int64_t slot, int head) const { return v_.data() + row_offset(slot, head, v_row_bytes_); }
  /// Stored (dequantisation) scales of (slot, kv head): scales_per_row floats.
  float* k_scales(int64_t slot, int head) { return k_scales_.data() + row_offset(slot, head, k_row_scales_); }
  float* v_scales(int64_t slot, int head) { return v_scales_.data() + row_offset(slot, head, v_row_scales_); }
  const float* k_scales(int64_t slot, int head) const { return k_scales_.data() + row_offset(slot, head, k_row_scales_); }
  const float* v_scales(int64_t slot, int head) const { return v_scales_.data() + row_offset(slot, head, v_row_scales_); }

  /// Decodes the stored K or V row of (slot, kv head) into out[0..head_dim).
  void decode_k(int64_t slot, int head, float* out) const;
  void decode_v(int64_t slot, int head, float* out) const;

  /// Fills the stored bytes and scales of every empty slot with NaN patterns
  /// (f32/f16/bf16/fp8 NaN, INT8 code 127 with NaN scales). A test hook.
  void poison_empty_slots();

  /// Bytes this cache holds: K and V bytes, scales and the position table.
  size_t footprint_bytes() const;

 private:
  size_t row_offset(int64_t slot, int head, size_t row_size) const {
    return (static_cast<size_t>(slot) * static_cast<size_t>(num_kv_heads_) + static_cast<size_t>(head)) * row_size;
  }

  RingGeometry geometry_;
  int num_kv_heads_;
  int head_dim_;
  KvFormat k_format_, v_format_;
  size_t k_row_bytes_, v_row_bytes_, k_row_scales_, v_row_scales_;
  std::vector<int64_t> positions_;
  std::vector<uint8_t> k_, v_;
  std::vector<float> k_scales_, v_scales_;
};

}  // namespace ringkv
