// ringkv ABI: the version rules, in one place (docs/engine-abi.md, "Versions and the entry point").
//
//  - A table's abi_version is (major << 16) | minor, as the plugin was compiled (RINGKV_ABI_VERSION).
//  - The major must equal the host's: the worker refuses any other, naming both (worker.cpp).
//  - A minor version only appends fields at the end of a struct or functions at the end of the table.
//    The host reads the capability fields a minor appended only from a plugin whose table's minor is at
//    least that one; an older plugin's bytes there are ignored and it keeps what its minor assumed:
//      1.1  precision2 (all zero = profile 1; read whatever the minor, since the host zeroes it)
//      1.2  the "spec 1 core" fields (max_sliding_windows ... kv_formats_differ); before 1.2: everything
//           they describe is supported
//      1.3  rollback, max_rollback_reserve; before 1.3: no rollback
//  - A plugin of a newer minor than the host's is accepted; the host reads what it knows.
//  - Zero means unchanged: from ABI 1.3 on, zero in an appended field means what the minors before it
//    assumed (1.3: rollback 0 = no rollback), so that a plugin recompiled against a newer header, whose
//    new fields keep the host's zeros, is judged as before. ABI 1.2 is the one exception (zero in
//    per_layer_rope, partial_rotary, settable_p0 or kv_formats_differ narrows the engine below what 1.1
//    assumed): a plugin of minor >= 2 that leaves all seven 1.2 fields at zero, as a 1.1 plugin
//    recompiled does, gets a warning at load naming them (abi_1_2_fields_left_at_zero below), and
//    `ringkv check` says what they cost.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ringkv/engine.hpp"
#include "ringkv/engine_abi.h"

namespace ringkv::abi {

/// "1.3" for a table's abi_version.
inline std::string abi_version_text(uint32_t v) {
  return std::to_string(RINGKV_ABI_VERSION_GET_MAJOR(v)) + "." + std::to_string(RINGKV_ABI_VERSION_GET_MINOR(v));
}

/// The ABI 1.2 capability fields count: the plugin was built against minor >= 2.
inline bool reads_abi_1_2_fields(uint32_t plugin_abi_version) { return RINGKV_ABI_VERSION_GET_MINOR(plugin_abi_version) >= 2; }

/// The ABI 1.3 capability fields (rollback) count: the plugin was built against minor >= 3.
inline bool reads_abi_1_3_fields(uint32_t plugin_abi_version) { return RINGKV_ABI_VERSION_GET_MINOR(plugin_abi_version) >= 3; }

/// A plugin of minor >= 2 whose ABI 1.2 capability fields are all zero (abi_1_2_fields_left_at_zero).
struct ZeroAbi12Fields {
  /// The fields whose zero narrows the engine below what ABI 1.1 assumed, in header order:
  /// "per_layer_rope", "partial_rotary", "settable_p0", "kv_formats_differ".
  std::vector<std::string> fields;
  std::vector<std::string> zero_means;  ///< per field: what its zero says ("every sequence starts at position 0")
  /// The plugin's mapped capabilities with those fields as ABI 1.1 assumed them (supported).
  Capabilities as_abi_1_1;
  /// The warning, one line for reports: what the zeros mean, why they are likely a recompiled older
  /// plugin, `cost` (abi_1_2_zero_cost; may be empty) and what to do: "plugin libx.so (ABI 1.3) leaves
  /// every ABI 1.2 capability field at zero, as a plugin written for ABI 1.1 and recompiled against a
  /// newer header does: ...".
  std::string warning(const std::string& cost = "") const;

  std::string plugin_name;
  uint32_t plugin_abi_version = 0;
};

/// The zero 1.2 fields of a plugin (`name`, its table's `plugin_abi_version`, its declaration `caps` and their
/// mapping `mapped`) that leaves every ABI 1.2 field at zero; nullopt when one of them is nonzero (the
/// plugin knows them) or its minor is < 2 (they are not read).
std::optional<ZeroAbi12Fields> abi_1_2_fields_left_at_zero(const std::string& name, const ringkv_capabilities& caps,
                                                           uint32_t plugin_abi_version, const Capabilities& mapped);

/// What the zero 1.2 fields cost on a golden set: "they cost 57 of the 88 golden cases (within the
/// capabilities: 20 instead of 77) and 8 classes (5 of them core) not applicable: reset-p0-down, ..." `cases_as_declared` and
/// `cases_as_abi_1_1`: the cases within the mapped capabilities and within as_abi_1_1; `classes_lost`:
/// the classes applicable under as_abi_1_1 but not under the mapped ones, `core_lost` of them core.
std::string abi_1_2_zero_cost(int cases_as_declared, int cases_as_abi_1_1, int cases_total,
                              const std::vector<std::string>& classes_lost, int core_lost);

}  // namespace ringkv::abi
