#include "support/profiles.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "ringkv/error.hpp"
#include "support/config_json.hpp"
#include "support/data_dir.hpp"

#ifndef RINGKV_PROFILES_DIR
#error "RINGKV_PROFILES_DIR must name the profiles/ folder (conformance/CMakeLists.txt)"
#endif

namespace ringkv::conformance {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "ringkv-precision-profile";

[[noreturn]] void bad(const std::string& path, const std::string& why) { throw ConfigError(path + ": " + why); }

// A field's value as a string (`path` names the field).
std::string string_value(const json& v, const std::string& path) {
  if (!v.is_string()) bad(path + " = " + v.dump(), "must be a string");
  return v.get<std::string>();
}

}  // namespace

ProfileSet profile_set_from_json(const json& j, const std::string& origin) {
  // The path of a field: "origin.key", or "key" for the fields of a file read on its own (origin "").
  const auto at = [&](const std::string& key) { return origin.empty() ? key : origin + "." + key; };
  if (!j.is_object()) bad(origin.empty() ? "profile" : origin, "must be a JSON object");
  ProfileSet set;
  set.name = origin;
  if (!j.contains("profile")) {  // a plain profile
    set.base = profile_from_json(j, origin.empty() ? "profile" : origin);
    return set;
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "format" && key != "name" && key != "description" && key != "profile" && key != "classes") {
      bad(at(key), "unknown field; a profile file has format, name, description, profile, classes");
    }
  }
  if (j.contains("format") && string_value(j["format"], at("format")) != kFormat) {
    bad(at("format") + " = " + j["format"].dump(), "must be \"" + std::string(kFormat) + "\"");
  }
  if (j.contains("name")) set.name = string_value(j["name"], at("name"));
  if (j.contains("description")) string_value(j["description"], at("description"));
  set.base = profile_from_json(j["profile"], at("profile"));
  if (j.contains("classes")) {
    const json& classes = j["classes"];
    if (!classes.is_array()) bad(at("classes"), "must be an array of {\"class\": ..., \"profile\": {...}}");
    for (size_t i = 0; i < classes.size(); ++i) {
      const std::string path = at("classes[" + std::to_string(i) + "]");
      const json& c = classes[i];
      if (!c.is_object() || !c.contains("class") || !c.contains("profile") || c.size() != 2) {
        bad(path, "must be {\"class\": NAME, \"profile\": {fields to override}}");
      }
      ClassProfile cp;
      cp.case_class = string_value(c["class"], path + ".class");
      if (cp.case_class.empty()) bad(path + ".class", "must not be empty");
      PrecisionProfile check = set.base;
      apply_profile_json(c["profile"], path + ".profile", check);  // validates the fields now
      cp.fields = c["profile"];
      set.classes.push_back(std::move(cp));
    }
  }
  return set;
}

PrecisionProfile resolve_profile(const ProfileSet& set, const std::vector<std::string>& case_classes) {
  PrecisionProfile p = set.base;
  for (const ClassProfile& c : set.classes) {
    if (std::find(case_classes.begin(), case_classes.end(), c.case_class) != case_classes.end()) {
      apply_profile_json(c.fields, set.name + " class " + c.case_class, p);
    }
  }
  return p;
}

std::string default_profiles_dir() { return data_dir("profiles", RINGKV_PROFILES_DIR); }

std::vector<std::string> named_profiles(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

ProfileSet load_profile_set(const std::string& name_or_path, const std::string& dir) {
  const bool is_path = fs::exists(name_or_path) || name_or_path.find('/') != std::string::npos ||
                       fs::path(name_or_path).extension() == ".json";
  const fs::path file = is_path ? fs::path(name_or_path) : fs::path(dir) / (name_or_path + ".json");
  std::ifstream in(file);
  if (!in) {
    if (is_path) throw ConfigError("profile " + name_or_path + ": cannot open the file");
    std::string names;
    for (const std::string& n : named_profiles(dir)) names += (names.empty() ? "" : ", ") + n;
    throw ConfigError("profile \"" + name_or_path + "\": not a file and not a named profile in " + dir +
                      " (named profiles: " + (names.empty() ? "none" : names) + ")");
  }
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    throw ConfigError(file.string() + ": not JSON: " + e.what());
  }
  ProfileSet set;
  try {  // a file's fields are named from its root (profile.q_dot), after the file
    set = profile_set_from_json(j, is_path ? "" : name_or_path);
  } catch (const ConfigError& e) {
    if (!is_path) throw;
    throw ConfigError(file.string() + ": " + e.what());
  }
  if (!j.contains("name")) set.name = is_path ? file.string() : name_or_path;
  return set;
}

}  // namespace ringkv::conformance
