// ringkv ABI, host side: the Engine adapter. A PluginEngine is one engine in the plugin's worker: each
// ringkv::Engine call becomes a request (plugin_host.hpp), with q and k rotated here for a plugin that
// wants them rotated, and a snapshot keyed by position mapped back to the spec's slots. Then the
// public API of plugin_engine.hpp. The other concerns have files of their own: worker_channel (framed
// I/O with deadlines), worker_process (the process), plugin_host (its lifecycle and the requests),
// leak_watch, capabilities_map and abi_versions (the ABI's version rules).
#include "plugin_engine.hpp"

#include <algorithm>
#include <utility>

#include "abi_versions.hpp"
#include "capabilities_map.hpp"
#include "leak_watch.hpp"
#include "plugin_host.hpp"
#include "protocol.hpp"
#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/ring.hpp"
#include "ringkv/rope.hpp"

namespace ringkv::abi {

using namespace wire;

namespace {

class PluginEngine final : public Engine {
 public:
  PluginEngine(std::shared_ptr<PluginHost> host, const Config& config) : host_(std::move(host)), config_(config) {
    validate(config_);
    // A reserve is sent only to a plugin that declared rollback and a reserve that large (ABI 1.3).
    const Capabilities& caps = host_->mapped();
    for (size_t l = 0; l < config_.layers.size(); ++l) {
      const int64_t q = config_.layers[l].rollback_reserve;
      if (q <= caps.max_rollback_reserve) continue;
      throw ConfigError("config.layers[" + std::to_string(l) + "].rollback_reserve = " + std::to_string(q) +
                        ": must be in [0, max_rollback_reserve = " + std::to_string(caps.max_rollback_reserve) +
                        "]: plugin " + host_->name() +
                        (caps.rollback ? " declares no larger reserve"
                                       : " declares no rollback (ABI " + abi_version_text(host_->abi_version()) +
                                             "; rollback needs ABI 1.3 and ringkv_capabilities.rollback = 1)"));
    }
    if (const std::string why = host_->unsupported(config_); !why.empty()) {
      throw ConfigError("config outside plugin " + host_->name() + "'s declared capabilities: " + why);
    }
    const auto B = static_cast<size_t>(config_.batch);
    p0_.resize(B);
    seen_.assign(B, 0);
    for (int s = 0; s < config_.batch; ++s) p0_[static_cast<size_t>(s)] = start_position(config_, s);
    rotate_ = host_->caps().wants_rotated_qk != 0;

    generation_ = host_->ensure_worker();
    Writer w;
    w.put(static_cast<uint32_t>(config_.layers.size()));
    w.put(static_cast<uint32_t>(config_.num_q_heads));
    w.put(static_cast<uint32_t>(config_.num_kv_heads));
    w.put(static_cast<uint32_t>(config_.head_dim));
    w.put(static_cast<uint32_t>(config_.batch));
    w.put_string(host_->config_json(config_));
    // One round trip: the reply carries the engine's get_info too (protocol.hpp).
    Reply r;
    try {
      r = host_->call(generation_, Op::create, w.bytes(), "create");
    } catch (const ConfigError& e) {
      // The host sends only configs inside the declaration (checked above): a refusal means the
      // capabilities claim more than the engine does.
      throw ConfigError("plugin " + host_->name() + " rejected a config inside its declared capabilities: " + e.what() +
                        " (the capabilities claim more than the engine does: fix the declaration or the engine)");
    }
    Reader in(r.payload.data(), r.payload.size());
    handle_ = in.get<uint64_t>();
    try {
      const auto info_status = in.get<uint32_t>();
      info_.name = std::string("plugin:") + host_->caps().name;
      info_.deterministic = host_->caps().deterministic != 0;
      info_.precision = map_profile(host_->caps().precision, host_->caps().precision2, config_);
      if (info_status == RINGKV_OK) {
        const auto info = in.get<ringkv_engine_info>();
        if (info.name[0] != '\0') info_.name = std::string("plugin:") + info.name;
        info_.deterministic = info.deterministic != 0;
        info_.precision = map_profile(info.precision, info.precision2, config_);
      } else if (info_status != RINGKV_ERR_UNSUPPORTED) {
        host_->throw_plugin_status(info_status, in.rest(), "get_info");
      }
    } catch (...) {
      destroy_remote();  // no engine object will own the handle
      throw;
    }
    if (LeakWatch::possible()) {
      try {
        leak_.start(*host_, generation_, handle_);
      } catch (...) {
        destroy_remote();
        throw;
      }
    }
  }

