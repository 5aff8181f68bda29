#include "junit_report.hpp"

#include <fstream>

#include "check.hpp"
#include "report_json.hpp"
#include "coverage_verdict.hpp"

namespace ringkv::cli {

using nlohmann::json;

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

void write_junit_report(const json& report, const std::string& path) {
  std::ofstream x(path);
  if (!x) throw InputError("--junit " + path + ": cannot write the file");
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ringkv check\">\n";
  for (const json& eng : report_items(report, "engines")) {
    const std::string label = eng.at("engine");
    const std::string availability = eng.at("availability");
    x << "  <testsuite name=\"" << xml_escape(label) << "\">\n";
    if (availability == "unloadable") {
      x << "    <testcase classname=\"engine\" name=\"" << xml_escape(label) << "\"><error message=\""
        << xml_escape("could not be loaded: " + eng.at("reason").get<std::string>()) << "\"/></testcase>\n";
    } else if (availability == "skipped") {
      x << "    <testcase classname=\"engine\" name=\"" << xml_escape(label) << "\"><skipped message=\""
        << xml_escape(eng.at("reason").get<std::string>()) << "\"/></testcase>\n";
    }
    for (const json& w : report_items(report, "engine_warnings")) {
      if (w.at("engine") != label) continue;
      x << "    <testcase classname=\"engine\" name=\"" << xml_escape(label) << ": declaration\"><system-out>"
        << xml_escape("WARNING: " + w.at("warning").get<std::string>()) << "</system-out></testcase>\n";
    }
    for (const json& r : report_items(report, "cases")) {
      if (r.at("engine") != label) continue;
      const std::string st = r.at("status");
      const std::string detail = r.at("detail");
      x << "    <testcase classname=\"golden\" name=\"" << xml_escape(r.at("name")) << "\">";
      if (st == "failed" || st == "xpass") {
        x << "<failure message=\"" << xml_escape(detail) << "\">" << xml_escape(r.at("reproduce")) << "</failure>";
      } else if (st == "error") {
        x << "<error message=\"" << xml_escape(detail) << "\"/>";
      } else if (st == "skipped" || st == "xfail") {
        x << "<skipped message=\"" << xml_escape(st + ": " + detail) << "\"/>";
      }
      for (const json& w : report_items(r, "warnings")) x << "<system-out>" << xml_escape("WARNING: " + w.get<std::string>()) << "</system-out>";
      x << "</testcase>\n";
    }
    // One test case per class in a coverage suite: judged passes, not applicable is skipped, and a
    // class that went unjudged is a failure when it was required, else skipped.
    for (const json& cov : report_items(report, "coverage")) {
      if (cov.at("engine") != label) continue;
      for (const json& k : report_items(cov, "classes")) {
        const std::string name = k.at("class"), st = k.at("status"), why = k.value("why", "");
        x << "    <testcase classname=\"coverage\" name=\"" << xml_escape(name) << "\">";
        bool missing = false;
        for (const json& m : report_items(cov, "missing")) missing = missing || m.get<std::string>().rfind(name + " (", 0) == 0;
        if (missing) {
          x << "<failure message=\"" << xml_escape("required class not judged: " + st + (why.empty() ? "" : " (" + why + ")") + "; " +
                                                   not_judged_advice(eng.value("external_outputs", false))) << "\"/>";
        } else if (st != "judged") {
          x << "<skipped message=\"" << xml_escape(st + (why.empty() ? "" : ": " + why)) << "\"/>";
        }
        x << "</testcase>\n";
      }
    }
    for (const json& p : report_items(report, "properties")) {
      if (p.at("engine") != label) continue;
      x << "    <testcase classname=\"property\" name=\"" << xml_escape(p.at("name")) << "\">";
      if (!p.at("passed").get<bool>()) x << "<failure message=\"property failed\">" << xml_escape(p.at("report")) << "</failure>";
      for (const json& w : report_items(p, "warnings")) x << "<system-out>" << xml_escape("WARNING: " + w.get<std::string>()) << "</system-out>";
      x << "</testcase>\n";
    }
    x << "  </testsuite>\n";
  }
  x << "</testsuites>\n";
}

}  // namespace ringkv::cli
