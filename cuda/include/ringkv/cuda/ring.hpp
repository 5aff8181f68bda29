// ringkv cuda: the ring layout and visibility (spec §2, §3) as __host__ __device__
// functions. Paired with reference/include/ringkv/ring.hpp (RingGeometry::slot_of)
// and ReferenceEngine::attends; the unit tests compare them exhaustively over
// small S, W, C and indices.
#pragma once

#include <cstdint>

#include "ringkv/cuda/hd.hpp"

namespace ringkv::cuda {

/// Position of an empty slot in the device position table.
constexpr int64_t kEmptySlot = -1;

/// Slot of token j (counted from the last reset) in a ring of `capacity` slots with S sinks:
/// j for a sink, else S + (j - S) mod (capacity - S).
RINGKV_HD int64_t slot_of(int64_t j, int64_t sinks, int64_t capacity) {
  if (j < sinks) return j;
  return sinks + (j - sinks) % (capacity - sinks);
}

/// Spec §2: query index i sees key index j iff j <= i and (j < S or j > i - W).
RINGKV_HD bool visible(int64_t i, int64_t j, int64_t sinks, int64_t window) {
  return j <= i && (j < sinks || j > i - window);
}

/// Whether a slot holding true position `slot_position` is visible to query index i of a
/// sequence that started at p0 (empty slots never are).
RINGKV_HD bool slot_visible(int64_t i, int64_t slot_position, int64_t p0, int64_t sinks, int64_t window) {
  return slot_position != kEmptySlot && visible(i, slot_position - p0, sinks, window);
}

/// Slots a decode query attends, as one range [0, n) in slot order, right after token i was
/// written into a spec ring (capacity min(S + W, max_tokens)): every occupied slot is visible
/// then, and the occupied slots are exactly the first min(i + 1, capacity).
RINGKV_HD int64_t decode_range(int64_t i, int64_t capacity) { return i + 1 < capacity ? i + 1 : capacity; }

/// Whether token j of a chunk [first, first + n) is the last of the chunk to land in its slot, so
/// that a commit of the whole chunk in any order leaves the ring as token-by-token writes would.
RINGKV_HD bool lands_last(int64_t j, int64_t first, int64_t n, int64_t sinks, int64_t capacity) {
  if (j < sinks) return true;
  return j + (capacity - sinks) >= first + n;
}

}  // namespace ringkv::cuda
