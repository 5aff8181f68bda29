// ringkv cuda: one Params struct per kernel family (FlashInfer style). Every
// pointer is memory of the backend that runs the launch: device memory for the
// CUDA backend, host memory for the cuda-plan backend, which executes the same
// launches one simulated block after another (cuda/src/plan_backend.cpp).
// Shapes are in every field's comment; B = batch, C = ring capacity of the
// layer, Hq/Hkv = query/kv heads, G = Hq / Hkv, D = head_dim, n = tokens.
#pragma once

#include <cstdint>

#include "ringkv/cuda/quant.hpp"
#include "ringkv/cuda/rope.hpp"
#include "ringkv/cuda/softmax.hpp"

namespace ringkv::cuda {

/// Element type of q, k and v handed to the engine (the device entry point takes all three).
enum : int { kInF32 = 0, kInF16 = 1, kInBF16 = 2 };

/// Element i of an input tensor, widened exactly to f32.
RINGKV_HD float load_input(const void* p, int type, int64_t i) {
  if (type == kInF16) return f16_value(static_cast<const uint16_t*>(p)[i]);
  if (type == kInBF16) return bf16_value(static_cast<const uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

/// One layer's rings for every sequence, contiguous per sequence.
struct RingLayerView {
  uint8_t* k = nullptr;          ///< [B][C][Hkv][D · k.bytes] encoded rotated K
  uint8_t* v = nullptr;          ///< [B][C][Hkv][D · v.bytes] encoded V
  float* k_scales = nullptr;     ///< [B][C][Hkv][k.scales_per_row] stored INT8 scales (null if none)
  float* v_scales = nullptr;     ///< [B][C][Hkv][v.scales_per_row]
  int64_t* positions = nullptr;  ///< [B][C] true position per slot, kEmptySlot if empty
  int64_t capacity = 1;          ///< C = min(S + W + Q, max_tokens)
  int64_t sinks = 0;             ///< S
  int64_t window = 1;            ///< W
};

/// The tokens one sequence appends in one launch. Its tensors keep the engine's layout
/// [L][layer_tokens][H][D]; the launch reads tokens [token_offset, token_offset + n) of `layer`.
struct SeqItem {
  int sequence = 0;            ///< ring row b in [0, B)
  int64_t first = 0;           ///< index since reset of the launch's first token
  int64_t p0 = 0;              ///< start position of the sequence: position = p0 + index
  int64_t n = 1;               ///< tokens in this launch
  int64_t token_offset = 0;    ///< first token of the launch within the tensors
  int64_t layer_tokens = 1;    ///< tokens per layer in the tensors' layout
  const void* q = nullptr;     ///< [L][layer_tokens][Hq][D], input type
  const void* k = nullptr;     ///< [L][layer_tokens][Hkv][D]
  const void* v = nullptr;     ///< [L][layer_tokens][Hkv][D]
  float* out = nullptr;        ///< [L][layer_tokens][Hq][D] f32 outputs
};

/// Shapes and numerics every attention launch of a layer shares.
struct LayerShape {
  int layer = 0;            ///< l: selects the layer's slice of SeqItem tensors
  int num_q_heads = 1;      ///< Hq
  int num_kv_heads = 1;     ///< Hkv
  int head_dim = 1;         ///< D
  float scale = 1.0f;       ///< τ rounded to f32
  bool capped = false;      ///< softcap set
  float cap = 1.0f;         ///< c rounded to f32
  const float* sink_logits = nullptr;  ///< [Hq] this layer's learned sink logits, or null
};

/// The K/V rows of a prefill chunk between the append and the commit: the chunk attends to them
/// (gather) while the ring still holds every key its queries need.
struct StageRows {
  uint8_t* k = nullptr;          ///< [n][Hkv][D · k.bytes]
  uint8_t* v = nullptr;          ///< [n][Hkv][D · v.bytes]
  float* k_scales = nullptr;     ///< [n][Hkv][k.scales_per_row] (null if none)
  float* v_scales = nullptr;     ///< [n][Hkv][v.scales_per_row]
  int64_t* positions = nullptr;  ///< [n] true positions
};

// ---------------------------------------------------------------- 1. append

/// Rotates q and k of every token at its true position and encodes K and V (spec §8, §10).
/// Grid: items × max_n × (Hq + Hkv) rows; a row < Hq is query head h, else kv head h - Hq.
struct AppendParams {
  const SeqItem* items = nullptr;  ///< [num_items]
  int num_items = 0;
  int64_t max_n = 1;               ///< largest n of the items
  LayerShape shape;
  int input_type = kInF32;         ///< kInF32, kInF16, kInBF16
  RopeDesc rope;                   ///< the layer's RoPE (inv_freq in this backend's memory)
  FormatDesc kf, vf;               ///< K and V storage formats
  /// Rotated queries: head h = g·G + m of token t of item i goes to
  /// q_rot + i·q_item_stride + t·q_token_stride + g·q_group_stride + m·D (f32).
  float* q_rot = nullptr;
  int64_t q_item_stride = 0, q_token_stride = 0, q_group_stride = 0;
  /// false: K/V rows go to their ring slots (decode: one token per item, the slot's position is
  /// written too); true: to the stage rows of item 0 (prefill), committed after attention.
  bool staged = false;
  RingLayerView ring;
  StageRows stage;                 ///< written when staged
};

/// Copies the stage rows of a prefill chunk into their ring slots, skipping tokens a later token
/// of the same chunk overwrites (lands_last). Grid: n × Hkv.
struct CommitParams {
  const SeqItem* item = nullptr;  ///< the chunk (one sequence)
  int64_t n = 1;
  int num_kv_heads = 1, head_dim = 1;
  FormatDesc kf, vf;
  RingLayerView ring;
  StageRows stage;                          ///< read only
};

// ---------------------------------------------------------------- 2. fused split-K decode

/// Keys per tile of the fused decode kernel for a head dim: the V tile [T][D] f32 fits 32 KiB.
RINGKV_HD int decode_tile(int head_dim) {
  const int t = 8192 / (head_dim > 0 ? head_dim : 1);
  return t >= 32 ? 32 : (t >= 8 ? t : 8);
}
/// Query heads one decode block serves (its accumulators: heads · D ≤ 4096 f32 over 128 threads).
RINGKV_HD int decode_heads_per_block(int group, int head_dim) {
  int h = 4096 / (head_dim > 0 ? head_dim : 1);
  if (h > 16) h = 16;
  if (h < 1) h = 1;
  return group < h ? group : h;
}
/// Most splits a decode launch may use (the partial buffers are sized for it).
constexpr int kMaxSplits = 64;
/// Threads of a decode block.
constexpr int kDecodeThreads = 128;
/// Warps of a block of the warp decode kernel (one split per warp), and the warps per SM its
/// split planning aims for (4 blocks of 4 warps at ≤ 128 registers).
constexpr int kDecodeWarpsPerBlock = 4;
constexpr int kDecodeWarpsPerSm = 16;

/// Query heads per warp of the warp decode kernel, or 0 where it does not apply and the block
/// kernel serves the launch. It applies when K and V share a 16-bit or 8-bit dtype (f16, bf16,
/// fp8, INT8 of any scheme: a lane's 8 elements never straddle a scale group), D is 64 or 128,
/// and G is a multiple of 2: each lane then owns 8 elements of a row, a key row spans D / 8
/// lanes, and a tile of 32 / heads keys gives every lane exactly one (key, head) score.
RINGKV_HD int decode_warp_heads(int group, int head_dim, const FormatDesc& kf, const FormatDesc& vf) {
  if (kf.dtype != vf.dtype || kf.bytes != vf.bytes || (kf.bytes != 1 && kf.bytes != 2)) return 0;
  if (kf.dtype == kF32 || (head_dim != 64 && head_dim != 128)) return 0;
  if (group % 4 == 0) return 4;
  if (group % 2 == 0) return 2;
  return 0;
}

/// One decode query per item (n = 1, its token already written). Work units:
/// items × Hkv × head_chunks × plan.splits; unit (i, g, c, s) serves query heads
/// g·G + c·heads_per_block .. + heads_per_block of item i over split s of its
/// keys [0, decode_keys(v)), v = decode_slots(index, S, W, C), tile by tile in slot
/// order, key k read from slot decode_slot(v, k) (ring.hpp). The block kernel
/// runs a unit per block of kDecodeThreads; the warp kernel (warp_heads > 0) a unit
/// per warp, kDecodeWarpsPerBlock units per block, with tile = 32 / warp_heads.
struct DecodeParams {
  const SeqItem* items = nullptr;  ///< [num_items], n = 1 each
  int num_items = 0;
  LayerShape shape;
  FormatDesc kf, vf;
  RingLayerView ring;
  const float* q_rot = nullptr;    ///< [num_items][Hq][D] rotated queries (f32)
  int heads_per_block = 1;         ///< decode_heads_per_block(G, D)
  int head_chunks = 1;             ///< ceil(G / heads_per_block)
  int tile = 32;                   ///< decode_tile(D), or 32 / warp_heads
  int warp_heads = 0;              ///< decode_warp_heads(G, D, kf, vf): > 0 selects the warp kernel
  SplitPlan plan;
  float* partial_acc = nullptr;    ///< [num_items][Hq][kMaxSplits][D] Σ exp(s − m)·v per split
  float* partial_ml = nullptr;     ///< [num_items][Hq][kMaxSplits][2] (m, l) per split
};

/// Merges the splits of every (item, query head) by log-sum-exp, with the sink logit in the
/// denominator, and writes the outputs. Grid: items × Hq.
struct MergeParams {
  const SeqItem* items = nullptr;  ///< [num_items]
  int num_items = 0;
  LayerShape shape;
  int splits = 1;
  const float* partial_acc = nullptr;  ///< as DecodeParams
  const float* partial_ml = nullptr;
};

// ---------------------------------------------------------------- 3. prefill chunks (cuBLAS path)

/// Decodes one sequence's ring (C slots) and the chunk's stage rows (n) into f32 K and V with
/// their positions, the operands of the two GEMMs. Empty slots read as 0 (their positions mask
/// them). Grid: (C + n) × Hkv.
struct GatherParams {
  int sequence = 0;
  int64_t n = 1;
  int num_kv_heads = 1, head_dim = 1;
  FormatDesc kf, vf;
  RingLayerView ring;
  StageRows stage;                          ///< read only
  float* k_out = nullptr;                   ///< [Hkv][C + n][D]
  float* v_out = nullptr;                   ///< [Hkv][C + n][D]
  int64_t* key_positions = nullptr;         ///< [C + n]
};

/// Strided batched f32 GEMM C_b = op(A_b)·op(B_b) in column-major terms (cuBLAS conventions),
/// b in [0, batch): the scores (A = K^T) and P·V.
struct GemmParams {
  bool transa = false, transb = false;
  int m = 1, n = 1, k = 1;
  const float* a = nullptr; int64_t lda = 1, stride_a = 0;
  const float* b = nullptr; int64_t ldb = 1, stride_b = 0;
  float* c = nullptr;       int64_t ldc = 1, stride_c = 0;
  int batch = 1;
};

/// Turns q·k dots into normalised weights P per row, masking by the keys' true positions (spec
/// §2) and applying scale, softcap and the sink logit (spec §9). Grid: Hkv × n·G rows.
struct MaskedSoftmaxParams {
  LayerShape shape;
  float* scores = nullptr;                ///< [Hkv][n·G][keys] in: dots; out: P (0 where masked)
  const int64_t* key_positions = nullptr; ///< [keys]
  int64_t keys = 1;                       ///< C + n
  int64_t n = 1;                          ///< queries (tokens of the chunk)
  int64_t first = 0;                      ///< index since reset of the first query
  int64_t p0 = 0;
  int64_t sinks = 0, window = 1;          ///< S, W
};

/// Writes the P·V result [Hkv][n][G][D] into the item's out tensor. Grid: n × Hq.
struct ScatterParams {
  const SeqItem* item = nullptr;
  LayerShape shape;
  int64_t n = 1;
  const float* o = nullptr;  ///< [Hkv][n·G][D]
};

// ---------------------------------------------------------------- test hook

/// Writes the format's NaN pattern (INT8: code 127 and NaN scales) into every empty slot.
/// Grid: B·C × Hkv.
struct PoisonParams {
  int batch = 1, num_kv_heads = 1, head_dim = 1;
  FormatDesc kf, vf;
  RingLayerView ring;
};

}  // namespace ringkv::cuda
