#include "ringkv/cuda/engine_core.hpp"
#include "ringkv/cuda/ring.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/rope.hpp"

namespace ringkv::cuda {
namespace {

FormatDesc format_desc(const KvFormat& f, int D) {
  FormatDesc d;
  d.dtype = static_cast<int>(f.dtype);
  d.int8_scheme = static_cast<int>(f.int8_scheme);
  d.rounding = static_cast<int>(f.rounding);
  d.scale = f.scale;
  d.bytes = bytes_per_element(f.dtype);
  d.group = f.dtype == DType::int8 ? int8_group_size(f.int8_scheme, D) : 0;
  d.scales_per_row = scales_per_row(f, D);
  return d;
}

// inv_freq_k = pow(θ', -(2k)/R), with the reference's own operations (spec §8).
std::vector<double> rope_inv_freq(const RopeConfig& rope, int R) {
  std::vector<double> f(static_cast<size_t>(R / 2));
  const double theta = rope_effective_theta(rope, R);
  for (int k = 0; k < R / 2; ++k) f[static_cast<size_t>(k)] = std::pow(theta, -(2.0 * k) / static_cast<double>(R));
  return f;
}

size_t sz(int64_t v) { return static_cast<size_t>(v); }

}  // namespace

Capabilities core_capabilities() {
  Capabilities caps;
  caps.rollback = true;
  caps.max_rollback_reserve = int64_t{1} << 30;
  return caps;
}
Capabilities EngineCore::capabilities() { return core_capabilities(); }

/// One rule for every backend of the core (cuda, cuda-plan, cuda-sim): the launches' 1-D grids and
/// the GEMMs' int dimensions must hold the largest launch the config can ask for, or the config is
/// refused here; a GPU would refuse the launch (cudaErrorInvalidConfiguration) where the plan would
/// run it. Largest per layer: gather (C + n)·Hkv blocks and C + n keys in the GEMMs (n ≤ 256, the
/// prefill's sub-chunk), poison B·C·Hkv blocks.
namespace {
void check_grid_limits(const Config& c) {
  constexpr int64_t kGridMax = 2147483647;  // 2^31 − 1 blocks in x
  const int64_t chunk = std::min<int64_t>(c.max_tokens, 256);
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const int64_t C = ring_capacity(c.layers[l], c.max_tokens);
    const std::string where = "layers[" + std::to_string(l) + "] (ring capacity C = " + std::to_string(C) +
                              ", num_kv_heads = " + std::to_string(c.num_kv_heads) + ", batch = " + std::to_string(c.batch) + ")";
    if ((C + chunk) * c.num_kv_heads > kGridMax) {
      throw ConfigError(where + ": the CUDA engine's gather launch needs (C + " + std::to_string(chunk) + ") x num_kv_heads = " +
                        std::to_string((C + chunk) * c.num_kv_heads) + " blocks, above the grid limit 2^31 - 1");
    }
    if (int64_t{c.batch} * C > kGridMax / c.num_kv_heads) {
      throw ConfigError(where + ": the CUDA engine's poison launch needs batch x C x num_kv_heads = " +
                        std::to_string(int64_t{c.batch} * C * c.num_kv_heads) + " blocks, above the grid limit 2^31 - 1");
    }
  }
}
}  // namespace

