#include "mutants/mutants.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringkv/quant.hpp"
#include "ringkv/reference_engine.hpp"
#include "ringkv/rope.hpp"
#include "support/capabilities.hpp"
#include "support/profiles.hpp"

namespace ringkv::conformance {
namespace {

// Window W + 1, with a ring one slot larger so that the mask, not the eviction, decides.
class WindowPlusOne : public ReferenceEngine {
 public:
  explicit WindowPlusOne(Config c) : ReferenceEngine(std::move(c)) { rebuild_rings(); }

 protected:
  RingGeometry ring_geometry(int layer) const override {
    const LayerConfig& L = config_.layers[static_cast<size_t>(layer)];
    return RingGeometry{L.sinks, L.window + 1, std::min(L.sinks + L.window + 1, config_.max_tokens)};
  }
  bool attends(int layer, int64_t i, int64_t j) const override {
    const LayerConfig& L = config_.layers[static_cast<size_t>(layer)];
    return j <= i && (j < L.sinks || j > i - (L.window + 1));
  }
  const char* engine_name() const override { return "mutant:window_plus_one"; }
};

// Window W - 1 (the ring is right; the mask drops the oldest key).
class WindowMinusOne : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  bool attends(int layer, int64_t i, int64_t j) const override {
    const LayerConfig& L = config_.layers[static_cast<size_t>(layer)];
    return j <= i && (j < L.sinks || j > i - (L.window - 1));
  }
  const char* engine_name() const override { return "mutant:window_minus_one"; }
};

// RoPE from the ring slot instead of the true position.
class RopeFromSlot : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  int64_t rope_position(int, int64_t, int64_t slot) const override { return slot; }
  const char* engine_name() const override { return "mutant:rope_from_slot"; }
};

// Attends every slot, including empty ones, before the ring fills.
class AttendsEmptySlots : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  bool slot_visible(int layer, int64_t i, int64_t pos, int64_t p0) const override {
    return pos == RingKvCache::kEmpty || ReferenceEngine::slot_visible(layer, i, pos, p0);
  }
  const char* engine_name() const override { return "mutant:attends_empty_slots"; }
};

// Writes the whole chunk into the ring, then attends: a chunk evicts keys its own earlier tokens need.
class ChunkWrittenFirst : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void process_chunk(int layer, int sequence, int64_t n, const float* q, const float* k, const float* v,
                     float* out) override {
    const int64_t qs = int64_t{config_.num_q_heads} * config_.head_dim;
    const int64_t kvs = int64_t{config_.num_kv_heads} * config_.head_dim;
    const int64_t first = seen_of(sequence);
    for (int64_t t = 0; t < n; ++t) write_token(layer, sequence, first + t, k + t * kvs, v + t * kvs);
    for (int64_t t = 0; t < n; ++t) attend_token(layer, sequence, first + t, q + t * qs, out + t * qs);
  }
  const char* engine_name() const override { return "mutant:chunk_written_first"; }
};

// A reset forgets the sequence's count but leaves its slots (and their positions) in place.
class StaleAfterReset : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void clear_sequence(int) override {}
  const char* engine_name() const override { return "mutant:stale_after_reset"; }
};

// A reset clears only the first layer's ring: later layers keep their stale cells, whose stored
// positions may fall inside the new sequence's window (when the new p0 is not far above the old one).
class ResetClearsFirstLayerOnly : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void clear_sequence(int sequence) override { ring_mut(0, sequence).reset(); }
  const char* engine_name() const override { return "mutant:reset_clears_first_layer_only"; }
};

// ---- spec 1.1 rollback (§5.1): each plants a bug engines have shipped with speculative decoding ----

// Rollback does nothing: counts, slots and high-water marks stay (mlx-swift-lm #424: once a layer has
// wrapped, the cache calls itself untrimmable and the rollback of rejected draft tokens is a no-op).
class RollbackIgnored : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void roll_back(int, int64_t) override {}
  const char* engine_name() const override { return "mutant:rollback_ignored"; }
};

// Only some layers roll back; the others keep the removed tokens and keep counting from where they
// were (each layer cache with its own offset, as in mlx-lm): their next token takes the wrong index
// and position, and the rejected drafts stay visible. `sliding_only`: the sliding layers roll back;
// else only layer 0 does.
class PartialRollback : public ReferenceEngine {
 public:
  PartialRollback(Config c, bool sliding_only)
      : ReferenceEngine(std::move(c)),
        sliding_only_(sliding_only),
        offset_(config_.layers.size() * static_cast<size_t>(config_.batch), 0) {}

 protected:
  bool rolls_back(int layer) const {
    return sliding_only_ ? config_.layers[static_cast<size_t>(layer)].window < config_.max_tokens : layer == 0;
  }
  int64_t& offset(int layer, int sequence) { return offset_[ring_index(layer, sequence)]; }
  void roll_back(int sequence, int64_t m) override {
    for (size_t l = 0; l < config_.layers.size(); ++l) {
      const auto li = static_cast<int>(l);
      if (!rolls_back(li)) continue;
      roll_back_layer(li, sequence, m);
      offset(li, sequence) = m;
    }
    seen_mut(sequence) = m;
  }
  void clear_sequence(int sequence) override {
    ReferenceEngine::clear_sequence(sequence);
    for (size_t l = 0; l < config_.layers.size(); ++l) offset(static_cast<int>(l), sequence) = 0;
  }
  void process_chunk(int layer, int sequence, int64_t n, const float* q, const float* k, const float* v,
                     float* out) override {
    const int64_t qs = int64_t{config_.num_q_heads} * config_.head_dim;
    const int64_t kvs = int64_t{config_.num_kv_heads} * config_.head_dim;
    int64_t& first = offset(layer, sequence);
    for (int64_t t = 0; t < n; ++t) {
      write_token(layer, sequence, first + t, k + t * kvs, v + t * kvs);
      attend_token(layer, sequence, first + t, q + t * qs, out + t * qs);
    }
    first += n;
  }
  const char* engine_name() const override {
    return sliding_only_ ? "mutant:rollback_sliding_layers_only" : "mutant:rollback_first_layer_only";
  }

 private:
  bool sliding_only_;
  std::vector<int64_t> offset_;  // [layer][sequence] the index of each layer's next token
};