  ~PluginEngine() override { destroy_remote(); }

  EngineInfo info() const override { return info_; }
  const Config& config() const override { return config_; }

  void step(const StepBatch& batch) override {
    if (!batch.rollbacks.empty() && !host_->mapped().rollback) {  // never sent: the plugin would not know them
      throw StepError("step.rollbacks: plugin " + host_->name() + " declares no rollback (ABI " +
                      abi_version_text(host_->abi_version()) +
                      "; rollback needs ABI 1.3 and ringkv_capabilities.rollback = 1), so it is never sent one");
    }
    const std::string during = "step " + std::to_string(steps_);
    const int B = config_.batch;
    const auto L = static_cast<int64_t>(config_.layers.size());
    const int64_t Hq = config_.num_q_heads, Hkv = config_.num_kv_heads, D = config_.head_dim;
    // Positions after this step's rollbacks and resets (for rotation and for our own bookkeeping); a
    // bad count is the plugin's to reject (it changes nothing then, and neither do we).
    std::vector<int64_t> p0 = p0_, seen = seen_;
    for (const SequenceRollback& r : batch.rollbacks) {
      if (r.sequence >= 0 && r.sequence < B) {
        int64_t& held = seen[static_cast<size_t>(r.sequence)];
        held = std::clamp<int64_t>(held - r.n_tokens, 0, held);
      }
    }
    for (const SequenceReset& r : batch.resets) {
      if (r.sequence >= 0 && r.sequence < B) {
        p0[static_cast<size_t>(r.sequence)] = r.start_position;
        seen[static_cast<size_t>(r.sequence)] = 0;
      }
    }
    for (size_t a = 0; a < batch.appends.size(); ++a) {
      const SequenceStep& s = batch.appends[a];
      const std::string at = "step.appends[" + std::to_string(a) + "].";
      if (s.n_tokens < 0 || s.n_tokens > config_.max_tokens) {
        throw StepError(at + "n_tokens = " + std::to_string(s.n_tokens) + ": must be in [1, max_tokens = " +
                        std::to_string(config_.max_tokens) + "]");
      }
      if (s.n_tokens > 0 && (!s.q || !s.k || !s.v || !s.out)) throw StepError(at + "q/k/v/out: must be non-null");
    }
    Writer w;
    size_t floats = 0;
    for (const SequenceStep& s : batch.appends) floats += static_cast<size_t>(L * s.n_tokens * (2 * Hq + 2 * Hkv) * D);
    w.reserve(64 + 12 * (batch.resets.size() + batch.appends.size() + batch.rollbacks.size()) + 4 * floats);
    w.put(handle_);
    w.put(static_cast<uint32_t>(batch.resets.size()));
    w.put(static_cast<uint32_t>(batch.appends.size()));
    for (const SequenceReset& r : batch.resets) {
      w.put(static_cast<int32_t>(r.sequence));
      w.put(r.start_position);
    }
    for (const SequenceStep& s : batch.appends) {
      w.put(static_cast<int32_t>(s.sequence));
      w.put(s.n_tokens);
    }
    std::vector<float> rot;
    for (const SequenceStep& s : batch.appends) {
      const auto n = s.n_tokens;
      const size_t qn = static_cast<size_t>(L * n * Hq * D), kvn = static_cast<size_t>(L * n * Hkv * D);
      const bool can_rotate = rotate_ && s.sequence >= 0 && s.sequence < B;
      if (can_rotate) {
        const int64_t first = p0[static_cast<size_t>(s.sequence)] + seen[static_cast<size_t>(s.sequence)];
        rotated(s.q, n, Hq, first, rot);
        w.put_array(rot.data(), qn);
        rotated(s.k, n, Hkv, first, rot);
        w.put_array(rot.data(), kvn);
      } else {
        w.put_array(s.q, qn);
        w.put_array(s.k, kvn);
      }
      w.put_array(s.v, kvn);
    }
    if (!batch.rollbacks.empty()) {  // ABI 1.3, after the inputs (protocol.hpp); absent when there are none
      w.put(static_cast<uint32_t>(batch.rollbacks.size()));
      for (const SequenceRollback& rb : batch.rollbacks) {
        w.put(static_cast<int32_t>(rb.sequence));
        w.put(rb.n_tokens);
      }
    }
    const Reply r = host_->call(generation_, Op::step, w.bytes(), during);
    ++steps_;
    Reader in(r.payload.data(), r.payload.size());
    for (const SequenceStep& s : batch.appends) in.get_array(s.out, static_cast<size_t>(L * s.n_tokens * Hq * D));
    leak_.check_limit(during, steps_);
    for (const SequenceStep& s : batch.appends) {
      if (s.sequence >= 0 && s.sequence < B) seen[static_cast<size_t>(s.sequence)] += s.n_tokens;
    }
    p0_ = std::move(p0);
    seen_ = std::move(seen);
  }

