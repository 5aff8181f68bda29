// ringkv ABI, host side: a plugin's declaration (ringkv_capabilities, its precision profiles) mapped
// to what ringkv's generators and bounds use (ringkv::Capabilities, ringkv::PrecisionProfile). Which
// fields count for which ABI minor is abi_versions.hpp's rule.
#pragma once

#include <cstdint>

#include "ringkv/engine.hpp"
#include "ringkv/engine_abi.h"

namespace ringkv::abi {

/// ringkv::Capabilities of a plugin's declaration; the ABI 1.2 fields count only from a plugin built
/// against ABI minor >= 2 (`plugin_abi_version`: its ringkv_engine_api.abi_version).
Capabilities map_capabilities(const ringkv_capabilities& caps, bool has_snapshot, uint32_t plugin_abi_version);

/// ringkv::PrecisionProfile of a plugin's declaration for a config. precision2 all zero (what the
/// host leaves for an ABI 1.0 plugin, which does not know it) means profile 1: q.k and P.V both
/// accumulate in precision.accumulator, q is not quantised. Throws ringkv::Error on a value that is
/// not a ringkv_precision / ringkv_q_quant, naming the field.
PrecisionProfile map_profile(const ringkv_precision_profile& p, const ringkv_precision_profile2& p2, const Config& c);

}  // namespace ringkv::abi