// Rollback restores the count but leaves the removed tokens' slots in place; a re-appended token whose
// slot already records its position is taken as cached and not written, so the rejected draft's K/V
// stay where the accepted token's belong (prompt-cache reuse keyed by position).
class StaleContentsOnReappend : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void roll_back(int sequence, int64_t m) override {
    for (size_t l = 0; l < config_.layers.size(); ++l) {
      int64_t& H = high_water(static_cast<int>(l), sequence);
      H = high_water_after_rollback(config_.layers[l], m, H);
    }
    seen_mut(sequence) = m;
  }
  void process_chunk(int layer, int sequence, int64_t n, const float* q, const float* k, const float* v,
                     float* out) override {
    const int64_t qs = int64_t{config_.num_q_heads} * config_.head_dim;
    const int64_t kvs = int64_t{config_.num_kv_heads} * config_.head_dim;
    const int64_t first = seen_of(sequence);
    const RingKvCache& r = ring(layer, sequence);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t index = first + t;
      if (r.position(r.geometry().slot_of(index)) != start_of(sequence) + index) {
        write_token(layer, sequence, index, k + t * kvs, v + t * kvs);
      }
      attend_token(layer, sequence, index, q + t * qs, out + t * qs);
    }
  }
  const char* engine_name() const override { return "mutant:stale_contents_on_reappend"; }
};

// Rolls back by slicing the ring by logical length (mlx-vlm #1715): slots numbered m and above are
// emptied, as if slot = index, which holds only before the wrap; and, like an engine whose ring never
// held a later token, the mask checks only the window's lower edge. After the wrap the removed tokens
// stay in their slots and the next queries attend them.
class RollbackTruncatesByLength : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  // Empties the ring's slots from index m on, as if slot s held token s: true only before the wrap.
  bool slot_rolled_back(const RingKvCache&, int64_t slot, int64_t, int64_t m) const override { return slot >= m; }
  bool slot_visible(int layer, int64_t i, int64_t pos, int64_t p0) const override {
    const LayerConfig& L = config_.layers[static_cast<size_t>(layer)];
    return pos != RingKvCache::kEmpty && (pos - p0 < L.sinks || pos - p0 > i - L.window);
  }
  const char* engine_name() const override { return "mutant:rollback_truncates_by_length"; }
};

// A verify chunk (several tokens) attends every key the ring still holds: with a reserve the ring keeps
// W + Q keys, and the keys that left the window but not the ring stay visible (transformers #48280:
// more K/V columns than the mask advertised). Decode steps are right.
class VerifyChunkEvictsNothing : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void process_chunk(int layer, int sequence, int64_t n, const float* q, const float* k, const float* v,
                     float* out) override {
    in_chunk_ = n > 1;
    ReferenceEngine::process_chunk(layer, sequence, n, q, k, v, out);
    in_chunk_ = false;
  }
  bool slot_visible(int layer, int64_t i, int64_t pos, int64_t p0) const override {
    if (!in_chunk_) return ReferenceEngine::slot_visible(layer, i, pos, p0);
    return pos != RingKvCache::kEmpty && pos - p0 <= i;
  }
  const char* engine_name() const override { return "mutant:verify_chunk_evicts_nothing"; }

 private:
  bool in_chunk_ = false;
};

// Honours every rollback: one that reaches keys a later write has overwritten goes through silently,
// and later queries miss those keys (a rollback beyond the reserve accepted; mlx-lm #1423).
class RollbackBeyondReserveAccepted : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void check_rollbacks(const StepBatch&) const override {}
  const char* engine_name() const override { return "mutant:rollback_beyond_reserve_accepted"; }
};

// Decides refusals from the current length instead of the high-water mark: a second rollback after a
// first one and a shorter re-append is honoured though the first rollback's tokens overwrote its keys.
class RefusalFromCurrentLength : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void check_rollbacks(const StepBatch& batch) const override {
    std::vector<int64_t> held(static_cast<size_t>(config_.batch));
    for (int s = 0; s < config_.batch; ++s) held[static_cast<size_t>(s)] = tokens_seen(s);
    std::vector<int64_t> as_high_water;  // [layer][sequence]: the length stands in for H
    for (size_t l = 0; l < config_.layers.size(); ++l) as_high_water.insert(as_high_water.end(), held.begin(), held.end());
    check_rollbacks_honoured(config_, batch, held, as_high_water);
  }
  const char* engine_name() const override { return "mutant:refusal_from_current_length"; }
};

// ---- interactions (issue 26 item 6): bugs that show only where two features meet in one score,
// angle or stored value, so only the committed cases with both judge them ----

// The learned sink logit goes through the softcap with the scores (cap·tanh(sink / cap)): softcap applied
// after the sink logit joins the logits instead of to the q·k scores alone (spec §7: the sink logit is
// not capped). Planted through the config the engine runs (config() still reports the one it was given).
class SoftcapAfterSinkLogit : public ReferenceEngine {
 public:
  explicit SoftcapAfterSinkLogit(const Config& c) : ReferenceEngine(capped(c)), given_(c) {}
  const Config& config() const override { return given_; }

 protected:
  const char* engine_name() const override { return "mutant:softcap_after_sink_logit"; }

 private:
  static Config capped(Config c) {
    if (!c.softcap) return c;
    const double cap = *c.softcap;
    for (auto& layer : c.sink_logits) {
      for (float& s : layer) s = static_cast<float>(cap * std::tanh(static_cast<double>(s) / cap));
    }
    return c;
  }
  Config given_;
};

// An fp8 cast that does not saturate (PyTorch's .to(float8_*) without satfinite): a value of x / scale
// beyond the largest finite one (past the midpoint to the next binade's first value) becomes NaN in
// e4m3 (which has no infinity) and ±inf in e5m2. `format`: the one format it gets wrong.
class Fp8OverflowNotSaturated : public ReferenceEngine {
 public:
  Fp8OverflowNotSaturated(Config c, DType format) : ReferenceEngine(std::move(c)), format_(format) {}

