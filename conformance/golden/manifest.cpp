// ringkv golden: the committed set: generation, manifest, verification.
#include "golden/golden.hpp"
#include "golden/coverage.hpp"
#include "golden/detail.hpp"
#include "golden/scale_golden.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "golden/sha256.hpp"
#include "support/capabilities.hpp"
#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"

namespace ringkv::golden {

using nlohmann::json;

using namespace detail;

// ---------------------------------------------------------------------------------------------
// The committed set: generation, manifest, verification.

namespace {

namespace fs = std::filesystem;

std::string case_file(const std::string& name) { return "cases/" + name + ".safetensors"; }

// The "requires" of a format 2 entry: the spec, the golden format and the engine capabilities its case
// needs. Format 1 entries carry none (they stay byte-identical to the manifests before format 2).
json requires_of(const ManifestEntry& e) {
  return json{{"spec", e.spec_version}, {"golden_format_version", e.golden_format_version},
              {"capabilities", e.required_capabilities}};
}

std::string manifest_text(const std::vector<ManifestEntry>& entries, const json& generator = nullptr) {
  json cases = json::array();
  int64_t total = 0;
  int version = 1;  // the manifest's version: the newest format among its cases
  for (const ManifestEntry& e : entries) {
    json entry{{"name", e.name}, {"id", e.id}, {"level", case_level(e.classes)},
               {"features", case_features(e.classes)}, {"classes", e.classes}, {"file", e.file},
               {"sha256", e.sha256}, {"bytes", e.bytes}};
    if (e.golden_format_version > 1) entry["requires"] = requires_of(e);
    cases.push_back(entry);
    total += e.bytes;
    version = std::max(version, e.golden_format_version);
  }
  json m{{"format", "ringkv-golden-manifest"},
         {"golden_format_version", version == 2 ? kGoldenFormatVersion2 : kGoldenFormatVersion},
         {"spec_version", version == 2 ? kSpecVersion11 : kSpecVersion},
         {"total_bytes", total},
         {"cases", cases}};
  if (!generator.is_null()) m["generator"] = generator;  // a random set: what regenerates it
  return m.dump(2) + "\n";
}

std::vector<ManifestEntry> entries_for(const std::vector<GoldenSpec>& specs, std::vector<std::vector<uint8_t>>* bytes) {
  std::vector<ManifestEntry> entries;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::vector<uint8_t>& b = (*bytes)[i];
    ManifestEntry e;
    e.name = specs[i].name;
    e.id = specs[i].c.id();
    e.file = case_file(specs[i].name);
    e.sha256 = sha256_hex(b);
    e.classes = specs[i].classes;
    e.bytes = static_cast<int64_t>(b.size());
    e.level = case_level(specs[i].classes);
    e.features = case_features(specs[i].classes);
    if (format_version_of(specs[i].c) == 2) {  // format 2: what a reader and an engine need
      e.golden_format_version = 2;
      e.spec_version = kSpecVersion11;
      e.required_capabilities = {"rollback"};
    }
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const ManifestEntry& a, const ManifestEntry& b) { return a.name < b.name; });
  return entries;
}

void check_unique_names(const std::vector<GoldenSpec>& specs) {
  std::set<std::string> names;
  for (const GoldenSpec& s : specs) {
    if (!names.insert(s.name).second) throw Error("golden_set(): the name " + s.name + " is used twice");
    for (char ch : s.name) {
      if (!(std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '_' ||
            ch == '-' || ch == '.')) {
        throw Error("golden_set(): the name " + s.name + " has a character outside [a-z0-9_.-]");
      }
    }
  }
}


// How a generator's cases are recorded: make_golden, or (a scale set) the inputs only.
using MakeCase = GoldenCase (*)(const GoldenSpec&);
MakeCase maker_of(const json& generator) {
  return generator.is_object() && generator.contains("scale") ? make_scale_golden_of : make_golden;
}

