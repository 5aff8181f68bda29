#include "property_runner.hpp"

#include <iostream>
#include <regex>
#include <sstream>

#include <rapidcheck.h>

#include "property/properties.hpp"
#include "support/show.hpp"

namespace ringkv::cli {

std::vector<PropertyOutcome> run_properties(const EngineFactory& factory, int cases, uint64_t seed,
                                            const std::string& filter, const std::string& exclude, bool progress) {
  using namespace ringkv::conformance;
  std::vector<PropertyOutcome> out;
  const std::regex keep(filter.empty() ? ".*" : filter), drop(exclude.empty() ? "$^" : exclude);
  for (const PropertyInfo& p : all_properties()) {
    if (!std::regex_search(p.name, keep) || std::regex_search(p.name, drop)) continue;
    if (p.needs_snapshot && !factory.capabilities.snapshot) {
      out.push_back({p.name, true, 0, "skipped: the engine exposes no cache snapshot"});
      continue;
    }
    if (progress) std::cerr << "[properties] " << p.name << " (" << cases << " cases) ..." << std::endl;
    rc::detail::TestParams params;
    params.seed = seed;
    params.maxSuccess = cases;
    rc::detail::TestMetadata meta;
    meta.id = p.name;
    meta.description = p.name;
    const PropertyInfo* prop = &p;
    const rc::detail::TestResult result = rc::detail::checkTestable(
        [&factory, prop]() {
          const Case c = *gen_case(factory.capabilities, prop->options);
          prop->run(factory, c);
        },
        meta, params);
    PropertyOutcome o;
    o.name = p.name;
    o.passed = result.is<rc::detail::SuccessResult>();
    o.cases_run = cases;
    if (!o.passed) {
      std::ostringstream os;
      rc::detail::printResultMessage(result, os);
      o.report = os.str();
    }
    out.push_back(o);
  }
  return out;
}

}  // namespace ringkv::cli