 protected:
  void encode_kv_row(bool is_key, const KvFormat& f, const float* x, uint8_t* bytes, float* scales) const override {
    ReferenceEngine::encode_kv_row(is_key, f, x, bytes, scales);
    if (f.dtype != format_) return;
    const bool e4m3 = format_ == DType::fp8_e4m3;
    const float overflow = e4m3 ? 464.0f : 61440.0f;  // 448 + 16, 57344 + 4096: rounds up to no finite value
    for (int i = 0; i < config_.head_dim; ++i) {
      const float r = x[i] / f.scale;
      if (std::fabs(r) < overflow) continue;
      bytes[i] = e4m3 ? uint8_t{0x7f} : static_cast<uint8_t>(r < 0 ? 0xfc : 0x7c);
    }
  }
  const char* engine_name() const override {
    return format_ == DType::fp8_e4m3 ? "mutant:fp8_e4m3_overflow_to_nan" : "mutant:fp8_e5m2_overflow_to_inf";
  }

 private:
  DType format_;
};

// Static INT8 clamped to [-128, 127] instead of the symmetric [-127, 127] (spec §6.4): a value at or
// below -127.5 · scale stores code -128.
class Int8StaticClamp128 : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void encode_kv_row(bool is_key, const KvFormat& f, const float* x, uint8_t* bytes, float* scales) const override {
    ReferenceEngine::encode_kv_row(is_key, f, x, bytes, scales);
    if (f.dtype != DType::int8 || f.int8_scheme != Int8Scheme::static_tensor) return;
    auto* codes = reinterpret_cast<int8_t*>(bytes);
    const float inv = 1.0f / f.scale;
    for (int i = 0; i < config_.head_dim; ++i) {
      if (x[i] * inv <= -127.5f) codes[i] = int8_t{-128};
    }
  }
  const char* engine_name() const override { return "mutant:int8_static_clamp_128"; }
};

// RoPE angle bugs, in the angles of q and k alike (rotation_angles).
enum class RopeBug {
  linear_ignored,      // the linear scaling factor is dropped (positions not divided)
  ntk_ignored,         // the NTK factor is dropped (theta not enlarged)
  freq_over_head_dim,  // partial rotary: inv_freq = theta^(-2k / D) over the head dim instead of R
  ntk_over_head_dim,   // NTK with partial rotary: theta · factor^(D / (D - 2)) with the head dim instead of R
};

class RopeAngleBug : public ReferenceEngine {
 public:
  RopeAngleBug(Config c, RopeBug bug) : ReferenceEngine(std::move(c)), bug_(bug) {}

 protected:
  void rotation_angles(const RopeConfig& rope, int64_t position, double* c, double* s) const override {
    RopeConfig r = rope;
    const int D = config_.head_dim, R = rotary_dim(rope, D);
    switch (bug_) {
      case RopeBug::linear_ignored:
        if (r.scaling == RopeScaling::linear) r.scaling = RopeScaling::none;
        return ReferenceEngine::rotation_angles(r, position, c, s);
      case RopeBug::ntk_ignored:
        if (r.scaling == RopeScaling::ntk) r.scaling = RopeScaling::none;
        return ReferenceEngine::rotation_angles(r, position, c, s);
      case RopeBug::freq_over_head_dim:
      case RopeBug::ntk_over_head_dim: {
        if (R == D) return ReferenceEngine::rotation_angles(rope, position, c, s);
        const bool over_d = bug_ == RopeBug::freq_over_head_dim;
        if (!over_d && rope.scaling != RopeScaling::ntk) return ReferenceEngine::rotation_angles(rope, position, c, s);
        const double theta = over_d ? rope_effective_theta(rope, R) : rope_effective_theta(rope, D);
        const double p = rope_scaled_position(rope, position);
        const double denominator = over_d ? D : R;
        for (int k = 0; k < R / 2; ++k) {
          const double angle = p * std::pow(theta, -(2.0 * k) / denominator);
          c[k] = std::cos(angle);
          s[k] = std::sin(angle);
        }
        return;
      }
    }
  }
  const char* engine_name() const override {
    switch (bug_) {
      case RopeBug::linear_ignored: return "mutant:rope_linear_ignored";
      case RopeBug::ntk_ignored: return "mutant:rope_ntk_ignored";
      case RopeBug::freq_over_head_dim: return "mutant:partial_rotary_freq_over_head_dim";
      case RopeBug::ntk_over_head_dim: return "mutant:ntk_exponent_over_head_dim";
    }
    return "mutant:?";
  }

 private:
  RopeBug bug_;
};

// Sinks are not pinned: the ring rotates over all S + W slots and evicts them.
class SinksEvicted : public ReferenceEngine {
 public:
  explicit SinksEvicted(Config c) : ReferenceEngine(std::move(c)) { rebuild_rings(); }

 protected:
  RingGeometry ring_geometry(int layer) const override {
    const LayerConfig& L = config_.layers[static_cast<size_t>(layer)];
    return RingGeometry{0, L.sinks + L.window, ring_capacity(L, config_.max_tokens)};
  }
  const char* engine_name() const override { return "mutant:sinks_evicted"; }
};

// GQA: query head h reads kv head h % Hkv instead of h / (Hq / Hkv).
class GqaModulo : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  int q_head_of(int kv_head, int member) const override { return kv_head + member * config_.num_kv_heads; }
  const char* engine_name() const override { return "mutant:gqa_modulo"; }
};

// INT8 codes truncated toward zero instead of rounded.
class Int8Truncation : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void encode_kv_row(bool is_key, const KvFormat& f, const float* x, uint8_t* bytes, float* scales) const override {
    if (f.dtype != DType::int8) return ReferenceEngine::encode_kv_row(is_key, f, x, bytes, scales);
    const int D = config_.head_dim, G = int8_group_size(f.int8_scheme, D);
    auto* codes = reinterpret_cast<int8_t*>(bytes);
    for (int g = 0; g * G < D; ++g) {
      float amax = 0.0f;
      for (int i = g * G; i < (g + 1) * G; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float s = f.int8_scheme == Int8Scheme::static_tensor ? f.scale : amax / 127.0f;
      for (int i = g * G; i < (g + 1) * G; ++i) {
        codes[i] = s == 0.0f ? int8_t{0} : static_cast<int8_t>(std::clamp(std::trunc(x[i] / s), -127.0f, 127.0f));
      }
      if (f.int8_scheme == Int8Scheme::per_head) scales[g] = s;
      if (f.int8_scheme == Int8Scheme::q8_0) scales[g] = round_to_f16(s);
    }
  }
  const char* engine_name() const override { return "mutant:int8_truncation"; }
};

