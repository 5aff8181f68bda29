// ringkv conformance: deliberately broken variants of the reference engine.
// Each plants one bug that real engines have shipped; the property suite must
// kill every one of them (conformance/mutants/mutant_test.cpp), which shows
// the tolerance bound is tight enough. docs/tolerances.md reports which
// property kills which mutant.
#pragma once

#include <string>
#include <vector>

#include "ringkv/engine.hpp"

namespace ringkv::conformance {

struct MutantInfo {
  const char* name;  ///< stable name, e.g. "window_plus_one"
  const char* bug;   ///< what it does wrong
  EngineFactory factory;
  bool must_pass = false;  ///< a control: correct under what it declares
};

/// Every mutant, then the controls (must_pass = true).
const std::vector<MutantInfo>& all_mutants();
/// The spec 1.1 rollback mutants (§5.1): engines declaring rollback that get it wrong. Every one must
/// be killed by the Rollback property and by at least three committed golden cases.
const std::vector<MutantInfo>& rollback_mutants();

/// Bugs where two features meet (issue 26 item 6): softcap with sink logits, fp8 saturation (per
/// format), static INT8's clamp, RoPE scaling (linear, NTK), partial rotary, NTK with partial rotary.
/// Every one must be killed by the property suite and, per feature it needs, by at least three
/// committed golden cases (GoldenCheck.EveryInteractionMutantFailsThreeCasesOfItsFeatures).
const std::vector<MutantInfo>& interaction_mutants();

/// Serving bugs (issue 35, spec 1.2 §5): what an engine shares between sequences. A prefix cache serving
/// blocks the window evicted, a join that mixes a new prefill's keys into decodes, prefix sharing past the
/// divergence. Every one must be killed by the BatchIsolation property (its identical-prefix variant) and
/// by at least three committed golden cases of its class.
const std::vector<MutantInfo>& serving_mutants();

/// `engine` ("reference", "window_plus_one", "window_minus_one" or "sinks_evicted") with the
/// numerics a named profile of profiles/ describes, declaring that profile (or the named profile
/// `declared`): the reference so is a control that must pass, the others structural mutants its
/// bound must still kill.
EngineFactory in_numerics(const std::string& engine, const std::string& profile, const std::string& declared = "");
/// ggml's quantize_row_q8_0_ref, dequantised in place (the q8_0-dot numerics): blocks of 32,
/// d = max|x|/127, codes roundf(x / d) (half away from zero), values code * f16(d).
void quantise_q8_0_as_ggml(float* x, int n);

/// The named profiles in_numerics knows (every one in profiles/ but f32-reference, the reference's own).
std::vector<std::string> numerics_profiles();

}  // namespace ringkv::conformance
