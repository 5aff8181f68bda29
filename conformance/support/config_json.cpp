#include "support/config_json.hpp"

#include <algorithm>
#include <iterator>
#include <sstream>

#include "ringkv/error.hpp"

namespace ringkv::conformance {
namespace {

using nlohmann::json;

// "PATH: WHY", or "PATH = VALUE: ..." where WHY starts with "= VALUE".
[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw ConfigError(path + (why.rfind("= ", 0) == 0 ? " " : ": ") + why);
}

const json& field(const json& j, const std::string& path, const char* name) {
  if (!j.is_object()) bad(path, "must be a JSON object");
  const auto it = j.find(name);
  if (it == j.end()) bad(path + "." + name, "missing");
  return *it;
}

int64_t get_int(const json& j, const std::string& path, const char* name) {
  const json& v = field(j, path, name);
  if (!v.is_number_integer()) bad(path + "." + name, "= " + v.dump() + ": must be an integer");
  return v.get<int64_t>();
}

double get_double(const json& j, const std::string& path, const char* name) {
  const json& v = field(j, path, name);
  if (!v.is_number()) bad(path + "." + name, "= " + v.dump() + ": must be a number");
  return v.get<double>();
}

std::string get_string(const json& j, const std::string& path, const char* name) {
  const json& v = field(j, path, name);
  if (!v.is_string()) bad(path + "." + name, "= " + v.dump() + ": must be a string");
  return v.get<std::string>();
}

template <typename E, size_t N>
E get_enum(const json& j, const std::string& path, const char* name, const E (&values)[N]) {
  const std::string s = get_string(j, path, name);
  std::string allowed;
  for (E e : values) {
    if (s == to_string(e)) return e;
    allowed += (allowed.empty() ? "" : ", ") + std::string(to_string(e));
  }
  bad(path + "." + name, "= \"" + s + "\": must be one of " + allowed);
}

// A field outside `known` is an error naming it and the fields `what` has: a typo ("wndow") or a newer
// spec's field must never be ignored.
template <size_t N>
void only_known(const json& j, const std::string& path, const char* const (&known)[N], const char* what) {
  if (!j.is_object()) return;  // the reads that follow say what it must be
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(std::begin(known), std::end(known), it.key()) != std::end(known)) continue;
    std::string allowed;
    for (const char* k : known) allowed += (allowed.empty() ? "" : ", ") + std::string(k);
    bad(path + "." + it.key(), std::string("unknown field; ") + what + " has " + allowed);
  }
}

constexpr const char* kConfigFields[] = {"config_version", "layers",      "num_q_heads", "num_kv_heads", "head_dim",
                                         "batch",          "max_tokens",  "softmax_scale", "softcap",    "sink_logits",
                                         "k_format",       "v_format",    "start_positions"};
// The plugin ABI's config document carries these two besides (docs/engine-abi.md): read as a config there.
constexpr const char* kAbiConfigFields[] = {"config_version", "layers",        "num_q_heads",  "num_kv_heads",
                                            "head_dim",       "batch",         "max_tokens",   "softmax_scale",
                                            "softcap",        "sink_logits",   "k_format",     "v_format",
                                            "start_positions", "window_convention", "qk_rotated"};
constexpr const char* kLayerFields[] = {"window", "sinks", "rope", "rollback_reserve"};
constexpr const char* kRopeFields[] = {"style", "theta", "rotary_dim", "scaling", "factor"};
constexpr const char* kFormatFields[] = {"dtype", "int8_scheme", "rounding", "scale"};
constexpr const char* kCaseFields[] = {"config",       "steps",       "initial_streams", "seed",           "data",
                                       "qk_amplitude", "layer_salt",  "stream_salt",     "needle_windows", "needle_sinks",
                                       "kv_head_repeat", "zero_rows_every"};
constexpr const char* kStepFields[] = {"resets", "tokens", "rollbacks"};
constexpr const char* kResetFields[] = {"sequence", "start_position", "stream"};
constexpr const char* kRollbackFields[] = {"sequence", "n_tokens", "stream"};

