// libringkv_plugin_window_left.so: a reference engine that declares the
// FlashAttention / FlashInfer window convention, RINGKV_WINDOW_LEFT. ringkv
// then sends layers[l].window_left = W - 1 (and no "window"); this plugin
// reads it and adds 1, as a FlashAttention-based engine maps its own
// window_size=(left, 0) to a mask. It must pass like the reference.
#include "export_engine.hpp"
#include "ringkv/error.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/config_json.hpp"

namespace {

ringkv::Config parse(const nlohmann::json& j) {
  if (j.value("window_convention", std::string()) != "left") {
    throw ringkv::ConfigError("config.window_convention: this engine takes \"left\" windows");
  }
  nlohmann::json w = j;
  for (size_t l = 0; l < w.at("layers").size(); ++l) {
    nlohmann::json& layer = w["layers"][l];
    if (layer.contains("window")) {
      throw ringkv::ConfigError("config.layers[" + std::to_string(l) + "].window: present, but a left-convention "
                                "engine must only see window_left");
    }
    const int64_t left = layer.at("window_left").get<int64_t>();
    if (left < 0) throw ringkv::ConfigError("config.layers[" + std::to_string(l) + "].window_left < 0");
    layer["window"] = left + 1;  // keys in [i - left, i]: left + 1 of them
    layer.erase("window_left");
  }
  return ringkv::conformance::config_from_json(w);
}

ringkv::abi::ExportSpec make_spec() {
  ringkv::abi::ExportSpec s;
  s.factory = ringkv::reference_engine_factory();
  s.factory.name = "reference-window-left";
  s.window_convention = RINGKV_WINDOW_LEFT;
  s.parse_config = parse;
  return s;
}

}  // namespace

RINGKV_EXPORT_ENGINE(make_spec)
