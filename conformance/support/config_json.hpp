// ringkv conformance: Config and Case <-> JSON (nlohmann::json). Used by the
// golden format (docs/golden-format.md) and by the C ABI, where the config
// crosses as a versioned JSON string (docs/engine-abi.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ringkv/config.hpp"
#include "ringkv/precision.hpp"
#include "support/case.hpp"

namespace ringkv::conformance {

/// Version of the JSON config layout ("config_version" in every document).
inline constexpr int kConfigJsonVersion = 1;

/// Every field of the config, enums as their to_string names.
nlohmann::json config_to_json(const Config& config);
/// Parses and validates; throws ConfigError naming the JSON path, e.g.
/// "config.layers[0].window: missing" or "config.k_format.dtype = \"f17\": must be one of f32, ...".
Config config_from_json(const nlohmann::json& j);

/// The schedule, seed and data settings of a case (everything but the config).
nlohmann::json case_to_json(const Case& c);
/// Inverse of case_to_json (plus "config"); throws ConfigError naming the path.
Case case_from_json(const nlohmann::json& j);

nlohmann::json profile_to_json(const PrecisionProfile& p);
PrecisionProfile profile_from_json(const nlohmann::json& j);

}  // namespace ringkv::conformance
