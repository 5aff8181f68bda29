// libringkv_plugin_limit_<what>.so: the reference engine behind a narrower declaration, the limit
// picked at compile time (abi/tests/plugin_test.cpp, "Capability limits"):
//  - limit_max_batch_1: declares max_batch = 1, and its create() refuses a batch > 1, as an engine
//    built for one sequence does: a batch case must be "not judged", never reach create().
//  - limit_min_window_2: declares min_window = 2 (an engine whose left-window convention cannot say
//    W = 1) and refuses a sliding layer with W = 1 in create().
//  - abi_1_1: an ABI 1.1 plugin (abi_version minor 1) whose capabilities carry garbage where ABI 1.2
//    appended its fields: the host must not read them (it takes such a plugin to support everything
//    they describe).
#include <cstdint>
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
#elif defined(RINGKV_LIMIT_abi_1_1)
  s.factory.name = "limit:abi_1_1";
  (void)caps;
#else
#error "define one RINGKV_LIMIT_x"
#endif
  return s;
}

}  // namespace

#if defined(RINGKV_LIMIT_abi_1_1)
namespace {

const ringkv_engine_api* g_inner = nullptr;
ringkv_engine_api g_api;

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

}  // namespace

extern "C" RINGKV_ABI_EXPORT const ringkv_engine_api* ringkv_engine_api_get(uint32_t host_major) {
  static const ringkv_engine_api* api = [host_major]() -> const ringkv_engine_api* {
    g_inner = ringkv::abi::export_engine(make_spec, host_major);
    if (g_inner == nullptr) return nullptr;
    g_api = *g_inner;
    g_api.abi_version = RINGKV_ABI_MAKE_VERSION(1, 1);
    g_api.get_capabilities = capabilities_with_garbage;
    return &g_api;
  }();
  return api;
}
#else
RINGKV_EXPORT_ENGINE(make_spec)
#endif
