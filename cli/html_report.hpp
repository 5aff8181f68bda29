// ringkv CLI: the report as one self-contained HTML page (`ringkv check --html`, `ringkv report merge
// --html`), written from the JSON report: the verdict first, then each failure with its reproduce
// line, the engines with their counts, and the engines x boundary classes coverage matrix. No
// scripts, no fetches: inline CSS only.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ringkv::cli {

/// The page of a JSON report (`ringkv check --json`'s document).
std::string html_report(const nlohmann::json& report);

/// Writes html_report(report) to path (InputError if it cannot).
void write_html_report(const nlohmann::json& report, const std::string& path);

}  // namespace ringkv::cli
