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
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace ringkv::abi