// One INT8 scale for a whole chunk (its amax over every token and head) instead of per group.
class Int8ScalePerChunk : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

 protected:
  void process_chunk(int layer, int sequence, int64_t n, const float* q, const float* k, const float* v,
                     float* out) override {
    const int D = config_.head_dim;
    const int64_t kvs = int64_t{config_.num_kv_heads} * D;
    const RopeConfig& rope = config_.layers[static_cast<size_t>(layer)].rope;
    std::vector<double> c(static_cast<size_t>(D)), s(static_cast<size_t>(D));
    std::vector<float> row(static_cast<size_t>(D));
    k_amax_ = v_amax_ = 0.0f;
    for (int64_t t = 0; t < n; ++t) {
      if (rope.style != RopeStyle::none) rope_angles(rope, D, start_of(sequence) + seen_of(sequence) + t, c.data(), s.data());
      for (int h = 0; h < config_.num_kv_heads; ++h) {
        const float* kr = k + t * kvs + h * D;
        if (rope.style != RopeStyle::none) {
          rope_rotate(rope, D, c.data(), s.data(), kr, row.data());
          kr = row.data();
        }
        for (int d = 0; d < D; ++d) {
          k_amax_ = std::max(k_amax_, std::fabs(kr[d]));
          v_amax_ = std::max(v_amax_, std::fabs(v[t * kvs + h * D + d]));
        }
      }
    }
    ReferenceEngine::process_chunk(layer, sequence, n, q, k, v, out);
  }
  void encode_kv_row(bool is_key, const KvFormat& f, const float* x, uint8_t* bytes, float* scales) const override {
    if (f.dtype != DType::int8 || f.int8_scheme == Int8Scheme::static_tensor) {
      return ReferenceEngine::encode_kv_row(is_key, f, x, bytes, scales);
    }
    const int D = config_.head_dim, G = int8_group_size(f.int8_scheme, D);
    const float s = (is_key ? k_amax_ : v_amax_) / 127.0f;
    auto* codes = reinterpret_cast<int8_t*>(bytes);
    for (int i = 0; i < D; ++i) codes[i] = s == 0.0f ? int8_t{0} : int8_round_clamp(x[i] / s, f.rounding);
    for (int g = 0; g * G < D; ++g) scales[g] = f.int8_scheme == Int8Scheme::q8_0 ? round_to_f16(s) : s;
  }
  const char* engine_name() const override { return "mutant:int8_scale_per_chunk"; }

 private:
  float k_amax_ = 0.0f, v_amax_ = 0.0f;
};

// q rounded to f16 before q·k. Declaring an f32 profile is a lie the bound must catch;
// declaring q_dot = f16 makes it a correct engine the bound must accept.
class F16Query : public ReferenceEngine {
 public:
  F16Query(Config c, bool declare_f16) : ReferenceEngine(std::move(c)), declare_f16_(declare_f16) {}

 protected:
  void round_query(float* q, int n) const override {
    for (int i = 0; i < n; ++i) q[i] = round_to_f16(q[i]);
  }
  PrecisionProfile precision() const override {
    PrecisionProfile p = ReferenceEngine::precision();
    if (declare_f16_) p.q_dot = Precision::f16;
    return p;
  }
  const char* engine_name() const override {
    return declare_f16_ ? "control:f16_query_declared_f16" : "mutant:f16_query_declared_f32";
  }

 private:
  bool declare_f16_;
};

// The numerics of common real engines, planted in the reference (or in a mutant of it) through
// its seams. Each declares the named profile of profiles/ that describes it (profiles/README.md).
enum class Numerics {
  f16_compute,          // q, P and the output rounded to f16, f32 accumulation: "f16-compute-f32-acc"
  bf16_compute,         // the same in bf16: "bf16-compute-f32-acc"
  f16_pv_accumulation,  // ggml CPU flash attention, f16 K/V: q to f16, P·V summed in f16: "f16-pv-accumulation"
  q8_0_dot,             // ggml with q8_0 K: q quantised to q8_0 blocks for q·k: "q8_0-dot"
  f32_rope_angles,      // position·inv_freq, cos and sin in f32 (HF, vLLM tables, ggml): "f32-rope-angles"
};

const char* profile_name(Numerics n) {
  switch (n) {
    case Numerics::f16_compute: return "f16-compute-f32-acc";
    case Numerics::bf16_compute: return "bf16-compute-f32-acc";
    case Numerics::f16_pv_accumulation: return "f16-pv-accumulation";
    case Numerics::q8_0_dot: return "q8_0-dot";
    case Numerics::f32_rope_angles: return "f32-rope-angles";
  }
  return "?";
}


// The default profile of the named profile file (read once).
PrecisionProfile named_profile(Numerics n) {
  static const std::vector<PrecisionProfile> profiles = [] {
    std::vector<PrecisionProfile> r;
    for (Numerics m : {Numerics::f16_compute, Numerics::bf16_compute, Numerics::f16_pv_accumulation, Numerics::q8_0_dot,
                       Numerics::f32_rope_angles}) {
      r.push_back(resolve_profile(load_profile_set(profile_name(m)), {}));
    }
    return r;
  }();
  return profiles[static_cast<size_t>(n)];
}

template <class Base>
class WithNumerics : public Base {
 public:
  WithNumerics(Config c, Numerics numerics, std::string name)
      : WithNumerics(std::move(c), numerics, std::move(name), numerics) {}
  // Declaring the profile of other numerics (a lie the bound must catch, or an honest superset).
  WithNumerics(Config c, Numerics numerics, std::string name, Numerics declared)
      : Base(std::move(c)), numerics_(numerics), name_(std::move(name)), declared_(named_profile(declared)) {}