constexpr RopeStyle kStyles[] = {RopeStyle::none, RopeStyle::neox, RopeStyle::gptj};
constexpr RopeScaling kScalings[] = {RopeScaling::none, RopeScaling::linear, RopeScaling::ntk};
constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8};
constexpr Int8Scheme kSchemes[] = {Int8Scheme::per_head, Int8Scheme::q8_0, Int8Scheme::static_tensor};
constexpr Rounding kRoundings[] = {Rounding::nearest_even, Rounding::half_away};
constexpr Precision kPrecisions[] = {Precision::f64, Precision::f32, Precision::tf32, Precision::f16,
                                     Precision::bf16, Precision::fp8_e4m3, Precision::fp8_e5m2, Precision::int8};

json format_to_json(const KvFormat& f) {
  return json{{"dtype", to_string(f.dtype)},
              {"int8_scheme", to_string(f.int8_scheme)},
              {"rounding", to_string(f.rounding)},
              {"scale", static_cast<double>(f.scale)}};
}

KvFormat format_from_json(const json& j, const std::string& path) {
  only_known(j, path, kFormatFields, "a K/V format");
  KvFormat f;
  f.dtype = get_enum(j, path, "dtype", kDTypes);
  f.int8_scheme = get_enum(j, path, "int8_scheme", kSchemes);
  f.rounding = get_enum(j, path, "rounding", kRoundings);
  f.scale = static_cast<float>(get_double(j, path, "scale"));
  return f;
}

const json& array_field(const json& j, const std::string& path, const char* name) {
  const json& v = field(j, path, name);
  if (!v.is_array()) bad(path + "." + name, "must be an array");
  return v;
}

}  // namespace

json config_to_json(const Config& c) {
  json layers = json::array();
  for (const LayerConfig& l : c.layers) {
    layers.push_back(json{{"window", l.window},
                          {"sinks", l.sinks},
                          {"rope",
                           {{"style", to_string(l.rope.style)},
                            {"theta", l.rope.theta},
                            {"rotary_dim", l.rope.rotary_dim},
                            {"scaling", to_string(l.rope.scaling)},
                            {"factor", l.rope.factor}}}});
    // Spec 1.1: written only when set, so a spec 1 config reads and writes as it always did.
    if (l.rollback_reserve != 0) layers.back()["rollback_reserve"] = l.rollback_reserve;
  }
  json j{{"config_version", kConfigJsonVersion},
         {"layers", layers},
         {"num_q_heads", c.num_q_heads},
         {"num_kv_heads", c.num_kv_heads},
         {"head_dim", c.head_dim},
         {"batch", c.batch},
         {"max_tokens", c.max_tokens},
         {"softmax_scale", c.softmax_scale ? json(*c.softmax_scale) : json(nullptr)},
         {"softcap", c.softcap ? json(*c.softcap) : json(nullptr)},
         {"sink_logits", c.sink_logits},
         {"k_format", format_to_json(c.k_format)},
         {"v_format", format_to_json(c.v_format)},
         {"start_positions", c.start_positions}};
  return j;
}