  void reset(int sequence, int64_t start_position) override {
    Writer w;
    w.put(handle_);
    w.put(static_cast<int32_t>(sequence));
    w.put(start_position);
    host_->call(generation_, Op::reset, w.bytes(), "reset of sequence " + std::to_string(sequence) + " after step " +
                                                       std::to_string(steps_));
    if (sequence >= 0 && sequence < config_.batch) {
      p0_[static_cast<size_t>(sequence)] = start_position;
      seen_[static_cast<size_t>(sequence)] = 0;
    }
  }

  std::optional<CacheSnapshot> snapshot(int layer, int sequence) const override {
    if (!host_->mapped().snapshot) return std::nullopt;
    if (layer < 0 || layer >= static_cast<int>(config_.layers.size())) {
      throw StepError("snapshot layer = " + std::to_string(layer) + ": must be in [0, " +
                      std::to_string(config_.layers.size()) + ")");
    }
    if (sequence < 0 || sequence >= config_.batch) {
      throw StepError("snapshot sequence = " + std::to_string(sequence) + ": must be in [0, " +
                      std::to_string(config_.batch) + ")");
    }
    // The spec ring of this (layer, sequence): which token each slot may hold now (spec §3): the sinks
    // and the last C - S tokens, one per slot. After a rollback (spec 1.1 §5.1.6) it holds only the
    // intact ones among them (a removed token's slot is empty, and the key it overwrote is gone):
    // those are the most recent keys, so they lie in this range, and the engine says which it holds.
    const LayerConfig& Lc = config_.layers[static_cast<size_t>(layer)];
    const RingGeometry geo{Lc.sinks, Lc.window, ring_capacity(Lc, config_.max_tokens)};
    const int64_t seen = seen_[static_cast<size_t>(sequence)], p0 = p0_[static_cast<size_t>(sequence)];
    std::vector<int64_t> token_of(static_cast<size_t>(geo.capacity), -1);
    const int64_t ring = geo.capacity - geo.sinks;
    for (int64_t j = 0; j < std::min(seen, geo.sinks); ++j) token_of[static_cast<size_t>(j)] = j;  // the sinks
    for (int64_t j = std::max(geo.sinks, seen - ring); j < seen; ++j) {  // the last `ring` tokens, one per slot
      token_of[static_cast<size_t>(geo.slot_of(j))] = j;
    }
    std::vector<int64_t> slots, positions;
    for (int64_t slot = 0; slot < geo.capacity; ++slot) {
      if (token_of[static_cast<size_t>(slot)] >= 0) {
        slots.push_back(slot);
        positions.push_back(p0 + token_of[static_cast<size_t>(slot)]);
      }
    }
    const int H = config_.num_kv_heads, D = config_.head_dim;
    const bool k8 = config_.k_format.dtype == DType::int8, v8 = config_.v_format.dtype == DType::int8;
    const auto kspr = static_cast<uint32_t>(scales_per_row(config_.k_format, D));
    const auto vspr = static_cast<uint32_t>(scales_per_row(config_.v_format, D));
    Writer w;
    w.put(handle_);
    w.put(static_cast<int32_t>(layer));
    w.put(static_cast<int32_t>(sequence));
    w.put(static_cast<uint32_t>(positions.size()));
    w.put(kspr);
    w.put(vspr);
    w.put(static_cast<uint32_t>(k8));
    w.put(static_cast<uint32_t>(v8));
    w.put_array(positions.data(), positions.size());
    const Reply r = host_->call(generation_, Op::snapshot, w.bytes(),
                                "snapshot of layer " + std::to_string(layer) + ", sequence " + std::to_string(sequence) +
                                    " after step " + std::to_string(steps_),
                                {RINGKV_ERR_UNSUPPORTED});
    if (r.status == RINGKV_ERR_UNSUPPORTED) return std::nullopt;
    Reader in(r.payload.data(), r.payload.size());
    const auto codes_written = in.get<int32_t>();
    const auto capacity_rows = in.get<int64_t>();
    const size_t count = positions.size(), row = static_cast<size_t>(H) * static_cast<size_t>(D);
    std::vector<uint8_t> present(count);
    std::vector<float> k(count * row), v(count * row);
    in.get_array(present.data(), count);
    in.get_array(k.data(), k.size());
    in.get_array(v.data(), v.size());
    std::vector<int8_t> kc, vc;
    std::vector<float> ks, vs;
    if (codes_written) {
      kc.resize(k8 ? count * row : 0);
      vc.resize(v8 ? count * row : 0);
      ks.resize(k8 ? count * static_cast<size_t>(H) * kspr : 0);
      vs.resize(v8 ? count * static_cast<size_t>(H) * vspr : 0);
      in.get_array(kc.data(), kc.size());
      in.get_array(vc.data(), vc.size());
      in.get_array(ks.data(), ks.size());
      in.get_array(vs.data(), vs.size());
    }
    // Back to the slot layout of ringkv::CacheSnapshot: the spec's slot of each position it holds.
    CacheSnapshot snap;
    snap.capacity = capacity_rows > 0 ? capacity_rows : geo.capacity;
    snap.num_kv_heads = H;
    snap.head_dim = D;
    const auto slots_n = static_cast<size_t>(std::max(snap.capacity, geo.capacity));
    snap.positions.assign(slots_n, RingKvCache::kEmpty);
    snap.k.assign(slots_n * row, 0.0f);
    snap.v.assign(slots_n * row, 0.0f);
    if (codes_written && k8) snap.k_codes.assign(slots_n * row, 0), snap.k_scales.assign(slots_n * H * kspr, 0.0f);
    if (codes_written && v8) snap.v_codes.assign(slots_n * row, 0), snap.v_scales.assign(slots_n * H * vspr, 0.0f);
    for (size_t i = 0; i < count; ++i) {
      if (!present[i]) continue;
      const auto slot = static_cast<size_t>(slots[i]);
      snap.positions[slot] = positions[i];
      std::copy_n(k.begin() + static_cast<std::ptrdiff_t>(i * row), row, snap.k.begin() + static_cast<std::ptrdiff_t>(slot * row));
      std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(i * row), row, snap.v.begin() + static_cast<std::ptrdiff_t>(slot * row));
      const auto copy_int8 = [&](const std::vector<int8_t>& codes, const std::vector<float>& scales, uint32_t spr,
                                 std::vector<int8_t>& codes_out, std::vector<float>& scales_out) {
        if (codes.empty()) return;
        std::copy_n(codes.begin() + static_cast<std::ptrdiff_t>(i * row), row,
                    codes_out.begin() + static_cast<std::ptrdiff_t>(slot * row));
        const size_t sr = static_cast<size_t>(H) * spr;
        std::copy_n(scales.begin() + static_cast<std::ptrdiff_t>(i * sr), sr,
                    scales_out.begin() + static_cast<std::ptrdiff_t>(slot * sr));
      };
      copy_int8(kc, ks, kspr, snap.k_codes, snap.k_scales);
      copy_int8(vc, vs, vspr, snap.v_codes, snap.v_scales);
    }
    return snap;
  }