EngineCore::EngineCore(Config config, std::unique_ptr<Backend> backend, CoreOptions options)
    : config_(std::move(config)), backend_(std::move(backend)), options_(std::move(options)) {
  validate(config_);
  const int B = config_.batch, Hq = config_.num_q_heads, Hkv = config_.num_kv_heads, D = config_.head_dim;
  const auto L = static_cast<int>(config_.layers.size());
  check_grid_limits(config_);
  group_ = Hq / Hkv;
  kf_ = format_desc(config_.k_format, D);
  vf_ = format_desc(config_.v_format, D);
  p0_.resize(sz(B));
  seen_.assign(sz(B), 0);
  high_water_.assign(sz(L) * sz(B), 0);
  replay_ = RollbackReplay(config_);
  resident_view_.resize(sz(B));
  for (int s = 0; s < B; ++s) p0_[sz(s)] = start_position(config_, s);

  try {
    // ---- the ring: every layer, every sequence, allocated once ----
    const size_t k_row = sz(D) * sz(kf_.bytes), v_row = sz(D) * sz(vf_.bytes);
    for (int l = 0; l < L; ++l) {
      const LayerConfig& lc = config_.layers[sz(l)];
      LayerState st;
      st.ring.capacity = ring_capacity(lc, config_.max_tokens);
      st.ring.sinks = lc.sinks;
      st.ring.window = lc.window;
      const size_t rows = sz(B) * sz(st.ring.capacity) * sz(Hkv);
      st.ring.k = static_cast<uint8_t*>(alloc(rows * k_row));
      st.ring.v = static_cast<uint8_t*>(alloc(rows * v_row));
      ring_bytes_ += rows * (k_row + v_row);
      if (kf_.scales_per_row > 0) st.ring.k_scales = static_cast<float*>(alloc(rows * sz(kf_.scales_per_row) * 4));
      if (vf_.scales_per_row > 0) st.ring.v_scales = static_cast<float*>(alloc(rows * sz(vf_.scales_per_row) * 4));
      ring_bytes_ += rows * sz(kf_.scales_per_row + vf_.scales_per_row) * 4;
      const size_t pos_bytes = sz(B) * sz(st.ring.capacity) * sizeof(int64_t);
      st.ring.positions = static_cast<int64_t*>(alloc(pos_bytes));
      backend_->fill(st.ring.positions, 0xff, pos_bytes);  // every slot empty (-1)
      ring_bytes_ += pos_bytes;
      max_capacity_ = std::max(max_capacity_, st.ring.capacity);

      st.rope.style = static_cast<int>(lc.rope.style);
      st.rope.rotary_dim = rotary_dim(lc.rope, D);
      st.rope.linear = lc.rope.scaling == RopeScaling::linear;
      st.rope.factor = lc.rope.factor;
      if (st.rope.style != kRopeNone && st.rope.rotary_dim >= 2) {
        const std::vector<double> f = rope_inv_freq(lc.rope, st.rope.rotary_dim);
        // rope_sincos reduces angles below 2^40 exactly; positions stay below 2^31.
        const double p_max = static_cast<double>(kMaxPosition) / (st.rope.linear ? lc.rope.factor : 1.0);
        const double largest = p_max * *std::max_element(f.begin(), f.end());
        if (!(largest < kRopeMaxAngle)) {
          throw ConfigError("layers[" + std::to_string(l) + "].rope.theta = " + std::to_string(lc.rope.theta) +
                            ": the CUDA engine needs RoPE angles below 2^40 (position / factor times the largest "
                            "inverse frequency), this layer reaches " + std::to_string(largest));
        }
        st.inv_freq = static_cast<double*>(alloc(f.size() * sizeof(double)));
        backend_->upload(st.inv_freq, f.data(), f.size() * sizeof(double));
      }
      st.rope.inv_freq = st.inv_freq;
      if (!config_.sink_logits.empty()) {
        const std::vector<float>& s = config_.sink_logits[sz(l)];
        st.sink_logits = static_cast<float*>(alloc(s.size() * sizeof(float)));
        backend_->upload(st.sink_logits, s.data(), s.size() * sizeof(float));
      }
      layers_.push_back(st);
    }

    // ---- decode scratch (fused path) ----
    items_dev_ = static_cast<SeqItem*>(alloc((sz(B) + 1) * sizeof(SeqItem)));
    host_items_.resize(sz(B) + 1);
    if (options_.path == DecodePath::fused) {
      int64_t most_tiles = 1;
      const int warp_heads = decode_warp_heads(group_, D, kf_, vf_);
      const int tile = warp_heads > 0 ? 32 / warp_heads : decode_tile(D);
      for (const LayerState& st : layers_) {
        most_tiles = std::max<int64_t>(most_tiles, (st.ring.capacity + tile - 1) / tile);
      }
      max_splits_ = static_cast<int>(std::clamp<int64_t>(most_tiles / 2, 1, kMaxSplits));
      q_rot_dec_ = static_cast<float*>(alloc(sz(B) * sz(Hq) * sz(D) * 4));
      partial_acc_ = static_cast<float*>(alloc(sz(B) * sz(Hq) * sz(kMaxSplits) * sz(D) * 4));
      partial_ml_ = static_cast<float*>(alloc(sz(B) * sz(Hq) * sz(kMaxSplits) * 2 * 4));
    }

    // ---- prefill scratch: sub-chunks of m tokens, m from the budget ----
    const auto prefill_bytes = [&](int64_t m) {
      const size_t keys = sz(max_capacity_ + m);
      return sz(m) * sz(Hq) * sz(D) * 4 * 2                          // q_rot, o
             + sz(m) * sz(Hkv) * (k_row + v_row + sz(kf_.scales_per_row + vf_.scales_per_row) * 4) + sz(m) * 8
             + keys * sz(Hkv) * sz(D) * 4 * 2 + keys * 8               // kd, vd, key positions
             + sz(m) * sz(Hq) * keys * 4;                             // scores
    };
    int64_t m = std::min<int64_t>(config_.max_tokens, 256);
    while (m > 1 && prefill_bytes(m) > options_.prefill_scratch_bytes) m /= 2;
    chunk_tile_ = std::max<int64_t>(m, 1);
    const size_t keys = sz(max_capacity_ + chunk_tile_);
    q_rot_pre_ = static_cast<float*>(alloc(sz(chunk_tile_) * sz(Hq) * sz(D) * 4));
    o_ = static_cast<float*>(alloc(sz(chunk_tile_) * sz(Hq) * sz(D) * 4));
    stage_.k = static_cast<uint8_t*>(alloc(sz(chunk_tile_) * sz(Hkv) * k_row));
    stage_.v = static_cast<uint8_t*>(alloc(sz(chunk_tile_) * sz(Hkv) * v_row));
    if (kf_.scales_per_row > 0) stage_.k_scales = static_cast<float*>(alloc(sz(chunk_tile_) * sz(Hkv) * sz(kf_.scales_per_row) * 4));
    if (vf_.scales_per_row > 0) stage_.v_scales = static_cast<float*>(alloc(sz(chunk_tile_) * sz(Hkv) * sz(vf_.scales_per_row) * 4));
    stage_.positions = static_cast<int64_t*>(alloc(sz(chunk_tile_) * 8));
    kd_ = static_cast<float*>(alloc(keys * sz(Hkv) * sz(D) * 4));
    vd_ = static_cast<float*>(alloc(keys * sz(Hkv) * sz(D) * 4));
    key_positions_ = static_cast<int64_t*>(alloc(keys * 8));
    scores_ = static_cast<float*>(alloc(sz(chunk_tile_) * sz(Hq) * keys * 4));

    // ---- host-path staging ----
    staging_tokens_ = std::max<int64_t>(B, chunk_tile_);
    const size_t per_token = sz(L) * sz(D);
    in_q_ = static_cast<float*>(alloc(sz(staging_tokens_) * per_token * sz(Hq) * 4));
    in_out_ = static_cast<float*>(alloc(sz(staging_tokens_) * per_token * sz(Hq) * 4));
    in_k_ = static_cast<float*>(alloc(sz(staging_tokens_) * per_token * sz(Hkv) * 4));
    in_v_ = static_cast<float*>(alloc(sz(staging_tokens_) * per_token * sz(Hkv) * 4));
    backend_->synchronize();
  } catch (...) {
    for (Buffer& b : buffers_) backend_->release(b.p);
    buffers_.clear();
    throw;
  }
}

