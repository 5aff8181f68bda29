// ringkv golden: the safetensors form of golden cases and of outputs files (docs/golden-format.md).
#include "golden/golden.hpp"
#include "golden/detail.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "support/config_json.hpp"

namespace ringkv::golden {

using conformance::Case;
using conformance::ResetPlan;
using conformance::RollbackPlan;
using conformance::StepPlan;
using nlohmann::json;

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Safetensors form.

namespace {

struct Names {
  static constexpr const char* score[6] = {"score.n_keys", "score.max_abs_dot", "score.max_abs_score",
                                           "score.max_tie_dot", "score.max_qk_norm", "score.max_angle"};
  static constexpr const char* dim[5] = {"dim.spread", "dim.abs_mass", "dim.tie_mass", "dim.abs_out", "dim.max_abs_v"};
};

// The bound-input fields in the order of Names (G: GoldenCase or const GoldenCase).
template <class G>
auto score_field(G& g, int i) {
  const std::array f{&g.n_keys, &g.max_abs_dot, &g.max_abs_score, &g.max_tie_dot, &g.max_qk_norm, &g.max_angle};
  return f[static_cast<size_t>(i)];
}
template <class G>
auto dim_field(G& g, int i) {
  const std::array f{&g.spread, &g.abs_mass, &g.tie_mass, &g.abs_out, &g.max_abs_v};
  return f[static_cast<size_t>(i)];
}

std::vector<int32_t> schedule_tensor(const Case& c) {
  std::vector<int32_t> s;
  for (const StepPlan& st : c.steps) {
    for (int64_t n : st.tokens) s.push_back(static_cast<int32_t>(n));
  }
  return s;
}

std::vector<int64_t> resets_tensor(const Case& c) {
  std::vector<int64_t> r;
  for (size_t st = 0; st < c.steps.size(); ++st) {
    for (const ResetPlan& p : c.steps[st].resets) {
      r.insert(r.end(), {static_cast<int64_t>(st), p.sequence, p.start_position, p.stream});
    }
  }
  return r;
}

// Format 2: per rollback, step, sequence, n_tokens, stream (rollbacks come first in their step).
std::vector<int64_t> rollbacks_tensor(const Case& c) {
  std::vector<int64_t> r;
  for (size_t st = 0; st < c.steps.size(); ++st) {
    for (const RollbackPlan& p : c.steps[st].rollbacks) {
      r.insert(r.end(), {static_cast<int64_t>(st), p.sequence, p.n_tokens, p.stream});
    }
  }
  return r;
}

size_t num_rollbacks(const Case& c) {
  size_t n = 0;
  for (const StepPlan& st : c.steps) n += st.rollbacks.size();
  return n;
}

// Format 2: per step, 1 where the spec refuses it.
std::vector<int32_t> refused_tensor(const std::vector<uint8_t>& refused) { return {refused.begin(), refused.end()}; }

std::vector<int64_t> rows_tensor(const std::vector<GoldenRow>& rows) {
  std::vector<int64_t> r;
  for (const GoldenRow& x : rows) r.insert(r.end(), {x.step, x.sequence, x.index, x.stream});
  return r;
}

std::vector<int64_t> positions_tensor(const std::vector<GoldenRow>& rows) {
  std::vector<int64_t> r;
  for (const GoldenRow& x : rows) r.push_back(x.position);
  return r;
}

std::vector<int64_t> chunks_tensor(const std::vector<GoldenChunk>& chunks) {
  std::vector<int64_t> r;
  for (const GoldenChunk& x : chunks) r.insert(r.end(), {x.step, x.sequence, x.row_begin, x.n_tokens});
  return r;
}

size_t num_resets(const Case& c) {
  size_t n = 0;
  for (const StepPlan& st : c.steps) n += st.resets.size();
  return n;
}

}  // namespace

StFile golden_to_safetensors(const GoldenCase& g) {
  const Case& c = g.c;
  const Dims d = dims_of(c, g.num_rows());
  StFile f;
  f.source = g.name;
  f.metadata["format"] = kGoldenFormat;
  const bool v2 = g.format_version() == 2;  // a case without rollbacks or a reserve stays format 1, byte for byte
  f.metadata["golden_format_version"] = v2 ? kGoldenFormatVersion2 : kGoldenFormatVersion;
  f.metadata["spec_version"] = v2 ? kSpecVersion11 : kSpecVersion;
  f.metadata["name"] = g.name;
  f.metadata["id"] = c.id();
  f.metadata["case"] = conformance::case_to_json(c).dump();
  f.metadata["classes"] = json(g.classes).dump();
  // Spec 1.2 (§3.1): which rows repeat an earlier row's inputs; a key that readers before it ignore.
  if (const std::string runs = repeats_to_json(g.repeat_of); !runs.empty()) f.metadata["repeats"] = runs;
  auto& t = f.tensors;
  t["schedule"] = make_tensor({d.T, d.B}, schedule_tensor(c));
  if (num_resets(c) > 0) t["resets"] = make_tensor({static_cast<int64_t>(num_resets(c)), 4}, resets_tensor(c));
  if (v2) {
    t["rollbacks"] = make_tensor({static_cast<int64_t>(num_rollbacks(c)), 4}, rollbacks_tensor(c));
    t["refused"] = make_tensor({d.T}, refused_tensor(g.refused));
  }
  t["rows"] = make_tensor({d.R, 4}, rows_tensor(g.rows));
  t["positions"] = make_tensor({d.R}, positions_tensor(g.rows));
  t["chunks"] = make_tensor({static_cast<int64_t>(g.chunks.size()), 4}, chunks_tensor(g.chunks));
  t["q"] = make_tensor({d.L, d.R, d.Hq, d.D}, g.q);
  t["k"] = make_tensor({d.L, d.R, d.Hkv, d.D}, g.k);
  t["v"] = make_tensor({d.L, d.R, d.Hkv, d.D}, g.v);
  if (!g.scale_case.empty()) {  // a scale case's inputs: the checker regenerates the oracle (docs/scale.md)
    f.metadata["scale_case"] = g.scale_case;
    f.metadata["sample_every"] = std::to_string(g.sample_every);
    return f;
  }
  t["expected"] = make_tensor({d.L, d.R, d.Hq, d.D}, g.expected);
  t["expected_f64"] = make_tensor({d.L, d.R, d.Hq, d.D}, g.expected_f64);
  for (int i = 0; i < 6; ++i) t[Names::score[i]] = make_tensor({d.L, d.R, d.Hq}, *score_field(g, i));
  for (int i = 0; i < 5; ++i) t[Names::dim[i]] = make_tensor({d.L, d.R, d.Hq, d.D}, *dim_field(g, i));
  for (int pass = 0; pass < 2; ++pass) {
    const GoldenStored& s = pass == 0 ? g.k_stored : g.v_stored;
    const std::string p = pass == 0 ? "k" : "v";
    const int64_t spr = pass == 0 ? d.k_spr : d.v_spr;
    t[p + "_stored"] = make_tensor({d.L, d.R, d.Hkv, d.D}, s.value);
    if (s.codes.empty()) continue;
    t[p + "_codes"] = make_tensor({d.L, d.R, d.Hkv, d.D}, s.codes);
    t[p + "_tie"] = make_tensor({d.L, d.R, d.Hkv, d.D}, s.tie);
    if (spr > 0) t[p + "_scales"] = make_tensor({d.L, d.R, d.Hkv, spr}, s.scales);
  }
  return f;
}

std::vector<uint8_t> serialize_golden(const GoldenCase& g) { return serialize_safetensors(golden_to_safetensors(g)); }

void write_golden(const std::string& path, const GoldenCase& g) { write_file_bytes(path, serialize_golden(g)); }

namespace {

std::string nonfinite_text(double x) { return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"; }

// The index [i0, i1, ...] of element `flat` of a row-major tensor of this shape.
std::vector<int64_t> multi_index(const std::vector<int64_t>& shape, size_t flat) {
  std::vector<int64_t> index(shape.size());
  auto rest = static_cast<int64_t>(flat);
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] > 0 ? rest % shape[d] : 0;
    rest = shape[d] > 0 ? rest / shape[d] : 0;
  }
  return index;
}

// Range checks of the schedule that case_from_json relies on (it indexes by the reset's sequence).
void precheck_schedule(const json& j) {
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object() || !j["config"].contains("batch") ||
      !j["config"]["batch"].is_number_integer() || !j.contains("steps") || !j["steps"].is_array()) {
    return;  // case_from_json names what is missing
  }
  const int64_t B = j["config"]["batch"].get<int64_t>();
  for (size_t i = 0; i < j["steps"].size(); ++i) {
    const json& st = j["steps"][i];
    const std::string p = "case.steps[" + std::to_string(i) + "]";
    if (!st.is_object()) throw Error(p + ": must be an object");
    if (st.contains("resets") && st["resets"].is_array()) {
      for (const json& r : st["resets"]) {
        if (!r.is_object() || !r.contains("sequence") || !r["sequence"].is_number_integer() ||
            r["sequence"].get<int64_t>() < 0 || r["sequence"].get<int64_t>() >= B) {
          throw Error(p + ".resets: every reset needs a sequence in [0, batch = " + std::to_string(B) + ")");
        }
        if (!r.contains("stream") || !r["stream"].is_number_integer() || r["stream"].get<int64_t>() < 0 ||
            r["stream"].get<int64_t>() > (int64_t{1} << 30)) {
          throw Error(p + ".resets: every reset needs a stream in [0, 2^30]");
        }
      }
    }
    if (st.contains("rollbacks") && st["rollbacks"].is_array()) {
      for (size_t k = 0; k < st["rollbacks"].size(); ++k) {
        const json& r = st["rollbacks"][k];
        const std::string rp = p + ".rollbacks[" + std::to_string(k) + "]";
        if (!r.is_object() || !r.contains("sequence") || !r["sequence"].is_number_integer() ||
            r["sequence"].get<int64_t>() < 0 || r["sequence"].get<int64_t>() >= B) {
          throw Error(rp + ".sequence: must be a sequence in [0, batch = " + std::to_string(B) + ")");
        }
        if (!r.contains("stream") || !r["stream"].is_number_integer() || r["stream"].get<int64_t>() < 0 ||
            r["stream"].get<int64_t>() > (int64_t{1} << 30)) {
          throw Error(rp + ".stream: must be a stream in [0, 2^30]");
        }
        if (!r.contains("n_tokens") || !r["n_tokens"].is_number_integer() || r["n_tokens"].get<int64_t>() < 1 ||
            r["n_tokens"].get<int64_t>() > (int64_t{1} << 40)) {
          throw Error(rp + ".n_tokens: must be an integer >= 1 (at most the tokens the sequence holds)");
        }
      }
    }
    if (st.contains("tokens") && st["tokens"].is_array()) {
      for (const json& n : st["tokens"]) {
        if (n.is_number_integer() && n.get<int64_t>() < 0) throw Error(p + ".tokens: counts must be >= 0");
      }
    }
  }
}