Config config_from_json(const json& j) {
  const std::string p = "config";
  only_known(j, p, kAbiConfigFields, "a config");
  const int64_t version = get_int(j, p, "config_version");
  if (version != kConfigJsonVersion) {
    bad(p + ".config_version", "= " + std::to_string(version) + ": this ringkv reads version " +
                                   std::to_string(kConfigJsonVersion));
  }
  Config c;
  const json& layers = array_field(j, p, "layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string lp = p + ".layers[" + std::to_string(i) + "]";
    LayerConfig l;
    only_known(layers[i], lp, kLayerFields, "a layer");
    l.window = get_int(layers[i], lp, "window");
    l.sinks = get_int(layers[i], lp, "sinks");
    if (layers[i].contains("rollback_reserve")) l.rollback_reserve = get_int(layers[i], lp, "rollback_reserve");
    const json& r = field(layers[i], lp, "rope");
    const std::string rp = lp + ".rope";
    only_known(r, rp, kRopeFields, "a layer's rope");
    l.rope.style = get_enum(r, rp, "style", kStyles);
    l.rope.theta = get_double(r, rp, "theta");
    l.rope.rotary_dim = static_cast<int>(get_int(r, rp, "rotary_dim"));
    l.rope.scaling = get_enum(r, rp, "scaling", kScalings);
    l.rope.factor = get_double(r, rp, "factor");
    c.layers.push_back(l);
  }
  const auto small_int = [&](const char* name) {
    const int64_t v = get_int(j, p, name);
    if (v < -(int64_t{1} << 31) || v >= (int64_t{1} << 31)) bad(p + "." + name, "= " + std::to_string(v) + ": out of range");
    return static_cast<int>(v);
  };
  c.num_q_heads = small_int("num_q_heads");
  c.num_kv_heads = small_int("num_kv_heads");
  c.head_dim = small_int("head_dim");
  c.batch = small_int("batch");
  c.max_tokens = get_int(j, p, "max_tokens");
  for (const char* name : {"softmax_scale", "softcap"}) {
    const json& v = field(j, p, name);
    if (v.is_null()) continue;
    if (!v.is_number()) bad(p + "." + name, "= " + v.dump() + ": must be a number or null");
    (std::string(name) == "softcap" ? c.softcap : c.softmax_scale) = v.get<double>();
  }
  const json& sl = array_field(j, p, "sink_logits");
  for (size_t l = 0; l < sl.size(); ++l) {
    if (!sl[l].is_array()) bad(p + ".sink_logits[" + std::to_string(l) + "]", "must be an array");
    std::vector<float> row;
    for (size_t h = 0; h < sl[l].size(); ++h) {
      if (!sl[l][h].is_number()) bad(p + ".sink_logits[" + std::to_string(l) + "][" + std::to_string(h) + "]", "must be a number");
      row.push_back(sl[l][h].get<float>());
    }
    c.sink_logits.push_back(row);
  }
  c.k_format = format_from_json(field(j, p, "k_format"), p + ".k_format");
  c.v_format = format_from_json(field(j, p, "v_format"), p + ".v_format");
  const json& sp = array_field(j, p, "start_positions");
  for (size_t s = 0; s < sp.size(); ++s) {
    if (!sp[s].is_number_integer()) bad(p + ".start_positions[" + std::to_string(s) + "]", "must be an integer");
    c.start_positions.push_back(sp[s].get<int64_t>());
  }
  validate(c);
  return c;
}

json case_to_json(const Case& c) {
  json steps = json::array();
  for (const StepPlan& st : c.steps) {
    json resets = json::array();
    for (const ResetPlan& r : st.resets) {
      resets.push_back(json{{"sequence", r.sequence}, {"start_position", r.start_position}, {"stream", r.stream}});
    }
    json step{{"resets", resets}, {"tokens", st.tokens}};
    if (!st.rollbacks.empty()) {  // spec 1.1; absent in every spec 1 case
      json rollbacks = json::array();
      for (const RollbackPlan& r : st.rollbacks) {
        rollbacks.push_back(json{{"sequence", r.sequence}, {"n_tokens", r.n_tokens}, {"stream", r.stream}});
      }
      step["rollbacks"] = rollbacks;
    }
    steps.push_back(step);
  }
  return json{{"config", config_to_json(c.config)},
              {"steps", steps},
              {"initial_streams", c.initial_streams},
              {"seed", c.seed},
              {"data", to_string(c.data)},
              {"qk_amplitude", static_cast<double>(c.qk_amplitude)},
              {"layer_salt", c.layer_salt},
              {"stream_salt", c.stream_salt},
              {"needle_windows", c.needle_windows},
              {"needle_sinks", c.needle_sinks},
              {"kv_head_repeat", c.kv_head_repeat},
              {"zero_rows_every", c.zero_rows_every}};
}

