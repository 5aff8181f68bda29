// ringkv ABI, plugin side: exports any ringkv::EngineFactory as a plugin
// (abi/include/ringkv/engine_abi.h), so that a C++ engine written against
// ringkv::Engine needs no C of its own. Every exception is caught at the
// boundary and becomes a status code plus last_error() text.
//
//   #include "export_engine.hpp"
//   ringkv::abi::ExportSpec make_spec() {
//     ringkv::abi::ExportSpec s;
//     s.factory = my_engine_factory();   // name, capabilities, create
//     return s;
//   }
//   RINGKV_EXPORT_ENGINE(make_spec)
//
// Link the plugin (a CMake MODULE library) against ringkv_abi_export.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "ringkv/engine.hpp"
#include "ringkv/engine_abi.h"

namespace ringkv::abi {

struct ExportSpec {
  /// name (reported as the capabilities' name), capabilities, create. capabilities.rollback and
  /// max_rollback_reserve are declared as ABI 1.3's rollback fields: the batch's rollbacks and each
  /// layer's rollback_reserve reach the engine (StepBatch::rollbacks, LayerConfig::rollback_reserve);
  /// without rollback, a rollback is refused with RINGKV_ERR_UNSUPPORTED and a reserve with
  /// RINGKV_ERR_CONFIG before the engine sees them.
  EngineFactory factory;
  /// The declared profile for ringkv_capabilities. With storage_as_configured, k_storage and v_storage
  /// are declared RINGKV_PRECISION_AS_CONFIGURED, unless factory.capabilities declares a fixed k_storage or
  /// v_storage (an engine that stores bf16 whatever it is given), which is declared instead. Each engine
  /// also reports its own info() through get_info.
  PrecisionProfile precision;
  bool storage_as_configured = true;
  bool deterministic = true;
  int32_t window_convention = RINGKV_WINDOW_W;
  bool wants_rotated_qk = false;
  int32_t threading = RINGKV_THREADING_ONE_ENGINE_PER_THREAD;
  bool snapshot = true;        ///< expose snapshot() (from Engine::snapshot)
  bool poison = true;          ///< expose poison_empty_slots()
  /// The config JSON document -> Config. Empty: conformance::config_from_json, after mapping
  /// layers[l].window_left to window = window_left + 1 when the document says "window_convention": "left".
  std::function<Config(const nlohmann::json&)> parse_config;
};

/// The C table for a spec made by `make` (called once, on first use). The table lives in static
/// storage; one spec per shared library.
const ringkv_engine_api* export_engine(ExportSpec (*make)(), uint32_t host_abi_major);

/// The default parse_config.
Config parse_config_json(const nlohmann::json& j);

}  // namespace ringkv::abi

/// Defines the plugin's one exported symbol, ringkv_engine_api_get, for a spec-making function.
#define RINGKV_EXPORT_ENGINE(make_spec)                                                          \
  extern "C" RINGKV_ABI_EXPORT const ringkv_engine_api* ringkv_engine_api_get(uint32_t host_major) { \
    return ::ringkv::abi::export_engine(make_spec, host_major);                                  \
  }
