// Profile JSON (profile 1 and 2), profile files with per-class overrides, and the named profiles
// shipped in profiles/ (conformance/support/profiles.hpp, docs/golden-format.md §5).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include "ringkv/error.hpp"
#include "support/config_json.hpp"
#include "support/profiles.hpp"

namespace ringkv::conformance {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProfileJson, RoundTripsEveryField) {
  PrecisionProfile p;
  p.q_dot = Precision::bf16;
  p.q_quant = QueryQuant::q8_0;
  p.k_storage = Precision::int8;  // v_storage stays "as configured"
  p.qk_accumulator = Precision::f32;
  p.pv_accumulator = Precision::f16;
  p.p_before_pv = Precision::f16;
  p.output = Precision::bf16;
  p.rope_angle = Precision::f32;
  const json j = profile_to_json(p);
  EXPECT_EQ(j["v_storage"], "as_configured");
  EXPECT_EQ(j["q_quant"], "q8_0");
  EXPECT_FALSE(j.contains("accumulator"));  // written as the two keys
  EXPECT_EQ(profile_from_json(j), p);
}

// Outputs files and profile files written before profile 2 keep their meaning.
TEST(ProfileJson, ProfileOneAccumulatorSetsBoth) {
  const json old = json::parse(R"({"accumulator":"f16","k_storage":"f16","output":"f16","p_before_pv":"f16",
                                   "q_dot":"f16","rope_angle":"f64","v_storage":"f16"})");
  const PrecisionProfile p = profile_from_json(old);
  EXPECT_EQ(p.qk_accumulator, Precision::f16);
  EXPECT_EQ(p.pv_accumulator, Precision::f16);
  EXPECT_EQ(p.q_quant, QueryQuant::none);
  EXPECT_EQ(p.k_storage, Precision::f16);
  json split = old;
  split["pv_accumulator"] = "f32";  // the specific key overrides the shorthand
  EXPECT_EQ(profile_from_json(split).pv_accumulator, Precision::f32);
  EXPECT_EQ(profile_from_json(split).qk_accumulator, Precision::f16);
}

TEST(ProfileJson, ErrorsNameTheField) {
  const json good = profile_to_json(PrecisionProfile{});
  json j = good;
  j.erase("qk_accumulator");
  EXPECT_NE(error_of([&] { profile_from_json(j); }).find("profile.qk_accumulator: missing"), std::string::npos);
  j = good;
  j["acumulator"] = "f32";
  EXPECT_NE(error_of([&] { profile_from_json(j); }).find("profile.acumulator: unknown field"), std::string::npos);
  j = good;
  j["k_storage"] = "f17";
  const std::string e = error_of([&] { profile_from_json(j); });
  EXPECT_NE(e.find("profile.k_storage = \"f17\""), std::string::npos) << e;
  EXPECT_NE(e.find("as_configured"), std::string::npos) << e;
  j = good;
  j["q_quant"] = "q4_0";
  EXPECT_NE(error_of([&] { profile_from_json(j); }).find("must be one of none, q8_0"), std::string::npos);
  j = good;
  j.erase("k_storage");  // optional: as configured
  EXPECT_EQ(profile_from_json(j).k_storage, std::nullopt);
}

TEST(ProfileSet, LaterMatchingClassesWinOnTheFieldsTheyGive) {
  const json j = json::parse(R"({
    "format": "ringkv-precision-profile", "name": "mixed",
    "profile": {"q_dot": "f16", "qk_accumulator": "f32", "pv_accumulator": "f16", "p_before_pv": "f32",
                "output": "f32", "rope_angle": "f64"},
    "classes": [{"class": "int8-q8_0", "profile": {"q_dot": "f32", "q_quant": "q8_0", "pv_accumulator": "f32"}},
                {"class": "kv-bf16", "profile": {"q_dot": "bf16"}}]})");
  const ProfileSet set = profile_set_from_json(j, "mixed.json");
  EXPECT_EQ(set.name, "mixed");
  const PrecisionProfile plain = resolve_profile(set, {"sinks", "mha"});
  EXPECT_EQ(plain, set.base);
  const PrecisionProfile q8 = resolve_profile(set, {"int8-q8_0", "sinks"});
  EXPECT_EQ(q8.q_quant, QueryQuant::q8_0);
  EXPECT_EQ(q8.q_dot, Precision::f32);
  EXPECT_EQ(q8.pv_accumulator, Precision::f32);
  EXPECT_EQ(q8.output, Precision::f32);  // not given: the default's
  const PrecisionProfile both = resolve_profile(set, {"kv-bf16", "int8-q8_0"});
  EXPECT_EQ(both.q_dot, Precision::bf16);  // the later entry
  EXPECT_EQ(both.q_quant, QueryQuant::q8_0);
}

TEST(ProfileSet, ErrorsNameTheField) {
  json j = json::parse(R"({"profile": {"q_dot": "f32", "accumulator": "f32", "p_before_pv": "f32", "output": "f32",
                                       "rope_angle": "f64"}, "classes": [{"class": "x", "profile": {"q_dot": "f8"}}]})");
  EXPECT_NE(error_of([&] { profile_set_from_json(j, "p.json"); }).find("p.json.classes[0].profile.q_dot = \"f8\""),
            std::string::npos);
  j["classes"] = json::array({json{{"profile", json::object()}}});
  EXPECT_NE(error_of([&] { profile_set_from_json(j, "p.json"); }).find("p.json.classes[0]: must be"), std::string::npos);
  j.erase("classes");
  j["format"] = "other";
  EXPECT_NE(error_of([&] { profile_set_from_json(j, "p.json"); }).find("p.json.format"), std::string::npos);
}

// Every file in profiles/ loads, is named for its file, and the list names the six of issue 9.
TEST(NamedProfiles, EveryShippedFileLoads) {
  const std::vector<std::string> names = named_profiles(default_profiles_dir());
  for (const char* want : {"f32-reference", "f16-compute-f32-acc", "bf16-compute-f32-acc", "f16-pv-accumulation",
                           "q8_0-dot", "f32-rope-angles"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const std::string& n : names) {
    const ProfileSet by_name = load_profile_set(n);
    EXPECT_EQ(by_name.name, n);
    const ProfileSet by_path = load_profile_set(default_profiles_dir() + "/" + n + ".json");
    EXPECT_EQ(by_path.base, by_name.base) << n;
  }
  EXPECT_EQ(load_profile_set("f32-reference").base, PrecisionProfile{});  // the reference's own
  const std::string e = error_of([] { load_profile_set("f16-everything"); });
  EXPECT_NE(e.find("not a file and not a named profile"), std::string::npos) << e;
  EXPECT_NE(e.find("q8_0-dot"), std::string::npos) << e;  // lists the names
  EXPECT_NE(error_of([] { load_profile_set("/nonexistent/p.json"); }).find("cannot open"), std::string::npos);
}

// A plain profile file (profile 1, as `--profile FILE` took before) still loads.
TEST(NamedProfiles, PlainProfileFileLoads) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "ringkv_profile_one.json";
  std::ofstream(file) << R"({"accumulator":"f32","k_storage":"f16","output":"f16","p_before_pv":"f16","q_dot":"f16",)"
                      << R"("rope_angle":"f64","v_storage":"f16"})";
  const ProfileSet set = load_profile_set(file.string());
  EXPECT_EQ(set.base.q_dot, Precision::f16);
  EXPECT_TRUE(set.classes.empty());
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace ringkv::conformance