Case case_from_json(const json& j) {
  const std::string p = "case";
  only_known(j, p, kCaseFields, "a case");
  only_known(field(j, p, "config"), p + ".config", kConfigFields, "a case's config");  // not the ABI's two
  Case c;
  try {  // the config's field paths start at "config": within a case they start at "case.config"
    c.config = config_from_json(field(j, p, "config"));
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    throw ConfigError(what.rfind("config", 0) == 0 ? p + "." + what : what);
  }
  const json& steps = array_field(j, p, "steps");
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string sp = p + ".steps[" + std::to_string(i) + "]";
    StepPlan st;
    only_known(steps[i], sp, kStepFields, "a step");
    const json& resets = array_field(steps[i], sp, "resets");
    for (size_t r = 0; r < resets.size(); ++r) {
      const std::string rp = sp + ".resets[" + std::to_string(r) + "]";
      only_known(resets[r], rp, kResetFields, "a reset");
      st.resets.push_back({static_cast<int>(get_int(resets[r], rp, "sequence")), get_int(resets[r], rp, "start_position"),
                           static_cast<int>(get_int(resets[r], rp, "stream"))});
      validate_start_position(c.config, st.resets.back().start_position, rp + ".start_position");
    }
    if (steps[i].contains("rollbacks")) {
      const json& rollbacks = array_field(steps[i], sp, "rollbacks");
      for (size_t r = 0; r < rollbacks.size(); ++r) {
        const std::string rp = sp + ".rollbacks[" + std::to_string(r) + "]";
        only_known(rollbacks[r], rp, kRollbackFields, "a rollback");
        st.rollbacks.push_back({static_cast<int>(get_int(rollbacks[r], rp, "sequence")),
                                get_int(rollbacks[r], rp, "n_tokens"), static_cast<int>(get_int(rollbacks[r], rp, "stream"))});
      }
    }
    const json& tokens = array_field(steps[i], sp, "tokens");
    for (const json& n : tokens) {
      if (!n.is_number_integer()) bad(sp + ".tokens", "must hold integers");
      st.tokens.push_back(n.get<int64_t>());
    }
    if (st.tokens.size() != static_cast<size_t>(c.config.batch)) {
      bad(sp + ".tokens", "has " + std::to_string(st.tokens.size()) + " entries: must be batch = " +
                              std::to_string(c.config.batch));
    }
    c.steps.push_back(st);
  }
  // Typed reads that name the field on a wrong type (never a bare nlohmann exception).
  const auto typed = [&](const char* name, const char* what, auto* out) {
    try {
      *out = field(j, p, name).get<std::remove_pointer_t<decltype(out)>>();
    } catch (const json::exception&) {
      bad(p + "." + name, std::string("must be ") + what);
    }
  };
  typed("initial_streams", "an array of integers", &c.initial_streams);
  typed("seed", "an unsigned 64-bit integer", &c.seed);
  const std::string data = get_string(j, p, "data");
  if (data != "random" && data != "needle") bad(p + ".data", "= \"" + data + "\": must be random or needle");
  c.data = data == "random" ? DataMode::random : DataMode::needle;
  c.qk_amplitude = static_cast<float>(get_double(j, p, "qk_amplitude"));
  typed("layer_salt", "an array of integers", &c.layer_salt);
  typed("stream_salt", "an array of integers", &c.stream_salt);
  typed("needle_windows", "an array of integers", &c.needle_windows);
  typed("needle_sinks", "an array of integers", &c.needle_sinks);
  c.kv_head_repeat = static_cast<int>(get_int(j, p, "kv_head_repeat"));
  c.zero_rows_every = get_int(j, p, "zero_rows_every");
  // The schedule against the config (support/case.hpp check_schedule), naming the field: a rollback
  // may take back at most what its sequence holds at that step.
  ScheduleTracker tracker(c);
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const std::string sp = p + ".steps[" + std::to_string(i) + "]";
    for (size_t r = 0; r < c.steps[i].rollbacks.size(); ++r) {
      const RollbackPlan& rb = c.steps[i].rollbacks[r];
      const std::string rp = sp + ".rollbacks[" + std::to_string(r) + "]";
      if (rb.sequence < 0 || rb.sequence >= c.config.batch) {
        bad(rp + ".sequence", "= " + std::to_string(rb.sequence) + ": outside [0, batch = " + std::to_string(c.config.batch) + ")");
      }
      const int64_t held = tracker.held(rb.sequence);
      if (rb.n_tokens < 1 || rb.n_tokens > held) {
        bad(rp + ".n_tokens", "= " + std::to_string(rb.n_tokens) + ": sequence " + std::to_string(rb.sequence) + " holds " +
                                  std::to_string(held) + " tokens, so it must lie in [1, " + std::to_string(held) + "]");
      }
    }
    try {
      if (tracker.honoured(c.steps[i])) tracker.apply(c.steps[i]);
    } catch (const std::logic_error& e) {
      bad(sp, e.what());
    }
  }
  return c;
}

