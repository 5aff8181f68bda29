// libringkv_plugin_limit_<what>.so: the reference engine behind a narrower declaration, the limit
// picked at compile time (abi/tests/plugin_test.cpp, "Capability limits"):
//  - limit_max_batch_1: declares max_batch = 1, and its create() refuses a batch > 1, as an engine
//    built for one sequence does: a batch case must be "not judged", never reach create().
//  - limit_min_window_2: declares min_window = 2 (an engine whose left-window convention cannot say
//    W = 1) and refuses a sliding layer with W = 1 in create().
//  - abi_1_1: an ABI 1.1 plugin (abi_version minor 1) whose capabilities carry garbage where ABI 1.2
//    appended its fields: the host must not read them (it takes such a plugin to support everything
//    they describe).
//  - abi_1_2: an ABI 1.2 plugin (abi_version minor 2) whose capabilities say "rollback" in the bytes
//    where ABI 1.3 appended its fields: the host must not read them (such a plugin has no rollback).
//    It aborts if it is ever sent a rollback or a rollback_reserve, which ABI 1.2 cannot express.
//  - abi_1_1_recompiled: a correct ABI 1.1 plugin recompiled against this header (issue 26): its table
//    says RINGKV_ABI_VERSION, but it fills only the fields ABI 1.1 had, so the 1.2 and 1.3 fields keep the
//    host's zeros. Zero in per_layer_rope, partial_rotary, settable_p0 and kv_formats_differ narrows it
//    below the spec 1 core; the host must say so at load (abi_versions.hpp).
//  - limit_max_rollback_reserve_4: declares rollback with max_rollback_reserve = 4.
//  - caps_lie_more: declares everything the reference supports (batch, INT8, sinks), but its create()
//    refuses a batch > 1 and INT8 K, and it ignores sinks (runs every layer with S = 0): capabilities
//    that claim more than the engine does (docs/reliability.md, "Faulty plugins").
//  - caps_lie_less: the reference declaring no sinks and max_batch = 1 (it runs both correctly):
//    capabilities that claim less; the cases beyond are not judged.
//  - caps_below_core: the reference declaring less than the spec 1 core: no RoPE style but none, and no
//    start position other than 0.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "export_engine.hpp"
#include "ringkv/error.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/capabilities.hpp"

namespace {

ringkv::abi::ExportSpec make_spec() {
  ringkv::abi::ExportSpec s;
  s.factory = ringkv::reference_engine_factory();
  s.precision = ringkv::PrecisionProfile{};
  ringkv::Capabilities& caps = s.factory.capabilities;
#if defined(RINGKV_LIMIT_max_batch_1)
  s.factory.name = "limit:max_batch_1";
  caps.max_batch = 1;
  s.factory.create = [](const ringkv::Config& c) -> std::unique_ptr<ringkv::Engine> {
    if (c.batch > 1) throw ringkv::ConfigError("config.batch = " + std::to_string(c.batch) + ": this engine runs one sequence");
    return std::make_unique<ringkv::ReferenceEngine>(c);
  };
#elif defined(RINGKV_LIMIT_min_window_2)
  s.factory.name = "limit:min_window_2";
  caps.min_window = 2;
  s.factory.create = [](const ringkv::Config& c) -> std::unique_ptr<ringkv::Engine> {
    if (const int64_t w = ringkv::conformance::smallest_sliding_window(c); w == 1) {
      throw ringkv::ConfigError("config.layers[].window = 1: window_left 0 cannot be expressed");
    }
    return std::make_unique<ringkv::ReferenceEngine>(c);
  };
#elif defined(RINGKV_LIMIT_max_rollback_reserve_4)
  s.factory.name = "limit:max_rollback_reserve_4";
  caps.max_rollback_reserve = 4;
#elif defined(RINGKV_LIMIT_caps_lie_more)
  s.factory.name = "caps_lie_more";
  (void)caps;
  s.factory.create = [](const ringkv::Config& c) -> std::unique_ptr<ringkv::Engine> {
    if (c.batch > 1) throw ringkv::ConfigError("config.batch = " + std::to_string(c.batch) + ": this engine runs one sequence");
    if (c.k_format.dtype == ringkv::DType::int8) throw ringkv::ConfigError("config.k_format.dtype = int8: not implemented");
    ringkv::Config no_sinks = c;
    for (ringkv::LayerConfig& l : no_sinks.layers) l.sinks = 0;
    return std::make_unique<ringkv::ReferenceEngine>(no_sinks);
  };
#elif defined(RINGKV_LIMIT_caps_lie_less)
  s.factory.name = "caps_lie_less";
  caps.sinks = false;
  caps.max_batch = 1;
#elif defined(RINGKV_LIMIT_caps_below_core)
  s.factory.name = "caps_below_core";
  caps.rope_styles = {ringkv::RopeStyle::none};
  caps.settable_p0 = false;
#elif defined(RINGKV_LIMIT_abi_1_1)
  s.factory.name = "limit:abi_1_1";
  (void)caps;
#elif defined(RINGKV_LIMIT_abi_1_2)
  s.factory.name = "limit:abi_1_2";
  (void)caps;
#elif defined(RINGKV_LIMIT_abi_1_1_recompiled)
  s.factory.name = "limit:abi_1_1_recompiled";
  (void)caps;
#else
#error "define one RINGKV_LIMIT_x"
#endif
  return s;
}

}  // namespace

