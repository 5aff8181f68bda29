#include "ringkv/precision.hpp"

#include <cmath>

#include "ringkv/error.hpp"

namespace ringkv {

double unit_roundoff(Precision p) {
  switch (p) {
    case Precision::f64: return std::ldexp(1.0, -53);
    case Precision::f32: return std::ldexp(1.0, -24);
    case Precision::tf32: return std::ldexp(1.0, -11);
    case Precision::f16: return std::ldexp(1.0, -11);
    case Precision::bf16: return std::ldexp(1.0, -8);
    case Precision::fp8_e4m3: return std::ldexp(1.0, -4);
    case Precision::fp8_e5m2: return std::ldexp(1.0, -3);
    case Precision::int8: return 0.0;
  }
  return 0.0;
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::f64: return "f64";
    case Precision::f32: return "f32";
    case Precision::tf32: return "tf32";
    case Precision::f16: return "f16";
    case Precision::bf16: return "bf16";
    case Precision::fp8_e4m3: return "fp8_e4m3";
    case Precision::fp8_e5m2: return "fp8_e5m2";
    case Precision::int8: return "int8";
  }
  return "?";
}

Precision parse_precision(const std::string& name) {
  for (Precision p : {Precision::f64, Precision::f32, Precision::tf32, Precision::f16, Precision::bf16,
                      Precision::fp8_e4m3, Precision::fp8_e5m2, Precision::int8}) {
    if (name == to_string(p)) return p;
  }
  throw ConfigError("precision = \"" + name +
                    "\": must be one of f64, f32, tf32, f16, bf16, fp8_e4m3, fp8_e5m2, int8");
}

const char* to_string(QueryQuant q) {
  switch (q) {
    case QueryQuant::none: return "none";
    case QueryQuant::q8_0: return "q8_0";
  }
  return "?";
}

std::string storage_to_string(const std::optional<Precision>& storage) {
  return storage ? to_string(*storage) : "as_configured";
}

std::string to_string(const PrecisionProfile& p) {
  return std::string("q_dot=") + to_string(p.q_dot) + " q_quant=" + to_string(p.q_quant) +
         " k_storage=" + storage_to_string(p.k_storage) + " v_storage=" + storage_to_string(p.v_storage) +
         " qk_accumulator=" + to_string(p.qk_accumulator) + " pv_accumulator=" + to_string(p.pv_accumulator) +
         " p_before_pv=" + to_string(p.p_before_pv) + " output=" + to_string(p.output) +
         " rope_angle=" + to_string(p.rope_angle);
}

}  // namespace ringkv