EngineCore::~EngineCore() {
  for (Buffer& b : buffers_) backend_->release(b.p);
}

void* EngineCore::alloc(size_t bytes) {
  buffers_.reserve(64);
  void* p = backend_->allocate(std::max<size_t>(bytes, 16));
  buffers_.push_back({p, bytes});
  return p;
}

EngineInfo EngineCore::info() const {
  PrecisionProfile p;  // f32 q, f32 accumulation (online softmax, f32 GEMMs), storage as configured, f64 RoPE
  p.k_storage = precision_of(config_.k_format.dtype);
  p.v_storage = precision_of(config_.v_format.dtype);
  // Split counts follow the batch and the visible length, and chunks take the GEMM path: the
  // bits depend on the schedule, so the engine does not declare itself deterministic.
  return EngineInfo{options_.name, p, false};
}

LayerShape EngineCore::shape(int layer) const {
  LayerShape s;
  s.layer = layer;
  s.num_q_heads = config_.num_q_heads;
  s.num_kv_heads = config_.num_kv_heads;
  s.head_dim = config_.head_dim;
  s.scale = static_cast<float>(softmax_scale(config_));
  s.capped = config_.softcap.has_value();
  s.cap = s.capped ? static_cast<float>(*config_.softcap) : 1.0f;
  s.sink_logits = layers_[sz(layer)].sink_logits;
  return s;
}

