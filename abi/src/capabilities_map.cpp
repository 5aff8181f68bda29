#include "capabilities_map.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "abi_versions.hpp"
#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"

namespace ringkv::abi {

namespace {

// Maps between ringkv's enums and the ABI's (the same order, checked here once).
static_assert(static_cast<int>(DType::int8) == RINGKV_DTYPE_INT8 && static_cast<int>(DType::fp8_e5m2) == RINGKV_DTYPE_FP8_E5M2);
static_assert(static_cast<int>(Int8Scheme::static_tensor) == RINGKV_INT8_STATIC_TENSOR);
static_assert(static_cast<int>(Rounding::half_away) == RINGKV_ROUNDING_HALF_AWAY);
static_assert(static_cast<int>(RopeStyle::gptj) == RINGKV_ROPE_GPTJ);
static_assert(static_cast<int>(RopeScaling::ntk) == RINGKV_ROPE_SCALING_NTK);
static_assert(static_cast<int>(Precision::int8) == RINGKV_PRECISION_INT8 && static_cast<int>(Precision::tf32) == RINGKV_PRECISION_TF32);

template <typename E>
bool in_mask(uint32_t mask, E e) {
  return (mask >> static_cast<unsigned>(e)) & 1u;
}

template <typename E, size_t N>
std::vector<E> from_mask(uint32_t mask, const E (&all)[N], E fallback) {
  std::vector<E> out;
  for (E e : all) {
    if (in_mask(mask, e)) out.push_back(e);
  }
  if (out.empty()) out.push_back(fallback);
  return out;
}


Precision precision_of(int32_t p, DType configured, const std::string& field) {
  if (p == RINGKV_PRECISION_AS_CONFIGURED) return ringkv::precision_of(configured);
  if (p < RINGKV_PRECISION_F64 || p > RINGKV_PRECISION_INT8) {
    throw Error("plugin declares precision." + field + " = " + std::to_string(p) + ": not a ringkv_precision");
  }
  return static_cast<Precision>(p);
}


constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8};
constexpr Int8Scheme kSchemes[] = {Int8Scheme::per_head, Int8Scheme::q8_0, Int8Scheme::static_tensor};
constexpr Rounding kRoundings[] = {Rounding::nearest_even, Rounding::half_away};
constexpr RopeStyle kStyles[] = {RopeStyle::none, RopeStyle::neox, RopeStyle::gptj};
constexpr RopeScaling kScalings[] = {RopeScaling::none, RopeScaling::linear, RopeScaling::ntk};

}  // namespace

PrecisionProfile map_profile(const ringkv_precision_profile& p, const ringkv_precision_profile2& p2, const Config& c) {
  PrecisionProfile r;
  r.q_dot = precision_of(p.q_dot, c.k_format.dtype, "q_dot");
  r.k_storage = precision_of(p.k_storage, c.k_format.dtype, "k_storage");
  r.v_storage = precision_of(p.v_storage, c.v_format.dtype, "v_storage");
  r.qk_accumulator = r.pv_accumulator = precision_of(p.accumulator, c.k_format.dtype, "accumulator");
  if (p2.split_accumulators != 0) {
    r.qk_accumulator = precision_of(p2.qk_accumulator, c.k_format.dtype, "qk_accumulator");
    r.pv_accumulator = precision_of(p2.pv_accumulator, c.k_format.dtype, "pv_accumulator");
  }
  if (p2.q_quant != RINGKV_Q_QUANT_NONE && p2.q_quant != RINGKV_Q_QUANT_Q8_0) {
    throw Error("plugin declares precision2.q_quant = " + std::to_string(p2.q_quant) + ": not a ringkv_q_quant (0 none, 1 q8_0)");
  }
  r.q_quant = p2.q_quant == RINGKV_Q_QUANT_Q8_0 ? QueryQuant::q8_0 : QueryQuant::none;
  r.p_before_pv = precision_of(p.p_before_pv, c.k_format.dtype, "p_before_pv");
  r.output = precision_of(p.output, c.k_format.dtype, "output");
  r.rope_angle = precision_of(p.rope_angle, c.k_format.dtype, "rope_angle");
  return r;
}

Capabilities map_capabilities(const ringkv_capabilities& k, bool has_snapshot, uint32_t plugin_abi_version) {
  Capabilities c;
  c.k_dtypes = from_mask(k.k_dtypes, kDTypes, DType::f32);
  c.v_dtypes = from_mask(k.v_dtypes, kDTypes, DType::f32);
  c.int8_schemes = from_mask(k.int8_schemes, kSchemes, Int8Scheme::per_head);
  if (k.int8_schemes == 0) {  // no scheme: no INT8 at all
    c.int8_schemes.clear();
    std::erase(c.k_dtypes, DType::int8);
    std::erase(c.v_dtypes, DType::int8);
    if (c.k_dtypes.empty()) c.k_dtypes = {DType::f32};
    if (c.v_dtypes.empty()) c.v_dtypes = {DType::f32};
  }
  c.rope_styles = from_mask(k.rope_styles, kStyles, RopeStyle::none);
  c.rope_scalings = from_mask(k.rope_scalings, kScalings, RopeScaling::none);
  c.head_dims.assign(k.head_dims, k.head_dims + std::min<uint32_t>(k.num_head_dims, RINGKV_MAX_HEAD_DIMS));
  c.sinks = k.sinks != 0;
  c.sink_logits = k.sink_logits != 0;
  c.softcap = k.softcap != 0;
  if (k.max_layers > 0) c.max_layers = k.max_layers;
  if (k.max_batch > 0) c.max_batch = k.max_batch;
  c.int8_roundings = from_mask(k.int8_roundings == 0 ? 1u : k.int8_roundings, kRoundings, Rounding::nearest_even);
  c.snapshot = k.snapshot != 0 && has_snapshot;
  if (k.max_window > 0) c.max_window = k.max_window;
  if (k.max_tokens > 0) c.max_tokens = k.max_tokens;
  // A fixed storage in the profile: the engine rounds what it is given, so it runs f32 cases too.
  if (k.precision.k_storage != RINGKV_PRECISION_AS_CONFIGURED && k.precision.k_storage >= RINGKV_PRECISION_F64 &&
      k.precision.k_storage <= RINGKV_PRECISION_INT8) {
    c.k_storage = static_cast<Precision>(k.precision.k_storage);
  }
  if (k.precision.v_storage != RINGKV_PRECISION_AS_CONFIGURED && k.precision.v_storage >= RINGKV_PRECISION_F64 &&
      k.precision.v_storage <= RINGKV_PRECISION_INT8) {
    c.v_storage = static_cast<Precision>(k.precision.v_storage);
  }
  if (reads_abi_1_2_fields(plugin_abi_version)) {  // ABI 1.2 fields; older plugins: spec 1's range
    if (k.max_sliding_windows > 0) c.max_sliding_windows = k.max_sliding_windows;
    c.per_layer_rope = k.per_layer_rope != 0;
    c.partial_rotary = k.partial_rotary != 0;
    c.settable_p0 = k.settable_p0 != 0;
    if (k.min_window > 0) c.min_window = k.min_window;
    if (k.max_position > 0) c.max_position = std::min<int64_t>(k.max_position, c.max_position);
    c.kv_formats_differ = k.kv_formats_differ != 0;
  }
  if (reads_abi_1_3_fields(plugin_abi_version) && k.rollback != 0) {  // ABI 1.3 (in range: capabilities_check); older: no rollback
    c.rollback = true;
    c.max_rollback_reserve = k.max_rollback_reserve;
  }
  return c;
}

}  // namespace ringkv::abi
