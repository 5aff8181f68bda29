#include "export_engine.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ringkv/error.hpp"
#include "support/config_json.hpp"

// The opaque handle of the C header: one ringkv::Engine and its last error message.
struct ringkv_engine {
  std::unique_ptr<ringkv::Engine> engine;
  std::string error;  // valid until the next call on this handle (each call clears it first)
  std::vector<float> scratch_in[3], scratch_out;
};

namespace ringkv::abi {
namespace {

std::optional<ExportSpec> g_spec;  // made once, on the first ringkv_engine_api_get()
std::once_flag g_once;
ringkv_engine_api g_api;

struct AbiError {
  ringkv_status status;
  std::string message;
};

[[noreturn]] void fail(ringkv_status s, std::string m) { throw AbiError{s, std::move(m)}; }

// Runs f, turning every exception into a status and the handle's message.
template <typename F>
ringkv_status guarded(ringkv_engine* h, F&& f) {
  if (h == nullptr) return RINGKV_ERR_INVALID_ARGUMENT;
  h->error.clear();
  try {
    f();
    return RINGKV_OK;
  } catch (const AbiError& e) {
    h->error = e.message;
    return e.status;
  } catch (const ConfigError& e) {
    h->error = e.what();
    return RINGKV_ERR_CONFIG;
  } catch (const StepError& e) {
    h->error = e.what();
    return RINGKV_ERR_STEP;
  } catch (const std::bad_alloc&) {
    h->error = "out of memory";
    return RINGKV_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    h->error = e.what();
    return RINGKV_ERR_INTERNAL;
  } catch (...) {
    h->error = "unknown exception";
    return RINGKV_ERR_INTERNAL;
  }
}

template <typename E>
uint32_t mask_of(const std::vector<E>& v) {
  uint32_t m = 0;
  for (E e : v) m |= 1u << static_cast<unsigned>(e);
  return m;
}

void copy_name(char (&dst)[RINGKV_NAME_SIZE], const std::string& s) {
  std::memset(dst, 0, RINGKV_NAME_SIZE);
  std::memcpy(dst, s.data(), std::min<size_t>(s.size(), RINGKV_NAME_SIZE - 1));
}

int32_t storage_of(const std::optional<Precision>& p, bool storage_as_configured) {
  return storage_as_configured || !p ? RINGKV_PRECISION_AS_CONFIGURED : static_cast<int32_t>(*p);
}

ringkv_precision_profile profile_of(const PrecisionProfile& p, bool storage_as_configured) {
  ringkv_precision_profile r;
  r.struct_size = sizeof r;
  r.q_dot = static_cast<int32_t>(p.q_dot);
  r.k_storage = storage_of(p.k_storage, storage_as_configured);
  r.v_storage = storage_of(p.v_storage, storage_as_configured);
  // For ABI 1.0 hosts: the coarser of the two accumulators (larger unit roundoff).
  r.accumulator = static_cast<int32_t>(unit_roundoff(p.pv_accumulator) > unit_roundoff(p.qk_accumulator) ? p.pv_accumulator
                                                                                                         : p.qk_accumulator);
  r.p_before_pv = static_cast<int32_t>(p.p_before_pv);
  r.output = static_cast<int32_t>(p.output);
  r.rope_angle = static_cast<int32_t>(p.rope_angle);
  return r;
}

ringkv_precision_profile2 profile2_of(const PrecisionProfile& p) {
  ringkv_precision_profile2 r;
  r.struct_size = sizeof r;
  r.split_accumulators = 1;
  r.qk_accumulator = static_cast<int32_t>(p.qk_accumulator);
  r.pv_accumulator = static_cast<int32_t>(p.pv_accumulator);
  r.q_quant = static_cast<int32_t>(p.q_quant);
  return r;
}

// ---------------------------------------------------------------- tensors

bool contiguous(const ringkv_tensor& t) {
  return t.strides[3] == 1 && t.strides[2] == t.shape[3] && t.strides[1] == t.shape[2] * t.shape[3] &&
         t.strides[0] == t.shape[1] * t.shape[2] * t.shape[3];
}

void check_tensor(const ringkv_tensor& t, const std::string& name, int64_t L, int64_t n, int64_t H, int64_t D) {
  if (t.struct_size < sizeof(ringkv_tensor)) fail(RINGKV_ERR_INVALID_ARGUMENT, name + ".struct_size is too small");
  if (t.dtype != RINGKV_DTYPE_F32) fail(RINGKV_ERR_UNSUPPORTED, name + ".dtype = " + std::to_string(t.dtype) + ": only f32 is supported");
  if (t.memory != RINGKV_MEMORY_HOST) fail(RINGKV_ERR_UNSUPPORTED, name + ": only host memory is supported");
  if (t.ndim != 4) fail(RINGKV_ERR_INVALID_ARGUMENT, name + ".ndim = " + std::to_string(t.ndim) + ": must be 4");
  const int64_t want[4] = {L, n, H, D};
  for (int d = 0; d < 4; ++d) {
    if (t.shape[d] != want[d]) {
      fail(RINGKV_ERR_INVALID_ARGUMENT, name + ".shape[" + std::to_string(d) + "] = " + std::to_string(t.shape[d]) +
                                            ": must be " + std::to_string(want[d]) + " ([layers][n_tokens][heads][head_dim])");
    }
  }
  if (t.data == nullptr) fail(RINGKV_ERR_STEP, name + " = null: must be non-null");
}

size_t elements(const ringkv_tensor& t) {
  return static_cast<size_t>(t.shape[0] * t.shape[1] * t.shape[2] * t.shape[3]);
}

template <typename F>
void for_each_index(const ringkv_tensor& t, F&& f) {
  size_t flat = 0;
  for (int64_t a = 0; a < t.shape[0]; ++a)
    for (int64_t b = 0; b < t.shape[1]; ++b)
      for (int64_t c = 0; c < t.shape[2]; ++c)
        for (int64_t d = 0; d < t.shape[3]; ++d)
          f(flat++, a * t.strides[0] + b * t.strides[1] + c * t.strides[2] + d * t.strides[3]);
}

const float* input_of(const ringkv_tensor& t, std::vector<float>& scratch) {
  const auto* p = static_cast<const float*>(t.data);
  if (contiguous(t)) return p;
  scratch.resize(elements(t));
  for_each_index(t, [&](size_t i, int64_t off) { scratch[i] = p[off]; });
  return scratch.data();
}

// ---------------------------------------------------------------- the functions

ringkv_status api_get_capabilities(ringkv_capabilities* caps) {
  if (caps == nullptr || caps->struct_size < offsetof(ringkv_capabilities, wants_rotated_qk)) return RINGKV_ERR_INVALID_ARGUMENT;
  try {
    const ExportSpec& s = *g_spec;
    const Capabilities& c = s.factory.capabilities;
    ringkv_capabilities k;
    std::memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.k_dtypes = mask_of(c.k_dtypes);
    k.v_dtypes = mask_of(c.v_dtypes);
    k.int8_schemes = mask_of(c.int8_schemes);
    k.int8_roundings = mask_of(c.int8_roundings);
    k.rope_styles = mask_of(c.rope_styles);
    k.rope_scalings = mask_of(c.rope_scalings);
    k.wants_rotated_qk = s.wants_rotated_qk ? 1 : 0;
    k.sinks = c.sinks;
    k.sink_logits = c.sink_logits;
    k.softcap = c.softcap;
    k.snapshot = c.snapshot && s.snapshot;
    k.deterministic = s.deterministic;
    k.window_convention = s.window_convention;
    k.threading = s.threading;
    k.max_layers = c.max_layers >= 1024 ? 0 : c.max_layers;
    k.max_batch = c.max_batch >= (1 << 20) ? 0 : c.max_batch;
    k.num_head_dims = static_cast<uint32_t>(std::min<size_t>(c.head_dims.size(), RINGKV_MAX_HEAD_DIMS));
    for (uint32_t i = 0; i < k.num_head_dims; ++i) k.head_dims[i] = c.head_dims[i];
    k.max_window = c.max_window;
    k.max_tokens = c.max_tokens;
    k.precision = profile_of(s.precision, s.storage_as_configured);
    // A fixed storage the factory declares (Capabilities::k_storage/v_storage) is its profile's: the host
    // maps it back to the capability to run f32-storage cases (capabilities_map.cpp, map_capabilities).
    if (c.k_storage) k.precision.k_storage = static_cast<int32_t>(*c.k_storage);
    if (c.v_storage) k.precision.v_storage = static_cast<int32_t>(*c.v_storage);
    copy_name(k.name, s.factory.name);
    k.precision2 = profile2_of(s.precision);
    k.max_sliding_windows = c.max_sliding_windows >= (1 << 20) ? 0 : c.max_sliding_windows;
    k.per_layer_rope = c.per_layer_rope;
    k.partial_rotary = c.partial_rotary;
    k.settable_p0 = c.settable_p0;
    k.min_window = c.min_window;
    k.max_position = c.max_position;
    k.kv_formats_differ = c.kv_formats_differ;
    k.rollback = c.rollback ? 1 : 0;
    k.max_rollback_reserve = c.rollback ? c.max_rollback_reserve : 0;
    const uint32_t size = std::min<uint32_t>(caps->struct_size, sizeof k);
    const uint32_t theirs = caps->struct_size;
    std::memcpy(caps, &k, size);
    caps->struct_size = theirs;
    return RINGKV_OK;
  } catch (...) {
    return RINGKV_ERR_INTERNAL;
  }
}

void write_error(char* error, size_t size, const std::string& m) {
  if (error == nullptr || size == 0) return;
  const size_t n = std::min(size - 1, m.size());
  std::memcpy(error, m.data(), n);
  error[n] = '\0';
}

ringkv_status api_create(const char* json, size_t json_size, ringkv_engine** out, char* error, size_t error_size) {
  if (out == nullptr) return RINGKV_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  if (json == nullptr) {
    write_error(error, error_size, "config_json is NULL");
    return RINGKV_ERR_INVALID_ARGUMENT;
  }
  ringkv_engine tmp;
  const ringkv_status st = guarded(&tmp, [&] {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(json, json + json_size);
    } catch (const nlohmann::json::exception& e) {
      fail(RINGKV_ERR_CONFIG, std::string("config JSON does not parse: ") + e.what());
    }
    const ExportSpec& s = *g_spec;
    const Config c = s.parse_config ? s.parse_config(j) : parse_config_json(j);
    const Capabilities& caps = s.factory.capabilities;
    const int64_t max_reserve = caps.rollback ? caps.max_rollback_reserve : 0;  // as declared (ABI 1.3)
    for (size_t l = 0; l < c.layers.size(); ++l) {
      if (c.layers[l].rollback_reserve > max_reserve) {
        fail(RINGKV_ERR_CONFIG, "config.layers[" + std::to_string(l) + "].rollback_reserve = " +
                                    std::to_string(c.layers[l].rollback_reserve) + ": must be in [0, max_rollback_reserve = " +
                                    std::to_string(max_reserve) + "]");
      }
    }
    auto h = std::make_unique<ringkv_engine>();
    h->engine = s.factory.create(c);
    if (!h->engine) fail(RINGKV_ERR_INTERNAL, "the engine factory returned no engine");
    *out = h.release();
  });
  if (st != RINGKV_OK) write_error(error, error_size, tmp.error);
  return st;
}

void api_destroy(ringkv_engine* h) {
  try {
    delete h;
  } catch (...) {
  }
}

const char* api_last_error(ringkv_engine* h) { return h ? h->error.c_str() : "no engine (NULL handle)"; }

ringkv_status api_get_info(ringkv_engine* h, ringkv_engine_info* info) {
  return guarded(h, [&] {
    // An ABI 1.0 host's struct ends before precision2: fill what it has.
    if (info == nullptr || info->struct_size < offsetof(ringkv_engine_info, precision2)) {
      fail(RINGKV_ERR_INVALID_ARGUMENT, "bad info struct");
    }
    const EngineInfo i = h->engine->info();
    ringkv_engine_info k{};
    k.deterministic = i.deterministic ? 1 : 0;
    k.precision = profile_of(i.precision, false);
    copy_name(k.name, i.name);
    k.precision2 = profile2_of(i.precision);
    const uint32_t theirs = info->struct_size;
    std::memcpy(info, &k, std::min<uint32_t>(theirs, sizeof k));
    info->struct_size = theirs;
  });
}

ringkv_status api_step(ringkv_engine* h, const ringkv_batch* batch) {
  return guarded(h, [&] {
    // A host of ABI 1.2 passes a batch that ends before the rollbacks (and has none).
    if (batch == nullptr || batch->struct_size < offsetof(ringkv_batch, num_rollbacks)) {
      fail(RINGKV_ERR_INVALID_ARGUMENT, "bad batch struct");
    }
    const uint32_t num_rollbacks = ringkv_batch_num_rollbacks(batch);
    if ((batch->num_resets > 0 && batch->resets == nullptr) || (batch->num_appends > 0 && batch->appends == nullptr) ||
        (num_rollbacks > 0 && batch->rollbacks == nullptr)) {
      fail(RINGKV_ERR_INVALID_ARGUMENT, "batch: a NULL array with a nonzero count");
    }
    Engine& e = *h->engine;
    const Config& cfg = e.config();
    const auto L = static_cast<int64_t>(cfg.layers.size());
    std::vector<SequenceRollback> rollbacks;
    if (num_rollbacks > 0 && !g_spec->factory.capabilities.rollback) {  // it would ignore them
      fail(RINGKV_ERR_UNSUPPORTED, "step.rollbacks: this engine declares no rollback (ringkv_capabilities.rollback = 0)");
    }
    for (uint32_t i = 0; i < num_rollbacks; ++i) {
      const ringkv_rollback* r = ringkv_batch_rollback(batch, i);
      if (r->struct_size < sizeof(ringkv_rollback)) fail(RINGKV_ERR_INVALID_ARGUMENT, "rollbacks[].struct_size is too small");
      rollbacks.push_back({r->sequence, r->n_tokens});
    }
    std::vector<SequenceReset> resets;
    for (uint32_t i = 0; i < batch->num_resets; ++i) {
      const ringkv_reset* r = ringkv_batch_reset(batch, i);
      if (r->struct_size < sizeof(ringkv_reset)) fail(RINGKV_ERR_INVALID_ARGUMENT, "resets[].struct_size is too small");
      resets.push_back({r->sequence, r->start_position});
    }
    std::vector<SequenceStep> appends;
    std::vector<std::vector<float>> in_scratch(3 * size_t{batch->num_appends});
    std::vector<std::pair<const ringkv_tensor*, std::vector<float>>> scatter;  // strided outputs
    for (uint32_t i = 0; i < batch->num_appends; ++i) {
      const ringkv_append* a = ringkv_batch_append(batch, i);
      if (a->struct_size < sizeof(ringkv_append)) fail(RINGKV_ERR_INVALID_ARGUMENT, "appends[].struct_size is too small");
      SequenceStep s{a->sequence, a->n_tokens, nullptr, nullptr, nullptr, nullptr};
      if (a->n_tokens >= 1) {  // else the engine rejects n_tokens itself
        const std::string at = "step.appends[" + std::to_string(i) + "].";
        check_tensor(a->q, at + "q", L, a->n_tokens, cfg.num_q_heads, cfg.head_dim);
        check_tensor(a->k, at + "k", L, a->n_tokens, cfg.num_kv_heads, cfg.head_dim);
        check_tensor(a->v, at + "v", L, a->n_tokens, cfg.num_kv_heads, cfg.head_dim);
        check_tensor(a->out, at + "out", L, a->n_tokens, cfg.num_q_heads, cfg.head_dim);
        s.q = input_of(a->q, in_scratch[3 * i]);
        s.k = input_of(a->k, in_scratch[3 * i + 1]);
        s.v = input_of(a->v, in_scratch[3 * i + 2]);
        if (contiguous(a->out)) {
          s.out = static_cast<float*>(a->out.data);
        } else {
          scatter.emplace_back(&a->out, std::vector<float>(elements(a->out)));
          s.out = scatter.back().second.data();
        }
      }
      appends.push_back(s);
    }
    e.step(StepBatch{resets, appends, rollbacks});
    for (auto& [t, buf] : scatter) {
      auto* p = static_cast<float*>(t->data);
      for_each_index(*t, [&, &b = buf](size_t i, int64_t off) { p[off] = b[i]; });
    }
  });
}

ringkv_status api_reset(ringkv_engine* h, int32_t sequence, int64_t start_position) {
  return guarded(h, [&] { h->engine->reset(sequence, start_position); });
}

ringkv_status api_snapshot(ringkv_engine* h, const ringkv_snapshot_request* req, ringkv_snapshot_result* res) {
  return guarded(h, [&] {
    if (req == nullptr || req->struct_size < sizeof(ringkv_snapshot_request) || res == nullptr ||
        res->struct_size < sizeof(ringkv_snapshot_result)) {
      fail(RINGKV_ERR_INVALID_ARGUMENT, "bad snapshot request or result struct");
    }
    if (req->num_positions > 0 && (req->positions == nullptr || res->present == nullptr || res->k == nullptr || res->v == nullptr)) {
      fail(RINGKV_ERR_INVALID_ARGUMENT, "snapshot: NULL positions, present, k or v");
    }
    const std::optional<CacheSnapshot> sn = h->engine->snapshot(req->layer, req->sequence);
    if (!sn) fail(RINGKV_ERR_UNSUPPORTED, "this engine does not expose its cache");
    const size_t row = static_cast<size_t>(sn->num_kv_heads) * static_cast<size_t>(sn->head_dim);
    std::unordered_map<int64_t, size_t> slot_of;
    for (size_t slot = 0; slot < sn->positions.size(); ++slot) {
      if (sn->positions[slot] >= 0) slot_of.emplace(sn->positions[slot], slot);
    }
    const size_t H = static_cast<size_t>(sn->num_kv_heads), C = static_cast<size_t>(sn->capacity);
    const size_t kspr = C > 0 && !sn->k_scales.empty() ? sn->k_scales.size() / (C * H) : 0;
    const size_t vspr = C > 0 && !sn->v_scales.empty() ? sn->v_scales.size() / (C * H) : 0;
    const bool k_codes = !sn->k_codes.empty() && res->k_codes != nullptr;
    const bool v_codes = !sn->v_codes.empty() && res->v_codes != nullptr;
    if ((k_codes && kspr != res->k_scales_per_row) || (v_codes && vspr != res->v_scales_per_row)) {
      fail(RINGKV_ERR_INVALID_ARGUMENT, "snapshot: scales_per_row does not match the engine's format");
    }
    for (uint32_t r = 0; r < req->num_positions; ++r) {
      const auto it = slot_of.find(req->positions[r]);
      res->present[r] = it != slot_of.end() ? 1 : 0;
      if (it == slot_of.end()) continue;
      const size_t slot = it->second;
      std::copy_n(sn->k.begin() + static_cast<std::ptrdiff_t>(slot * row), row, res->k + r * row);
      std::copy_n(sn->v.begin() + static_cast<std::ptrdiff_t>(slot * row), row, res->v + r * row);
      if (k_codes) {
        std::copy_n(sn->k_codes.begin() + static_cast<std::ptrdiff_t>(slot * row), row, res->k_codes + r * row);
        if (kspr > 0 && res->k_scales) {
          std::copy_n(sn->k_scales.begin() + static_cast<std::ptrdiff_t>(slot * H * kspr), H * kspr, res->k_scales + r * H * kspr);
        }
      }
      if (v_codes) {
        std::copy_n(sn->v_codes.begin() + static_cast<std::ptrdiff_t>(slot * row), row, res->v_codes + r * row);
        if (vspr > 0 && res->v_scales) {
          std::copy_n(sn->v_scales.begin() + static_cast<std::ptrdiff_t>(slot * H * vspr), H * vspr, res->v_scales + r * H * vspr);
        }
      }
    }
    res->codes_written = (k_codes || v_codes) ? 1 : 0;
    res->capacity_rows = sn->capacity;
  });
}

ringkv_status api_cache_bytes(ringkv_engine* h, uint64_t* bytes) {
  return guarded(h, [&] {
    if (bytes == nullptr) fail(RINGKV_ERR_INVALID_ARGUMENT, "bytes is NULL");
    *bytes = h->engine->cache_bytes();
  });
}

ringkv_status api_poison(ringkv_engine* h) {
  return guarded(h, [&] {
    if (!h->engine->poison_empty_slots()) fail(RINGKV_ERR_UNSUPPORTED, "this engine cannot poison its empty slots");
  });
}

}  // namespace

