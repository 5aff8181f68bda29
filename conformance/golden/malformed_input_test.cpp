// Malformed input (issue 11): one row per kind of malformed file, each a mutation of a copy of a
// valid committed file (in a temporary folder, never golden/), and the exact message the reader
// must give: it names the file, the tensor or field, and what was expected. docs/reliability.md
// "Malformed input" lists every row (MalformedInputDocs.ListEveryRowOfTheTable keeps it so).
//
// Readers: a golden case file (read_golden, and through a manifest load_manifest_case, where the
// same message comes as GoldenInputError, unusable input, never the engine's fault), the manifest
// (read_manifest, load_manifest_case), a precision profile file (load_profile_set) and an outputs
// file of the file-exchange mode (read_golden_outputs, check_golden_outputs).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "golden/golden.hpp"
#include "golden/safetensors.hpp"
#include "golden/sha256.hpp"
#include "ringkv/error.hpp"
#include "support/profiles.hpp"

namespace ringkv::golden {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Bytes = std::vector<uint8_t>;

const std::string kGolden = RINGKV_GOLDEN_DIR;
const std::string kSource = RINGKV_SOURCE_DIR;
const fs::path kTmp = RINGKV_MALFORMED_TMP;

// ---------------------------------------------------------------------------------------------
// Byte-level editing of a safetensors file, independent of the reader under test: the 8-byte
// length, the header as plain JSON, the buffer.

struct Split {
  json header;
  Bytes buffer;
};

Split split(const Bytes& b) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{b.at(static_cast<size_t>(i))} << (8 * i);
  Split s;
  s.header = json::parse(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  s.buffer.assign(b.begin() + 8 + static_cast<std::ptrdiff_t>(n), b.end());
  return s;
}

Bytes join(const json& header, const Bytes& buffer) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  Bytes out(8);
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), buffer.begin(), buffer.end());
  return out;
}

std::string shape_text(const json& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i].get<int64_t>());
  return s + "]";
}

// ---------------------------------------------------------------------------------------------
// The table

enum class Reader { golden_case, manifest, profile, outputs };

// What a row's mutation works on, and the values its expected message quotes ({name} in `expected`).
struct Input {
  Bytes bytes;      // the golden case, outputs or profile file
  json manifest;    // manifest rows: the manifest of the copied set
  bool remove_case_file = false;
  std::map<std::string, std::string> vars;
};

struct Row {
  std::string id;    // the test's name and the key of the docs' table
  std::string kind;  // what is malformed
  Reader reader;
  std::string how;   // the mutation, in words (the docs' "example")
  std::function<void(Input&)> mutate;
  std::string expected;  // the whole message; {file}, {dir} and the row's vars are filled in
  bool prefix = false;   // `expected` is the stable start of the message (a JSON parser's text follows)
  std::string source = "window_1";  // the committed case the row starts from
};

// Mutations of the header JSON, the metadata, the case JSON.
std::function<void(Input&)> on_header(std::function<void(json&, Input&)> f) {
  return [f](Input& in) {
    Split s = split(in.bytes);
    f(s.header, in);
    in.bytes = join(s.header, s.buffer);
  };
}
std::function<void(Input&)> on_meta(const std::string& key, const std::string& value) {
  return on_header([key, value](json& h, Input&) { h["__metadata__"][key] = value; });
}
std::function<void(Input&)> on_case(std::function<void(json&, Input&)> f) {
  return on_header([f](json& h, Input& in) {
    json c = json::parse(h["__metadata__"]["case"].get<std::string>());
    f(c, in);
    h["__metadata__"]["case"] = c.dump();
  });
}
// Writes one element of a tensor's data (little-endian host, as the format).
template <typename T>
std::function<void(Input&)> set_element(const std::string& tensor, size_t element, T value) {
  return [=](Input& in) {
    Split s = split(in.bytes);
    const auto begin = s.header.at(tensor).at("data_offsets")[0].get<size_t>();
    std::memcpy(s.buffer.data() + begin + element * sizeof(T), &value, sizeof(T));
    in.bytes = join(s.header, s.buffer);
  };
}
std::string offsets_of(const json& h, const std::string& tensor, int i) {
  return std::to_string(h.at(tensor).at("data_offsets")[static_cast<size_t>(i)].get<uint64_t>());
}