 protected:
  void round_query(float* q, int n) const override {
    switch (numerics_) {
      case Numerics::f16_compute:
      case Numerics::f16_pv_accumulation:
        for (int i = 0; i < n; ++i) q[i] = round_to_f16(q[i]);
        break;
      case Numerics::bf16_compute:
        for (int i = 0; i < n; ++i) q[i] = round_to_bf16(q[i]);
        break;
      case Numerics::q8_0_dot:
        for (int h = 0; h < n; h += this->config_.head_dim) quantise_q8_0_as_ggml(q + h, this->config_.head_dim);
        break;
      case Numerics::f32_rope_angles: break;
    }
  }
  void round_weights(float* p, int64_t n) const override { round_compute(p, n); }
  void round_output(float* o, int n) const override { round_compute(o, n); }
  void accumulate_pv(float* acc, float p, const float* v, int n) const override {
    if (numerics_ != Numerics::f16_pv_accumulation) return Base::accumulate_pv(acc, p, v, n);
    for (int d = 0; d < n; ++d) acc[d] = round_to_f16(acc[d] + p * v[d]);  // ggml_vec_mad_f16
  }
  void rotation_angles(const RopeConfig& rope, int64_t position, double* c, double* s) const override {
    if (numerics_ != Numerics::f32_rope_angles) return Base::rotation_angles(rope, position, c, s);
    // An f32 inv_freq table, the position converted to f32, the angle, cos and sin in f32.
    const int R = rotary_dim(rope, this->config_.head_dim);
    const double theta = rope_effective_theta(rope, R);
    const auto p = static_cast<float>(rope_scaled_position(rope, position));
    for (int k = 0; k < R / 2; ++k) {
      const auto inv_freq = static_cast<float>(std::pow(theta, -(2.0 * k) / static_cast<double>(R)));
      const float angle = p * inv_freq;
      c[k] = std::cos(angle);
      s[k] = std::sin(angle);
    }
  }
  PrecisionProfile precision() const override { return declared_; }
  const char* engine_name() const override { return name_.c_str(); }

 private:
  void round_compute(float* x, int64_t n) const {
    if (numerics_ == Numerics::f16_compute) {
      for (int64_t i = 0; i < n; ++i) x[i] = round_to_f16(x[i]);
    } else if (numerics_ == Numerics::bf16_compute) {
      for (int64_t i = 0; i < n; ++i) x[i] = round_to_bf16(x[i]);
    }
  }

  Numerics numerics_;
  std::string name_;
  PrecisionProfile declared_;
};

// Controls for summation order: the softmax denominator and P·V summed over the visible keys
// in reverse slot order (deterministic), or in an order that alternates from one query to the
// next (declared non-deterministic, so every comparison between two runs goes through the bound).
class OtherSummationOrder : public ReferenceEngine {
 public:
  OtherSummationOrder(Config c, bool varying) : ReferenceEngine(std::move(c)), varying_(varying) {}

 protected:
  void order_visible(int64_t* slots, int64_t n) const override {
    if (!varying_ || (calls_++ % 2 == 1)) std::reverse(slots, slots + n);
  }
  bool deterministic() const override { return !varying_; }
  const char* engine_name() const override {
    return varying_ ? "control:varying_summation" : "control:reversed_summation";
  }

 private:
  bool varying_;
  mutable uint64_t calls_ = 0;
};

// A "spec 1 core" engine (docs/spec.md §0): the reference, declaring only the core. With bf16 storage it
// is a kernel-library-like engine that stores f32 K and V as bf16: an f32 config runs on the reference
// with bf16 K/V, config() is still the config it was given, and its profile declares k_storage =
// v_storage = bf16 (the reference's precision() reports the dtype it stores). Other dtypes, outside
// what it declares, it stores as configured, so the property suite (which does not narrow its cases to
// an engine's capabilities) judges it as the correct engine it is.
class CoreEngine : public ReferenceEngine {
 public:
  CoreEngine(const Config& c, bool bf16_storage)
      : ReferenceEngine(stored_as(c, bf16_storage)), given_(c), bf16_storage_(bf16_storage) {}
  const Config& config() const override { return given_; }

 protected:
  const char* engine_name() const override {
    return bf16_storage_ ? "control:core_bf16_engine" : "control:core_f32_engine";
  }

 private:
  static Config stored_as(Config c, bool bf16_storage) {
    for (KvFormat* f : {&c.k_format, &c.v_format}) {
      if (bf16_storage && f->dtype == DType::f32) f->dtype = DType::bf16;
    }
    return c;
  }
  Config given_;
  bool bf16_storage_;
};

// ---- serving (issue 35, spec 1.2 §5): what an engine shares between sequences ----

// Tracks, per (layer, sequence), a chained hash of every token's position and raw k and v since the
// sequence's reset: the key an engine's prefix cache would use (token ids and positions), here the
// inputs themselves. Two sequences' chains agree at index t iff their tokens 0..t are identical.
class PrefixTracking : public ReferenceEngine {
 public:
  explicit PrefixTracking(Config c) : ReferenceEngine(std::move(c)), chains_(config_.layers.size() * config_.batch) {}

