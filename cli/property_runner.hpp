// ringkv CLI: runs the RapidCheck properties (with shrinking) against any engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ringkv/engine.hpp"

namespace ringkv::cli {

struct PropertyOutcome {
  std::string name;
  bool passed = false;
  int cases_run = 0;
  std::string report;     ///< RapidCheck's message: the shrunk counterexample and the reproduce string
};

/// Runs every property (whose name matches `filter`, if non-empty) for `cases` cases each.
std::vector<PropertyOutcome> run_properties(const EngineFactory& factory, int cases, uint64_t seed,
                                            const std::string& filter, const std::string& exclude, bool progress);

}  // namespace ringkv::cli