std::vector<Row> table() {
  std::vector<Row> rows;
  // ---- the safetensors layer of a golden case file
  rows.push_back({"truncated_header_length", "truncated file (inside the 8-byte header length)", Reader::golden_case,
                  "keep the first 5 bytes", [](Input& in) { in.bytes.resize(5); },
                  "{file}: file is 5 bytes, too short for the 8-byte header length (truncated?)"});
  rows.push_back({"truncated_data", "truncated file (inside the tensor data)", Reader::golden_case,
                  "drop the last 4 bytes",
                  [](Input& in) {
                    const Split s = split(in.bytes);
                    in.vars["begin"] = offsets_of(s.header, "v_stored", 0);
                    in.vars["end"] = offsets_of(s.header, "v_stored", 1);
                    in.vars["buffer"] = std::to_string(s.buffer.size() - 4);
                    in.bytes.resize(in.bytes.size() - 4);
                  },
                  "{file}: tensor 'v_stored': data_offsets [{begin}, {end}] out of range: the buffer has {buffer} bytes "
                  "(truncated file?)"});
  rows.push_back({"header_length_beyond_file", "header length beyond the file", Reader::golden_case,
                  "set the header length to the file's size",
                  [](Input& in) {
                    const uint64_t n = in.bytes.size();
                    for (int i = 0; i < 8; ++i) in.bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
                    in.vars["n"] = std::to_string(n);
                    in.vars["after"] = std::to_string(n - 8);
                  },
                  "{file}: header length {n} exceeds the {after} bytes after it (truncated file or corrupt header length)"});
  rows.push_back({"header_not_json", "header not JSON", Reader::golden_case,
                  "replace the header's first '\"' with 'x'", [](Input& in) { in.bytes.at(9) = 'x'; },
                  "{file}: header is not valid JSON: [json.exception.parse_error.101] parse error at line 1, column 2: ",
                  true});
  rows.push_back({"header_not_an_object", "header JSON but not an object", Reader::golden_case,
                  "a header that is the JSON array [1]",
                  [](Input& in) {
                    const Split s = split(in.bytes);
                    in.bytes = join(json::array({1}), s.buffer);
                  },
                  "{file}: header does not start with '{': a safetensors header is a JSON object (not a safetensors file?)"});
  rows.push_back({"offsets_overlapping", "data offsets overlapping", Reader::golden_case,
                  "move tensor 'v' 4 bytes down, into 'score.n_keys'",
                  on_header([](json& h, Input& in) {
                    auto& off = h["v"]["data_offsets"];
                    off = {off[0].get<uint64_t>() - 4, off[1].get<uint64_t>() - 4};
                    in.vars["v"] = "[" + offsets_of(h, "v", 0) + ", " + offsets_of(h, "v", 1) + ")";
                    in.vars["n"] = "[" + offsets_of(h, "score.n_keys", 0) + ", " + offsets_of(h, "score.n_keys", 1) + ")";
                  }),
                  "{file}: tensor 'v' {v} overlaps tensor 'score.n_keys' {n} (each byte of the buffer belongs to one "
                  "tensor)"});
  rows.push_back({"offsets_out_of_order", "data offsets out of order", Reader::golden_case,
                  "swap the begin and end of tensor 'v'",
                  on_header([](json& h, Input& in) {
                    auto& off = h["v"]["data_offsets"];
                    off = {off[1], off[0]};
                    in.vars["off"] = "[" + offsets_of(h, "v", 0) + ", " + offsets_of(h, "v", 1) + "]";
                  }),
                  "{file}: tensor 'v': data_offsets {off}: end before begin (expected [begin, end] with begin <= end)"});
  rows.push_back({"offsets_out_of_range", "data offsets out of range", Reader::golden_case,
                  "move tensor 'v' 2^40 bytes up",
                  on_header([](json& h, Input& in) {
                    auto& off = h["v"]["data_offsets"];
                    off = {off[0].get<uint64_t>() + (uint64_t{1} << 40), off[1].get<uint64_t>() + (uint64_t{1} << 40)};
                    in.vars["off"] = "[" + offsets_of(h, "v", 0) + ", " + offsets_of(h, "v", 1) + "]";
                    in.vars["buffer"] = std::to_string(split(in.bytes).buffer.size());
                  }),
                  "{file}: tensor 'v': data_offsets {off} out of range: the buffer has {buffer} bytes (truncated file?)"});
  rows.push_back({"unknown_dtype", "dtype unknown", Reader::golden_case, "tensor 'q' as dtype \"F16\"",
                  on_header([](json& h, Input&) { h["q"]["dtype"] = "F16"; }),
                  "{file}: tensor 'q': unknown dtype \"F16\" (this reader knows F64, F32, I64, I32, I8, U8)"});
  rows.push_back({"wrong_dtype", "wrong dtype", Reader::golden_case,
                  "tensor 'expected' as I32 (same byte size)",
                  on_header([](json& h, Input&) { h["expected"]["dtype"] = "I32"; }),
                  "{file}: tensor 'expected' has dtype I32, expected F32"});
  rows.push_back({"shape_and_bytes_disagree", "shape and byte size disagreeing", Reader::golden_case,
                  "tensor 'q' one element longer in its last dimension",
                  on_header([](json& h, Input& in) {
                    json& shape = h["q"]["shape"];
                    shape[shape.size() - 1] = shape.back().get<int64_t>() + 1;
                    int64_t n = 4;
                    for (const json& d : shape) n *= d.get<int64_t>();
                    in.vars["shape"] = shape_text(shape);
                    in.vars["need"] = std::to_string(n);
                    in.vars["off"] = "[" + offsets_of(h, "q", 0) + ", " + offsets_of(h, "q", 1) + "]";
                    in.vars["give"] = std::to_string(h["q"]["data_offsets"][1].get<int64_t>() -
                                                     h["q"]["data_offsets"][0].get<int64_t>());
                  }),
                  "{file}: tensor 'q': shape {shape} of F32 needs {need} bytes, data_offsets {off} give {give}"});
  rows.push_back({"shape_disagrees_with_config", "shape disagreeing with the case's config", Reader::golden_case,
                  "tensor 'q' [L, R, Hq, D] as [L, R, Hq / 2, 2 D] (same byte size)",
                  on_header([](json& h, Input& in) {
                    json& shape = h["q"]["shape"];
                    in.vars["want"] = shape_text(shape);
                    shape[2] = shape[2].get<int64_t>() / 2;
                    shape[3] = shape[3].get<int64_t>() * 2;
                    in.vars["shape"] = shape_text(shape);
                  }),
                  "{file}: tensor 'q' has shape {shape}, expected {want}"});
  rows.push_back({"missing_tensor", "a missing tensor", Reader::golden_case, "remove tensor 'k_stored' and its bytes",
                  [](Input& in) {
                    StFile f = parse_safetensors(in.bytes, "copy");
                    in.vars["shape"] = shape_string(f.get("k_stored").shape);
                    f.tensors.erase("k_stored");
                    in.bytes = serialize_safetensors(f);
                  },
                  "{file}: tensor 'k_stored' is missing: golden format 1 holds it as F32 {shape}"});
  rows.push_back({"extra_tensor", "an extra tensor", Reader::golden_case, "add a tensor 'extra', U8 [1]",
                  [](Input& in) {
                    StFile f = parse_safetensors(in.bytes, "copy");
                    f.tensors["extra"] = make_tensor<uint8_t>({1}, {0});
                    in.bytes = serialize_safetensors(f);
                  },
                  "{file}: unexpected tensor 'extra' (not part of golden format 1)"});
  rows.push_back({"nan_in_expected", "NaN in expected values", Reader::golden_case,
                  "element 0 of tensor 'expected' set to NaN",
                  set_element<float>("expected", 0, std::numeric_limits<float>::quiet_NaN()),
                  "{file}: tensor 'expected' holds nan at [0, 0, 0, 0]: every value of a golden case is finite"});
  rows.push_back({"inf_in_expected_f64", "Inf in expected values", Reader::golden_case,
                  "element 17 of tensor 'expected_f64' set to -Inf",
                  set_element<double>("expected_f64", 17, -std::numeric_limits<double>::infinity()),
                  "{file}: tensor 'expected_f64' holds -inf at [0, 0, 1, 1]: every value of a golden case is finite"});
  rows.push_back({"unknown_format", "an unknown format", Reader::golden_case,
                  "__metadata__ format = \"ringkv-golden-outputs\"", on_meta("format", "ringkv-golden-outputs"),
                  "{file}: __metadata__ format = \"ringkv-golden-outputs\": not a ringkv golden case (expected "
                  "\"ringkv-golden\")"});
  rows.push_back({"unknown_golden_format_version", "an unknown golden format version", Reader::golden_case,
                  "__metadata__ golden_format_version = \"3\"", on_meta("golden_format_version", "3"),
                  "{file}: golden_format_version 3: this ringkv reads versions 1 and 2 (a newer ringkv wrote this case)"});
  rows.push_back({"unknown_spec_version", "an unknown spec version", Reader::golden_case,
                  "__metadata__ spec_version = \"2\"", on_meta("spec_version", "2"),
                  "{file}: spec_version 2: golden format 1 holds spec 1 cases (this ringkv implements spec 1.2)"});
  // ---- spec 1.2: declared repeats (__metadata__ 'repeats', golden format §3.1), on a case that has them
  const std::string with_repeats = "serving_prefixes_f32_w8_d32";  // runs [[13,0,11],...]: Hkv 1, D 32
  rows.push_back({"repeats_data_differ", "a declared repeat whose data differ", Reader::golden_case,
                  "element 421 of tensor 'k' (layer 0, row 13, head 0, dim 5) changed, row 13 being declared a repeat of row 0",
                  set_element<float>("k", 13 * 32 + 5, 0.4375f),
                  "{file}: __metadata__ repeats[0]: row 13 repeats row 0, but tensor 'k' differs at [0, 13, 0, 5]: a repeat "
                  "has bitwise-equal q, k and v in every layer (a corrupt golden: the file, not the engine)",
                  false, with_repeats});
  rows.push_back({"repeats_position_differs", "a declared repeat at another position", Reader::golden_case,
                  "__metadata__ repeats = \"[[14,0,1]]\"", on_meta("repeats", "[[14,0,1]]"),
                  "{file}: __metadata__ repeats[0]: row 14 repeats row 0, but tensor 'positions' holds 1 and 0: a repeat has "
                  "the same position (a corrupt golden: the file, not the engine)",
                  false, with_repeats});
  rows.push_back({"repeats_not_earlier", "a declared repeat of a later row", Reader::golden_case,
                  "__metadata__ repeats = \"[[13,20,1]]\"", on_meta("repeats", "[[13,20,1]]"),
                  "{file}: __metadata__ repeats[0] = [13, 20, 1]: of must lie in [0, row = 13): a repeat names an earlier "
                  "row (a corrupt golden: the file, not the engine)",
                  false, with_repeats});
  rows.push_back({"repeats_not_runs", "repeats not a list of runs", Reader::golden_case,
                  "__metadata__ repeats = \"[[13,0]]\"", on_meta("repeats", "[[13,0]]"),
                  "{file}: __metadata__ repeats[0] = [13,0]: every run is [row, of, n], three integers (a corrupt golden: "
                  "the file, not the engine)",
                  false, with_repeats});
  // ---- the case's config and schedule (__metadata__ 'case')
  rows.push_back({"config_window_zero", "config: W = 0", Reader::golden_case, "case.config.layers[0].window = 0",
                  on_case([](json& c, Input&) { c["config"]["layers"][0]["window"] = 0; }),
                  "{file}: __metadata__ 'case' is not a valid case: case.config.layers[0].window = 0: must be in "
                  "[1, 2^31 - 1]"});
  rows.push_back({"config_head_dim_odd_for_rope", "config: head_dim odd for RoPE", Reader::golden_case,
                  "case.config.head_dim = 15 (RoPE on every dim: rotary_dim 0)",
                  on_case([](json& c, Input&) { c["config"]["head_dim"] = 15; }),
                  "{file}: __metadata__ 'case' is not a valid case: case.config.layers[0].rope.rotary_dim = 0 "
                  "(= head_dim = 15): the rotary dim must be even; set rotary_dim explicitly"});
  // A typo or a newer spec's field is never ignored (issue 26): in the config, and in a layer.
  rows.push_back({"config_unknown_field", "config: an unknown field", Reader::golden_case, "case.config.wndow = 4",
                  on_case([](json& c, Input&) { c["config"]["wndow"] = 4; }),
                  "{file}: __metadata__ 'case' is not a valid case: case.config.wndow: unknown field; a case's config has "
                  "config_version, layers, num_q_heads, num_kv_heads, head_dim, batch, max_tokens, softmax_scale, "
                  "softcap, sink_logits, k_format, v_format, start_positions"});
  rows.push_back({"layer_unknown_field", "config: an unknown field in a layer", Reader::golden_case,
                  "case.config.layers[0].wndow = 4", on_case([](json& c, Input&) { c["config"]["layers"][0]["wndow"] = 4; }),
                  "{file}: __metadata__ 'case' is not a valid case: case.config.layers[0].wndow: unknown field; a layer "
                  "has window, sinks, rope, rollback_reserve"});
  const auto p0_row = [](const std::string& id, const std::string& kind, int64_t p0) {
    return Row{id, kind, Reader::golden_case, "case.config.start_positions[0] = " + std::to_string(p0),
               on_case([p0](json& c, Input& in) {
                 c["config"]["start_positions"][0] = p0;
                 const int64_t T = c["config"]["max_tokens"].get<int64_t>();
                 in.vars["T"] = std::to_string(T);
                 in.vars["hi"] = std::to_string((int64_t{1} << 31) - T);
               }),
               "{file}: __metadata__ 'case' is not a valid case: case.config.start_positions[0] = " + std::to_string(p0) +
                   ": must be in [0, {hi}] so that every position p0 + i, i < max_tokens = {T}, stays below 2^31"};
  };
  rows.push_back(p0_row("config_negative_position", "config: a negative position", -1));
  rows.push_back(p0_row("config_p0_beyond_2p31", "config: p0 beyond 2^31", int64_t{1} << 31));
  rows.push_back({"reset_negative_position", "schedule: a reset to a negative position", Reader::golden_case,
                  "case.steps[2].resets = [{sequence 0, start_position -3, stream 1}]",
                  on_case([](json& c, Input& in) {
                    c["steps"][2]["resets"] = json::array({{{"sequence", 0}, {"start_position", -3}, {"stream", 1}}});
                    const int64_t T = c["config"]["max_tokens"].get<int64_t>();
                    in.vars["T"] = std::to_string(T);
                    in.vars["hi"] = std::to_string((int64_t{1} << 31) - T);
                  }),
                  "{file}: __metadata__ 'case' is not a valid case: case.steps[2].resets[0].start_position = -3: must be "
                  "in [0, {hi}] so that every position p0 + i, i < max_tokens = {T}, stays below 2^31"});
  rows.push_back({"rollback_beyond_held", "schedule: a rollback of more tokens than the sequence holds",
                  Reader::golden_case, "case.steps[1].rollbacks[0].n_tokens = 20 more than step 0 appended",
                  on_case([](json& c, Input& in) {
                    const int64_t held = c["steps"][0]["tokens"][0].get<int64_t>();  // step 0 only appends
                    c["steps"][1]["rollbacks"][0]["n_tokens"] = held + 20;
                    in.vars["n"] = std::to_string(held + 20);
                    in.vars["held"] = std::to_string(held);
                  }),
                  "{file}: __metadata__ 'case' is not a valid case: case.steps[1].rollbacks[0].n_tokens = {n}: sequence 0 "
                  "holds {held} tokens, so it must lie in [1, {held}]",
                  false, "rollback_repeated_refused"});
  // ---- the manifest
  rows.push_back({"manifest_missing_file", "manifest naming a missing file", Reader::manifest,
                  "delete cases/window_1.safetensors", [](Input& in) { in.remove_case_file = true; },
                  "unusable golden case: {file}: cannot open for reading (manifest.json: the file of case window_1)"});
  rows.push_back({"manifest_wrong_hash", "manifest with a wrong hash", Reader::manifest,
                  "cases[0].sha256 of another file",
                  [](Input& in) {
                    in.vars["have"] = in.manifest["cases"][0]["sha256"].get<std::string>();
                    in.vars["says"] = sha256_hex(std::string("another file"));
                    in.manifest["cases"][0]["sha256"] = in.vars["says"];
                  },
                  "unusable golden case: {file} has sha256 {have}, its manifest says {says} (the file is corrupt or not "
                  "the one listed)"});
  rows.push_back({"manifest_wrong_size", "manifest with a wrong size", Reader::manifest, "cases[0].bytes one more",
                  [](Input& in) {
                    const int64_t b = in.manifest["cases"][0]["bytes"].get<int64_t>();
                    in.manifest["cases"][0]["bytes"] = b + 1;
                    in.vars["have"] = std::to_string(b);
                    in.vars["says"] = std::to_string(b + 1);
                  },
                  "unusable golden case: {file} has {have} bytes, its manifest says {says} (the file is corrupt or not "
                  "the one listed)"});
  rows.push_back({"manifest_case_twice", "manifest listing the same case twice", Reader::manifest,
                  "cases[1] a copy of cases[0]",
                  [](Input& in) { in.manifest["cases"][1] = in.manifest["cases"][0]; },
                  "{dir}/manifest.json: cases[1].name = \"window_1\": listed twice (also cases[0]); each case is listed "
                  "once"});
  rows.push_back({"manifest_missing_field", "manifest entry without a field", Reader::manifest,
                  "remove cases[0].sha256", [](Input& in) { in.manifest["cases"][0].erase("sha256"); },
                  "{dir}/manifest.json: cases[0].sha256: missing (each case has name, id, file, sha256, bytes, classes)"});
  rows.push_back({"manifest_unknown_format", "manifest of an unknown format", Reader::manifest,
                  "format = \"ringkv-golden\"", [](Input& in) { in.manifest["format"] = "ringkv-golden"; },
                  "{dir}/manifest.json: format = \"ringkv-golden\": expected \"ringkv-golden-manifest\""});
  rows.push_back({"manifest_unknown_version", "manifest of an unknown golden format version", Reader::manifest,
                  "golden_format_version = \"3\"", [](Input& in) { in.manifest["golden_format_version"] = "3"; },
                  "{dir}/manifest.json: golden_format_version \"3\": this ringkv reads versions 1 and 2 (a newer ringkv "
                  "wrote this manifest)"});
  rows.push_back({"manifest_version_a_number", "manifest whose golden format version is a number", Reader::manifest,
                  "golden_format_version = 2 (a number)", [](Input& in) { in.manifest["golden_format_version"] = 2; },
                  "{dir}/manifest.json: golden_format_version = 2: must be a string, \"1\" or \"2\" (a version is "
                  "written as a JSON string)"});
  // A case file outside the golden folder is refused before anything opens it.
  for (const auto& [id, kind, file] : {std::tuple<const char*, const char*, const char*>{
                                           "manifest_file_outside_the_folder", "manifest entry leaving the golden folder",
                                           "../../../../etc/passwd"},
                                       {"manifest_file_absolute", "manifest entry with an absolute path", "/etc/passwd"}}) {
    rows.push_back({id, kind, Reader::manifest, std::string("cases[0].file = \"") + file + "\"",
                    [file = std::string(file)](Input& in) { in.manifest["cases"][0]["file"] = file; },
                    std::string("{dir}/manifest.json: cases[0].file = \"") + file +
                        "\": must be a path inside the golden folder, relative to it (e.g. "
                        "\"cases/window_1.safetensors\"); not opened"});
  }
  // ---- a precision profile file (--profile)
  const auto on_profile = [](std::function<void(json&)> f) {
    return [f](Input& in) {
      json j = json::parse(in.bytes.begin(), in.bytes.end());
      f(j);
      const std::string s = j.dump(2);
      in.bytes.assign(s.begin(), s.end());
    };
  };
  rows.push_back({"profile_unknown_field", "profile with an unknown field", Reader::profile,
                  "profiles/f32-reference.json with profile.colour = \"red\"",
                  on_profile([](json& j) { j["profile"]["colour"] = "red"; }),
                  "{file}: profile.colour: unknown field; a profile has q_dot, q_quant, k_storage, v_storage, "
                  "accumulator, qk_accumulator, pv_accumulator, p_before_pv, output, rope_angle"});
  rows.push_back({"profile_impossible_value", "profile with an impossible value", Reader::profile,
                  "profiles/f32-reference.json with profile.q_dot = \"f12\"",
                  on_profile([](json& j) { j["profile"]["q_dot"] = "f12"; }),
                  "{file}: profile.q_dot = \"f12\": must be one of f64, f32, tf32, f16, bf16, fp8_e4m3, fp8_e5m2, "
                  "int8"});
  rows.push_back({"profile_not_json", "profile not JSON", Reader::profile, "a profile file holding `{\"q_dot\": `",
                  [](Input& in) {
                    const std::string s = "{\"q_dot\": ";
                    in.bytes.assign(s.begin(), s.end());
                  },
                  "{file}: not JSON: [json.exception.parse_error.101] parse error at line 1, column 11: ", true});
  // ---- an outputs file (--outputs) for window_1
  rows.push_back({"outputs_wrong_shape", "outputs file of the wrong shape", Reader::outputs,
                  "tensor 'out' [L, R, Hq, D] as [L, R, 2 Hq, D / 2] (same byte size)",
                  on_header([](json& h, Input& in) {
                    json& shape = h["out"]["shape"];
                    in.vars["want"] = shape_text(shape);
                    shape[2] = shape[2].get<int64_t>() * 2;
                    shape[3] = shape[3].get<int64_t>() / 2;
                    in.vars["shape"] = shape_text(shape);
                  }),
                  "{file}: tensor 'out' has shape {shape}, expected {want}"});
  rows.push_back({"outputs_wrong_dtype", "outputs file of the wrong dtype", Reader::outputs,
                  "tensor 'out' as I32 (same byte size)", on_header([](json& h, Input&) { h["out"]["dtype"] = "I32"; }),
                  "{file}: tensor 'out' has dtype I32, expected F32"});
  rows.push_back({"outputs_missing_out", "outputs file without 'out'", Reader::outputs, "remove tensor 'out'",
                  [](Input& in) {
                    StFile f = parse_safetensors(in.bytes, "copy");
                    f.tensors.erase("out");
                    in.bytes = serialize_safetensors(f);
                  },
                  "{file}: tensor 'out' is missing"});
  return rows;
}