 protected:
  std::vector<uint64_t>& chain(int layer, int sequence) { return chains_[ring_index(layer, sequence)]; }
  void clear_sequence(int sequence) override {
    for (size_t l = 0; l < config_.layers.size(); ++l) chain(static_cast<int>(l), sequence).clear();
    ReferenceEngine::clear_sequence(sequence);
  }
  void roll_back(int sequence, int64_t m) override {
    for (size_t l = 0; l < config_.layers.size(); ++l) {
      std::vector<uint64_t>& ch = chain(static_cast<int>(l), sequence);
      ch.resize(static_cast<size_t>(std::min<int64_t>(m, static_cast<int64_t>(ch.size()))));
    }
    ReferenceEngine::roll_back(sequence, m);
  }
  // The reference's token loop, with the chain kept and share() called after each token is written.
  void process_chunk(int layer, int sequence, int64_t n, const float* q, const float* k, const float* v,
                     float* out) override {
    const int64_t qs = int64_t{config_.num_q_heads} * config_.head_dim, kvs = int64_t{config_.num_kv_heads} * config_.head_dim;
    const int64_t first = seen_of(sequence);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t i = first + t;
      extend_chain(layer, sequence, i, k + t * kvs, v + t * kvs);
      write_token(layer, sequence, i, k + t * kvs, v + t * kvs);
      share(layer, sequence, i);
      attend_token(layer, sequence, i, q + t * qs, out + t * qs);
    }
  }
  // What the engine shares for token i of a sequence, just written: the mutant's bug.
  virtual void share(int layer, int sequence, int64_t i) = 0;
  // Appends token `index`'s hash to its chain (before it is written).
  void extend_chain(int layer, int sequence, int64_t index, const float* k, const float* v) {
    std::vector<uint64_t>& ch = chain(layer, sequence);
    uint64_t h = ch.empty() ? 0xcbf29ce484222325ull : ch.back();
    const auto mix = [&h](const void* p, size_t n) {
      const auto* b = static_cast<const unsigned char*>(p);
      for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
    };
    const int64_t position = start_of(sequence) + index;
    const size_t row = static_cast<size_t>(config_.num_kv_heads) * static_cast<size_t>(config_.head_dim) * sizeof(float);
    mix(&position, sizeof position);
    mix(k, row);
    mix(v, row);
    ch.push_back(h);
  }
  // Another sequence whose tokens 0..`at` equal this one's (chains agree at `at`) and that holds `index`; -1 if none.
  int donor(int layer, int sequence, int64_t at, int64_t index) {
    const uint64_t mine = chain(layer, sequence)[static_cast<size_t>(at)];
    for (int d = 0; d < config_.batch; ++d) {
      const std::vector<uint64_t>& ch = chain(layer, d);
      if (d != sequence && static_cast<int64_t>(ch.size()) > std::max(at, index) && ch[static_cast<size_t>(at)] == mine) return d;
    }
    return -1;
  }
  // Copies the stored K and V (bytes and scales) of `slot` from the donor's ring: a shared block.
  void copy_slot(int layer, int from, int to, int64_t slot) {
    const RingKvCache& src = ring(layer, from);
    RingKvCache& dst = ring_mut(layer, to);
    const int D = config_.head_dim;
    const size_t kb = static_cast<size_t>(D) * static_cast<size_t>(bytes_per_element(src.k_format().dtype));
    const size_t vb = static_cast<size_t>(D) * static_cast<size_t>(bytes_per_element(src.v_format().dtype));
    const int ks = scales_per_row(src.k_format(), D), vs = scales_per_row(src.v_format(), D);
    for (int h = 0; h < config_.num_kv_heads; ++h) {
      std::copy(src.k_bytes(slot, h), src.k_bytes(slot, h) + kb, dst.k_bytes(slot, h));
      std::copy(src.v_bytes(slot, h), src.v_bytes(slot, h) + vb, dst.v_bytes(slot, h));
      std::copy(src.k_scales(slot, h), src.k_scales(slot, h) + ks, dst.k_scales(slot, h));
      std::copy(src.v_scales(slot, h), src.v_scales(slot, h) + vs, dst.v_scales(slot, h));
    }
  }

 private:
  std::vector<std::vector<uint64_t>> chains_;  // [layer][sequence]
};

// A prefix cache that serves blocks the window has evicted (the bug class of vLLM's sliding-window
// prefix caching and of cyclic caches reused by a later request): a token whose prefix another sequence
// holds is served from that sequence's slot, whatever the slot holds now. While the slot still holds the
// token the copy is exact; once the donor's ring has wrapped, it is a later token's key.
class PrefixCacheServesEvicted : public PrefixTracking {
 public:
  using PrefixTracking::PrefixTracking;

 protected:
  void share(int layer, int sequence, int64_t i) override {
    const int d = donor(layer, sequence, i, i);
    if (d >= 0) copy_slot(layer, d, sequence, ring(layer, sequence).geometry().slot_of(i));
  }
  const char* engine_name() const override { return "mutant:prefix_cache_serves_evicted"; }
};

// A shared-prefix engine that shares past the divergence point: it matches prefixes by blocks of 4
// tokens, on the block's first token only, and then takes every token of the block from the sequence it
// shares with (where that sequence still holds it), also those after the prompts diverge.
class SharesPastDivergence : public PrefixTracking {
 public:
  using PrefixTracking::PrefixTracking;

 protected:
  void share(int layer, int sequence, int64_t i) override {
    const int d = donor(layer, sequence, i - i % 4, i);
    const int64_t slot = ring(layer, sequence).geometry().slot_of(i);
    if (d >= 0 && ring(layer, d).position(slot) == start_of(d) + i) copy_slot(layer, d, sequence, slot);
  }
  const char* engine_name() const override { return "mutant:shares_past_divergence"; }
};

// Requests joining a running batch: a step holding a prefill (2+ tokens from index 0) and decodes
// (one token at index >= 1) packs them into one varlen buffer and reads each decode's key and value at
// the wrong offset: the prefill's last token's. A decoding sequence then attends the new prompt's key.
class JoinMixesPrefillKeys : public ReferenceEngine {
 public:
  using ReferenceEngine::ReferenceEngine;

  void step(const StepBatch& batch) override {
    std::vector<int64_t> held(static_cast<size_t>(config_.batch));
    for (int s = 0; s < config_.batch; ++s) held[static_cast<size_t>(s)] = seen_of(s);
    for (const SequenceReset& r : batch.resets) held[static_cast<size_t>(r.sequence)] = 0;
    for (const SequenceRollback& r : batch.rollbacks) held[static_cast<size_t>(r.sequence)] -= r.n_tokens;
    const SequenceStep* prefill = nullptr;
    for (const SequenceStep& a : batch.appends) {
      if (held[static_cast<size_t>(a.sequence)] == 0 && a.n_tokens >= 2) prefill = &a;
    }
    if (prefill == nullptr) return ReferenceEngine::step(batch);
    const size_t L = config_.layers.size(), row = static_cast<size_t>(config_.num_kv_heads) * static_cast<size_t>(config_.head_dim);
    std::vector<SequenceStep> appends(batch.appends.begin(), batch.appends.end());
    std::vector<std::vector<float>> keys, values;  // per mixed decode: [L][1][Hkv][D]
    for (SequenceStep& a : appends) {
      if (a.n_tokens != 1 || held[static_cast<size_t>(a.sequence)] < 1) continue;
      std::vector<float> k(L * row), v(L * row);
      for (size_t l = 0; l < L; ++l) {
        const size_t from = (l * static_cast<size_t>(prefill->n_tokens) + static_cast<size_t>(prefill->n_tokens - 1)) * row;
        std::copy(prefill->k + from, prefill->k + from + row, k.begin() + static_cast<std::ptrdiff_t>(l * row));
        std::copy(prefill->v + from, prefill->v + from + row, v.begin() + static_cast<std::ptrdiff_t>(l * row));
      }
      keys.push_back(std::move(k));
      values.push_back(std::move(v));
      a.k = keys.back().data();
      a.v = values.back().data();
    }
    ReferenceEngine::step(StepBatch{batch.resets, appends, batch.rollbacks});
  }

