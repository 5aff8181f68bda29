// ringkv golden: the scale cases (support/scale.hpp) in golden format, for engines reached through
// files (`ringkv golden generate --scale TIER`), and their outputs files judged on the sampled rows
// (`ringkv check --outputs DIR --scale TIER`). docs/scale.md, "Scale cases in files".
//
// A scale golden file holds the schedule and every input, like any golden case, but no expected
// outputs, bound inputs or stored cache: at these shapes those are about 1 GB per case, and the
// checker regenerates the oracle from the case's seed on the rows it samples, exactly as
// `ringkv check --scale` does for an engine in process. The engine writes the outputs of every row
// (golden-format §7); only the sampled ones are judged.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "golden/golden.hpp"
#include "support/scale.hpp"

namespace ringkv::golden {

/// The file name of a scale case: "scale/ci/gqa32x8_..." -> "scale_ci_gqa32x8_...".
std::string scale_golden_name(const conformance::ScaleCase& sc);

/// A scale case's rows and chunks (golden-format §3), without tensors: what an outputs file is read
/// against.
GoldenCase scale_golden_layout(const conformance::ScaleCase& sc);
/// The layout with every input (q, k, v as support/case.hpp generates them): what the file holds.
GoldenCase make_scale_golden(const conformance::ScaleCase& sc);

/// The cases of a tier as the golden set's writer takes them (names scale_<tier>_<shape>, classes
/// derived); with a `filter`, only those whose scale case name ("scale/<tier>/<shape>") or id it
/// matches (std::regex_search; Error for a bad regex or when it keeps none).
std::vector<GoldenSpec> scale_golden_specs(conformance::ScaleTier tier, const std::string& filter = "");
/// make_scale_golden of the scale case a spec of scale_golden_specs names (Error for another name).
GoldenCase make_scale_golden_of(const GoldenSpec& spec);

/// Writes DIR/cases/<name>.safetensors for every case of a tier (that `filter` keeps) and
/// DIR/manifest.json, whose "generator" {"scale": TIER[, "filter": REGEX]} lets `ringkv golden verify`
/// regenerate it.
void generate_scale_golden_set(const std::string& dir, conformance::ScaleTier tier, const std::string& filter = "",
                               void (*progress)(const std::string& name, size_t bytes) = nullptr);

/// An outputs file of a scale case judged: the file read against the case's layout, then
/// run_scale_case with an engine that hands back the file's rows (its profile: the file's own, else
/// `default_profile`); with q_rot and k_rot also RoPE apart, as golden-format §7 does for a golden case
/// (where the declared rope_angle's term swamps the bound, near 2^24, that is what judges the window).
/// A file that declares the case unsupported is skipped; one that cannot be read (a missing or
/// misshapen tensor, the id of another case) fails, naming the field: the engine's file.
struct ScaleOutputsOutcome {
  conformance::ScaleOutcome scale;
  bool skipped = false;
  std::string skip_reason;
  std::optional<PrecisionProfile> profile;  ///< the profile the outputs were judged under
  bool profile_from_file = false;
  std::string not_judged;  ///< tensors the file holds that a scale case does not judge ("" if none)
  /// With q_rot and k_rot: RoPE checked apart (golden-format §7), the rotation on every row, attention
  /// from the engine's own rotated values on the sampled rows (bound's RoPE term off).
  std::optional<RopeVerdict> rope;
};
ScaleOutputsOutcome check_scale_outputs(const conformance::ScaleCase& sc, const std::string& outputs_path,
                                        const PrecisionProfile& default_profile);

}  // namespace ringkv::golden
