// libringkv_plugin_rotated_qk.so: a reference engine that wants q and k
// already rotated (wants_rotated_qk), like an engine whose RoPE runs in an
// earlier kernel. ringkv rotates per spec §8 before sending; the engine runs
// with RoPE switched off, and must pass like the reference (bit for bit, since
// ringkv rotates exactly as the reference does).
#include "export_engine.hpp"
#include "ringkv/reference_engine.hpp"

namespace {

ringkv::abi::ExportSpec make_spec() {
  ringkv::abi::ExportSpec s;
  s.factory = ringkv::reference_engine_factory();
  s.factory.name = "reference-rotated-qk";
  s.factory.create = [](const ringkv::Config& config) -> std::unique_ptr<ringkv::Engine> {
    ringkv::Config c = config;
    for (ringkv::LayerConfig& l : c.layers) l.rope = ringkv::RopeConfig{ringkv::RopeStyle::none, 10000.0, 0, ringkv::RopeScaling::none, 1.0};
    return ringkv::make_reference_engine(c);
  };
  s.wants_rotated_qk = true;
  return s;
}

}  // namespace

RINGKV_EXPORT_ENGINE(make_spec)
