#include "scale_run.hpp"

#include <algorithm>
#include <cstdio>

#include "golden/golden.hpp"

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

CaseResult run_scale_item(const EngineUnderTest& eng, const EngineFactory& factory, const ScaleCase& sc,
                          const CheckOptions& opt) {
  CaseResult r;
  r.engine = eng.label;
  r.name = sc.name;
  r.id = sc.c.id();
  r.classes = golden::derive_classes(sc.c);
  r.reproduce = "ringkv check --engine '" + eng.label + "' --scale " + opt.scale + " --no-golden --filter '^" + sc.name + " '";
  const conformance::ScaleOutcome o = conformance::run_scale_case(factory, sc);
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
    r.detail = stats;
  } else {
    r.status = CaseResult::Status::failed;
    r.detail = o.failure + " (" + stats + ")";
  }
  return r;
}

}  // namespace ringkv::cli
