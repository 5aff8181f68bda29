#include "plugin_declaration.hpp"

#include "abi_versions.hpp"
#include "golden/coverage.hpp"
#include "support/capabilities.hpp"

namespace ringkv::cli {

std::vector<std::string> declaration_warnings(const abi::Plugin& plugin, const std::string& golden_dir,
                                              const std::vector<golden::ManifestEntry>& selected) {
  const std::optional<abi::ZeroAbi12Fields>& zero = plugin.zero_abi_1_2_fields();
  if (!zero) return {};
  std::string cost;
  if (!selected.empty()) {
    int as_declared = 0, as_abi_1_1 = 0;
    for (const golden::ManifestEntry& e : selected) {
      try {
        const golden::GoldenCase g = golden::load_manifest_case(golden_dir, e);
        as_declared += conformance::capability_gap(plugin.capabilities(), g.c).empty() ? 1 : 0;
        as_abi_1_1 += conformance::capability_gap(zero->as_abi_1_1, g.c).empty() ? 1 : 0;
      } catch (const std::exception&) {  // an unusable golden file: its case reports it
      }
    }
    std::vector<std::string> lost;
    int core_lost = 0;
    for (const golden::ClassInfo& k : golden::class_catalogue()) {
      if (golden::class_not_applicable(plugin.capabilities(), k.name).empty() ||
          !golden::class_not_applicable(zero->as_abi_1_1, k.name).empty()) {
        continue;
      }
      lost.push_back(k.name);
      core_lost += k.level == golden::ClassLevel::core ? 1 : 0;
    }
    cost = abi::abi_1_2_zero_cost(as_declared, as_abi_1_1, static_cast<int>(selected.size()), lost, core_lost);
  }
  return {zero->warning(cost)};
}

}  // namespace ringkv::cli
