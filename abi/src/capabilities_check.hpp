// ringkv ABI, host side: the documented range of every field of a plugin's ringkv_capabilities
// (docs/engine-abi.md, "Capabilities": the ranges). A declaration with a field outside it is refused at
// load, naming the field, its value and the range (plugin_host.cpp), never read as something else: a
// num_head_dims beyond head_dims, a negative limit, an unknown enum value or mask bit, a min above its max.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ringkv/engine_abi.h"

namespace ringkv::abi {

/// The fields of `caps` outside their documented ranges, in header order, each as
/// "num_head_dims = 1000000: must be in [0, 32] (the entries used in head_dims[32]; 0 = any head dim)";
/// empty when every field is in range. The fields an ABI minor appended count only from a plugin of that
/// minor (`plugin_abi_version`, abi_versions.hpp), as map_capabilities() reads them.
std::vector<std::string> capability_range_errors(const ringkv_capabilities& caps, uint32_t plugin_abi_version);

}  // namespace ringkv::abi