std::string fill(std::string text, const std::map<std::string, std::string>& vars) {
  for (const auto& [k, v] : vars) {
    const std::string key = "{" + k + "}";
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + v.size())) text.replace(at, key.size(), v);
  }
  return text;
}

// A copy of two committed cases (the row's source and decode_w8) with a manifest listing only them.
struct Copy {
  fs::path dir, case_file;
  json manifest;
};

Copy make_copy(const std::string& id, const std::string& source) {
  Copy c;
  c.dir = kTmp / id;
  fs::remove_all(c.dir);
  fs::create_directories(c.dir / "cases");
  const Bytes text = read_file_bytes(kGolden + "/manifest.json");
  const json full = json::parse(text.begin(), text.end());
  c.manifest = full;
  c.manifest["cases"] = json::array();
  for (const std::string& name : {source, std::string("decode_w8")}) {
    for (const json& e : full["cases"]) {
      if (e["name"] == name) c.manifest["cases"].push_back(e);
    }
    fs::copy_file(kGolden + "/cases/" + name + ".safetensors", c.dir / "cases" / (name + ".safetensors"));
  }
  c.case_file = c.dir / "cases" / (source + ".safetensors");
  return c;
}

void write_json(const fs::path& path, const json& j) {
  const std::string s = j.dump(2) + "\n";
  write_file_bytes(path.string(), Bytes(s.begin(), s.end()));
}

