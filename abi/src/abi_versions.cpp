#include "abi_versions.hpp"

namespace ringkv::abi {

std::optional<ZeroAbi12Fields> abi_1_2_fields_left_at_zero(const std::string& name, const ringkv_capabilities& caps,
                                                           uint32_t plugin_abi_version, const Capabilities& mapped) {
  if (!reads_abi_1_2_fields(plugin_abi_version)) return std::nullopt;
  if (caps.max_sliding_windows != 0 || caps.per_layer_rope != 0 || caps.partial_rotary != 0 || caps.settable_p0 != 0 ||
      caps.min_window != 0 || caps.max_position != 0 || caps.kv_formats_differ != 0) {
    return std::nullopt;
  }
  // The four whose zero narrows (the other three say "any" or "1" at zero), with what zero says.
  const struct {
    const char* field;
    const char* zero_means;
    bool Capabilities::*flag;
  } narrowing[] = {
      {"per_layer_rope", "the same RoPE in every layer", &Capabilities::per_layer_rope},
      {"partial_rotary", "no partial rotary (rotary_dim < head_dim)", &Capabilities::partial_rotary},
      {"settable_p0", "every sequence starts at position 0", &Capabilities::settable_p0},
      {"kv_formats_differ", "one format for K and V", &Capabilities::kv_formats_differ},
  };
  ZeroAbi12Fields z;
  z.plugin_name = name;
  z.plugin_abi_version = plugin_abi_version;
  z.as_abi_1_1 = mapped;
  for (const auto& n : narrowing) {
    z.fields.push_back(n.field);
    z.zero_means.push_back(n.zero_means);
    z.as_abi_1_1.*n.flag = true;
  }
  return z;
}

std::string ZeroAbi12Fields::warning(const std::string& cost) const {
  std::string names, meanings;
  for (size_t i = 0; i < fields.size(); ++i) {
    const char* sep = i == 0 ? "" : i + 1 == fields.size() ? " and " : ", ";
    names += sep + fields[i];
    meanings += (i == 0 ? "" : ", ") + zero_means[i];
  }
  return "plugin " + plugin_name + " (ABI " + abi_version_text(plugin_abi_version) +
         ") leaves every ABI 1.2 capability field at zero, as a plugin written for ABI 1.1 and recompiled against a "
         "newer header does: zero in " + names + " narrows it (" + meanings +
         ") where ABI 1.1 took it to support them" + (cost.empty() ? "" : "; " + cost) +
         ". Declare what the engine supports in those fields (docs/engine-abi.md, \"Minor versions\"); if the zeros "
         "are meant, set min_window = 1 (the same as 0) to say so";
}

std::string abi_1_2_zero_cost(int cases_as_declared, int cases_as_abi_1_1, int cases_total,
                              const std::vector<std::string>& classes_lost, int core_lost) {
  std::string list;
  for (const std::string& c : classes_lost) list += (list.empty() ? "" : ", ") + c;
  return "they cost " + std::to_string(cases_as_abi_1_1 - cases_as_declared) + " of the " +
         std::to_string(cases_total) + " golden cases (within the capabilities: " + std::to_string(cases_as_declared) +
         " instead of " + std::to_string(cases_as_abi_1_1) + ") and " + std::to_string(classes_lost.size()) +
         " classes (" + std::to_string(core_lost) + " of them core) not applicable" + (list.empty() ? "" : ": " + list);
}

}  // namespace ringkv::abi
