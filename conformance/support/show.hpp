// ringkv conformance: how RapidCheck prints a Case in a counterexample.
#pragma once

#include <ostream>

#include "support/case.hpp"

namespace ringkv::conformance {

/// Found by RapidCheck through argument-dependent lookup.
inline void showValue(const Case& c, std::ostream& os) { os << "\n" << c.describe(); }

}  // namespace ringkv::conformance