// The message of the Error a call throws, or a note that it threw none.
template <typename E = Error, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a ") + typeid(E).name() + ": " + e.what() + ">";
  }
  return "<accepted>";
}

// Runs a row: the message each reader gives (several where the input reaches more than one).
struct Outcome {
  std::string expected;
  std::vector<std::pair<std::string, std::string>> messages;  // (what was called, its message)
};

Outcome run_row(const Row& row) {
  Copy copy = make_copy(row.id, row.source);
  Input in;
  in.manifest = copy.manifest;
  std::string file = copy.case_file.string();
  const std::string dir = copy.dir.string();
  const GoldenCase g = read_golden(copy.case_file.string());
  if (row.reader == Reader::golden_case || row.reader == Reader::manifest) {
    in.bytes = read_file_bytes(file);
  } else if (row.reader == Reader::profile) {
    in.bytes = read_file_bytes(kSource + "/profiles/f32-reference.json");
    file = (copy.dir / "profile.json").string();
  } else {
    file = (copy.dir / "window_1.safetensors").string();
    write_golden_outputs(file, g, g.expected, "malformed-input-test", std::nullopt);
    in.bytes = read_file_bytes(file);
  }
  row.mutate(in);
  in.vars["file"] = file;
  in.vars["dir"] = dir;
  Outcome o;
  o.expected = fill(row.expected, in.vars);
  switch (row.reader) {
    case Reader::golden_case: {
      write_file_bytes(file, in.bytes);
      o.messages.emplace_back("read_golden", error_of([&] { (void)read_golden(file); }));
      // Through a manifest whose size and hash fit the mutated file: the same message, as unusable input.
      ManifestEntry e;
      e.name = row.source;
      e.file = "cases/" + row.source + ".safetensors";
      e.bytes = static_cast<int64_t>(in.bytes.size());
      e.sha256 = sha256_hex(in.bytes);
      e.golden_format_version = g.format_version();
      const std::string m = error_of<GoldenInputError>([&] { (void)load_manifest_case(dir, e); });
      const std::string unusable = "unusable golden case: ";
      o.messages.emplace_back("load_manifest_case", m.rfind(unusable, 0) == 0 ? m.substr(unusable.size()) : m);
      break;
    }
    case Reader::manifest: {
      write_json(copy.dir / "manifest.json", in.manifest);
      if (in.remove_case_file) fs::remove(file);
      o.messages.emplace_back("read_manifest, load_manifest_case", error_of([&] {
        for (const ManifestEntry& e : read_manifest(dir)) {
          try {
            (void)load_manifest_case(dir, e);
          } catch (const GoldenInputError&) {
            throw;
          } catch (const std::exception& x) {
            throw std::runtime_error(std::string("load_manifest_case threw a non-GoldenInputError: ") + x.what());
          }
        }
      }));
      break;
    }
    case Reader::profile:
      write_file_bytes(file, in.bytes);
      o.messages.emplace_back("load_profile_set", error_of([&] { (void)conformance::load_profile_set(file); }));
      break;
    case Reader::outputs: {
      write_file_bytes(file, in.bytes);
      o.messages.emplace_back("read_golden_outputs", error_of([&] { (void)read_golden_outputs(file, g); }));
      const GoldenOutcome r = check_golden_outputs(g, file, PrecisionProfile{});
      o.messages.emplace_back("check_golden_outputs", r.passed || r.skipped ? "<passed or skipped>" : r.failure);
      break;
    }
  }
  return o;
}