// Every tensor of a golden file is one the format names.
void reject_unexpected(const StFile& f, const std::set<std::string>& names, const std::string& version) {
  for (const auto& [name, t] : f.tensors) {
    (void)t;
    if (!names.count(name)) {
      throw Error(f.source + ": unexpected tensor '" + name + "' (not part of golden format " + version +
                  (f.metadata.count("scale_case") ? ", a scale case holds the schedule and the inputs only)" : ")"));
    }
  }
}

// A scale case's __metadata__ scale_case and sample_every (docs/scale.md "Scale cases in files").
void read_scale_metadata(const StFile& f, GoldenCase* g) {
  g->scale_case = f.meta("scale_case");
  if (g->scale_case.rfind("scale/", 0) != 0) {
    throw Error(f.source + ": __metadata__ scale_case = \"" + g->scale_case + "\": must name a scale case, \"scale/<tier>/<shape>\"");
  }
  const std::string& every = f.meta("sample_every");
  try {
    size_t used = 0;
    g->sample_every = std::stoll(every, &used);
    if (used != every.size() || g->sample_every < 1) throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw Error(f.source + ": __metadata__ sample_every = \"" + every + "\": must be an integer >= 1");
  }
}

}  // namespace

GoldenCase golden_from_safetensors(const StFile& f) {
  const std::string& src = f.source;
  const auto bad = [&](const std::string& why) -> Error { return Error(src + ": " + why); };
  if (f.meta("format") != kGoldenFormat) {
    throw bad("__metadata__ format = \"" + f.meta("format") + "\": not a ringkv golden case (expected \"" + kGoldenFormat + "\")");
  }
  const std::string version = f.meta("golden_format_version");
  if (version != kGoldenFormatVersion && version != kGoldenFormatVersion2) {
    throw bad("golden_format_version " + version + ": this ringkv reads versions 1 and 2 (a newer ringkv wrote this case)");
  }
  const bool v2 = version == kGoldenFormatVersion2;
  const std::string want_spec = v2 ? kSpecVersion11 : kSpecVersion;
  if (f.meta("spec_version") != want_spec) {
    throw bad("spec_version " + f.meta("spec_version") + ": golden format " + version + " holds spec " + want_spec +
              " cases (this ringkv implements spec " + kSpecImplemented + ")");
  }
  GoldenCase g;
  g.name = f.meta("name");
  try {
    const json cj = json::parse(f.meta("case"));
    precheck_schedule(cj);
    g.c = conformance::case_from_json(cj);
  } catch (const std::exception& e) {
    throw bad(std::string("__metadata__ 'case' is not a valid case: ") + e.what());
  }
  {  // the rows tensor bounds the schedule (so a corrupt schedule cannot ask for huge tables)
    int64_t total = 0;
    for (const StepPlan& st : g.c.steps) {
      for (int64_t n : st.tokens) total += n;
    }
    const StTensor& rt = f.get("rows");
    if (rt.shape.size() != 2 || rt.shape[0] != total) {
      throw bad("tensor 'rows' has shape " + shape_string(rt.shape) + ", but the schedule appends " + std::to_string(total) +
                " tokens (expected [" + std::to_string(total) + ", 4])");
    }
  }
  try {
    const json cl = json::parse(f.meta("classes"));
    if (!cl.is_array()) throw Error("not an array");
    for (const json& x : cl) {
      if (!x.is_string()) throw Error("an entry is not a string");
      g.classes.push_back(x.get<std::string>());
    }
  } catch (const std::exception& e) {
    throw bad(std::string("__metadata__ 'classes' must be a JSON array of strings: ") + e.what());
  }
  if (f.meta("id") != g.c.id()) {
    throw bad("__metadata__ id \"" + f.meta("id") + "\" does not match the case it describes (\"" + g.c.id() + "\")");
  }
  if (v2 != (format_version_of(g.c) == 2)) {
    throw bad(v2 ? std::string("golden_format_version 2, but the case has no rollback events and no rollback_reserve (such a "
                               "case is format 1)")
                 : std::string("golden_format_version 1 cannot hold rollback events (case.steps[*].rollbacks) or a "
                               "rollback_reserve: this case is format 2, spec 1.1"));
  }
  try {  // format 2: a schedule a reader can trust (counts, fresh streams, refusals): else a corrupt golden
    g.refused = rollback_schedule(g.c);
  } catch (const Error& e) {
    throw bad(std::string("__metadata__ 'case' has an invalid rollback schedule: ") + e.what());
  }
  layout_rows(g.c, g.refused, &g.rows, &g.chunks);
  const Dims d = dims_of(g.c, g.num_rows());
  const Case& c = g.c;
  std::set<std::string> expected_names;
  const auto take = [&]<typename T>(const std::string& name, std::vector<int64_t> shape, std::vector<T>* out) {
    expected_names.insert(name);
    if (!f.has(name)) {
      throw bad("tensor '" + name + "' is missing: golden format " + version + " holds it as " +
                to_string(st_dtype_of<T>()) + " " + shape_string(shape));
    }
    *out = f.values<T>(name, shape);
    if constexpr (std::is_floating_point_v<T>) {  // inputs, expected values, bound inputs, stored values
      for (size_t i = 0; i < out->size(); ++i) {
        if (!std::isfinite((*out)[i])) {
          throw bad("tensor '" + name + "' holds " + nonfinite_text((*out)[i]) + " at " + shape_string(multi_index(shape, i)) +
                    ": every value of a golden case is finite");
        }
      }
    }
  };
  const auto same = [&]<typename T>(const std::string& name, std::vector<int64_t> shape, const std::vector<T>& want,
                                    const char* what) {
    std::vector<T> got;
    take(name, std::move(shape), &got);
    if (got != want) throw bad("tensor '" + name + "' does not match the " + std::string(what) + " in __metadata__ 'case'");
  };
  same("schedule", {d.T, d.B}, schedule_tensor(c), "schedule");
  if (num_resets(c) > 0) same("resets", {static_cast<int64_t>(num_resets(c)), 4}, resets_tensor(c), "resets");
  if (v2) {
    same("rollbacks", {static_cast<int64_t>(num_rollbacks(c)), 4}, rollbacks_tensor(c), "rollbacks");
    std::vector<int32_t> refused;
    take("refused", {d.T}, &refused);
    for (size_t st = 0; st < refused.size(); ++st) {
      if (refused[st] != static_cast<int32_t>(g.refused[st])) {
        throw bad("tensor 'refused' says step " + std::to_string(st) + (refused[st] ? " is refused" : " is honoured") +
                  ", but spec 1.1 §5.1.2 " + (g.refused[st] ? "refuses" : "honours") + " its rollbacks (" +
                  (refused[st] == 0 || refused[st] == 1 ? std::string("the file contradicts the rule")
                                                        : "it holds " + std::to_string(refused[st]) + ", not 0 or 1") +
                  ")");
      }
    }
  }
  same("rows", {d.R, 4}, rows_tensor(g.rows), "schedule");
  same("positions", {d.R}, positions_tensor(g.rows), "start positions and schedule");
  same("chunks", {static_cast<int64_t>(g.chunks.size()), 4}, chunks_tensor(g.chunks), "schedule");
  take("q", {d.L, d.R, d.Hq, d.D}, &g.q);
  take("k", {d.L, d.R, d.Hkv, d.D}, &g.k);
  take("v", {d.L, d.R, d.Hkv, d.D}, &g.v);
  if (f.metadata.count("scale_case")) {  // a scale case's inputs: no expected outputs (docs/scale.md)
    read_scale_metadata(f, &g);
    reject_unexpected(f, expected_names, version);
    return g;
  }
  take("expected", {d.L, d.R, d.Hq, d.D}, &g.expected);
  take("expected_f64", {d.L, d.R, d.Hq, d.D}, &g.expected_f64);
  for (int i = 0; i < 6; ++i) take(Names::score[i], {d.L, d.R, d.Hq}, score_field(g, i));
  for (int i = 0; i < 5; ++i) take(Names::dim[i], {d.L, d.R, d.Hq, d.D}, dim_field(g, i));
  for (int pass = 0; pass < 2; ++pass) {
    GoldenStored& s = pass == 0 ? g.k_stored : g.v_stored;
    const KvFormat& fm = pass == 0 ? c.config.k_format : c.config.v_format;
    const std::string p = pass == 0 ? "k" : "v";
    const int64_t spr = pass == 0 ? d.k_spr : d.v_spr;
    take(p + "_stored", {d.L, d.R, d.Hkv, d.D}, &s.value);
    if (fm.dtype != DType::int8) continue;
    take(p + "_codes", {d.L, d.R, d.Hkv, d.D}, &s.codes);
    take(p + "_tie", {d.L, d.R, d.Hkv, d.D}, &s.tie);
    for (uint8_t x : s.tie) {
      if (x > 1) throw bad("tensor '" + p + "_tie' holds " + std::to_string(x) + ": a tie mask holds 0 or 1");
    }
    if (spr > 0) take(p + "_scales", {d.L, d.R, d.Hkv, spr}, &s.scales);
  }
  // Spec 1.2 (§3.1): every declared repeat checked against the data, so a wrong one blames the file.
  if (const auto it = f.metadata.find("repeats"); it != f.metadata.end()) g.repeat_of = read_repeats(g, it->second, src);
  reject_unexpected(f, expected_names, version);
  for (double n : g.n_keys) {
    if (!(n >= 1)) throw bad("tensor 'score.n_keys' holds " + show_number(n) + ": every query sees at least its own key");
  }
  return g;
}

