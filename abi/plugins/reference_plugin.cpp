// libringkv_plugin_reference.so: the reference engine (ringkv::ReferenceEngine)
// as a plugin. It passes everything; a plugin that does not is not conformant.
#include "export_engine.hpp"
#include "ringkv/reference_engine.hpp"

namespace {

ringkv::abi::ExportSpec make_spec() {
  ringkv::abi::ExportSpec s;
  s.factory = ringkv::reference_engine_factory();
  s.factory.name = "reference";
  s.precision = ringkv::PrecisionProfile{};  // f32 everywhere, f64 RoPE; storage as configured
  s.deterministic = true;
  return s;
}

}  // namespace

RINGKV_EXPORT_ENGINE(make_spec)
