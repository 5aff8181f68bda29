// ringkv cuda: the decode plan's numerics as __host__ __device__ functions: the
// score of one key (scale and softcap), split planning, the online softmax
// state per split, and the log-sum-exp merge of the splits (with the learned
// sink logit). The fused decode kernel, the cuBLAS path's masked softmax and
// the cuda-plan engine all call these, in the same order.
#pragma once

#include <cstdint>

#include "ringkv/cuda/hd.hpp"

namespace ringkv::cuda {

// ---------------------------------------------------------------- scores

/// s = fl32(τ·dot), then c·tanh(s/c) if a softcap c > 0 is set (spec §9, the reference's f32 form).
RINGKV_HD float score_of(float dot, float scale, bool capped, float cap) {
  float s = mul_rn(scale, dot);
  if (capped) s = mul_rn(cap, tanh_f32(div_rn(s, cap)));
  return s;
}

// ---------------------------------------------------------------- split planning

/// How the fused decode kernel cuts the visible range of every sequence.
struct SplitPlan {
  int splits = 1;             ///< blocks per (sequence, kv head, head chunk) along the keys
  int64_t keys_per_split = 0; ///< a multiple of the tile; split s covers [s·k, (s+1)·k) ∩ [0, visible)
};

/// Chooses the split count from the SM count, the blocks the batch already gives
/// (B·Hkv·head chunks) and the longest visible range: enough blocks for `waves` per SM,
/// but never a split shorter than `min_tiles` tiles, and at most `max_splits`.
RINGKV_HD SplitPlan plan_splits(int64_t max_visible, int64_t base_blocks, int sm_count, int tile, int max_splits,
                                int waves = 2, int min_tiles = 2) {
  SplitPlan p;
  if (max_visible < 1) max_visible = 1;
  if (base_blocks < 1) base_blocks = 1;
  const int64_t want_blocks = static_cast<int64_t>(sm_count) * waves;
  int64_t splits = (want_blocks + base_blocks - 1) / base_blocks;
  const int64_t tiles = (max_visible + tile - 1) / tile;
  const int64_t by_length = tiles / min_tiles > 0 ? tiles / min_tiles : 1;
  if (splits > by_length) splits = by_length;
  if (splits > max_splits) splits = max_splits;
  if (splits < 1) splits = 1;
  const int64_t tiles_per_split = (tiles + splits - 1) / splits;
  p.keys_per_split = tiles_per_split * tile;
  p.splits = static_cast<int>((max_visible + p.keys_per_split - 1) / p.keys_per_split);  // no empty tail split
  return p;
}

/// The slot range [begin, end) split s covers of a sequence with `visible` slots (may be empty).
RINGKV_HD void split_range(const SplitPlan& p, int s, int64_t visible, int64_t* begin, int64_t* end) {
  int64_t b = static_cast<int64_t>(s) * p.keys_per_split;
  int64_t e = b + p.keys_per_split;
  if (b > visible) b = visible;
  if (e > visible) e = visible;
  *begin = b;
  *end = e;
}

// ---------------------------------------------------------------- online softmax (per split, f32)

/// Running state of one query head over the tiles of a split: acc (kept by the caller, D floats)
/// holds Σ exp(s_j − m)·v_j, l holds Σ exp(s_j − m).
struct OnlineSoftmax {
  float m;  ///< running max (−inf before the first key)
  float l;  ///< running sum
};

RINGKV_HD OnlineSoftmax online_start() { return OnlineSoftmax{neg_inf_f32(), 0.0f}; }

/// Starts a tile whose largest score is `tile_max`: returns the factor every accumulated value
/// (l and acc) is multiplied by, and moves m to the new max.
RINGKV_HD float online_rescale(OnlineSoftmax& st, float tile_max) {
  const float m_new = max_f32(st.m, tile_max);
  const float alpha = st.m == neg_inf_f32() ? 0.0f : exp_f32(st.m - m_new);
  st.m = m_new;
  st.l = mul_rn(st.l, alpha);
  return alpha;
}

/// The weight of a key with score s under the current max: exp(s − m).
RINGKV_HD float online_weight(const OnlineSoftmax& st, float s) { return exp_f32(s - st.m); }

// ---------------------------------------------------------------- log-sum-exp merge of the splits

/// Merge state of one query head: M the common max, den the denominator so far.
struct LseMerge {
  float m;
  float den;
};

/// Starts a merge; with a learned sink logit σ (spec §9) it joins the denominator only.
RINGKV_HD LseMerge merge_start(bool has_sink, float sink) {
  return has_sink ? LseMerge{sink, 1.0f} : LseMerge{neg_inf_f32(), 0.0f};
}

/// First pass: the common max over the splits (and the sink logit).
RINGKV_HD void merge_max(LseMerge& mg, const OnlineSoftmax& split) {
  if (split.l > 0.0f) mg.m = max_f32(mg.m, split.m);
}

/// After merge_max: the weight exp(m_s − M) of a split (0 for an empty split); adds its l.
RINGKV_HD float merge_weight(LseMerge& mg, const OnlineSoftmax& split) {
  if (!(split.l > 0.0f)) return 0.0f;
  const float w = exp_f32(split.m - mg.m);
  mg.den = mg.den + mul_rn(split.l, w);
  return w;
}

/// The sink logit's term, rescaled to the common max (call once after merge_max, before the weights).
RINGKV_HD void merge_rebase_sink(LseMerge& mg, bool has_sink, float sink) {
  mg.den = has_sink ? exp_f32(sink - mg.m) : 0.0f;
}

}  // namespace ringkv::cuda
