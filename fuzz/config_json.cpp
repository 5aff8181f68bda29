// Fuzz target: the config and case JSON readers (config_from_json, case_from_json,
// conformance/support/config_json.hpp). Input that is not JSON is skipped; a config or case they
// accept must write back to JSON they accept again, as the same config.
#include <nlohmann/json.hpp>

#include "clear_error.hpp"
#include "round_trip.hpp"
#include "support/config_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringkv::conformance;
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  ringkv::Config config;
  if (ringkv::fuzz::accepts("config_from_json", [&] { config = config_from_json(j); })) {
    ringkv::fuzz::expect_round_trip("config_from_json (of config_to_json)", config, config_from_json, config_to_json);
  }
  ringkv::fuzz::accepts("case_from_json", [&] { (void)case_from_json(j); });
  return 0;
}
