// ringkv CLI: what `ringkv check` says about a plugin's declaration, found at load (abi_versions.hpp):
// a plugin of ABI minor >= 2 that leaves every ABI 1.2 capability field at zero, as a plugin written for
// ABI 1.1 and recompiled does, with what the zeros cost on the golden cases of the run. Printed with the
// engine's verdict, and in the JSON ("engine_warnings") and JUnit reports.
#pragma once

#include <string>
#include <vector>

#include "golden/golden.hpp"
#include "plugin_engine.hpp"

namespace ringkv::cli {

/// The warnings about `plugin`'s declaration, each with its cost on `selected` (the run's golden cases
/// of `golden_dir`; none: without the cost). Empty for a plugin whose declaration raises none.
std::vector<std::string> declaration_warnings(const abi::Plugin& plugin, const std::string& golden_dir,
                                              const std::vector<golden::ManifestEntry>& selected);

}  // namespace ringkv::cli