// gtest prints a failing row by its id and kind.
void PrintTo(const Row& row, std::ostream* os) { *os << row.id << " (" << row.kind << ")"; }

class MalformedInputTable : public ::testing::TestWithParam<Row> {};

TEST_P(MalformedInputTable, NamesTheFileTheFieldAndWhatWasExpected) {
  const Row& row = GetParam();
  const Outcome o = run_row(row);
  for (const auto& [call, message] : o.messages) {
    if (row.prefix) {
      EXPECT_EQ(message.substr(0, o.expected.size()), o.expected) << call << " gave:\n  " << message;
    } else {
      EXPECT_EQ(message, o.expected) << call;
    }
  }
  fs::remove_all(kTmp / row.id);
}

INSTANTIATE_TEST_SUITE_P(Kinds, MalformedInputTable, ::testing::ValuesIn(table()),
                         [](const ::testing::TestParamInfo<Row>& row) { return row.param.id; });

// The copies the rows start from are valid: each row's error comes from its mutation alone.
TEST(MalformedInput, TheUnmutatedCopiesAreAccepted) {
  std::set<std::string> sources;
  for (const Row& r : table()) sources.insert(r.source);
  for (const std::string& s : sources) {
    const Copy copy = make_copy("unmutated_" + s, s);
    write_json(copy.dir / "manifest.json", copy.manifest);
    GoldenCase g;
    for (const ManifestEntry& e : read_manifest(copy.dir.string())) {
      const GoldenCase x = load_manifest_case(copy.dir.string(), e);
      if (e.name == "window_1") g = x;
    }
    if (s != "window_1") continue;
    const std::string out = (copy.dir / "window_1.safetensors").string();
    write_golden_outputs(out, g, g.expected, "malformed-input-test", std::nullopt);
    EXPECT_TRUE(check_golden_outputs(g, out, PrecisionProfile{}).passed);
    EXPECT_NO_THROW((void)conformance::load_profile_set(kSource + "/profiles/f32-reference.json"));
  }
  // Only this test's own folders: ctest runs the rows in parallel, each in its folder under kTmp.
  for (const std::string& s : sources) fs::remove_all(kTmp / ("unmutated_" + s));
}