#if defined(RINGKV_LIMIT_abi_1_1) || defined(RINGKV_LIMIT_abi_1_2) || defined(RINGKV_LIMIT_abi_1_1_recompiled)
namespace {

const ringkv_engine_api* g_inner = nullptr;  // the export helper's table, which the old plugin's wraps
ringkv_engine_api g_api;

#if defined(RINGKV_LIMIT_abi_1_1)
// The 1.1 capabilities, then garbage where 1.2 appended its fields (each would narrow the engine).
ringkv_status capabilities_with_garbage(ringkv_capabilities* caps) {
  const ringkv_status st = g_inner->get_capabilities(caps);
  if (st == RINGKV_OK && RINGKV_HAS_FIELD(caps, ringkv_capabilities, max_position)) {
    caps->max_sliding_windows = 1;
    caps->per_layer_rope = 0;
    caps->partial_rotary = 0;
    caps->settable_p0 = 0;
    caps->min_window = 1000;
    caps->max_position = 5;
    caps->kv_formats_differ = 0;
  }
  return st;
}

void make_old(ringkv_engine_api& api) {
  api.abi_version = RINGKV_ABI_MAKE_VERSION(1, 1);
  api.get_capabilities = capabilities_with_garbage;
}
#elif defined(RINGKV_LIMIT_abi_1_1_recompiled)
// What an ABI 1.1 plugin's get_capabilities writes: the fields up to precision2. Whatever lies beyond
// keeps the zero the host put there.
ringkv_status capabilities_of_abi_1_1(ringkv_capabilities* caps) {
  const ringkv_status st = g_inner->get_capabilities(caps);
  if (st == RINGKV_OK && RINGKV_HAS_FIELD(caps, ringkv_capabilities, rollback)) {
    caps->max_sliding_windows = 0;
    caps->per_layer_rope = 0;
    caps->partial_rotary = 0;
    caps->settable_p0 = 0;
    caps->min_window = 0;
    caps->max_position = 0;
    caps->kv_formats_differ = 0;
    caps->reserved_1_3 = 0;
    caps->max_rollback_reserve = 0;
    caps->rollback = 0;
  }
  return st;
}

void make_old(ringkv_engine_api& api) {  // abi_version stays RINGKV_ABI_VERSION: it was recompiled
  api.get_capabilities = capabilities_of_abi_1_1;
}
#else
// The 1.2 capabilities, then "rollback, reserve up to 64" where 1.3 appended its fields.
ringkv_status capabilities_with_rollback_bytes(ringkv_capabilities* caps) {
  const ringkv_status st = g_inner->get_capabilities(caps);
  if (st == RINGKV_OK && RINGKV_HAS_FIELD(caps, ringkv_capabilities, rollback)) {
    caps->reserved_1_3 = 0x5a5a5a5a;
    caps->max_rollback_reserve = 64;
    caps->rollback = 1;
  }
  return st;
}

// ABI 1.2 has no rollback_reserve in the config and no rollbacks in a batch: getting either is a host bug.
ringkv_status create_without_reserve(const char* json, size_t size, ringkv_engine** engine, char* error, size_t error_size) {
  if (json != nullptr && std::strstr(json, "rollback_reserve") != nullptr) std::abort();
  return g_inner->create(json, size, engine, error, error_size);
}

ringkv_status step_without_rollbacks(ringkv_engine* engine, const ringkv_batch* batch) {
  if (batch != nullptr && ringkv_batch_num_rollbacks(batch) > 0) std::abort();
  return g_inner->step(engine, batch);
}

void make_old(ringkv_engine_api& api) {
  api.abi_version = RINGKV_ABI_MAKE_VERSION(1, 2);
  api.get_capabilities = capabilities_with_rollback_bytes;
  api.create = create_without_reserve;
  api.step = step_without_rollbacks;
}
#endif

}  // namespace

extern "C" RINGKV_ABI_EXPORT const ringkv_engine_api* ringkv_engine_api_get(uint32_t host_major) {
  static const ringkv_engine_api* api = [host_major]() -> const ringkv_engine_api* {
    g_inner = ringkv::abi::export_engine(make_spec, host_major);
    if (g_inner == nullptr) return nullptr;
    g_api = *g_inner;
    make_old(g_api);
    return &g_api;
  }();
  return api;
}
#else
RINGKV_EXPORT_ENGINE(make_spec)
#endif