json profile_to_json(const PrecisionProfile& p) {
  return json{{"q_dot", to_string(p.q_dot)},
              {"q_quant", to_string(p.q_quant)},
              {"k_storage", storage_to_string(p.k_storage)},
              {"v_storage", storage_to_string(p.v_storage)},
              {"qk_accumulator", to_string(p.qk_accumulator)},
              {"pv_accumulator", to_string(p.pv_accumulator)},
              {"p_before_pv", to_string(p.p_before_pv)},
              {"output", to_string(p.output)},
              {"rope_angle", to_string(p.rope_angle)}};
}

namespace {

constexpr QueryQuant kQueryQuants[] = {QueryQuant::none, QueryQuant::q8_0};
constexpr const char* kProfileFields[] = {"q_dot",          "q_quant",        "k_storage",   "v_storage", "accumulator",
                                          "qk_accumulator", "pv_accumulator", "p_before_pv", "output",    "rope_angle"};

std::optional<Precision> get_storage(const json& j, const std::string& path, const char* name) {
  if (get_string(j, path, name) == "as_configured") return std::nullopt;
  try {
    return get_enum(j, path, name, kPrecisions);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string(e.what()) + ", as_configured");
  }
}

}  // namespace

void apply_profile_json(const json& j, const std::string& path, PrecisionProfile& r) {
  if (!j.is_object()) bad(path, "must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kProfileFields), std::end(kProfileFields), key) == std::end(kProfileFields)) {
      std::string allowed;
      for (const char* f : kProfileFields) allowed += (allowed.empty() ? "" : ", ") + std::string(f);
      bad(path + "." + key, "unknown field; a profile has " + allowed);
    }
  }
  const auto has = [&](const char* name) { return j.contains(name); };
  if (has("q_dot")) r.q_dot = get_enum(j, path, "q_dot", kPrecisions);
  if (has("q_quant")) r.q_quant = get_enum(j, path, "q_quant", kQueryQuants);
  if (has("k_storage")) r.k_storage = get_storage(j, path, "k_storage");
  if (has("v_storage")) r.v_storage = get_storage(j, path, "v_storage");
  // Profile 1's single accumulator: shorthand for both; the specific keys override it.
  if (has("accumulator")) r.qk_accumulator = r.pv_accumulator = get_enum(j, path, "accumulator", kPrecisions);
  if (has("qk_accumulator")) r.qk_accumulator = get_enum(j, path, "qk_accumulator", kPrecisions);
  if (has("pv_accumulator")) r.pv_accumulator = get_enum(j, path, "pv_accumulator", kPrecisions);
  if (has("p_before_pv")) r.p_before_pv = get_enum(j, path, "p_before_pv", kPrecisions);
  if (has("output")) r.output = get_enum(j, path, "output", kPrecisions);
  if (has("rope_angle")) r.rope_angle = get_enum(j, path, "rope_angle", kPrecisions);
}

PrecisionProfile profile_from_json(const json& j, const std::string& path) {
  for (const char* name : {"q_dot", "p_before_pv", "output", "rope_angle"}) field(j, path, name);  // required
  for (const char* name : {"qk_accumulator", "pv_accumulator"}) {
    if (!j.contains(name) && !j.contains("accumulator")) bad(path + "." + name, "missing (or give \"accumulator\" for both)");
  }
  PrecisionProfile r;
  apply_profile_json(j, path, r);
  return r;
}

}  // namespace ringkv::conformance