// docs/reliability.md "Malformed input" lists exactly the rows of the table, by id.
TEST(MalformedInputDocs, ListEveryRowOfTheTable) {
  const Bytes bytes = read_file_bytes(kSource + "/docs/reliability.md");
  const std::string doc(bytes.begin(), bytes.end());
  const size_t begin = doc.find("\n## Malformed input\n");
  ASSERT_NE(begin, std::string::npos) << "docs/reliability.md has no section \"## Malformed input\"";
  const size_t end = doc.find("\n## ", begin + 1);
  const std::string section = doc.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  std::set<std::string> documented;
  for (size_t at = section.find("\n| `"); at != std::string::npos; at = section.find("\n| `", at + 1)) {
    const size_t close = section.find('`', at + 4);
    documented.insert(section.substr(at + 4, close - (at + 4)));
  }
  std::set<std::string> ids;
  for (const Row& r : table()) {
    ids.insert(r.id);
    EXPECT_TRUE(documented.count(r.id)) << "row " << r.id << " (" << r.kind << ") is not in the docs' table";
  }
  for (const std::string& d : documented) {
    if (d.rfind("cli.", 0) == 0) continue;  // the CLI-level rows name their ctest
    EXPECT_TRUE(ids.count(d)) << "the docs' table lists " << d << ", which the test's table does not have";
  }
}