GoldenCase read_golden(const std::string& path) { return golden_from_safetensors(read_safetensors(path)); }


namespace {

// The optional tensors of an outputs file (§7): the engine's rotated q and k, and its stored cache.
constexpr const char* kOutputsTensors[] = {"out", "q_rot", "k_rot", "k_stored", "v_stored",
                                           "k_codes", "v_codes", "k_scales", "v_scales"};

}  // namespace

GoldenOutputs read_golden_outputs(const std::string& path, const GoldenCase& g) {
  const StFile f = read_safetensors(path);
  const Dims d = dims_of(g.c, g.num_rows());
  GoldenOutputs o;
  const auto meta = [&](const char* key) -> const std::string* {
    const auto it = f.metadata.find(key);
    return it == f.metadata.end() ? nullptr : &it->second;
  };
  const auto has = [&](const std::string& name) { return f.tensors.count(name) > 0; };
  if (const std::string* fm = meta("format"); fm && *fm != kOutputsFormat) {
    throw Error(path + ": __metadata__ format = \"" + *fm + "\": expected \"" + kOutputsFormat + "\"");
  }
  if (const std::string* id = meta("id"); id && *id != g.id()) {
    throw Error(path + ": outputs are for case \"" + *id + "\", not for " + g.name + " (\"" + g.id() + "\")");
  }
  for (const auto& [name, t] : f.tensors) {
    (void)t;
    if (std::find(std::begin(kOutputsTensors), std::end(kOutputsTensors), name) == std::end(kOutputsTensors)) {
      throw Error(path + ": unexpected tensor '" + name +
                  "' (an outputs file holds 'out' and optionally q_rot, k_rot, k_stored, v_stored, k_codes, v_codes, "
                  "k_scales, v_scales)");
    }
  }
  if (const std::string* e = meta("engine")) o.engine = *e;
  if (const std::string* p = meta("profile")) {
    try {
      o.profile = conformance::profile_from_json(json::parse(*p));
    } catch (const std::exception& e) {
      throw Error(path + ": __metadata__ 'profile' is not a valid precision profile: " + e.what());
    }
  }
  if (const std::string* rs = meta("refused_steps")) {  // spec 1.1: the steps the engine refused
    const std::string field = path + ": __metadata__ refused_steps = " + *rs;
    json j;
    try {
      j = json::parse(*rs);
    } catch (const json::exception&) {
      throw Error(field + ": not JSON; give the refused steps as a JSON array of step numbers, e.g. [3, 7]");
    }
    if (!j.is_array()) throw Error(field + ": must be a JSON array of step numbers, e.g. [3, 7]");
    const auto T = static_cast<int64_t>(g.c.steps.size());
    for (const json& x : j) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= T) {
        throw Error(field + ": every entry must be a step number in [0, " + std::to_string(T) + ")");
      }
      const int st = static_cast<int>(x.get<int64_t>());
      if (!o.refused_steps.empty() && st <= o.refused_steps.back()) throw Error(field + ": steps must be ascending, each once");
      if (g.c.steps[static_cast<size_t>(st)].rollbacks.empty()) {
        throw Error(field + ": step " + std::to_string(st) + " has no rollback, so there is nothing to refuse");
      }
      o.refused_steps.push_back(st);
    }
  }
  if (const std::string* u = meta("unsupported")) {
    if (u->empty()) throw Error(path + ": __metadata__ 'unsupported' is empty: give the reason the engine cannot run the case");
    o.unsupported = *u;
    return o;  // nothing else is read: the case counts as skipped
  }
  o.out = f.values<float>("out", {d.L, d.R, d.Hq, d.D});
  if (has("q_rot") != has("k_rot")) {
    throw Error(path + ": tensor '" + std::string(has("q_rot") ? "q_rot" : "k_rot") + "' without '" +
                (has("q_rot") ? "k_rot" : "q_rot") + "': the rotated q and k come together");
  }
  if (has("q_rot")) {
    o.q_rot = f.values<float>("q_rot", {d.L, d.R, d.Hq, d.D});
    o.k_rot = f.values<float>("k_rot", {d.L, d.R, d.Hkv, d.D});
  }
  for (int pass = 0; pass < 2; ++pass) {
    const std::string p = pass == 0 ? "k" : "v";
    const KvFormat& fm = pass == 0 ? g.c.config.k_format : g.c.config.v_format;
    const int64_t spr = pass == 0 ? d.k_spr : d.v_spr;
    const bool int8 = fm.dtype == DType::int8;
    if (!has(p + "_stored")) {
      for (const std::string& x : {p + "_codes", p + "_scales"}) {
        if (has(x)) throw Error(path + ": tensor '" + x + "' without '" + p + "_stored'");
      }
      continue;
    }
    GoldenStored s;
    s.value = f.values<float>(p + "_stored", {d.L, d.R, d.Hkv, d.D});
    if (!int8) {
      for (const std::string& x : {p + "_codes", p + "_scales"}) {
        if (has(x)) throw Error(path + ": tensor '" + x + "': the case's " + p + "_format is " + to_string(fm) + ", not int8");
      }
    } else {
      if (!has(p + "_codes")) throw Error(path + ": tensor '" + p + "_codes' missing: an int8 " + p + "_stored comes with its codes");
      s.codes = f.values<int8_t>(p + "_codes", {d.L, d.R, d.Hkv, d.D});
      if (spr > 0) {
        if (!has(p + "_scales")) {
          throw Error(path + ": tensor '" + p + "_scales' missing: " + to_string(fm) + " stores " + std::to_string(spr) +
                      " scale(s) per row");
        }
        s.scales = f.values<float>(p + "_scales", {d.L, d.R, d.Hkv, spr});
      } else if (has(p + "_scales")) {
        throw Error(path + ": tensor '" + p + "_scales': int8 static stores no per-row scale");
      }
    }
    (pass == 0 ? o.k_stored : o.v_stored) = std::move(s);
  }
  return o;
}

