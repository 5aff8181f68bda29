// A `ringkv check` run read back from its JSON report (check_run.hpp): the report model that
// print_text_report reads, so that `ringkv report merge` prints the text report the unsharded run
// prints.
#include <stdexcept>

#include "check_run.hpp"
#include "report_json.hpp"

namespace ringkv::cli {

using nlohmann::json;

namespace {

CaseResult::Status status_of(const std::string& name) {
  for (CaseResult::Status s : {CaseResult::Status::passed, CaseResult::Status::failed, CaseResult::Status::skipped,
                               CaseResult::Status::xfail, CaseResult::Status::xpass, CaseResult::Status::error}) {
    if (name == status_name(s)) return s;
  }
  throw std::invalid_argument("a case's status \"" + name + "\" is not one of passed, failed, skipped, xfail, xpass, error");
}

golden::RopeVerdict::Kind rope_kind_of(const std::string& name) {
  using K = golden::RopeVerdict::Kind;
  for (K k : {K::conformant, K::within_declared, K::failed, K::rotated_by_ringkv, K::not_checked}) {
    if (name == golden::to_string(k)) return k;
  }
  throw std::invalid_argument("a case's RoPE verdict \"" + name + "\" is not known");
}

}  // namespace

CheckRun run_from_report(const json& report, CheckOptions& opt) {
  const json& header = report.at("shard");
  const json& options = header.at("options");
  opt.cases = options.at("cases").get<int>();
  opt.seed = options.at("seed").get<uint64_t>();
  opt.replay = options.at("replay").get<std::string>();
  opt.no_golden = options.at("no_golden").get<bool>();
  opt.scale = options.value("scale", "");
  opt.properties = options.at("properties").get<bool>();
  opt.golden_dir = header.at("golden").at("dir").get<std::string>();
  opt.quiet = true;
  CheckRun run(opt);
  run.properties = opt.properties;
  run.shard = ShardSpec{header.at("index").get<int>(), header.at("count").get<int>(), "the report"};
  for (const json& c : report_items(report, "cases")) {
    CaseResult r;
    r.engine = c.at("engine");
    r.name = c.at("name");
    r.id = c.at("id");
    r.classes = c.at("classes").get<std::vector<std::string>>();
    r.status = status_of(c.at("status"));
    r.worst_ratio = c.at("worst_ratio").get<double>();
    r.outputs = c.at("outputs_checked").get<int64_t>();
    r.detail = c.at("detail");
    r.reproduce = c.at("reproduce");
    r.warnings = c.value("warnings", std::vector<std::string>{});
    if (c.contains("profile")) {
      r.profile = c.at("profile").dump();
      r.profile_source = c.value("profile_source", "");
    }
    if (c.contains("rope")) {
      golden::RopeVerdict v;
      v.kind = rope_kind_of(c.at("rope").at("verdict"));
      v.line = c.at("rope").at("line");
      r.rope = v;
    }
    run.failed = run.failed || r.status == CaseResult::Status::failed || r.status == CaseResult::Status::xpass;
    run.results.push_back(std::move(r));
  }
  for (const json& p : report_items(report, "properties")) {
    PropertyOutcome o;
    o.name = p.at("name");
    o.passed = p.at("passed").get<bool>();
    o.skipped = p.at("skipped").get<bool>();
    o.report = p.at("report");
    o.warnings = p.value("warnings", std::vector<std::string>{});
    run.failed = run.failed || !o.passed;
    run.props.emplace_back(p.at("engine").get<std::string>(), std::move(o));
  }
  for (const json& e : report_items(report, "engines")) {
    EngineUnderTest eng;
    eng.label = e.at("engine");
    eng.external_outputs = e.at("external_outputs").get<bool>();
    eng.unavailable = e.at("reason");
    eng.capabilities_source = e.at("capabilities_source");
    if (e.at("availability") == "unloadable") run.unloadable.insert(eng.label);
    for (const json& w : report_items(report, "engine_warnings")) {
      if (w.at("engine") == eng.label) eng.declaration_warnings.push_back(w.at("warning"));
    }
    for (const CaseResult& r : run.results) {
      if (r.engine == eng.label && r.rope && r.rope->kind == golden::RopeVerdict::Kind::rotated_by_ringkv) eng.qk_rotated_by_ringkv = true;
    }
    run.golden_cases = e.at("golden_cases").get<size_t>();
    run.engines.push_back(std::move(eng));
  }
  for (const json& entry : report_items(report, "coverage")) {
    EngineCoverage cov;
    cov.classes = classes_from_json(entry);
    cov.missing = entry.at("missing").get<std::vector<std::string>>();
    cov.core_judged = entry.at("core_judged").get<int>();
    cov.core_applicable = entry.at("core_applicable").get<int>();
    cov.features_judged = entry.at("features_judged").get<int>();
    cov.features_applicable = entry.at("features_applicable").get<int>();
    cov.line = entry.at("line");
    run.failed = run.failed || !cov.missing.empty();
    run.coverage.emplace(entry.at("engine").get<std::string>(), std::move(cov));
  }
  run.reasons = report.at("reasons").get<std::vector<std::string>>();
  run.errors = report.at("errors").get<int>();
  return run;
}

}  // namespace ringkv::cli
