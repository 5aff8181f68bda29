// libringkv_plugin_mutant_<name>.so: one mutant of conformance/mutants as a
// plugin, picked at compile time by RINGKV_MUTANT_NAME. Every mutant must be
// caught through the ABI exactly as in process; the controls must pass.
#include <stdexcept>
#include <string>
#include <vector>

#include "export_engine.hpp"
#include "mutants/mutants.hpp"

#ifndef RINGKV_MUTANT_NAME
#error "define RINGKV_MUTANT_NAME"
#endif

namespace {

ringkv::abi::ExportSpec make_spec() {
  std::vector<ringkv::conformance::MutantInfo> all = ringkv::conformance::all_mutants();
  const auto& rollback = ringkv::conformance::rollback_mutants();  // spec 1.1: they declare rollback (ABI 1.3)
  all.insert(all.end(), rollback.begin(), rollback.end());
  const auto& interaction = ringkv::conformance::interaction_mutants();  // bugs where two features meet
  all.insert(all.end(), interaction.begin(), interaction.end());
  const auto& serving = ringkv::conformance::serving_mutants();  // what a serving engine shares (spec 1.2)
  all.insert(all.end(), serving.begin(), serving.end());
  for (const ringkv::conformance::MutantInfo& m : all) {
    if (std::string(m.name) != RINGKV_MUTANT_NAME) continue;
    ringkv::abi::ExportSpec s;
    s.factory = m.factory;
    s.factory.name = std::string(m.must_pass ? "control:" : "mutant:") + m.name;
    s.deterministic = true;  // every engine reports its own profile through get_info
    return s;
  }
  throw std::logic_error("no mutant named " RINGKV_MUTANT_NAME);  // export_engine returns NULL
}

}  // namespace

RINGKV_EXPORT_ENGINE(make_spec)