 protected:
  const char* engine_name() const override { return "mutant:join_mixes_prefill_keys"; }
};

// The core controls' factories: core_capabilities({f32}); or bf16 only, head dims {64, 128}, K and V
// stored as bf16 (so it also runs f32-storage cases, capabilities.hpp).
EngineFactory core_factory(bool bf16_storage) {
  Capabilities caps = core_capabilities({bf16_storage ? DType::bf16 : DType::f32});
  if (bf16_storage) {
    caps.head_dims = {64, 128};
    caps.k_storage = caps.v_storage = Precision::bf16;
  }
  return EngineFactory{bf16_storage ? "core_bf16_engine" : "core_f32_engine", caps,
                       [bf16_storage](const Config& c) -> std::unique_ptr<Engine> {
                         return std::make_unique<CoreEngine>(c, bf16_storage);
                       }};
}

template <typename T, typename... Extra>
EngineFactory factory(const std::string& name, Extra... extra) {
  return EngineFactory{name, ReferenceEngine::capabilities(), [=](const Config& c) -> std::unique_ptr<Engine> {
                         return std::make_unique<T>(c, extra...);
                       }};
}

}  // namespace

const std::vector<MutantInfo>& rollback_mutants() {
  static const std::vector<MutantInfo> mutants{
      {"rollback_ignored", "a rollback does nothing: the rejected drafts stay and the count goes on",
       factory<RollbackIgnored>("rollback_ignored")},
      {"rollback_sliding_layers_only", "only the sliding layers roll back; the global ones keep the drafts and count on",
       factory<PartialRollback>("rollback_sliding_layers_only", true)},
      {"rollback_first_layer_only", "only the first layer rolls back; the others keep the drafts and count on",
       factory<PartialRollback>("rollback_first_layer_only", false)},
      {"stale_contents_on_reappend", "the count goes back, the slots stay; a re-appended token whose slot records "
       "its position is not written (stale K/V)", factory<StaleContentsOnReappend>("stale_contents_on_reappend")},
      {"rollback_truncates_by_length", "empties slots numbered m and above (slot = index), so after the wrap the "
       "removed tokens stay and are attended", factory<RollbackTruncatesByLength>("rollback_truncates_by_length")},
      {"verify_chunk_evicts_nothing", "a chunk attends every key the ring holds: keys in the reserve beyond the "
       "window stay visible", factory<VerifyChunkEvictsNothing>("verify_chunk_evicts_nothing")},
      {"rollback_beyond_reserve_accepted", "honours every rollback, also one whose keys later writes overwrote",
       factory<RollbackBeyondReserveAccepted>("rollback_beyond_reserve_accepted")},
      {"refusal_from_current_length", "decides refusals from the current length, not the high-water mark",
       factory<RefusalFromCurrentLength>("refusal_from_current_length")},
  };
  return mutants;
}

const std::vector<MutantInfo>& serving_mutants() {
  static const std::vector<MutantInfo> mutants{
      {"prefix_cache_serves_evicted", "a token whose prefix another sequence holds is served from that sequence's slot, "
                                      "also after the window evicted it there", factory<PrefixCacheServesEvicted>("prefix_cache_serves_evicted")},
      {"join_mixes_prefill_keys", "in a step with a new prefill, each decode reads the prefill's last key and value "
                                  "instead of its own", factory<JoinMixesPrefillKeys>("join_mixes_prefill_keys")},
      {"shares_past_divergence", "shares prefixes by blocks of 4 matched on their first token: tokens after the "
                                 "divergence come from the other sequence", factory<SharesPastDivergence>("shares_past_divergence")},
  };
  return mutants;
}

const std::vector<MutantInfo>& interaction_mutants() {
  static const std::vector<MutantInfo> mutants{
      {"softcap_after_sink_logit", "the learned sink logit is softcapped with the scores (cap applied after it joins)",
       factory<SoftcapAfterSinkLogit>("softcap_after_sink_logit")},
      {"fp8_e4m3_overflow_to_nan", "fp8 e4m3 without saturation: x / scale past 448 stores NaN",
       factory<Fp8OverflowNotSaturated>("fp8_e4m3_overflow_to_nan", DType::fp8_e4m3)},
      {"fp8_e5m2_overflow_to_inf", "fp8 e5m2 without saturation: x / scale past 57344 stores +-inf",
       factory<Fp8OverflowNotSaturated>("fp8_e5m2_overflow_to_inf", DType::fp8_e5m2)},
      {"int8_static_clamp_128", "static INT8 clamped to [-128, 127]: x / scale <= -127.5 stores -128",
       factory<Int8StaticClamp128>("int8_static_clamp_128")},
      {"rope_linear_ignored", "linear RoPE scaling dropped: positions not divided by the factor",
       factory<RopeAngleBug>("rope_linear_ignored", RopeBug::linear_ignored)},
      {"rope_ntk_ignored", "NTK RoPE scaling dropped: theta not enlarged", factory<RopeAngleBug>("rope_ntk_ignored",
                                                                                                 RopeBug::ntk_ignored)},
      {"partial_rotary_freq_over_head_dim", "partial rotary: inv_freq = theta^(-2k/D) over the head dim, not R",
       factory<RopeAngleBug>("partial_rotary_freq_over_head_dim", RopeBug::freq_over_head_dim)},
      {"ntk_exponent_over_head_dim", "NTK with partial rotary: theta * factor^(D/(D-2)) with the head dim, not R",
       factory<RopeAngleBug>("ntk_exponent_over_head_dim", RopeBug::ntk_over_head_dim)},
  };
  return mutants;
}