// Writes the cases of `specs` and their manifest (with `generator` for a random or scale set).
void write_golden_set(const std::string& dir, const std::vector<GoldenSpec>& specs, const json& generator,
                      void (*progress)(const std::string&, size_t)) {
  const MakeCase make = maker_of(generator);
  check_unique_names(specs);
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "cases", ec);
  if (ec) throw Error(dir + "/cases: cannot create: " + ec.message());
  std::set<std::string> wanted;
  std::vector<std::vector<uint8_t>> bytes;
  for (const GoldenSpec& s : specs) {
    bytes.push_back(serialize_golden(make(s)));
    write_file_bytes((fs::path(dir) / case_file(s.name)).string(), bytes.back());
    wanted.insert(s.name + ".safetensors");
    if (progress) progress(s.name, bytes.back().size());
  }
  // Files of cases that are no longer in the set would linger: remove them.
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(dir) / "cases")) {
    const std::string f = e.path().filename().string();
    if (e.path().extension() == ".safetensors" && !wanted.count(f)) fs::remove(e.path());
  }
  const std::string text = manifest_text(entries_for(specs, &bytes), generator);
  write_file_bytes((fs::path(dir) / "manifest.json").string(), std::vector<uint8_t>(text.begin(), text.end()));
}

json random_generator(int n, uint64_t seed, const Capabilities& caps) {
  return json{{"random", n}, {"seed", seed}, {"capabilities", conformance::capabilities_to_json(caps)}};
}

// The manifest's "generator" (null for the committed set).
json read_generator(const std::string& dir) {
  const std::vector<uint8_t> bytes = read_file_bytes((fs::path(dir) / "manifest.json").string());
  json m;
  try {
    m = json::parse(bytes.begin(), bytes.end());
  } catch (const json::exception& e) {
    throw Error(dir + "/manifest.json: not valid JSON: " + e.what());
  }
  return m.contains("generator") ? m["generator"] : json(nullptr);
}

// The specs a manifest's generator describes: the committed set, or the random set it names.
std::vector<GoldenSpec> specs_of(const json& generator, const std::string& dir) {
  if (generator.is_null()) return golden_set();
  try {
    if (generator.contains("scale")) {  // a scale set: the cases of one tier (golden/scale_golden.hpp)
      const std::string tier = generator.at("scale").get<std::string>();
      const std::optional<conformance::ScaleTier> t = conformance::parse_scale_tier(tier);
      if (!t) throw Error(dir + "/manifest.json: generator.scale = \"" + tier + "\": the tiers are " + conformance::scale_tier_names());
      return scale_golden_specs(*t, generator.value("filter", std::string()));
    }
    const conformance::CapabilitiesFile caps = conformance::capabilities_from_json(generator.at("capabilities"), dir + "/manifest.json generator");
    return random_golden_set(generator.at("random").get<int>(), generator.at("seed").get<uint64_t>(), caps.capabilities);
  } catch (const json::exception& e) {
    throw Error(dir + "/manifest.json: generator " + generator.dump() + ": " + e.what());
  }
}

// An entry's "requires" (format 2): {"spec": "1.1", "golden_format_version": 2, "capabilities": ["rollback"]}.
void read_requires(const json& r, const std::string& at, const std::string& manifest_version, ManifestEntry* e) {
  if (!r.is_object()) throw Error(at + ": must be an object with spec, golden_format_version and capabilities");
  for (const auto& [key, value] : r.items()) {
    (void)value;
    if (key != "spec" && key != "golden_format_version" && key != "capabilities") {
      throw Error(at + "." + key + ": unknown field (allowed: spec, golden_format_version, capabilities)");
    }
  }
  const json& v = r.at("golden_format_version");
  if (!v.is_number_integer() || v.get<int64_t>() < 1) throw Error(at + ".golden_format_version = " + v.dump() + ": must be 1 or 2");
  if (v.get<int64_t>() > 2) {
    throw Error(at + ".golden_format_version = " + v.dump() + ": case " + e->name +
                " needs a newer ringkv (this one reads golden format versions 1 and 2)");
  }
  e->golden_format_version = static_cast<int>(v.get<int64_t>());
  if (e->golden_format_version == 2 && manifest_version != kGoldenFormatVersion2) {
    throw Error(at + ".golden_format_version = 2 in a manifest of golden_format_version " + manifest_version);
  }
  const json& spec = r.at("spec");
  const std::string want_spec = e->golden_format_version == 2 ? kSpecVersion11 : kSpecVersion;
  if (!spec.is_string() || spec.get<std::string>() != want_spec) {
    throw Error(at + ".spec = " + spec.dump() + ": golden format " + std::to_string(e->golden_format_version) +
                " cases are spec \"" + want_spec + "\"");
  }
  e->spec_version = want_spec;
  const json& caps = r.at("capabilities");
  if (!caps.is_array()) throw Error(at + ".capabilities: must be an array of capability names, e.g. [\"rollback\"]");
  for (const json& x : caps) {
    if (!x.is_string() || x.get<std::string>() != "rollback") {
      throw Error(at + ".capabilities: " + x.dump() + " is not a capability this ringkv knows (allowed: \"rollback\")");
    }
    e->required_capabilities.push_back(x.get<std::string>());
  }
}

}  // namespace

