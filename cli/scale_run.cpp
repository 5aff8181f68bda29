#include "scale_run.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "golden/golden.hpp"
#include "golden/scale_golden.hpp"
#include "support/capabilities.hpp"
#include "support/config_json.hpp"

namespace ringkv::cli {

using conformance::ScaleCase;

std::vector<ScaleCase> select_scale_cases(const std::string& tier, const std::regex& keep, const std::regex& drop) {
  const std::optional<conformance::ScaleTier> t = conformance::parse_scale_tier(tier);
  if (!t) {
    throw InputError("--scale: \"" + tier + "\" is not a tier; the tiers are " + conformance::scale_tier_names());
  }
  std::vector<ScaleCase> kept;
  for (ScaleCase& sc : conformance::scale_cases(*t)) {
    const std::string key = sc.name + " " + sc.c.id();
    if (std::regex_search(key, keep) && !std::regex_search(key, drop)) kept.push_back(std::move(sc));
  }
  if (kept.empty()) throw InputError("--scale " + tier + ": no scale case matches --filter/--exclude");
  return kept;
}

double scale_cost(const ScaleCase& sc) {
  const Config& cfg = sc.c.config;
  double keys = 0;  // (query, visible key) pairs over the layers: sum of min(i + 1, S + W) per token i
  for (const conformance::AppendedChunk& ch : conformance::appended_chunks(sc.c)) {
    for (const LayerConfig& l : cfg.layers) {
      for (int64_t i = ch.first; i < ch.first + ch.n; ++i) keys += static_cast<double>(std::min(i + 1, l.sinks + l.window));
    }
  }
  // About 1.5 ns per (visible key, q head, dim) on one core of a 2-core CI machine (docs/scale.md).
  return keys * cfg.num_q_heads * cfg.head_dim * 1.5e-9;
}

bool is_scale_result(const CaseResult& r) { return r.name.rfind("scale/", 0) == 0; }

namespace {

// The report's case of a scale case, before its verdict: engine, name, id and classes.
CaseResult scale_result(const EngineUnderTest& eng, const ScaleCase& sc) {
  CaseResult r;
  r.engine = eng.label;
  r.name = sc.name;
  r.id = sc.c.id();
  r.classes = golden::derive_classes(sc.c);
  return r;
}

// The verdict of a run (an engine in process, or an outputs file replayed): status, worst error, the
// sampled rows and the time in `detail`.
void set_verdict(CaseResult& r, const conformance::ScaleOutcome& o, const std::string& note = "") {
  r.worst_ratio = o.worst_ratio;
  r.outputs = o.outputs_checked;
  char stats[200];
  std::snprintf(stats, sizeof stats, "sampled %lld of %lld query rows (%.2f %%), %.1f s",
                static_cast<long long>(o.queries_sampled), static_cast<long long>(o.queries_total),
                o.queries_total ? 100.0 * static_cast<double>(o.queries_sampled) / static_cast<double>(o.queries_total) : 0.0,
                o.seconds);
  if (o.oracle_error) {
    r.status = CaseResult::Status::error;
    r.detail = o.failure;
  } else if (o.passed) {
    r.status = CaseResult::Status::passed;
    r.detail = stats + note;
  } else {
    r.status = CaseResult::Status::failed;
    r.detail = o.failure + (o.queries_total ? " (" + std::string(stats) + ")" : "");
  }
}

}  // namespace

CaseResult run_scale_item(const EngineUnderTest& eng, const EngineFactory& factory, const ScaleCase& sc,
                          const CheckOptions& opt) {
  CaseResult r = scale_result(eng, sc);
  r.reproduce = "ringkv check --engine '" + eng.label + "' --scale " + opt.scale + " --no-golden --filter '^" + sc.name + " '";
  set_verdict(r, conformance::run_scale_case(factory, sc));
  return r;
}

CaseResult run_scale_outputs_item(const EngineUnderTest& eng, const ScaleCase& sc, const std::string& outputs_file,
                                  const conformance::ProfileSet& profiles, const std::string& inputs, const CheckOptions& opt) {
  CaseResult r = scale_result(eng, sc);
  const std::string tier = sc.name.substr(6, sc.name.find('/', 6) - 6);  // "scale/<tier>/<shape>"
  r.reproduce = inputs + "\n  then: ringkv check --outputs " + shell_quote(opt.outputs_dir) + " --scale " + tier +
                " --no-golden --filter " + shell_quote("^" + sc.name + " ");
  if (!opt.profile_file.empty()) r.reproduce += " --profile " + shell_quote(opt.profile_file);
  if (!std::filesystem::exists(outputs_file)) {
    const std::string gap = eng.capabilities_source.empty() ? "" : conformance::capability_gap(eng.factory.capabilities, sc.c);
    if (!gap.empty()) {
      r.status = CaseResult::Status::skipped;  // outside what the capabilities file declares: not applicable
      r.detail = "outside the capabilities in " + eng.capabilities_source + ": " + gap;
    } else {
      r.status = CaseResult::Status::failed;
      r.detail = "no outputs file " + outputs_file +
                 (eng.capabilities_source.empty() ? "" : " (the case is within the capabilities in " + eng.capabilities_source + ")");
    }
    return r;
  }
  const golden::ScaleOutputsOutcome o = golden::check_scale_outputs(sc, outputs_file, conformance::resolve_profile(profiles, r.classes));
  if (o.profile) {
    r.profile = conformance::profile_to_json(*o.profile).dump();
    r.profile_source = o.profile_from_file ? "the outputs file's metadata"
                       : opt.profile_file.empty() ? "the default (no --profile)"
                                                  : "--profile " + opt.profile_file;
    r.reproduce += "  # profile " + r.profile + " from " + r.profile_source;
  }
  if (o.skipped) {
    r.status = CaseResult::Status::skipped;
    r.detail = o.skip_reason;
    return r;
  }
  r.rope = o.rope;
  set_verdict(r, o.scale, o.not_judged.empty() ? "" : "; not judged at scale: the file's " + o.not_judged);
  return r;
}

}  // namespace ringkv::cli