const std::vector<MutantInfo>& all_mutants() {
  static const std::vector<MutantInfo> mutants{
      {"window_plus_one", "attends W + 1 keys (ring one slot larger, so only the mask is wrong)",
       factory<WindowPlusOne>("window_plus_one")},
      {"window_minus_one", "attends W - 1 keys", factory<WindowMinusOne>("window_minus_one")},
      {"rope_from_slot", "RoPE angle from the ring slot instead of the true position", factory<RopeFromSlot>("rope_from_slot")},
      {"attends_empty_slots", "attends empty slots before the ring fills", factory<AttendsEmptySlots>("attends_empty_slots")},
      {"chunk_written_first", "writes a whole chunk into the ring before attending", factory<ChunkWrittenFirst>("chunk_written_first")},
      {"stale_after_reset", "a reset leaves the old slots and positions in place", factory<StaleAfterReset>("stale_after_reset")},
      {"reset_clears_first_layer_only", "a reset clears only the first layer's ring; later layers keep stale cells",
       factory<ResetClearsFirstLayerOnly>("reset_clears_first_layer_only")},
      {"sinks_evicted", "sink tokens rotate out of the ring like any other", factory<SinksEvicted>("sinks_evicted")},
      {"gqa_modulo", "query head h reads kv head h % Hkv", factory<GqaModulo>("gqa_modulo")},
      {"int8_truncation", "INT8 codes truncated toward zero", factory<Int8Truncation>("int8_truncation")},
      {"int8_scale_per_chunk", "one INT8 scale for a whole chunk", factory<Int8ScalePerChunk>("int8_scale_per_chunk")},
      {"window_plus_one_f16", "W + 1 in an f16 engine that declares its f16 profile",
       factory<WithNumerics<WindowPlusOne>>("window_plus_one_f16", Numerics::f16_compute, "mutant:window_plus_one_f16")},
      {"window_minus_one_f16", "W - 1 in an f16 engine that declares its f16 profile",
       factory<WithNumerics<WindowMinusOne>>("window_minus_one_f16", Numerics::f16_compute, "mutant:window_minus_one_f16")},
      {"sinks_evicted_f16", "sinks evicted in an f16 engine that declares its f16 profile",
       factory<WithNumerics<SinksEvicted>>("sinks_evicted_f16", Numerics::f16_compute, "mutant:sinks_evicted_f16")},
      {"f16_query_declared_f32", "q rounded to f16 before q.k while declaring an f32 profile",
       factory<F16Query>("f16_query_declared_f32", false)},
      {"f16_query_declared_f16", "q rounded to f16, declaring q_dot = f16 (correct: must pass)",
       factory<F16Query>("f16_query_declared_f16", true), true},
      {"f16_engine", "q, P and output rounded to f16, declared (a typical f16 engine: must pass)",
       factory<WithNumerics<ReferenceEngine>>("f16_engine", Numerics::f16_compute, "control:f16_engine"), true},
      {"reversed_summation", "sums over the visible keys in reverse slot order (correct: must pass)",
       factory<OtherSummationOrder>("reversed_summation", false), true},
      {"varying_summation", "summation order changes from query to query, declared non-deterministic "
       "(correct: must pass)", factory<OtherSummationOrder>("varying_summation", true), true},
      {"bf16_engine", "a bf16 engine (q, P, output in bf16), declaring bf16-compute-f32-acc (correct: must pass)",
       factory<WithNumerics<ReferenceEngine>>("bf16_engine", Numerics::bf16_compute, "control:bf16_engine"), true},
      {"f16pv_engine", "a ggml-like engine accumulating P.V in f16, declaring f16-pv-accumulation (correct: must pass)",
       factory<WithNumerics<ReferenceEngine>>("f16pv_engine", Numerics::f16_pv_accumulation, "control:f16pv_engine"), true},
      {"q8_0dot_engine", "a ggml-like engine quantising q to q8_0 for q.k, declaring q8_0-dot (correct: must pass)",
       factory<WithNumerics<ReferenceEngine>>("q8_0dot_engine", Numerics::q8_0_dot, "control:q8_0dot_engine"), true},
      {"f32angles_engine", "an engine computing RoPE angles in f32, declaring f32-rope-angles (correct: must pass)",
       factory<WithNumerics<ReferenceEngine>>("f32angles_engine", Numerics::f32_rope_angles, "control:f32angles_engine"), true},
      {"core_f32_engine", "the reference declaring only spec 1 core with f32 K/V (correct: must pass)",
       core_factory(false), true},
      {"core_bf16_engine", "a bf16 kernel-library-like engine: spec 1 core, bf16 K/V storage, head dims 64 and 128 "
       "(correct: must pass)", core_factory(true), true},
  };
  return mutants;
}

void quantise_q8_0_as_ggml(float* x, int n) {
  for (int b = 0; b < n; b += 32) {
    const int e = std::min(n, b + 32);
    float amax = 0.0f;
    for (int i = b; i < e; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float d16 = round_to_f16(d);
    for (int i = b; i < e; ++i) x[i] = std::round(x[i] * id) * d16;
  }
}

EngineFactory in_numerics(const std::string& engine, const std::string& profile, const std::string& declared) {
  const auto numerics_of = [](const std::string& name) {
    for (Numerics m : {Numerics::f16_compute, Numerics::bf16_compute, Numerics::f16_pv_accumulation, Numerics::q8_0_dot,
                       Numerics::f32_rope_angles}) {
      if (name == profile_name(m)) return m;
    }
    throw std::invalid_argument("in_numerics: no numerics for the profile \"" + name + "\"");
  };
  const Numerics n = numerics_of(profile);
  const Numerics d = declared.empty() ? n : numerics_of(declared);
  const std::string name = engine + "@" + profile + (declared.empty() ? "" : "-declaring-" + declared);
  const std::string label = (engine == "reference" ? "control:" : "mutant:") + name;
  if (engine == "reference") return factory<WithNumerics<ReferenceEngine>>(name, n, label, d);
  if (engine == "window_plus_one") return factory<WithNumerics<WindowPlusOne>>(name, n, label, d);
  if (engine == "window_minus_one") return factory<WithNumerics<WindowMinusOne>>(name, n, label, d);
  if (engine == "sinks_evicted") return factory<WithNumerics<SinksEvicted>>(name, n, label, d);
  throw std::invalid_argument("in_numerics: engine \"" + engine + "\" is not reference, window_plus_one, "
                              "window_minus_one or sinks_evicted");
}

std::vector<std::string> numerics_profiles() {
  return {"f16-compute-f32-acc", "bf16-compute-f32-acc", "f16-pv-accumulation", "q8_0-dot", "f32-rope-angles"};
}

}  // namespace ringkv::conformance
