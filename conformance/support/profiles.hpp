// ringkv conformance: profile files. A profile file declares an engine's precision profile
// (ringkv/precision.hpp), optionally with overrides for cases of given classes (an engine whose
// numerics depend on the KV format, like ggml's). The named profiles shipped in profiles/ are
// such files. JSON and resolution rule: docs/golden-format.md §5.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringkv/precision.hpp"

namespace ringkv::conformance {

/// Overrides for the cases that carry one class: the profile fields `fields` gives replace the default's.
struct ClassProfile {
  std::string case_class;  ///< a class name of the golden manifest, e.g. "int8-q8_0"
  nlohmann::json fields;   ///< a validated subset of a profile's fields
};

/// A default profile and per-class overrides (in file order).
struct ProfileSet {
  std::string name;  ///< the file's "name", or its path
  PrecisionProfile base;
  std::vector<ClassProfile> classes;
};

/// A profile file's JSON: either a plain profile (profile 1 or 2 fields), or
/// {"format": "ringkv-precision-profile", "name": ..., "description": ..., "profile": {...},
///  "classes": [{"class": "int8-q8_0", "profile": {subset}}, ...]}.
/// Throws ConfigError naming the field.
ProfileSet profile_set_from_json(const nlohmann::json& j, const std::string& origin);

/// The profile for a case with these classes: the default, then every entry whose class the case
/// carries applied in file order (a later entry wins on the fields both give).
PrecisionProfile resolve_profile(const ProfileSet& set, const std::vector<std::string>& case_classes);

/// The folder of named profiles (the source tree's profiles/ for now; installing it is issue 12's).
std::string default_profiles_dir();

/// Names of the profiles in `dir` (file stems of *.json), sorted.
std::vector<std::string> named_profiles(const std::string& dir);

/// `name_or_path` is a file path (it exists, or contains '/' or ends in .json) or the name of a
/// file in `dir`. Throws ConfigError naming the argument (and the file's field) and listing the names in `dir`.
ProfileSet load_profile_set(const std::string& name_or_path, const std::string& dir = default_profiles_dir());

}  // namespace ringkv::conformance
