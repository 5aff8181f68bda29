#include "html_report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "check.hpp"
#include "report_json.hpp"
#include "junit_report.hpp"
#include "report_merge.hpp"

namespace ringkv::cli {

using nlohmann::json;

namespace {

std::string h(const std::string& s) { return xml_escape(s); }

std::string ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", r);
  return buf;
}

constexpr const char* kStyle = R"(body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
.verdict{font-size:1.6em;font-weight:bold;padding:.4em .8em;display:inline-block;border-radius:4px}
.PASSED{background:#d4f4d4;color:#135e13}.FAILED{background:#fbd5d5;color:#8a1010}.ERROR{background:#fde8c4;color:#7a4a00}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}
th.class{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap}
td.judged{background:#d4f4d4}td.failed{background:#f5a3a3}td.na{background:#eee;color:#888}td.notjudged{background:#fde8c4}
pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap;font-size:.85em}
.failure{border-left:4px solid #c33;padding-left:.8em;margin:1em 0;overflow-wrap:anywhere}
.scroll{overflow-x:auto}.scroll tr>:first-child{position:sticky;left:0;background:#fff;z-index:1})";

}  // namespace

std::string html_report(const json& report) {
  const int rc = report_exit_code(report);
  const std::string verdict = rc == 1 ? "FAILED" : rc == 2 ? "ERROR" : "PASSED";
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ringkv check: " << verdict
    << "</title><style>" << kStyle << "</style></head><body>\n";
  o << "<h1>ringkv check</h1>\n<p><span id=\"verdict\" class=\"verdict " << verdict << "\">" << verdict << "</span></p>\n";

  // Counts per engine, from the cases and properties.
  struct Counts { int passed = 0, failed = 0, xfail = 0, skipped = 0, error = 0, props = 0, props_failed = 0; double worst = 0; };
  std::map<std::string, Counts> counts;
  // Per engine and class: failed cases, and the worst error as a fraction of the bound.
  std::map<std::pair<std::string, std::string>, std::pair<int, double>> per_class;
  for (const json& c : report_items(report, "cases")) {
    Counts& n = counts[c.at("engine")];
    const std::string st = c.at("status");
    if (st == "passed") ++n.passed;
    else if (st == "failed" || st == "xpass") ++n.failed;
    else if (st == "xfail") ++n.xfail;
    else if (st == "skipped") ++n.skipped;
    else ++n.error;
    if (st == "skipped" || st == "error") continue;
    n.worst = std::max(n.worst, c.value("worst_ratio", 0.0));
    for (const json& k : report_items(c, "classes")) {
      auto& pc = per_class[{c.at("engine"), k.get<std::string>()}];
      pc.first += st == "failed" || st == "xpass";
      pc.second = std::max(pc.second, c.value("worst_ratio", 0.0));
    }
  }
  for (const json& p : report_items(report, "properties")) {
    Counts& n = counts[p.at("engine")];
    ++n.props;
    n.props_failed += p.value("passed", false) ? 0 : 1;
  }

  // Why the run failed beyond its cases (required classes not judged).
  if (!report_items(report, "reasons").empty()) {
    o << "<h2>Why it failed</h2>\n";
    for (const json& r : report_items(report, "reasons")) o << "<pre class=\"reason\">" << h(r) << "</pre>\n";
  }
  // Failures first, each with its reproduce line.
  o << "<h2>Failures</h2>\n";
  int failures = 0;
  for (const json& c : report_items(report, "cases")) {
    const std::string st = c.at("status");
    if (st != "failed" && st != "xpass" && st != "error") continue;
    ++failures;
    std::string classes;
    for (const json& k : report_items(c, "classes")) classes += (classes.empty() ? "" : " ") + k.get<std::string>();
    o << "<div class=\"failure\"><b>" << (st == "error" ? "ERROR " : "FAILED ") << h(c.at("name")) << "</b> [" << h(st)
      << "] on engine <b>" << h(c.at("engine")) << "</b><br>case: " << h(c.at("id")) << "<br>classes: " << h(classes)
      << "<pre>" << h(c.at("detail")) << "</pre>";
    if (st != "error") o << "reproduce:<pre class=\"reproduce\">" << h(c.at("reproduce")) << "</pre>";
    o << "</div>\n";
  }
  for (const json& p : report_items(report, "properties")) {
    if (p.value("passed", false)) continue;
    ++failures;
    o << "<div class=\"failure\"><b>FAILED property " << h(p.at("name")) << "</b> on engine <b>" << h(p.at("engine"))
      << "</b><pre class=\"reproduce\">" << h(p.at("report")) << "</pre></div>\n";
  }
  if (failures == 0) o << "<p id=\"no-failures\">No failing case or property.</p>\n";

  // One line per engine.
  o << "<h2>Engines</h2>\n<table id=\"engines\"><tr><th>engine</th><th>verdict</th><th>golden passed</th><th>failed</th>"
       "<th>xfail</th><th>skipped</th><th>unusable</th><th>worst error / bound</th><th>properties failed</th>"
       "<th>coverage</th></tr>\n";
  for (const json& e : report_items(report, "engines")) {
    const std::string label = e.at("engine"), availability = e.at("availability");
    const Counts n = counts.count(label) ? counts.at(label) : Counts{};
    std::string line, ev = availability == "ran" ? "PASSED" : availability == "unloadable" ? "ERROR" : "skipped";
    bool missing = false;
    for (const json& cov : report_items(report, "coverage")) {
      if (cov.at("engine") != label) continue;
      line = cov.value("line", "");
      missing = !report_items(cov, "missing").empty();
    }
    if (availability == "ran" && (n.failed || n.props_failed || missing)) ev = "FAILED";
    else if (availability == "ran" && n.error) ev = "ERROR";
    if (availability != "ran") line = e.value("reason", "");
    o << "<tr class=\"engine\"><td>" << h(label) << "</td><td class=\"" << ev << "\">" << ev << "</td><td>" << n.passed
      << "</td><td>" << n.failed << "</td><td>" << n.xfail << "</td><td>" << n.skipped << "</td><td>" << n.error << "</td><td>"
      << ratio(n.worst) << "</td><td>" << n.props_failed << " of " << n.props << "</td><td>" << h(line) << "</td></tr>\n";
  }
  o << "</table>\n";

  // The engines x boundary classes matrix: judged (worst error / bound), failed, not applicable, not judged.
  const json& coverage = report_items(report, "coverage");
  if (!coverage.empty()) {
    o << "<h2>Coverage: engines &times; boundary classes</h2>\n<p>judged (worst error as a fraction of the bound), "
         "<b>failed</b> (cases failing), n/a (the engine cannot express it), not judged (it could; no case within its "
         "capabilities was compared). A required class not judged fails the run.</p>\n<div class=\"scroll\"><table id=\"coverage\"><tr><th>engine</th>";
    for (const json& k : report_items(coverage[0], "classes")) o << "<th class=\"class\">" << h(k.at("class")) << "</th>";
    o << "</tr>\n";
    for (const json& cov : coverage) {
      const std::string label = cov.at("engine");
      o << "<tr><td>" << h(label) << "</td>";
      for (const json& k : report_items(cov, "classes")) {
        const std::string name = k.at("class"), st = k.at("status"), why = k.value("why", "");
        const auto pc = per_class.find({label, name});
        std::string css = "judged", text;
        if (st == "judged" && pc != per_class.end() && pc->second.first > 0) {
          css = "failed";
          text = "failed " + std::to_string(pc->second.first);
        } else if (st == "judged") {
          text = ratio(pc != per_class.end() ? pc->second.second : 0);
        } else if (st == "not applicable") {
          css = "na";
          text = "n/a";
        } else {
          css = "notjudged";
          text = "not judged";
        }
        o << "<td class=\"" << css << "\" data-class=\"" << h(name) << "\" title=\"" << h(name + ": " + st + (why.empty() ? "" : " (" + why + ")"))
          << "\">" << h(text) << "</td>";
      }
      o << "</tr>\n";
    }
    o << "</table></div>\n";
  }
  if (report.contains("shard")) {
    const json& s = report.at("shard");
    o << "<p class=\"provenance\">work items: " << report_items(s, "work").size() << "; fingerprint " << h(s.value("fingerprint", ""))
      << "</p>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

void write_html_report(const json& report, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw InputError("--html " + path + ": cannot write the file");
  out << html_report(report);
}

}  // namespace ringkv::cli
