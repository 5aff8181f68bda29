// ringkv conformance: deliberately broken variants of the reference engine.
// Each plants one bug that real engines have shipped; the property suite must
// kill every one of them (conformance/mutants/mutant_test.cpp), which shows
// the tolerance bound is tight enough. docs/tolerances.md reports which
// property kills which mutant.
#pragma once

#include <string>
#include <vector>

#include "ringkv/engine.hpp"

namespace ringkv::conformance {

struct MutantInfo {
  const char* name;  ///< stable name, e.g. "window_plus_one"
  const char* bug;   ///< what it does wrong
  EngineFactory factory;
  bool must_pass = false;  ///< a control: correct under what it declares
};

/// Every mutant, then the controls (must_pass = true).
const std::vector<MutantInfo>& all_mutants();

}  // namespace ringkv::conformance
