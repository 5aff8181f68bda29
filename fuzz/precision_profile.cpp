// Fuzz target: the precision-profile reader (profile_from_json and apply_profile_json,
// conformance/support/config_json.hpp). Input that is not JSON is skipped; a profile it accepts must
// write back to JSON it accepts again, as the same profile.
#include <nlohmann/json.hpp>

#include "clear_error.hpp"
#include "round_trip.hpp"
#include "support/config_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringkv::conformance;
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  ringkv::PrecisionProfile profile;
  if (ringkv::fuzz::accepts("profile_from_json", [&] { profile = profile_from_json(j); })) {
    const auto read = [](const nlohmann::json& x) { return profile_from_json(x); };  // its path argument defaulted
    ringkv::fuzz::expect_round_trip("profile_from_json (of profile_to_json)", profile, read, profile_to_json);
  }
  ringkv::PrecisionProfile overridden;
  ringkv::fuzz::accepts("apply_profile_json", [&] { apply_profile_json(j, "profile", overridden); });
  return 0;
}