void EngineCore::apply_rollbacks(std::span<const SequenceRollback> rollbacks) {
  const size_t B = sz(config_.batch);
  for (const SequenceRollback& rb : rollbacks) {
    const int64_t held = seen_[sz(rb.sequence)], m = held - rb.n_tokens;
    for (size_t l = 0; l < layers_.size(); ++l) {
      // Every slot holding a removed token (index >= m) becomes empty: the slots of [m, held),
      // at most three ranges. The honour rule guarantees no later query needs what they held.
      const RingLayerView& r = layers_[l].ring;
      const SlotRanges empty = rollback_slots(m, held, r.sinks, r.capacity);
      for (int k = 0; k < empty.count; ++k) {
        backend_->fill(r.positions + sz(rb.sequence) * sz(r.capacity) + sz(empty.begin[k]), 0xff,
                       sz(empty.end[k] - empty.begin[k]) * sizeof(int64_t));
      }
      int64_t& H = high_water_[l * B + sz(rb.sequence)];
      H = high_water_after_rollback(config_.layers[l], m, H);
    }
    seen_[sz(rb.sequence)] = m;
  }
}

void EngineCore::apply_resets(std::span<const SequenceReset> resets) {
  const size_t B = sz(config_.batch);
  for (const SequenceReset& r : resets) {
    for (size_t l = 0; l < layers_.size(); ++l) {
      const RingLayerView& ring = layers_[l].ring;
      backend_->fill(ring.positions + sz(r.sequence) * sz(ring.capacity), 0xff, sz(ring.capacity) * sizeof(int64_t));
      high_water_[l * B + sz(r.sequence)] = 0;
    }
    p0_[sz(r.sequence)] = r.start_position;
    seen_[sz(r.sequence)] = 0;
  }
}

template <class Appends>
void EngineCore::raise_high_water(const Appends& appends) {
  const size_t B = sz(config_.batch);
  for (const auto& a : appends) {
    for (size_t l = 0; l < layers_.size(); ++l) {
      int64_t& H = high_water_[l * B + sz(a.sequence)];
      H = std::max(H, seen_[sz(a.sequence)]);
    }
  }
}

void EngineCore::reset(int sequence, int64_t start_position) {
  const SequenceReset r{sequence, start_position};
  step(StepBatch{std::span<const SequenceReset>(&r, 1), {}});
}

// ---------------------------------------------------------------- decode: append → decode → merge