// Prints the docs' table with the messages of a real run (the temporary folder shown as <dir>):
//   ringkv_golden_malformed_tests --gtest_also_run_disabled_tests --gtest_filter='*PrintDocsTable'
TEST(MalformedInputDocs, DISABLED_PrintDocsTable) {
  for (const Row& r : table()) {
    const Outcome o = run_row(r);
    std::string m = o.messages.front().second;
    const std::string dir = (kTmp / r.id).string();
    for (size_t at = m.find(dir); at != std::string::npos; at = m.find(dir)) m.replace(at, dir.size(), "<dir>");
    for (size_t at = m.find('|'); at != std::string::npos; at = m.find('|', at + 2)) m.replace(at, 1, "\\|");
    const char* reader = r.reader == Reader::golden_case ? "golden case"
                         : r.reader == Reader::manifest  ? "manifest"
                         : r.reader == Reader::profile   ? "profile"
                                                          : "outputs";
    const int exit_code = r.reader == Reader::outputs ? 1 : 2;  // an outputs file is the engine's: it fails
    std::printf("| `%s` | %s | %s: %s | `%s` | %d |\n", r.id.c_str(), r.kind.c_str(), reader, r.how.c_str(), m.c_str(),
                exit_code);
    fs::remove_all(kTmp / r.id);
  }
}

}  // namespace
}  // namespace ringkv::golden
