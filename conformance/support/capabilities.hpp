// ringkv conformance: what an engine can express, and whether a config lies within it.
//
// One rule for every engine, whatever its origin (built in, a C ABI plugin, or an external engine
// judged through its outputs files with a capabilities file beside them): a golden case or a
// generated config outside an engine's Capabilities is "not judged" for that engine, never failed.
// "spec 1 core" (docs/spec.md §0) is core_capabilities(); everything beyond it is a named feature.
// The JSON form is docs/golden-format.md §10.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringkv/config.hpp"
#include "ringkv/engine.hpp"
#include "ringkv/precision.hpp"
#include "support/case.hpp"

namespace ringkv::conformance {

/// A layer with W < max_tokens: its window can slide. One with W >= max_tokens attends to every
/// token the sequence holds (full attention over the config's length).
bool is_sliding(const LayerConfig& layer, const Config& config);
/// The largest W over the sliding layers (0: none slides).
int64_t largest_sliding_window(const Config& config);
/// The smallest W over the sliding layers (0: none slides).
int64_t smallest_sliding_window(const Config& config);
/// How many distinct W the sliding layers have.
int distinct_sliding_windows(const Config& config);

/// A fixed storage (Capabilities::k_storage, v_storage) with which an engine also runs f32-storage
/// cases: f32, f16 or bf16 (it rounds what it is given; the bound takes the declared storage).
bool fixed_storage_runs_f32(const std::optional<Precision>& fixed);

/// Why `caps` do not cover `config`, or "" if they do. Each gap names the config's value and the
/// declared limit, e.g. "unsupported: batch 3 > max_batch 1, window 1 < min_window 2". The same
/// rule serves built-in engines, plugins (their ABI declaration mapped to Capabilities) and the
/// file exchange. Positions are the start positions' (p0 .. p0 + max_tokens - 1).
std::string capability_gap(const Capabilities& caps, const Config& config);
/// The same for a whole case: also the positions its resets start at (settable_p0, max_position).
std::string capability_gap(const Capabilities& caps, const Case& c);

/// "spec 1 core" (spec §0): K and V in one of `kv_dtypes` (f32, f16, bf16), neox RoPE without
/// scaling over the whole head, the same RoPE in every layer, no sink tokens, no sink logits, no
/// softcap, at most one sliding window besides full-attention layers, start positions settable.
Capabilities core_capabilities(std::vector<DType> kv_dtypes = {DType::f32, DType::f16, DType::bf16});

/// The capabilities file of the file exchange (docs/golden-format.md §10):
///   {"format": "ringkv-capabilities", "level": "core" | "full", <fields>, "profile": {...}}
/// "level" (default "full") gives the starting point; each field present replaces it. Fields:
/// k_dtypes, v_dtypes, int8_schemes, int8_roundings, rope_styles, rope_scalings (arrays of names),
/// head_dims (array of ints), sinks, sink_logits, softcap, per_layer_rope, partial_rotary,
/// settable_p0, kv_formats_differ (booleans), max_layers, max_batch, max_sliding_windows, min_window, max_window,
/// max_tokens, max_position (integers), k_storage, v_storage (precision names). Unknown fields are
/// errors. Throws ConfigError naming "capabilities.<field>" and the allowed values.
struct CapabilitiesFile {
  std::string name;                         ///< "name", or the path
  Capabilities capabilities;
  std::optional<PrecisionProfile> profile;  ///< "profile", if given (the same JSON as a profile file's)
};
CapabilitiesFile capabilities_from_json(const nlohmann::json& j, const std::string& origin);
CapabilitiesFile read_capabilities_file(const std::string& path);
/// Every field (a round trip through capabilities_from_json gives the same Capabilities).
nlohmann::json capabilities_to_json(const Capabilities& caps);

}  // namespace ringkv::conformance