void EngineCore::run_decode(std::span<const SeqItem> items, int input_type) {
  if (items.empty()) return;
  const int Hq = config_.num_q_heads, Hkv = config_.num_kv_heads, D = config_.head_dim;
  const auto num = static_cast<int>(items.size());
  backend_->upload(items_dev_, items.data(), items.size() * sizeof(SeqItem));
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {
    const LayerState& st = layers_[sz(l)];
    AppendParams a;
    a.items = items_dev_;
    a.num_items = num;
    a.max_n = 1;
    a.shape = shape(l);
    a.input_type = input_type;
    a.rope = st.rope;
    a.kf = kf_;
    a.vf = vf_;
    a.q_rot = q_rot_dec_;
    a.q_item_stride = int64_t{Hq} * D;
    a.q_token_stride = 0;
    a.q_group_stride = int64_t{group_} * D;
    a.staged = false;
    a.ring = st.ring;
    backend_->append(a);

    DecodeParams d;
    d.items = items_dev_;
    d.num_items = num;
    d.shape = a.shape;
    d.kf = kf_;
    d.vf = vf_;
    d.ring = st.ring;
    d.q_rot = q_rot_dec_;
    // The warp kernel where it applies (a split per warp, tiles of 32 / heads keys), else the block
    // kernel (a split per block); the plan backend runs either from the same params.
    d.warp_heads = decode_warp_heads(group_, D, kf_, vf_);
    d.heads_per_block = d.warp_heads > 0 ? d.warp_heads : decode_heads_per_block(group_, D);
    d.head_chunks = (group_ + d.heads_per_block - 1) / d.heads_per_block;
    d.tile = d.warp_heads > 0 ? 32 / d.warp_heads : decode_tile(D);
    int64_t longest = 1;
    for (const SeqItem& it : items) {
      longest = std::max(longest, decode_keys(decode_slots(it.first, st.ring.sinks, st.ring.window, st.ring.capacity)));
    }
    const int64_t units = int64_t{num} * Hkv * d.head_chunks;
    d.plan = d.warp_heads > 0
                 ? plan_splits(longest, units, backend_->sm_count() * kDecodeWarpsPerSm, d.tile, max_splits_, 2, 4)
                 : plan_splits(longest, units, backend_->sm_count(), d.tile, max_splits_);
    d.partial_acc = partial_acc_;
    d.partial_ml = partial_ml_;
    backend_->decode(d);
    last_splits_ = d.plan.splits;

    MergeParams mp;
    mp.items = items_dev_;
    mp.num_items = num;
    mp.shape = a.shape;
    mp.splits = d.plan.splits;
    mp.partial_acc = partial_acc_;
    mp.partial_ml = partial_ml_;
    backend_->merge(mp);
  }
}

// ---------------------------------------------------------------- chunk: stage → GEMMs → commit