void generate_golden_set(const std::string& dir, void (*progress)(const std::string&, size_t)) {
  write_golden_set(dir, golden_set(), nullptr, progress);
}

void generate_random_golden_set(const std::string& dir, int n, uint64_t seed, const Capabilities& caps,
                                void (*progress)(const std::string&, size_t)) {
  write_golden_set(dir, random_golden_set(n, seed, caps), random_generator(n, seed, caps), progress);
}

void generate_scale_golden_set(const std::string& dir, conformance::ScaleTier tier, const std::string& filter,
                               void (*progress)(const std::string&, size_t)) {
  json generator{{"scale", conformance::to_string(tier)}};
  if (!filter.empty()) generator["filter"] = filter;
  write_golden_set(dir, scale_golden_specs(tier, filter), generator, progress);
}

std::string golden_set_generator(const std::string& dir) {
  const json g = read_generator(dir);
  if (g.is_null()) return "";
  if (g.contains("scale")) {
    const std::string filter = g.value("filter", std::string());
    std::string quoted = "'";  // a POSIX shell word
    for (char ch : filter) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return "ringkv golden generate --scale " + g.at("scale").get<std::string>() +
           (filter.empty() ? "" : " --filter " + quoted + "'") + " --out " + dir;
  }
  const bool full = g.at("capabilities") == conformance::capabilities_to_json(Capabilities{});
  return "ringkv golden generate --random " + std::to_string(g.at("random").get<int>()) + " --seed " +
         std::to_string(g.at("seed").get<uint64_t>()) + (full ? "" : " --capabilities CAPS.json") + " --out " + dir +
         (full ? "" : "  # CAPS.json: the \"capabilities\" of " + dir + "/manifest.json's \"generator\"");
}

