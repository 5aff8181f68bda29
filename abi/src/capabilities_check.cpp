#include "capabilities_check.hpp"

#include <cstdio>

#include "abi_versions.hpp"

namespace ringkv::abi {

namespace {

constexpr int64_t kMaxInt32 = (int64_t{1} << 31) - 1;

struct Errors {
  std::vector<std::string> list;

  // `field` = `value`: must be in [lo, hi] (`meaning`).
  void range(const std::string& field, int64_t value, int64_t lo, int64_t hi, const std::string& meaning) {
    if (value >= lo && value <= hi) return;
    list.push_back(field + " = " + std::to_string(value) + ": must be in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]" + (meaning.empty() ? "" : " (" + meaning + ")"));
  }

  // A mask of enum values: only bits 0 .. count - 1 may be set.
  void mask(const std::string& field, uint32_t value, unsigned count, const std::string& values) {
    const uint32_t unknown = value & ~((1u << count) - 1u);
    if (unknown == 0) return;
    std::string bits;
    for (unsigned b = 0; b < 32; ++b) {
      if ((unknown >> b) & 1u) bits += (bits.empty() ? "" : ", ") + std::to_string(b);
    }
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%x", value);
    list.push_back(field + " = " + hex + ": may set only bits 0 to " + std::to_string(count - 1) + " (" + values +
                   "); " + (bits.find(',') == std::string::npos ? "bit " + bits + " names" : "bits " + bits + " name") +
                   " no such value");
  }

  // A ringkv_precision; `as_configured`: RINGKV_PRECISION_AS_CONFIGURED allowed too.
  void precision(const std::string& field, int32_t value, bool as_configured) {
    if (value >= RINGKV_PRECISION_F64 && value <= RINGKV_PRECISION_INT8) return;
    if (as_configured && value == RINGKV_PRECISION_AS_CONFIGURED) return;
    list.push_back(field + " = " + std::to_string(value) + ": must be a ringkv_precision in [0, 7] (F64 to INT8)" +
                   (as_configured ? " or 100 (AS_CONFIGURED)" : ""));
  }
};

void check_precision(Errors& e, const ringkv_capabilities& k) {
  const ringkv_precision_profile& p = k.precision;
  e.precision("precision.q_dot", p.q_dot, false);
  e.precision("precision.k_storage", p.k_storage, true);
  e.precision("precision.v_storage", p.v_storage, true);
  e.precision("precision.accumulator", p.accumulator, false);
  e.precision("precision.p_before_pv", p.p_before_pv, false);
  e.precision("precision.output", p.output, false);
  e.precision("precision.rope_angle", p.rope_angle, false);
  const ringkv_precision_profile2& p2 = k.precision2;
  if (p2.split_accumulators != 0) {
    e.precision("precision2.qk_accumulator", p2.qk_accumulator, false);
    e.precision("precision2.pv_accumulator", p2.pv_accumulator, false);
  }
  e.range("precision2.q_quant", p2.q_quant, RINGKV_Q_QUANT_NONE, RINGKV_Q_QUANT_Q8_0, "a ringkv_q_quant: 0 none, 1 q8_0");
}

void check_abi_1_2_fields(Errors& e, const ringkv_capabilities& k) {
  e.range("max_sliding_windows", k.max_sliding_windows, 0, 1024, "0 = any; at most the 1024 layers of a config");
  e.range("min_window", k.min_window, 0, kMaxInt32, "0 = 1");
  e.range("max_position", k.max_position, 0, kMaxInt32, "0 = any, below 2^31");
  if (k.min_window > 1 && k.max_window > 0 && k.min_window > k.max_window && k.min_window <= kMaxInt32 &&
      k.max_window <= kMaxInt32) {
    e.list.push_back("min_window = " + std::to_string(k.min_window) + ": must be at most max_window = " +
                     std::to_string(k.max_window) + " (a min above its max leaves no sliding window)");
  }
}

void check_abi_1_3_fields(Errors& e, const ringkv_capabilities& k) {
  e.range("reserved_1_3", k.reserved_1_3, 0, 0, "reserved");
  e.range("rollback", k.rollback, 0, 1, "1: rollback, 0: none");
  if (k.rollback == 1) e.range("max_rollback_reserve", k.max_rollback_reserve, 0, int64_t{1} << 30, "up to 2^30");
}

}  // namespace

std::vector<std::string> capability_range_errors(const ringkv_capabilities& k, uint32_t plugin_abi_version) {
  Errors e;
  e.mask("k_dtypes", k.k_dtypes, 6, "1u << RINGKV_DTYPE_x, F32 0 to INT8 5");
  e.mask("v_dtypes", k.v_dtypes, 6, "1u << RINGKV_DTYPE_x, F32 0 to INT8 5");
  e.mask("int8_schemes", k.int8_schemes, 3, "1u << RINGKV_INT8_x, PER_HEAD 0 to STATIC_TENSOR 2");
  e.mask("int8_roundings", k.int8_roundings, 2, "1u << RINGKV_ROUNDING_x, NEAREST_EVEN 0 and HALF_AWAY 1");
  e.mask("rope_styles", k.rope_styles, 3, "1u << RINGKV_ROPE_x, NONE 0 to GPTJ 2");
  e.mask("rope_scalings", k.rope_scalings, 3, "1u << RINGKV_ROPE_SCALING_x, NONE 0 to NTK 2");
  e.range("window_convention", k.window_convention, RINGKV_WINDOW_W, RINGKV_WINDOW_LEFT,
          "a ringkv_window_convention: 0 W, 1 LEFT");
  e.range("threading", k.threading, RINGKV_THREADING_ONE_ENGINE_PER_THREAD, RINGKV_THREADING_SINGLE_THREAD,
          "a ringkv_threading: 0 ONE_ENGINE_PER_THREAD, 1 THREAD_SAFE, 2 SINGLE_THREAD");
  e.range("max_layers", k.max_layers, 0, 1024, "0 = any");
  e.range("max_batch", k.max_batch, 0, int64_t{1} << 20, "0 = any");
  e.range("num_head_dims", k.num_head_dims, 0, RINGKV_MAX_HEAD_DIMS,
          "the entries used in head_dims[" + std::to_string(RINGKV_MAX_HEAD_DIMS) + "]; 0 = any head dim in [1, 1024]");
  if (k.num_head_dims <= RINGKV_MAX_HEAD_DIMS) {
    for (uint32_t i = 0; i < k.num_head_dims; ++i) {
      e.range("head_dims[" + std::to_string(i) + "]", k.head_dims[i], 1, 1024, "a head dim, num_head_dims = " +
              std::to_string(k.num_head_dims));
    }
  }
  e.range("max_window", k.max_window, 0, kMaxInt32, "0 = any");
  e.range("max_tokens", k.max_tokens, 0, kMaxInt32, "0 = any");
  check_precision(e, k);
  if (reads_abi_1_2_fields(plugin_abi_version)) check_abi_1_2_fields(e, k);
  if (reads_abi_1_3_fields(plugin_abi_version)) check_abi_1_3_fields(e, k);
  return e.list;
}

}  // namespace ringkv::abi
