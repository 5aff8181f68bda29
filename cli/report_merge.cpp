#include "report_merge.hpp"

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "check.hpp"
#include "check_run.hpp"
#include "report_json.hpp"
#include "coverage_verdict.hpp"
#include "html_report.hpp"
#include "junit_report.hpp"

namespace ringkv::cli {

using nlohmann::json;

namespace {

std::string shard_name(const json& header) {
  return std::to_string(header.at("index").get<int>()) + "/" + std::to_string(header.at("count").get<int>());
}

// "kind\tengine\tname": a work item's key, and that of a case or property.
std::string key(const std::string& kind, const json& item) {
  return kind + "\t" + item.at("engine").get<std::string>() + "\t" + item.at("name").get<std::string>();
}

// The keys of `a` and `b` whose values differ, e.g. "seed (1 against 2)".
std::string differences(const json& a, const json& b) {
  std::string out;
  if (!a.is_object() || !b.is_object()) return a.dump() + " against " + b.dump();
  std::set<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.insert(k);
  for (const auto& [k, v] : b.items()) keys.insert(k);
  for (const std::string& k : keys) {
    const json va = a.value(k, json()), vb = b.value(k, json());
    if (va != vb) out += (out.empty() ? "" : ", ") + k + " (" + va.dump() + " against " + vb.dump() + ")";
  }
  return out;
}

}  // namespace

int report_exit_code(const json& report) {
  bool failed = !report_items(report, "reasons").empty();
  for (const json& c : report_items(report, "cases")) failed = failed || c.at("status") == "failed" || c.at("status") == "xpass";
  for (const json& p : report_items(report, "properties")) failed = failed || !p.at("passed").get<bool>();
  return failed ? 1 : report.value("errors", 0) > 0 ? 2 : 0;
}

json merge_reports(const std::vector<json>& shards, const std::vector<std::string>& names) {
  if (shards.empty()) throw InputError("report merge: no shard reports given");
  // ---- the shards make one run: same count, options, golden set, engines and work; each index once ----
  for (size_t i = 0; i < shards.size(); ++i) {
    if (!shards[i].is_object() || !shards[i].contains("shard")) {
      throw InputError(names[i] + ": not the JSON report of `ringkv check` with a shard header (\"shard\"); write each "
                                  "shard with `ringkv check --shard I/N --json FILE`");
    }
  }
  const json& first = shards[0].at("shard");
  const int count = first.at("count").get<int>();
  for (size_t i = 1; i < shards.size(); ++i) {
    const json& h = shards[i].at("shard");
    const auto differ = [&](const char* what, const std::string& how) {
      throw InputError("report merge: " + names[0] + " (shard " + shard_name(first) + ") and " + names[i] + " (shard " +
                       shard_name(h) + ") are not shards of one run: " + what + how);
    };
    if (h.at("count") != first.at("count")) differ("different shard counts", "");
    if (h.at("options") != first.at("options")) differ("different suites: their options differ: ", differences(first.at("options"), h.at("options")));
    // The golden set is its manifest's contents (runners may check it out at different paths).
    if (h.at("golden").at("manifest_sha256") != first.at("golden").at("manifest_sha256")) {
      differ("different golden sets: ", differences(first.at("golden"), h.at("golden")));
    }
    if (h.at("engines") != first.at("engines")) differ("different engines: ", first.at("engines").dump() + " against " + h.at("engines").dump());
    if (h.at("work_sha256") != first.at("work_sha256") || h.at("work") != first.at("work")) differ("different work lists", "");
  }
  std::map<int, size_t> by_index;  // shard index -> its report
  for (size_t i = 0; i < shards.size(); ++i) {
    const int index = shards[i].at("shard").at("index").get<int>();
    if (index < 1 || index > count) throw InputError(names[i] + ": shard index " + std::to_string(index) + " is not from 1 to " + std::to_string(count));
    if (const auto it = by_index.find(index); it != by_index.end()) {
      throw InputError("report merge: shard " + std::to_string(index) + "/" + std::to_string(count) + " given twice: " +
                       names[it->second] + " and " + names[i]);
    }
    by_index[index] = i;
  }
  std::string missing;
  for (int k = 1; k <= count; ++k) {
    if (!by_index.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k) + "/" + std::to_string(count);
  }
  if (!missing.empty()) throw InputError("report merge: shard(s) " + missing + " missing (given: " + std::to_string(shards.size()) + " of " + std::to_string(count) + ")");

  // ---- the results, at their place in the work list; each shard holds exactly its items ----
  const json& work = first.at("work");
  std::map<std::string, size_t> position;
  for (size_t k = 0; k < work.size(); ++k) position[key(work[k].at("kind"), work[k])] = k;
  std::vector<std::vector<json>> at(work.size());
  for (const auto& [index, i] : by_index) {
    const json& report = shards[i];
    std::set<std::string> own;
    for (const json& w : work) {
      if (w.at("shard").get<int>() == index) own.insert(key(w.at("kind"), w));
    }
    std::set<std::string> seen;
    const auto place = [&](const char* kind, const json& r) {
      const std::string k = key(kind, r);
      if (!own.count(k)) {
        throw InputError(names[i] + " (shard " + shard_name(report.at("shard")) + "): a result that is not its work: " + kind +
                         " " + r.at("name").get<std::string>() + " on engine " + r.at("engine").get<std::string>());
      }
      seen.insert(k);
      at[position.at(k)].push_back(r);
    };
    for (const json& c : report_items(report, "cases")) {  // a golden case, or a scale case (docs/scale.md)
      place(c.at("name").get<std::string>().rfind("scale/", 0) == 0 ? "scale" : "golden", c);
    }
    for (const json& p : report_items(report, "properties")) place("property", p);
    for (const std::string& k : own) {
      if (!seen.count(k)) {
        throw InputError(names[i] + " (shard " + shard_name(report.at("shard")) + ") has no result for its work item " + k +
                         " (an interrupted shard? run it again)");
      }
    }
  }
  json merged;
  const json& one = shards[by_index.at(1)];
  for (const char* k : {"engine_errors", "skipped_engines", "engine_warnings", "engines"}) {
    if (one.contains(k)) merged[k] = one.at(k);
  }
  int errors = static_cast<int>(report_items(one, "engine_errors").size());
  bool failed = false;
  for (size_t k = 0; k < work.size(); ++k) {
    for (const json& r : at[k]) {
      if (work[k].at("kind") == "golden" || work[k].at("kind") == "scale") {  // cases of the report
        merged["cases"].push_back(r);
        errors += r.at("status") == "error";
        failed = failed || r.at("status") == "failed" || r.at("status") == "xpass";
      } else {
        merged["properties"].push_back(r);
        failed = failed || !r.at("passed").get<bool>();
      }
    }
  }
  // ---- coverage: a class is judged if any shard judged it; then the verdict on the whole ----
  const json& options = first.at("options");
  const std::string require_classes = options.at("require_classes");
  std::optional<std::regex> required;
  if (!require_classes.empty()) required = std::regex(require_classes);
  const bool require_default = options.at("require_default").get<bool>();
  std::map<std::string, bool> external;
  for (const json& e : first.at("engines")) external[e.at("engine")] = e.at("external_outputs").get<bool>();
  std::map<std::string, std::string> reason_of;  // per engine; listed below in the run's engine order, as check does
  for (const json& entry : report_items(one, "coverage")) {
    const std::string label = entry.at("engine");
    std::vector<golden::ClassCoverage> classes = classes_from_json(entry);
    for (const auto& [index, i] : by_index) {
      if (index == 1) continue;
      const json* other = nullptr;
      for (const json& e : report_items(shards[i], "coverage")) {
        if (e.at("engine") == label) other = &e;
      }
      if (!other) throw InputError(names[i] + ": no coverage of engine " + label + " (the other shards have it)");
      const std::vector<golden::ClassCoverage> more = classes_from_json(*other);
      if (more.size() != classes.size()) throw InputError(names[i] + ": the coverage of engine " + label + " has other classes");
      for (size_t c = 0; c < classes.size(); ++c) {
        if (more[c].name != classes[c].name) throw InputError(names[i] + ": the coverage of engine " + label + " has other classes");
        classes[c].cases_judged += more[c].cases_judged;
        if (more[c].status == golden::Coverage::judged) classes[c].status = golden::Coverage::judged;
        if (classes[c].status == golden::Coverage::judged) classes[c].why.clear();
      }
    }
    const EngineCoverage cov = coverage_verdict(std::move(classes), required, require_default);
    if (!cov.missing.empty()) {
      failed = true;
      reason_of[label] = missing_classes_reason(label, cov, require_classes, external[label]);
    }
    merged["coverage"].push_back(coverage_to_json(label, cov));
  }
  std::vector<std::string> reasons;
  for (const json& e : first.at("engines")) {
    const auto it = reason_of.find(e.at("engine").get<std::string>());
    if (it != reason_of.end()) reasons.push_back(it->second);
  }
  merged["passed"] = !failed && errors == 0;
  merged["errors"] = errors;
  merged["reasons"] = reasons;
  // The header of the whole run: one shard of one, every item in it.
  json header = first;
  header["index"] = 1;
  header["count"] = 1;
  for (json& w : header["work"]) w["shard"] = 1;
  merged["shard"] = header;
  return merged;
}

int run_report_merge(const MergeOptions& opt) {
  std::vector<json> shards;
  for (const std::string& path : opt.shards) {
    std::ifstream in(path);
    if (!in) throw InputError("report merge: " + path + ": cannot open the file");
    try {
      shards.push_back(json::parse(in));
    } catch (const json::exception& e) {
      throw InputError("report merge: " + path + ": not JSON: " + e.what());
    }
  }
  json merged;
  try {
    merged = merge_reports(shards, opt.shards);
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(std::string("report merge: a shard report is malformed: ") + e.what());
  }
  // The text report of the unsharded run, from the merged report; where it came from on stderr.
  const json& header = merged.at("shard");
  std::fprintf(stderr, "ringkv report merge: %zu shard(s), %zu work items, fingerprint %s\n", shards.size(),
               report_items(header, "work").size(), header.at("fingerprint").get<std::string>().c_str());
  CheckOptions as_run;
  as_run.table = opt.table;
  print_text_report(run_from_report(merged, as_run));
  std::fflush(stdout);
  const int rc = report_exit_code(merged);
  if (!opt.json_file.empty()) std::ofstream(opt.json_file) << merged.dump(2) << "\n";
  if (!opt.junit_file.empty()) write_junit_report(merged, opt.junit_file);
  if (!opt.html_file.empty()) write_html_report(merged, opt.html_file);
  return rc;
}

}  // namespace ringkv::cli