void EngineCore::run_chunk(const SeqItem& item, int input_type) {
  const int Hkv = config_.num_kv_heads, D = config_.head_dim;
  const int64_t n = item.n;
  SeqItem* dev_item = items_dev_ + config_.batch;
  backend_->upload(dev_item, &item, sizeof(SeqItem));
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {
    const LayerState& st = layers_[sz(l)];
    const int64_t C = st.ring.capacity, keys = C + n;
    AppendParams a;
    a.items = dev_item;
    a.num_items = 1;
    a.max_n = n;
    a.shape = shape(l);
    a.input_type = input_type;
    a.rope = st.rope;
    a.kf = kf_;
    a.vf = vf_;
    a.q_rot = q_rot_pre_;
    a.q_item_stride = 0;
    a.q_token_stride = int64_t{group_} * D;
    a.q_group_stride = n * group_ * D;
    a.staged = true;
    a.ring = st.ring;
    a.stage = stage_;
    backend_->append(a);

    GatherParams g;
    g.sequence = item.sequence;
    g.n = n;
    g.num_kv_heads = Hkv;
    g.head_dim = D;
    g.kf = kf_;
    g.vf = vf_;
    g.ring = st.ring;
    g.stage = stage_;
    g.k_out = kd_;
    g.v_out = vd_;
    g.key_positions = key_positions_;
    backend_->gather(g);

    // scores_g [n·G][keys] (row-major) = Q_g [n·G][D] · K_g^T: column-major keys × n·G = K_g^T... (A = K_g, op T)
    GemmParams sc;
    sc.transa = true;
    sc.transb = false;
    sc.m = static_cast<int>(keys);
    sc.n = static_cast<int>(n * group_);
    sc.k = D;
    sc.a = kd_;
    sc.lda = D;
    sc.stride_a = keys * D;
    sc.b = q_rot_pre_;
    sc.ldb = D;
    sc.stride_b = n * group_ * D;
    sc.c = scores_;
    sc.ldc = keys;
    sc.stride_c = n * group_ * keys;
    sc.batch = Hkv;
    backend_->gemm(sc);

    MaskedSoftmaxParams ms;
    ms.shape = a.shape;
    ms.scores = scores_;
    ms.key_positions = key_positions_;
    ms.keys = keys;
    ms.n = n;
    ms.first = item.first;
    ms.p0 = item.p0;
    ms.sinks = st.ring.sinks;
    ms.window = st.ring.window;
    backend_->masked_softmax(ms);

    // o_g [n·G][D] (row-major) = P_g [n·G][keys] · V_g [keys][D]: column-major D × n·G = V^T · P^T
    GemmParams pv;
    pv.transa = false;
    pv.transb = false;
    pv.m = D;
    pv.n = static_cast<int>(n * group_);
    pv.k = static_cast<int>(keys);
    pv.a = vd_;
    pv.lda = D;
    pv.stride_a = keys * D;
    pv.b = scores_;
    pv.ldb = keys;
    pv.stride_b = n * group_ * keys;
    pv.c = o_;
    pv.ldc = D;
    pv.stride_c = n * group_ * D;
    pv.batch = Hkv;
    backend_->gemm(pv);

    ScatterParams sp;
    sp.item = dev_item;
    sp.shape = a.shape;
    sp.n = n;
    sp.o = o_;
    backend_->scatter(sp);

    CommitParams cm;
    cm.item = dev_item;
    cm.n = n;
    cm.num_kv_heads = Hkv;
    cm.head_dim = D;
    cm.kf = kf_;
    cm.vf = vf_;
    cm.ring = st.ring;
    cm.stage = stage_;
    backend_->commit(cm);
  }
}

// ---------------------------------------------------------------- steps

void EngineCore::step_resident(const ResidentBatch& batch) {
  // The values stay in backend memory: everything but their finiteness is checked as step() does.
  if (batch.input_type != kInF32 && batch.input_type != kInF16 && batch.input_type != kInBF16) {
    throw StepError("step.input_type = " + std::to_string(batch.input_type) + ": must be f32 (0), f16 (1) or bf16 (2)");
  }
  if (batch.appends.size() > resident_view_.size()) {
    throw StepError("step.appends has " + std::to_string(batch.appends.size()) + " entries: at most batch = " +
                    std::to_string(config_.batch) + ", one per sequence");
  }
  for (size_t a = 0; a < batch.appends.size(); ++a) {  // only the pointers' nullness is read
    const ResidentStep& s = batch.appends[a];
    resident_view_[a] = SequenceStep{s.sequence, s.n_tokens, static_cast<const float*>(s.q),
                                     static_cast<const float*>(s.k), static_cast<const float*>(s.v), s.out};
  }
  const StepBatch view{batch.resets, std::span<const SequenceStep>(resident_view_.data(), batch.appends.size()),
                       batch.rollbacks};
  validate_step(config_, view, seen_, /*check_values=*/false);
  check_rollbacks_honoured(config_, view, seen_, high_water_, &replay_);  // refused: nothing changed
  replay_.apply(view);
  apply_rollbacks(batch.rollbacks);
  apply_resets(batch.resets);
  size_t num = 0;
  for (const ResidentStep& s : batch.appends) {
    if (options_.path == DecodePath::fused && s.n_tokens == 1) {
      host_items_[num++] = SeqItem{s.sequence, seen_[sz(s.sequence)], p0_[sz(s.sequence)], 1, 0, 1, s.q, s.k, s.v, s.out};
    }
  }
  run_decode(std::span<const SeqItem>(host_items_.data(), num), batch.input_type);
  for (const ResidentStep& s : batch.appends) {
    if (options_.path == DecodePath::fused && s.n_tokens == 1) continue;
    for (int64_t t0 = 0; t0 < s.n_tokens; t0 += chunk_tile_) {
      const int64_t m = std::min(chunk_tile_, s.n_tokens - t0);
      const SeqItem item{s.sequence, seen_[sz(s.sequence)] + t0, p0_[sz(s.sequence)], m, t0, s.n_tokens,
                         s.q, s.k, s.v, s.out};
      run_chunk(item, batch.input_type);
    }
  }
  for (const ResidentStep& s : batch.appends) seen_[sz(s.sequence)] += s.n_tokens;
  raise_high_water(batch.appends);
}