  size_t cache_bytes() const override {
    Writer w;
    w.put(handle_);
    const Reply r = host_->call(generation_, Op::cache_bytes, w.bytes(), "cache_bytes after step " + std::to_string(steps_));
    Reader in(r.payload.data(), r.payload.size());
    return static_cast<size_t>(in.get<uint64_t>());
  }

  bool poison_empty_slots() override {
    if (!host_->has(kHasPoison)) return false;
    Writer w;
    w.put(handle_);
    const Reply r = host_->call(generation_, Op::poison, w.bytes(), "poison_empty_slots after step " + std::to_string(steps_),
                                {RINGKV_ERR_UNSUPPORTED});
    return r.status == RINGKV_OK;
  }

 private:
  void destroy_remote() noexcept {
    if (!host_->alive(generation_)) return;
    leak_.warn(steps_);
    if (!host_->alive(generation_)) return;
    try {
      Writer w;
      w.put(handle_);
      host_->destroy_async(generation_, w.bytes());  // no wait: the next request reads the reply
    } catch (...) {  // reports nothing; the next create() sees a dead worker and restarts it
    }
  }

  // q or k of one chunk rotated per spec §8 at positions first, first + 1, ... (layer by layer).
  void rotated(const float* x, int64_t n, int64_t heads, int64_t first, std::vector<float>& out) const {
    const auto L = static_cast<int64_t>(config_.layers.size());
    const int D = config_.head_dim;
    out.assign(x, x + L * n * heads * D);
    std::vector<double> c(static_cast<size_t>(D)), s(static_cast<size_t>(D));
    for (int64_t l = 0; l < L; ++l) {
      const RopeConfig& rope = config_.layers[static_cast<size_t>(l)].rope;
      if (rope.style == RopeStyle::none) continue;
      for (int64_t t = 0; t < n; ++t) {
        rope_angles(rope, D, first + t, c.data(), s.data());
        for (int64_t h = 0; h < heads; ++h) {
          float* row = out.data() + ((l * n + t) * heads + h) * D;
          rope_rotate(rope, D, c.data(), s.data(), row, row);
        }
      }
    }
  }