void write_golden_outputs(const std::string& path, const GoldenCase& g, const GoldenOutputs& o) {
  const Dims d = dims_of(g.c, g.num_rows());
  StFile f;
  f.source = path;
  f.metadata["format"] = kOutputsFormat;
  f.metadata["id"] = g.id();
  f.metadata["name"] = g.name;
  if (!o.engine.empty()) f.metadata["engine"] = o.engine;
  if (o.profile) f.metadata["profile"] = conformance::profile_to_json(*o.profile).dump();
  if (!o.unsupported.empty()) f.metadata["unsupported"] = o.unsupported;
  if (!o.refused_steps.empty()) f.metadata["refused_steps"] = json(o.refused_steps).dump();
  if (!o.out.empty()) f.tensors["out"] = make_tensor({d.L, d.R, d.Hq, d.D}, o.out);
  if (!o.q_rot.empty()) f.tensors["q_rot"] = make_tensor({d.L, d.R, d.Hq, d.D}, o.q_rot);
  if (!o.k_rot.empty()) f.tensors["k_rot"] = make_tensor({d.L, d.R, d.Hkv, d.D}, o.k_rot);
  for (int pass = 0; pass < 2; ++pass) {
    const std::optional<GoldenStored>& s = pass == 0 ? o.k_stored : o.v_stored;
    if (!s) continue;
    const std::string p = pass == 0 ? "k" : "v";
    const int64_t spr = pass == 0 ? d.k_spr : d.v_spr;
    f.tensors[p + "_stored"] = make_tensor({d.L, d.R, d.Hkv, d.D}, s->value);
    if (!s->codes.empty()) f.tensors[p + "_codes"] = make_tensor({d.L, d.R, d.Hkv, d.D}, s->codes);
    if (!s->scales.empty()) f.tensors[p + "_scales"] = make_tensor({d.L, d.R, d.Hkv, spr}, s->scales);
  }
  write_safetensors(path, f);
}

void write_golden_outputs(const std::string& path, const GoldenCase& g, const std::vector<float>& out,
                          const std::string& engine, const std::optional<PrecisionProfile>& profile) {
  GoldenOutputs o;
  o.out = out;
  o.engine = engine;
  o.profile = profile;
  write_golden_outputs(path, g, o);
}

}  // namespace ringkv::golden