void EngineCore::step(const StepBatch& batch) {
  validate_step(config_, batch, seen_);                         // throws before anything changes
  check_rollbacks_honoured(config_, batch, seen_, high_water_, &replay_);  // a refused rollback too
  replay_.apply(batch);
  apply_rollbacks(batch.rollbacks);
  apply_resets(batch.resets);
  const int Hq = config_.num_q_heads, Hkv = config_.num_kv_heads, D = config_.head_dim;
  const auto L = static_cast<int64_t>(config_.layers.size());
  const size_t qrow = sz(Hq) * sz(D), kvrow = sz(Hkv) * sz(D);  // floats per token and layer

  // Decode items (n = 1 on the fused path): inputs staged [item][L][1][H][D].
  size_t num = 0;
  for (const SequenceStep& s : batch.appends) {
    if (options_.path != DecodePath::fused || s.n_tokens != 1) continue;
    float* q = in_q_ + num * sz(L) * qrow;
    float* k = in_k_ + num * sz(L) * kvrow;
    float* v = in_v_ + num * sz(L) * kvrow;
    float* out = in_out_ + num * sz(L) * qrow;
    backend_->upload(q, s.q, sz(L) * qrow * 4);
    backend_->upload(k, s.k, sz(L) * kvrow * 4);
    backend_->upload(v, s.v, sz(L) * kvrow * 4);
    host_items_[num++] = SeqItem{s.sequence, seen_[sz(s.sequence)], p0_[sz(s.sequence)], 1, 0, 1, q, k, v, out};
  }
  run_decode(std::span<const SeqItem>(host_items_.data(), num), kInF32);
  num = 0;
  for (const SequenceStep& s : batch.appends) {
    if (options_.path != DecodePath::fused || s.n_tokens != 1) continue;
    backend_->download(s.out, in_out_ + num * sz(L) * qrow, sz(L) * qrow * 4);
    ++num;
  }

  // Chunks: sub-chunks of at most chunk_tile() tokens, inputs staged [L][m][H][D].
  for (const SequenceStep& s : batch.appends) {
    if (options_.path == DecodePath::fused && s.n_tokens == 1) continue;
    for (int64_t t0 = 0; t0 < s.n_tokens; t0 += chunk_tile_) {
      const int64_t m = std::min(chunk_tile_, s.n_tokens - t0);
      for (int64_t l = 0; l < L; ++l) {
        backend_->upload(in_q_ + sz(l * m) * qrow, s.q + sz(l * s.n_tokens + t0) * qrow, sz(m) * qrow * 4);
        backend_->upload(in_k_ + sz(l * m) * kvrow, s.k + sz(l * s.n_tokens + t0) * kvrow, sz(m) * kvrow * 4);
        backend_->upload(in_v_ + sz(l * m) * kvrow, s.v + sz(l * s.n_tokens + t0) * kvrow, sz(m) * kvrow * 4);
      }
      const SeqItem item{s.sequence, seen_[sz(s.sequence)] + t0, p0_[sz(s.sequence)], m, 0, m,
                         in_q_, in_k_, in_v_, in_out_};
      run_chunk(item, kInF32);
      for (int64_t l = 0; l < L; ++l) {
        backend_->download(s.out + sz(l * s.n_tokens + t0) * qrow, in_out_ + sz(l * m) * qrow, sz(m) * qrow * 4);
      }
    }
  }
  for (const SequenceStep& s : batch.appends) seen_[sz(s.sequence)] += s.n_tokens;
  raise_high_water(batch.appends);
  backend_->synchronize();
}

