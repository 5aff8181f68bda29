#include "coverage_verdict.hpp"

namespace ringkv::cli {

EngineCoverage coverage_verdict(std::vector<golden::ClassCoverage> classes, const std::optional<std::regex>& required,
                                bool require_default) {
  EngineCoverage c;
  c.classes = std::move(classes);
  std::string na, unjudged;
  for (const golden::ClassCoverage& k : c.classes) {
    const golden::ClassInfo& info = golden::class_info(k.name);
    const bool core = info.level == golden::ClassLevel::core;
    if (k.status != golden::Coverage::not_applicable) ++(core ? c.core_applicable : c.features_applicable);
    if (k.status == golden::Coverage::judged) ++(core ? c.core_judged : c.features_judged);
    if (!core && k.status == golden::Coverage::not_applicable) na += (na.empty() ? "" : ", ") + k.name;
    if (k.status == golden::Coverage::not_judged) unjudged += (unjudged.empty() ? "" : ", ") + k.name;
    // Required: what --require-classes names (even where not applicable: it was asked for), else the
    // structural classes the engine can express.
    const bool want = required          ? std::regex_search(k.name, *required)
                      : require_default ? info.structural && k.status != golden::Coverage::not_applicable
                                        : false;
    if (want && k.status != golden::Coverage::judged) {
      c.missing.push_back(k.name + (k.why.empty() ? std::string(" (no case within the capabilities was compared)")
                                                  : " (not applicable: " + k.why + ")"));
    }
  }
  c.line = "core " + std::to_string(c.core_judged) + " of " + std::to_string(c.core_applicable) + " classes judged; features " +
           std::to_string(c.features_judged) + " of " + std::to_string(c.features_applicable) + " judged";
  if (!na.empty()) c.line += "; n/a: " + na;
  if (!unjudged.empty()) c.line += "; not judged: " + unjudged;
  return c;
}

std::string not_judged_advice(bool external_outputs) {
  return std::string("to judge it: declare the capability in the engine's ") +
         (external_outputs ? "capabilities file" : "capabilities (a plugin: docs/engine-abi.md; ABI 1.2 fields left at zero narrow it)") +
         " if the engine has it; judge the engine on a random set drawn within its capabilities (`ringkv golden generate "
         "--random 240 --capabilities caps.json --out DIR`, then `ringkv check --golden DIR`)" +
         (external_outputs ? "" : "; or run the properties too (`--properties`: generated cases within the capabilities)");
}

std::vector<std::string> below_core(const EngineCoverage& cov) {
  std::vector<std::string> out;
  for (const golden::ClassCoverage& k : cov.classes) {
    if (golden::class_info(k.name).level != golden::ClassLevel::core || k.status != golden::Coverage::not_applicable) continue;
    if (k.name.starts_with("kv-") || k.name.starts_with("head_dim-")) continue;
    out.push_back(k.name);
  }
  return out;
}

std::string missing_classes_reason(const std::string& engine, const EngineCoverage& cov, const std::string& require_classes,
                                   bool external_outputs) {
  std::string list;
  for (const std::string& m : cov.missing) list += "\n    " + m;
  return "engine " + engine + ": " + std::to_string(cov.missing.size()) + " required class(es) not judged (" +
         (!require_classes.empty() ? "--require-classes " + require_classes
                                   : std::string("default: the structural classes within its capabilities")) +
         "):" + list + "\n  " + not_judged_advice(external_outputs);
}

nlohmann::json coverage_to_json(const std::string& engine, const EngineCoverage& cov) {
  using nlohmann::json;
  json jc = {{"engine", engine}, {"line", cov.line}, {"missing", cov.missing},
             {"core_judged", cov.core_judged}, {"core_applicable", cov.core_applicable},
             {"features_judged", cov.features_judged}, {"features_applicable", cov.features_applicable}};
  jc["below_core"] = below_core(cov);  // core classes its declaration cannot express (see the summary)
  for (const golden::ClassCoverage& k : cov.classes) {
    json e = {{"class", k.name}, {"level", golden::class_info(k.name).level == golden::ClassLevel::core ? "core" : "feature"},
              {"structural", golden::class_info(k.name).structural}, {"status", golden::to_string(k.status)},
              {"cases_judged", k.cases_judged}};
    if (!k.why.empty()) e["why"] = k.why;
    jc["classes"].push_back(e);
  }
  return jc;
}

std::vector<golden::ClassCoverage> classes_from_json(const nlohmann::json& entry) {
  std::vector<golden::ClassCoverage> out;
  for (const nlohmann::json& e : entry.at("classes")) {
    golden::ClassCoverage k;
    k.name = e.at("class").get<std::string>();
    golden::class_info(k.name);  // an unknown class throws
    const std::string status = e.at("status").get<std::string>();
    bool known = false;
    for (golden::Coverage c : {golden::Coverage::judged, golden::Coverage::not_applicable, golden::Coverage::not_judged}) {
      if (status == golden::to_string(c)) k.status = c, known = true;
    }
    if (!known) throw std::invalid_argument("class " + k.name + ": unknown coverage status \"" + status + "\"");
    k.cases_judged = e.at("cases_judged").get<int>();
    k.why = e.value("why", "");
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace ringkv::cli
