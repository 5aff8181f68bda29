// ringkv CLI: `ringkv check --scale TIER`: the production-shape cases of a tier (support/scale.hpp),
// selected by --filter/--exclude, each run on an engine as one case of the report.
#pragma once

#include <regex>
#include <string>
#include <vector>

#include "check.hpp"
#include "check_run.hpp"
#include "support/profiles.hpp"
#include "support/scale.hpp"

namespace ringkv::cli {

/// The tier's cases whose name or id --filter keeps and --exclude does not; InputError for an unknown
/// tier (naming the allowed ones) or a tier whose every case is filtered out.
std::vector<conformance::ScaleCase> select_scale_cases(const std::string& tier, const std::regex& keep,
                                                       const std::regex& drop);

/// Estimated seconds of a scale case on a CPU engine (for --shard's balance): visible keys over the
/// schedule, times heads and head dim.
double scale_cost(const conformance::ScaleCase& sc);

/// Whether a report's case is a scale case (its name starts with "scale/").
bool is_scale_result(const CaseResult& r);

/// One scale case on an engine, as a case of the report: its classes, verdict, worst error, the
/// sampled rows and time in `detail`, and the command that reproduces it.
CaseResult run_scale_item(const EngineUnderTest& eng, const EngineFactory& factory, const conformance::ScaleCase& sc,
                          const CheckOptions& opt);

/// One scale case judged from the outputs file an engine reached through files wrote for it
/// (`outputs_file`, from the inputs of `ringkv golden generate --scale`; golden/scale_golden.hpp):
/// the sampled rows of its `out`, under the file's profile, else `profiles` resolved for the case's
/// classes. No file: not applicable where the capabilities file puts the case outside (a skip), else
/// a failure; a file that declares it unsupported: skipped; a malformed file: the engine's failure.
/// `inputs` is the command that generated the inputs (the first line of the reproduce command).
CaseResult run_scale_outputs_item(const EngineUnderTest& eng, const conformance::ScaleCase& sc, const std::string& outputs_file,
                                  const conformance::ProfileSet& profiles, const std::string& inputs, const CheckOptions& opt);

}  // namespace ringkv::cli
