// ringkv conformance: how numbers appear in case ids and messages, and how RapidCheck prints a Case
// in a counterexample.
#pragma once

#include <ostream>
#include <sstream>
#include <string>

#include "support/case.hpp"

namespace ringkv::conformance {

/// A number as case ids, verdicts and error messages print it: 9 significant digits (enough to tell
/// any two floats apart), shortest form ("0.5", "1e+38"). Case ids depend on it: do not change it.
inline std::string show_number(double x) {
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}

/// Found by RapidCheck through argument-dependent lookup.
inline void showValue(const Case& c, std::ostream& os) { os << "\n" << c.describe(); }

}  // namespace ringkv::conformance