std::vector<ManifestEntry> read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / "manifest.json").string();
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  json m;
  try {
    m = json::parse(bytes.begin(), bytes.end());
  } catch (const json::exception& e) {
    throw Error(path + ": not valid JSON: " + e.what());
  }
  std::vector<ManifestEntry> out;
  try {
    if (!m.is_object()) throw Error("must be a JSON object with format, golden_format_version, spec_version and cases");
    if (const json& f = m.contains("format") ? m["format"] : json(); f != "ringkv-golden-manifest") {
      throw Error("format = " + (f.is_null() ? std::string("(missing)") : f.dump()) + ": expected \"ringkv-golden-manifest\"");
    }
    const json& v = m.contains("golden_format_version") ? m["golden_format_version"] : json();
    if (!v.is_string()) {
      throw Error("golden_format_version = " + (v.is_null() ? std::string("(missing)") : v.dump()) +
                  ": must be a string, \"1\" or \"2\" (a version is written as a JSON string)");
    }
    const std::string version = v.get<std::string>();
    if (version != kGoldenFormatVersion && version != kGoldenFormatVersion2) {
      throw Error("golden_format_version " + m.at("golden_format_version").dump() +
                  ": this ringkv reads versions 1 and 2 (a newer ringkv wrote this manifest)");
    }
    if (!m.contains("cases") || !m["cases"].is_array()) throw Error("cases: missing or not an array of case entries");
    std::map<std::string, size_t> first_listed;  // name -> index in cases
    for (const json& c : m.at("cases")) {
      const std::string at = "cases[" + std::to_string(out.size()) + "]";
      if (!c.is_object()) throw Error(at + ": must be an object (each case has name, id, file, sha256, bytes, classes)");
      for (const char* key : {"name", "id", "file", "sha256", "bytes", "classes"}) {
        if (!c.contains(key)) throw Error(at + "." + key + ": missing (each case has name, id, file, sha256, bytes, classes)");
      }
      for (const char* key : {"name", "id", "file", "sha256"}) {
        if (!c[key].is_string()) throw Error(at + "." + key + " = " + c[key].dump() + ": must be a string");
      }
      if (const json& cl = c["classes"];
          !cl.is_array() || !std::all_of(cl.begin(), cl.end(), [](const json& x) { return x.is_string(); })) {
        throw Error(at + ".classes = " + cl.dump() + ": must be an array of class names");
      }
      if (const auto [it, fresh] = first_listed.emplace(c["name"].get<std::string>(), out.size()); !fresh) {
        throw Error(at + ".name = " + c["name"].dump() + ": listed twice (also cases[" + std::to_string(it->second) +
                    "]); each case is listed once");
      }
      ManifestEntry e;
      // A float would reach get<int64_t> as an out-of-range conversion (undefined behaviour).
      if (const json& b = c.at("bytes"); !b.is_number_unsigned() || b.get<uint64_t>() > uint64_t{INT64_MAX}) {
        throw Error("cases[" + std::to_string(out.size()) + "].bytes = " + b.dump() +
                    ": must be the file's size in bytes, an integer from 0 to 2^63 - 1");
      }
      e.name = c.at("name").get<std::string>();
      e.id = c.at("id").get<std::string>();
      e.file = c.at("file").get<std::string>();
      // Checked before anything opens it: a case file lies inside the golden folder, named relative to it.
      if (const fs::path f(e.file); f.empty() || f.has_root_name() || f.has_root_directory() ||
                                    *f.lexically_normal().begin() == "..") {
        throw Error(at + ".file = " + c["file"].dump() +
                    ": must be a path inside the golden folder, relative to it (e.g. \"cases/" + e.name +
                    ".safetensors\"); not opened");
      }
      e.sha256 = c.at("sha256").get<std::string>();
      e.classes = c.at("classes").get<std::vector<std::string>>();
      // "level" and "features" (issue 14) follow from the classes; a manifest that states them must agree.
      e.level = case_level(e.classes);
      e.features = case_features(e.classes);
      if (c.contains("level") && c.at("level").get<std::string>() != e.level) {
        throw Error("case " + e.name + ": level " + c.at("level").dump() + " but its classes make it " + e.level);
      }
      if (c.contains("features") && c.at("features").get<std::vector<std::string>>() != e.features) {
        throw Error("case " + e.name + ": features " + c.at("features").dump() + " do not match its classes");
      }
      e.bytes = c.at("bytes").get<int64_t>();
      if (c.contains("requires")) read_requires(c.at("requires"), "cases[" + std::to_string(out.size()) + "].requires", version, &e);
      out.push_back(std::move(e));
    }
  } catch (const std::exception& e) {
    throw Error(path + ": " + e.what());
  }
  return out;
}

GoldenCase load_manifest_case(const std::string& dir, const ManifestEntry& e) {
  const fs::path file(e.file);
  const std::string path = file.is_relative() ? (fs::path(dir) / file).string() : e.file;
  std::vector<uint8_t> bytes;
  try {
    bytes = read_file_bytes(path);
  } catch (const Error& err) {
    throw GoldenInputError(std::string("unusable golden case: ") + err.what() + " (manifest.json: the file of case " +
                           e.name + ")");
  }
  if (static_cast<int64_t>(bytes.size()) != e.bytes) {
    throw GoldenInputError("unusable golden case: " + path + " has " + std::to_string(bytes.size()) +
                           " bytes, its manifest says " + std::to_string(e.bytes) + " (the file is corrupt or not the one listed)");
  }
  if (const std::string hash = sha256_hex(bytes); hash != e.sha256) {
    throw GoldenInputError("unusable golden case: " + path + " has sha256 " + hash + ", its manifest says " + e.sha256 +
                           " (the file is corrupt or not the one listed)");
  }
  GoldenCase g;
  try {
    g = golden_from_safetensors(parse_safetensors(bytes, path));
  } catch (const std::exception& err) {
    throw GoldenInputError(std::string("unusable golden case: ") + err.what());
  }
  if (g.format_version() != e.golden_format_version) {
    throw GoldenInputError("unusable golden case: " + path + " is golden format " + std::to_string(g.format_version()) +
                           ", its manifest entry requires format " + std::to_string(e.golden_format_version));
  }
  return g;
}

