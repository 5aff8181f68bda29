// libringkv_plugin_caps_<what>.so: the reference engine whose capabilities carry one field outside its
// documented range (issue 36; abi/src/capabilities_check.hpp, docs/engine-abi.md "Capabilities"). The
// host must refuse it at load, naming the field, its value and the range, never read it as something
// else. One kind each, picked at compile time:
//  - num_head_dims_1000000:  a count beyond its array (head_dims holds 32): once read as "head dim 64"
//  - head_dim_0:             an entry of head_dims out of [1, 1024]
//  - max_batch_negative:     a negative limit (max_batch = -1)
//  - rollback_reserve_negative: rollback = 1 with max_rollback_reserve = -1
//  - window_convention_7:    an unknown enum value
//  - k_dtypes_bit_9:         a mask bit that names no ringkv_dtype
//  - accumulator_42:         a precision that is no ringkv_precision
//  - min_window_above_max:   min_window 64 above max_window 16
#include <cstdint>

#include "export_engine.hpp"
#include "ringkv/reference_engine.hpp"

namespace {

ringkv::abi::ExportSpec make_spec() {
  ringkv::abi::ExportSpec s;
  s.factory = ringkv::reference_engine_factory();
  s.factory.name = "caps_out_of_range";
  s.factory.capabilities.rollback = true;
  s.factory.capabilities.max_rollback_reserve = 4;
  return s;
}

const ringkv_engine_api* g_inner = nullptr;  // the export helper's table, whose get_capabilities this wraps
ringkv_engine_api g_api;

void put_out_of_range(ringkv_capabilities& c) {
#if defined(RINGKV_CAPS_num_head_dims_1000000)
  c.num_head_dims = 1000000;
  c.head_dims[0] = 64;
#elif defined(RINGKV_CAPS_head_dim_0)
  c.num_head_dims = 2;
  c.head_dims[0] = 64;
  c.head_dims[1] = 0;
#elif defined(RINGKV_CAPS_max_batch_negative)
  c.max_batch = -1;
#elif defined(RINGKV_CAPS_rollback_reserve_negative)
  c.max_rollback_reserve = -1;
#elif defined(RINGKV_CAPS_window_convention_7)
  c.window_convention = 7;
#elif defined(RINGKV_CAPS_k_dtypes_bit_9)
  c.k_dtypes |= 1u << 9;
#elif defined(RINGKV_CAPS_accumulator_42)
  c.precision.accumulator = 42;
#elif defined(RINGKV_CAPS_min_window_above_max)
  c.min_window = 64;
  c.max_window = 16;
#else
#error "define one RINGKV_CAPS_x"
#endif
}

ringkv_status capabilities_out_of_range(ringkv_capabilities* caps) {
  const ringkv_status st = g_inner->get_capabilities(caps);
  if (st == RINGKV_OK && RINGKV_HAS_FIELD(caps, ringkv_capabilities, rollback)) put_out_of_range(*caps);
  return st;
}

}  // namespace

extern "C" RINGKV_ABI_EXPORT const ringkv_engine_api* ringkv_engine_api_get(uint32_t host_major) {
  static const ringkv_engine_api* api = [host_major]() -> const ringkv_engine_api* {
    g_inner = ringkv::abi::export_engine(make_spec, host_major);
    if (g_inner == nullptr) return nullptr;
    g_api = *g_inner;
    g_api.get_capabilities = capabilities_out_of_range;
    return &g_api;
  }();
  return api;
}