// ---------------------------------------------------------------- test hooks

bool EngineCore::poison_empty_slots() {
  for (const LayerState& st : layers_) {
    PoisonParams p;
    p.batch = config_.batch;
    p.num_kv_heads = config_.num_kv_heads;
    p.head_dim = config_.head_dim;
    p.kf = kf_;
    p.vf = vf_;
    p.ring = st.ring;
    backend_->poison(p);
  }
  backend_->synchronize();
  return true;
}

std::optional<CacheSnapshot> EngineCore::snapshot(int layer, int sequence) const {
  validate_snapshot_request(config_, layer, sequence);
  const RingLayerView& r = layers_[sz(layer)].ring;
  const int H = config_.num_kv_heads, D = config_.head_dim;
  const size_t C = sz(r.capacity), rows = C * sz(H);
  const size_t k_row = sz(D) * sz(kf_.bytes), v_row = sz(D) * sz(vf_.bytes);
  const size_t ks = sz(kf_.scales_per_row), vs = sz(vf_.scales_per_row);
  const size_t first_row = sz(sequence) * rows;
  std::vector<uint8_t> kb(rows * k_row), vb(rows * v_row);
  std::vector<float> ksc(rows * ks), vsc(rows * vs);
  CacheSnapshot snap;
  snap.capacity = r.capacity;
  snap.num_kv_heads = H;
  snap.head_dim = D;
  snap.positions.resize(C);
  backend_->download(snap.positions.data(), r.positions + sz(sequence) * C, C * sizeof(int64_t));
  backend_->download(kb.data(), r.k + first_row * k_row, kb.size());
  backend_->download(vb.data(), r.v + first_row * v_row, vb.size());
  if (ks > 0) backend_->download(ksc.data(), r.k_scales + first_row * ks, ksc.size() * 4);
  if (vs > 0) backend_->download(vsc.data(), r.v_scales + first_row * vs, vsc.size() * 4);
  snap.k.resize(rows * sz(D));
  snap.v.resize(rows * sz(D));
  const bool k8 = kf_.dtype == kInt8, v8 = vf_.dtype == kInt8;
  if (k8) snap.k_codes.resize(snap.k.size()), snap.k_scales = ksc;
  if (v8) snap.v_codes.resize(snap.v.size()), snap.v_scales = vsc;
  for (size_t row = 0; row < rows; ++row) {
    for (int e = 0; e < D; ++e) {
      const size_t i = row * sz(D) + sz(e);
      snap.k[i] = decode_element(kf_, kb.data() + row * k_row, ks ? ksc.data() + row * ks : nullptr, e);
      snap.v[i] = decode_element(vf_, vb.data() + row * v_row, vs ? vsc.data() + row * vs : nullptr, e);
      if (k8) snap.k_codes[i] = static_cast<int8_t>(kb[row * k_row + sz(e)]);
      if (v8) snap.v_codes[i] = static_cast<int8_t>(vb[row * v_row + sz(e)]);
    }
  }
  return snap;
}

}  // namespace ringkv::cuda