std::vector<std::string> verify_golden_set(const std::string& dir) {
  std::vector<std::string> problems;
  std::vector<ManifestEntry> manifest;
  try {
    manifest = read_manifest(dir);
  } catch (const Error& e) {
    return {e.what()};
  }
  json generator;
  std::vector<GoldenSpec> specs;
  try {
    generator = read_generator(dir);
    specs = specs_of(generator, dir);
  } catch (const Error& e) {
    return {e.what()};
  }
  std::map<std::string, const GoldenSpec*> by_name;
  for (const GoldenSpec& s : specs) by_name[s.name] = &s;
  std::set<std::string> listed;
  for (const ManifestEntry& e : manifest) listed.insert(e.name);
  for (const GoldenSpec& s : specs) {
    if (!listed.count(s.name)) problems.push_back("case " + s.name + " of golden_set() is missing from the manifest");
  }
  std::vector<std::vector<uint8_t>> regenerated(specs.size());
  const MakeCase make = maker_of(generator);
  for (size_t i = 0; i < specs.size(); ++i) regenerated[i] = serialize_golden(make(specs[i]));
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < specs.size(); ++i) index[specs[i].name] = i;
  for (const ManifestEntry& e : manifest) {
    const auto it = by_name.find(e.name);
    if (it == by_name.end()) {
      problems.push_back("the manifest lists " + e.name + ", which golden_set() does not define");
      continue;
    }
    const std::string path = (fs::path(dir) / e.file).string();
    std::vector<uint8_t> bytes;
    try {
      bytes = read_file_bytes(path);
    } catch (const Error& err) {
      problems.push_back(err.what());
      continue;
    }
    const std::string hash = sha256_hex(bytes);
    if (static_cast<int64_t>(bytes.size()) != e.bytes) {
      problems.push_back(path + ": " + std::to_string(bytes.size()) + " bytes, the manifest says " + std::to_string(e.bytes));
    }
    if (hash != e.sha256) problems.push_back(path + ": sha256 " + hash + ", the manifest says " + e.sha256);
    const std::vector<uint8_t>& fresh = regenerated[index[e.name]];
    if (fresh != bytes) {
      size_t at = 0;
      while (at < fresh.size() && at < bytes.size() && fresh[at] == bytes[at]) ++at;
      problems.push_back(path + ": differs from a fresh regeneration (sha256 " + sha256_hex(fresh) + ", " +
                         std::to_string(fresh.size()) + " bytes; first difference at byte " + std::to_string(at) + ")");
    }
    if (e.id != it->second->c.id()) problems.push_back(e.name + ": the manifest id differs from the case's id");
    if (e.classes != it->second->classes) problems.push_back(e.name + ": the manifest classes differ from golden_set()'s");
    try {
      (void)golden_from_safetensors(parse_safetensors(bytes, path));
    } catch (const std::exception& err) {
      problems.push_back(err.what());
    }
  }
  // The manifest itself, byte for byte.
  const std::string want = manifest_text(entries_for(specs, &regenerated), generator);
  const std::vector<uint8_t> have = read_file_bytes((fs::path(dir) / "manifest.json").string());
  if (std::string(have.begin(), have.end()) != want) problems.push_back(dir + "/manifest.json differs from a fresh regeneration");
  // Files nobody lists.
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(dir) / "cases", ec)) {
    const std::string f = "cases/" + e.path().filename().string();
    bool known = false;
    for (const ManifestEntry& m : manifest) known = known || m.file == f;
    if (!known) problems.push_back(dir + "/" + f + " is not listed in the manifest");
  }
  return problems;
}

}  // namespace ringkv::golden
