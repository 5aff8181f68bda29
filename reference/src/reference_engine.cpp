#include "ringkv/reference_engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/rope.hpp"

namespace ringkv {

ReferenceEngine::ReferenceEngine(Config config) : config_(std::move(config)) {
  validate(config_);
  p0_.resize(static_cast<size_t>(config_.batch));
  seen_.assign(static_cast<size_t>(config_.batch), 0);
  high_water_.assign(config_.layers.size() * static_cast<size_t>(config_.batch), 0);
  replay_ = RollbackReplay(config_);
  for (int s = 0; s < config_.batch; ++s) p0_[static_cast<size_t>(s)] = start_position(config_, s);
  rebuild_rings();
}

void ReferenceEngine::rebuild_rings() {
  const auto L = static_cast<int>(config_.layers.size());
  const int D = config_.head_dim;
  rings_.clear();
  rings_.reserve(static_cast<size_t>(L) * static_cast<size_t>(config_.batch));
  int64_t max_capacity = 1;
  for (int l = 0; l < L; ++l) {
    const RingGeometry geometry = ring_geometry(l);
    max_capacity = std::max(max_capacity, geometry.capacity);
    for (int s = 0; s < config_.batch; ++s) {
      rings_.emplace_back(geometry, config_.num_kv_heads, D, config_.k_format, config_.v_format);
    }
  }
  const int group = config_.num_q_heads / config_.num_kv_heads;
  cos_.assign(static_cast<size_t>(D), 0.0);
  sin_.assign(static_cast<size_t>(D), 0.0);
  q_rot_.assign(static_cast<size_t>(config_.num_q_heads) * static_cast<size_t>(D), 0.0f);
  k_rot_.assign(static_cast<size_t>(D), 0.0f);
  row_.assign(static_cast<size_t>(D), 0.0f);
  visible_.assign(static_cast<size_t>(max_capacity), 0);
  scores_.assign(static_cast<size_t>(group) * static_cast<size_t>(max_capacity), 0.0f);
  acc_.assign(static_cast<size_t>(group) * static_cast<size_t>(D), 0.0f);
}

Capabilities ReferenceEngine::capabilities() {
  Capabilities caps;  // everything spec 1 allows, and spec 1.1's rollback
  caps.rollback = true;
  caps.max_rollback_reserve = int64_t{1} << 30;
  return caps;
}

EngineInfo ReferenceEngine::info() const { return EngineInfo{engine_name(), precision(), deterministic()}; }

PrecisionProfile ReferenceEngine::precision() const {
  PrecisionProfile p;
  p.q_dot = Precision::f32;
  p.k_storage = precision_of(config_.k_format.dtype);
  p.v_storage = precision_of(config_.v_format.dtype);
  p.qk_accumulator = Precision::f32;
  p.pv_accumulator = Precision::f32;
  p.p_before_pv = Precision::f32;
  p.output = Precision::f32;
  p.rope_angle = Precision::f64;
  return p;
}

size_t ReferenceEngine::cache_bytes() const {
  size_t total = 0;
  for (const RingKvCache& r : rings_) total += r.footprint_bytes();
  return total;
}

bool ReferenceEngine::poison_empty_slots() {
  for (RingKvCache& r : rings_) r.poison_empty_slots();
  return true;
}

// ---------------------------------------------------------------- seams (defaults = the spec)

RingGeometry ReferenceEngine::ring_geometry(int layer) const {
  const LayerConfig& L = config_.layers[static_cast<size_t>(layer)];
  return RingGeometry{L.sinks, L.window, ring_capacity(L, config_.max_tokens)};
}

bool ReferenceEngine::attends(int layer, int64_t i, int64_t j) const {
  const LayerConfig& L = config_.layers[static_cast<size_t>(layer)];
  return j <= i && (j < L.sinks || j > i - L.window);
}

bool ReferenceEngine::slot_visible(int layer, int64_t query_index, int64_t slot_position, int64_t p0) const {
  return slot_position != RingKvCache::kEmpty && attends(layer, query_index, slot_position - p0);
}

int64_t ReferenceEngine::rope_position(int, int64_t true_position, int64_t) const { return true_position; }

int ReferenceEngine::q_head_of(int kv_head, int member) const {
  return kv_head * (config_.num_q_heads / config_.num_kv_heads) + member;
}

void ReferenceEngine::clear_sequence(int sequence) {
  for (size_t l = 0; l < config_.layers.size(); ++l) ring_mut(static_cast<int>(l), sequence).reset();
}

void ReferenceEngine::check_rollbacks(const StepBatch& batch) const {
  check_rollbacks_honoured(config_, batch, seen_, high_water_, &replay_);
}

void ReferenceEngine::roll_back(int sequence, int64_t m) {
  for (size_t l = 0; l < config_.layers.size(); ++l) roll_back_layer(static_cast<int>(l), sequence, m);
  seen_mut(sequence) = m;
}

bool ReferenceEngine::slot_rolled_back(const RingKvCache& ring, int64_t slot, int64_t p0, int64_t m) const {
  const int64_t pos = ring.position(slot);
  return pos != RingKvCache::kEmpty && pos - p0 >= m;
}

void ReferenceEngine::encode_kv_row(bool, const KvFormat& format, const float* x, uint8_t* bytes, float* scales) const {
  encode_row(format, config_.head_dim, x, bytes, scales);
}

void ReferenceEngine::round_query(float*, int) const {}
void ReferenceEngine::order_visible(int64_t*, int64_t) const {}
void ReferenceEngine::round_weights(float*, int64_t) const {}
void ReferenceEngine::round_output(float*, int) const {}

void ReferenceEngine::accumulate_pv(float* acc, float p, const float* v, int n) const {
  for (int d = 0; d < n; ++d) acc[d] += p * v[d];
}

void ReferenceEngine::rotation_angles(const RopeConfig& rope, int64_t position, double* cos_out, double* sin_out) const {
  rope_angles(rope, config_.head_dim, position, cos_out, sin_out);
}

// ---------------------------------------------------------------- the algorithm

void ReferenceEngine::validate_batch(const StepBatch& batch) const { validate_step(config_, batch, seen_); }

void ReferenceEngine::reset(int sequence, int64_t start_position) {
  const SequenceReset r{sequence, start_position};
  step(StepBatch{std::span<const SequenceReset>(&r, 1), {}});
}

void ReferenceEngine::step(const StepBatch& batch) {
  validate_batch(batch);    // throws before anything changes
  check_rollbacks(batch);   // a refused rollback rejects the whole step, also before any change
  replay_.apply(batch);
  for (const SequenceRollback& rb : batch.rollbacks) roll_back(rb.sequence, seen_of(rb.sequence) - rb.n_tokens);
  for (const SequenceReset& r : batch.resets) {
    clear_sequence(r.sequence);
    p0_[static_cast<size_t>(r.sequence)] = r.start_position;
    seen_[static_cast<size_t>(r.sequence)] = 0;
    for (size_t l = 0; l < config_.layers.size(); ++l) high_water(static_cast<int>(l), r.sequence) = 0;
  }
  const int64_t D = config_.head_dim;
  for (const SequenceStep& a : batch.appends) {
    const int64_t n = a.n_tokens;
    const int64_t q_layer = n * config_.num_q_heads * D;  // floats per layer
    const int64_t kv_layer = n * config_.num_kv_heads * D;
    for (size_t l = 0; l < config_.layers.size(); ++l) {
      const auto li = static_cast<int64_t>(l);
      process_chunk(static_cast<int>(l), a.sequence, n, a.q + li * q_layer, a.k + li * kv_layer,
                    a.v + li * kv_layer, a.out + li * q_layer);
    }
    seen_[static_cast<size_t>(a.sequence)] += n;
    for (size_t l = 0; l < config_.layers.size(); ++l) {
      int64_t& H = high_water(static_cast<int>(l), a.sequence);
      H = std::max(H, seen_of(a.sequence));
    }
  }
}

void ReferenceEngine::roll_back_layer(int layer, int sequence, int64_t m) {
  RingKvCache& ring = ring_mut(layer, sequence);
  // What a removed slot held is gone; the honour rule guarantees that no later query needs it.
  for (int64_t slot = 0; slot < ring.capacity(); ++slot) {
    if (slot_rolled_back(ring, slot, start_of(sequence), m)) ring.set_position(slot, RingKvCache::kEmpty);
  }
  int64_t& H = high_water(layer, sequence);
  H = high_water_after_rollback(config_.layers[static_cast<size_t>(layer)], m, H);
}

void ReferenceEngine::process_chunk(int layer, int sequence, int64_t n, const float* q, const float* k,
                                    const float* v, float* out) {
  const int64_t qs = int64_t{config_.num_q_heads} * config_.head_dim;  // floats per token
  const int64_t kvs = int64_t{config_.num_kv_heads} * config_.head_dim;
  const int64_t first = seen_of(sequence);
  // Token by token: a token's key must be in the ring before it attends (it sees
  // itself), and must not evict a key an earlier token of the chunk still needs.
  for (int64_t t = 0; t < n; ++t) {
    write_token(layer, sequence, first + t, k + t * kvs, v + t * kvs);
    attend_token(layer, sequence, first + t, q + t * qs, out + t * qs);
  }
}

void ReferenceEngine::write_token(int layer, int sequence, int64_t index, const float* k, const float* v) {
  RingKvCache& ring = ring_mut(layer, sequence);
  const RopeConfig& rope = config_.layers[static_cast<size_t>(layer)].rope;
  const int D = config_.head_dim;
  const int64_t slot = ring.geometry().slot_of(index);
  const int64_t position = start_of(sequence) + index;
  if (rope.style != RopeStyle::none) {
    rotation_angles(rope, rope_position(layer, position, slot), cos_.data(), sin_.data());
  }
  for (int h = 0; h < config_.num_kv_heads; ++h) {
    const float* k_row = k + static_cast<size_t>(h) * static_cast<size_t>(D);
    if (rope.style != RopeStyle::none) {
      rope_rotate(rope, D, cos_.data(), sin_.data(), k_row, k_rot_.data());
      k_row = k_rot_.data();
    }
    encode_kv_row(true, ring.k_format(), k_row, ring.k_bytes(slot, h), ring.k_scales(slot, h));
    encode_kv_row(false, ring.v_format(), v + static_cast<size_t>(h) * static_cast<size_t>(D), ring.v_bytes(slot, h),
                  ring.v_scales(slot, h));
  }
  ring.set_position(slot, position);
}

void ReferenceEngine::attend_token(int layer, int sequence, int64_t index, const float* q, float* out) {
  const RingKvCache& ring = rings_[ring_index(layer, sequence)];
  const RopeConfig& rope = config_.layers[static_cast<size_t>(layer)].rope;
  const int D = config_.head_dim;
  const int Hq = config_.num_q_heads;
  const int group = Hq / config_.num_kv_heads;
  const int64_t C = ring.capacity();
  const int64_t p0 = start_of(sequence);

  // 1. Rotate the query from its true position.
  const int64_t position = p0 + index;
  if (rope.style != RopeStyle::none) {
    rotation_angles(rope, rope_position(layer, position, ring.geometry().slot_of(index)), cos_.data(), sin_.data());
    for (int h = 0; h < Hq; ++h) {
      rope_rotate(rope, D, cos_.data(), sin_.data(), q + h * D, q_rot_.data() + h * D);
    }
  } else {
    std::copy(q, q + static_cast<size_t>(Hq) * static_cast<size_t>(D), q_rot_.begin());
  }
  round_query(q_rot_.data(), Hq * D);

  // 2. The visible slots: chosen by the true position each slot records.
  int64_t n_visible = 0;
  for (int64_t slot = 0; slot < C; ++slot) {
    if (slot_visible(layer, index, ring.position(slot), p0)) visible_[static_cast<size_t>(n_visible++)] = slot;
  }
  order_visible(visible_.data(), n_visible);

  const float scale = static_cast<float>(softmax_scale(config_));
  const bool capped = config_.softcap.has_value();
  const float cap = capped ? static_cast<float>(*config_.softcap) : 1.0f;
  const bool has_sink_logit = !config_.sink_logits.empty();
  float* scores = scores_.data();  // [group][C]
  float* acc = acc_.data();        // [group][D]

  for (int g = 0; g < config_.num_kv_heads; ++g) {
    // 3. Scores: each K row is decoded once and used by every query head of the group.
    for (int64_t i = 0; i < n_visible; ++i) {
      ring.decode_k(visible_[static_cast<size_t>(i)], g, row_.data());
      for (int m = 0; m < group; ++m) {
        const float* qh = q_rot_.data() + q_head_of(g, m) * D;
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot += qh[d] * row_[static_cast<size_t>(d)];
        float s = scale * dot;
        if (capped) s = cap * std::tanh(s / cap);
        scores[m * C + i] = s;
      }
    }
    // 4. Softmax per query head (the learned sink logit joins the denominator only).
    for (int m = 0; m < group; ++m) {
      float* sm = scores + m * C;
      const float sink = has_sink_logit ? config_.sink_logits[static_cast<size_t>(layer)][static_cast<size_t>(q_head_of(g, m))]
                                        : -std::numeric_limits<float>::infinity();
      float max_s = sink;
      for (int64_t i = 0; i < n_visible; ++i) max_s = std::max(max_s, sm[i]);
      float sum = has_sink_logit ? std::exp(sink - max_s) : 0.0f;
      for (int64_t i = 0; i < n_visible; ++i) {
        sm[i] = std::exp(sm[i] - max_s);
        sum += sm[i];
      }
      // Normalise P now so that P·V below is a plain weighted sum.
      for (int64_t i = 0; i < n_visible; ++i) sm[i] /= sum;
      round_weights(sm, n_visible);
      std::fill(acc + m * D, acc + (m + 1) * D, 0.0f);
    }
    // 5. P·V: each V row is decoded once.
    for (int64_t i = 0; i < n_visible; ++i) {
      ring.decode_v(visible_[static_cast<size_t>(i)], g, row_.data());
      for (int m = 0; m < group; ++m) {
        accumulate_pv(acc + m * D, scores[m * C + i], row_.data(), D);
      }
    }
    for (int m = 0; m < group; ++m) {
      std::copy(acc + m * D, acc + (m + 1) * D, out + q_head_of(g, m) * D);
      round_output(out + q_head_of(g, m) * D, D);
    }
  }
}

std::optional<CacheSnapshot> ReferenceEngine::snapshot(int layer, int sequence) const {
  validate_snapshot_request(config_, layer, sequence);
  const RingKvCache& ring = rings_[ring_index(layer, sequence)];
  const int H = config_.num_kv_heads, D = config_.head_dim;
  const auto C = static_cast<size_t>(ring.capacity());
  CacheSnapshot snap;
  snap.capacity = ring.capacity();
  snap.num_kv_heads = H;
  snap.head_dim = D;
  snap.positions.resize(C);
  const size_t row = static_cast<size_t>(D);
  snap.k.resize(C * static_cast<size_t>(H) * row);
  snap.v.resize(C * static_cast<size_t>(H) * row);
  const bool k_int8 = ring.k_format().dtype == DType::int8, v_int8 = ring.v_format().dtype == DType::int8;
  const auto ks = static_cast<size_t>(scales_per_row(ring.k_format(), D));
  const auto vs = static_cast<size_t>(scales_per_row(ring.v_format(), D));
  if (k_int8) snap.k_codes.resize(snap.k.size()), snap.k_scales.resize(C * static_cast<size_t>(H) * ks);
  if (v_int8) snap.v_codes.resize(snap.v.size()), snap.v_scales.resize(C * static_cast<size_t>(H) * vs);
  for (size_t slot = 0; slot < C; ++slot) {
    snap.positions[slot] = ring.position(static_cast<int64_t>(slot));
    for (int h = 0; h < H; ++h) {
      const size_t r = slot * static_cast<size_t>(H) + static_cast<size_t>(h);
      const auto s = static_cast<int64_t>(slot);
      ring.decode_k(s, h, snap.k.data() + r * row);
      ring.decode_v(s, h, snap.v.data() + r * row);
      if (k_int8) {
        const auto* c = reinterpret_cast<const int8_t*>(ring.k_bytes(s, h));
        std::copy(c, c + D, snap.k_codes.begin() + static_cast<std::ptrdiff_t>(r * row));
        std::copy(ring.k_scales(s, h), ring.k_scales(s, h) + ks, snap.k_scales.begin() + static_cast<std::ptrdiff_t>(r * ks));
      }
      if (v_int8) {
        const auto* c = reinterpret_cast<const int8_t*>(ring.v_bytes(s, h));
        std::copy(c, c + D, snap.v_codes.begin() + static_cast<std::ptrdiff_t>(r * row));
        std::copy(ring.v_scales(s, h), ring.v_scales(s, h) + vs, snap.v_scales.begin() + static_cast<std::ptrdiff_t>(r * vs));
      }
    }
  }
  return snap;
}

EngineFactory reference_engine_factory() {
  return EngineFactory{"reference", ReferenceEngine::capabilities(),
                       [](const Config& c) -> std::unique_ptr<Engine> { return std::make_unique<ReferenceEngine>(c); }};
}

std::unique_ptr<Engine> make_reference_engine(const Config& config) { return std::make_unique<ReferenceEngine>(config); }

}  // namespace ringkv
