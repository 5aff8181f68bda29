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

/// Every field of profile 2 (docs/golden-format.md §5); storage nullopt as "as_configured".
nlohmann::json profile_to_json(const PrecisionProfile& p);
/// A whole profile. Required: q_dot, p_before_pv, output, rope_angle, and either "accumulator"
/// (profile 1: sets qk_accumulator and pv_accumulator) or both of those; optional: q_quant
/// ("none"), k_storage and v_storage ("as_configured"). Unknown fields are errors (a typo would
/// otherwise silently keep a default). Throws ConfigError naming path.field.
PrecisionProfile profile_from_json(const nlohmann::json& j, const std::string& path = "profile");
/// Sets the fields j gives (any subset, same spellings and rules), keeps the others: a per-class
/// override of a profile file (conformance/support/profiles.hpp).
void apply_profile_json(const nlohmann::json& j, const std::string& path, PrecisionProfile& profile);

}  // namespace ringkv::conformance