Config parse_config_json(const nlohmann::json& j) {
  const auto conv = j.find("window_convention");
  if (conv == j.end() || !conv->is_string() || *conv != "left") return conformance::config_from_json(j);
  nlohmann::json w = j;
  if (!w.contains("layers") || !w["layers"].is_array()) return conformance::config_from_json(w);  // names the error
  for (size_t l = 0; l < w["layers"].size(); ++l) {
    nlohmann::json& layer = w["layers"][l];
    const std::string at = "config.layers[" + std::to_string(l) + "].window_left";
    if (!layer.is_object() || !layer.contains("window_left")) throw ConfigError(at + ": missing (window_convention is left)");
    if (!layer["window_left"].is_number_integer()) throw ConfigError(at + " = " + layer["window_left"].dump() + ": must be an integer");
    layer["window"] = layer["window_left"].get<int64_t>() + 1;
    layer.erase("window_left");
  }
  return conformance::config_from_json(w);
}

const ringkv_engine_api* export_engine(ExportSpec (*make)(), uint32_t /*host_abi_major*/) {
  try {
    std::call_once(g_once, [make] {
      g_spec.emplace(make());
      std::memset(&g_api, 0, sizeof g_api);
      g_api.struct_size = sizeof g_api;
      g_api.abi_version = RINGKV_ABI_VERSION;
      g_api.get_capabilities = api_get_capabilities;
      g_api.create = api_create;
      g_api.destroy = api_destroy;
      g_api.last_error = api_last_error;
      g_api.get_info = api_get_info;
      g_api.step = api_step;
      g_api.reset = api_reset;
      g_api.snapshot = g_spec->snapshot && g_spec->factory.capabilities.snapshot ? api_snapshot : nullptr;
      g_api.cache_bytes = api_cache_bytes;
      g_api.poison_empty_slots = g_spec->poison ? api_poison : nullptr;
    });
  } catch (...) {
    return nullptr;
  }
  return &g_api;
}

}  // namespace ringkv::abi