  std::shared_ptr<PluginHost> host_;
  Config config_;
  EngineInfo info_;
  uint64_t generation_ = 0, handle_ = 0;
  std::vector<int64_t> p0_, seen_;
  int64_t steps_ = 0;
  bool rotate_ = false;
  LeakWatch leak_;  // the worker's resident memory over this engine's life
};

}  // namespace

// ---------------------------------------------------------------- public API

Plugin::Plugin(std::unique_ptr<PluginHost> host)
    : host_(std::move(host)),
      zero_abi_1_2_fields_(abi_1_2_fields_left_at_zero(host_->name(), host_->caps(), host_->abi_version(), host_->mapped())) {}
Plugin::~Plugin() = default;

std::shared_ptr<Plugin> Plugin::open(const std::string& plugin_path, PluginOptions options) {
  return std::shared_ptr<Plugin>(new Plugin(std::make_unique<PluginHost>(plugin_path, std::move(options))));
}

const std::string& Plugin::path() const { return host_->path(); }
const ringkv_capabilities& Plugin::raw_capabilities() const { return host_->caps(); }
const Capabilities& Plugin::capabilities() const { return host_->mapped(); }
uint32_t Plugin::abi_version() const { return host_->abi_version(); }
const std::optional<ZeroAbi12Fields>& Plugin::zero_abi_1_2_fields() const { return zero_abi_1_2_fields_; }
std::string Plugin::unsupported(const Config& config) const { return host_->unsupported(config); }
std::string Plugin::config_json(const Config& config) const { return host_->config_json(config); }
std::unique_ptr<Engine> Plugin::create(const Config& config) { return std::make_unique<PluginEngine>(host_, config); }
int Plugin::workers_started() const { return host_->started(); }
int Plugin::worker_pid() const { return host_->pid(); }

EngineFactory plugin_engine_factory(std::shared_ptr<Plugin> plugin) {
  EngineFactory f;
  f.name = "plugin:" + base_name(plugin->path());
  f.capabilities = plugin->capabilities();
  f.create = [plugin](const Config& c) { return plugin->create(c); };
  return f;
}

EngineFactory plugin_engine_factory(const std::string& plugin_path, PluginOptions opts) {
  return plugin_engine_factory(Plugin::open(plugin_path, std::move(opts)));
}

}  // namespace ringkv::abi
