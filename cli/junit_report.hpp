// ringkv CLI: the JUnit XML report, written from the JSON report (the report as data: `ringkv check`
// and `ringkv report merge` write the same file from the same document).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ringkv::cli {

/// Text with &, <, > and " escaped, for XML attributes and text (and HTML).
std::string xml_escape(const std::string& s);

/// Writes the JUnit report of a JSON report (`ringkv check --json`'s document): a test suite per
/// engine with its golden cases, its coverage (a class per test case) and its properties.
void write_junit_report(const nlohmann::json& report, const std::string& path);

}  // namespace ringkv::cli
