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

/// Slots a decode query attends without a reserve, as one range [0, n) in slot order, right after
/// token i was written into a ring of capacity min(S + W, max_tokens) with no rollback: every
/// occupied slot is visible then, and the occupied slots are exactly the first min(i + 1, capacity).
/// decode_slots() is the general form; with Q = 0 it gives this range and an empty gap.
RINGKV_HD int64_t decode_range(int64_t i, int64_t capacity) { return i + 1 < capacity ? i + 1 : capacity; }

/// The slots decode query i sees (spec §2, §3), as slot order over [0, end) minus one gap
/// [gap_begin, gap_begin + gap_len): key k in [0, decode_keys()) is slot k if k < gap_begin, else
/// k + gap_len. The set depends only on i, S, W and C (slot_of(j) for j in V(i)), so it holds in any
/// ring in which every key V(i) names is intact: token by token, with a reserve, and after any
/// rollback the honour rule (spec 1.1 §5.1.2) lets through. No per-key position is read.
struct DecodeSlots {
  int64_t end = 1;
  int64_t gap_begin = 0;
  int64_t gap_len = 0;
};

/// decode_slots(i, S, W, C): before the wrap (i + 1 <= C, slot = index) V(i) = [0, min(S, i + 1)) ∪
/// [max(S, i − W + 1), i + 1), so the gap is [S, max(S, i − W + 1)) and end = i + 1. After the wrap
/// (then C = S + W + Q and lo = i − W + 1 > S) the W keys [lo, i] fill the slots from sl = slot_of(lo)
/// to si = slot_of(i) cyclically: if sl <= si, gap [S, sl) and end si + 1; else gap [si + 1, sl) and
/// end C. With Q = 0 the gap is empty and end = decode_range(i, C).
RINGKV_HD DecodeSlots decode_slots(int64_t i, int64_t sinks, int64_t window, int64_t capacity) {
  DecodeSlots v;
  if (i + 1 <= capacity) {
    const int64_t lo = i - window + 1;
    v.end = i + 1;
    v.gap_begin = sinks;
    v.gap_len = lo > sinks ? lo - sinks : 0;
    return v;
  }
  const int64_t sl = slot_of(i - window + 1, sinks, capacity), si = slot_of(i, sinks, capacity);
  if (sl <= si) {
    v.end = si + 1;
    v.gap_begin = sinks;
    v.gap_len = sl - sinks;
  } else {
    v.end = capacity;
    v.gap_begin = si + 1;
    v.gap_len = sl - si - 1;
  }
  return v;
}

/// Keys a decode query attends: min(i + 1, S + W).
RINGKV_HD int64_t decode_keys(const DecodeSlots& v) { return v.end - v.gap_len; }

/// Slot of key k in [0, decode_keys(v)), in slot order.
RINGKV_HD int64_t decode_slot(const DecodeSlots& v, int64_t k) { return k < v.gap_begin ? k : k + v.gap_len; }

/// The slots that hold tokens [m, held) of a sequence, which a rollback to m empties: at most
/// three contiguous ranges [begin[r], end[r]), r < count (the sinks m..S − 1, then the non-sink
/// indices from max(m, S), which fill [S, C) cyclically). No other slot holds an index >= m.
struct SlotRanges {
  int count = 0;
  int64_t begin[3] = {0, 0, 0};
  int64_t end[3] = {0, 0, 0};
};

/// Appends [b, e) to r if it is not empty.
RINGKV_HD void add_slot_range(SlotRanges& r, int64_t b, int64_t e) {
  if (b >= e || r.count >= 3) return;
  r.begin[r.count] = b;
  r.end[r.count] = e;
  ++r.count;
}

RINGKV_HD SlotRanges rollback_slots(int64_t m, int64_t held, int64_t sinks, int64_t capacity) {
  SlotRanges r;
  add_slot_range(r, m, held < sinks ? held : sinks);  // sinks: slot = index
  const int64_t a = m > sinks ? m : sinks, count = held - a;
  if (count <= 0) return r;
  if (count >= capacity - sinks) {
    add_slot_range(r, sinks, capacity);
    return r;
  }
  const int64_t s0 = slot_of(a, sinks, capacity), s1 = s0 + count;
  if (s1 <= capacity) {
    add_slot_range(r, s0, s1);
  } else {
    add_slot_range(r, s0, capacity);
    add_slot_range(r, sinks, sinks + (s1 - capacity));
  }
  return r;
}

/// Whether token j of a chunk [first, first + n) is the last of the chunk to land in its slot, so
/// that a commit of the whole chunk in any order leaves the ring as token-by-token writes would.
RINGKV_HD bool lands_last(int64_t j, int64_t first, int64_t n, int64_t sinks, int64_t capacity) {
  if (j < sinks) return true;
  return j + (capacity - sinks) >= first + n;
}

}  // namespace ringkv::cuda
