#include "support/capabilities.hpp"

#include <algorithm>
#include <fstream>
#include <set>

#include "ringkv/error.hpp"
#include "support/config_json.hpp"

namespace ringkv::conformance {
namespace {

using nlohmann::json;

template <typename T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void add(std::vector<std::string>& gaps, const std::string& g) {
  if (!contains(gaps, g)) gaps.push_back(g);
}

std::string join(const std::vector<std::string>& gaps) {
  std::string s;
  for (const std::string& g : gaps) s += (s.empty() ? "unsupported: " : ", ") + g;
  return s;
}

// " (supports a, b)": what the engine declares, for a gap's message.
template <typename E>
std::string supports(const std::vector<E>& v) {
  std::string list;
  for (E e : v) list += (list.empty() ? "" : ", ") + std::string(to_string(e));
  return " (supports " + (list.empty() ? std::string("none") : list) + ")";
}

// Storage the engine can run: the dtype itself, or f32 when the engine declares one fixed float
// storage (fixed_storage_runs_f32).
bool storage_ok(const std::vector<DType>& dtypes, const std::optional<Precision>& fixed, DType want) {
  return contains(dtypes, want) || (want == DType::f32 && fixed_storage_runs_f32(fixed));
}

void config_gaps(const Capabilities& caps, const Config& cfg, std::vector<std::string>& gaps) {
  if (!storage_ok(caps.k_dtypes, caps.k_storage, cfg.k_format.dtype)) add(gaps, std::string("K dtype ") + to_string(cfg.k_format.dtype) + supports(caps.k_dtypes));
  if (!storage_ok(caps.v_dtypes, caps.v_storage, cfg.v_format.dtype)) add(gaps, std::string("V dtype ") + to_string(cfg.v_format.dtype) + supports(caps.v_dtypes));
  for (const KvFormat* f : {&cfg.k_format, &cfg.v_format}) {
    if (f->dtype != DType::int8) continue;
    if (!contains(caps.int8_schemes, f->int8_scheme)) add(gaps, std::string("int8 scheme ") + to_string(f->int8_scheme) + supports(caps.int8_schemes));
    if (!contains(caps.int8_roundings, f->rounding)) add(gaps, std::string("int8 rounding ") + to_string(f->rounding) + supports(caps.int8_roundings));
  }
  std::set<std::string> ropes;
  for (const LayerConfig& l : cfg.layers) {
    const RopeConfig& r = l.rope;
    if (!contains(caps.rope_styles, r.style)) add(gaps, std::string("rope style ") + to_string(r.style) + supports(caps.rope_styles));
    if (r.style == RopeStyle::none) {
      ropes.insert("none");
      continue;
    }
    if (!contains(caps.rope_scalings, r.scaling)) add(gaps, std::string("rope scaling ") + to_string(r.scaling) + supports(caps.rope_scalings));
    const int rd = rotary_dim(r, cfg.head_dim);
    if (rd < cfg.head_dim && !caps.partial_rotary) add(gaps, "partial rotary (rotary_dim " + std::to_string(rd) + " < head_dim)");
    ropes.insert(std::string(to_string(r.style)) + ":" + std::to_string(r.theta) + ":" + std::to_string(rd) + ":" +
                 to_string(r.scaling) + ":" + std::to_string(r.factor));
  }
  if (ropes.size() > 1 && !caps.per_layer_rope) add(gaps, "per-layer RoPE");
  if (!caps.head_dims.empty() && !contains(caps.head_dims, cfg.head_dim)) {
    std::string list;
    for (int h : caps.head_dims) list += (list.empty() ? "" : ", ") + std::to_string(h);
    add(gaps, "head_dim " + std::to_string(cfg.head_dim) + " (supports " + list + ")");
  }
  bool sinks = false;
  for (const LayerConfig& l : cfg.layers) sinks = sinks || l.sinks > 0;
  if (sinks && !caps.sinks) add(gaps, "sink tokens");
  if (!cfg.sink_logits.empty() && !caps.sink_logits) add(gaps, "sink logits");
  if (!(cfg.k_format == cfg.v_format) && !caps.kv_formats_differ) add(gaps, "K and V in different formats");
  if (cfg.softcap && !caps.softcap) add(gaps, "softcap");
  const auto L = static_cast<int64_t>(cfg.layers.size());
  if (L > caps.max_layers) add(gaps, std::to_string(L) + " layers > max_layers " + std::to_string(caps.max_layers));
  if (cfg.batch > caps.max_batch) add(gaps, "batch " + std::to_string(cfg.batch) + " > max_batch " + std::to_string(caps.max_batch));
  if (const int n = distinct_sliding_windows(cfg); n > caps.max_sliding_windows) {
    add(gaps, std::to_string(n) + " distinct sliding windows > max_sliding_windows " + std::to_string(caps.max_sliding_windows));
  }
  if (const int64_t w = largest_sliding_window(cfg); w > caps.max_window) {
    add(gaps, "window " + std::to_string(w) + " > max_window " + std::to_string(caps.max_window));
  }
  if (const int64_t w = smallest_sliding_window(cfg); w > 0 && w < caps.min_window) {
    add(gaps, "window " + std::to_string(w) + " < min_window " + std::to_string(caps.min_window));
  }
  if (cfg.max_tokens > caps.max_tokens) {
    add(gaps, "max_tokens " + std::to_string(cfg.max_tokens) + " > max_tokens " + std::to_string(caps.max_tokens));
  }
  int64_t reserve = 0;
  for (const LayerConfig& l : cfg.layers) reserve = std::max(reserve, l.rollback_reserve);
  if (reserve > caps.max_rollback_reserve) {
    add(gaps, "rollback_reserve " + std::to_string(reserve) + " > max_rollback_reserve " +
                  std::to_string(caps.max_rollback_reserve));
  }
}

void position_gaps(const Capabilities& caps, int64_t p0, int64_t max_tokens, std::vector<std::string>& gaps) {
  if (p0 != 0 && !caps.settable_p0) add(gaps, "start position " + std::to_string(p0) + " (p0 is not settable)");
  const int64_t last = p0 + max_tokens - 1;
  if (last > caps.max_position) {
    add(gaps, "positions up to " + std::to_string(last) + " > max_position " + std::to_string(caps.max_position));
  }
}

// ---- JSON ----

template <typename E, size_t N>
E enum_named(const json& v, const std::string& path, const E (&values)[N]) {
  std::string allowed;
  for (E e : values) allowed += (allowed.empty() ? "" : ", ") + std::string(to_string(e));
  if (v.is_string()) {
    for (E e : values) {
      if (v.get<std::string>() == to_string(e)) return e;
    }
  }
  throw ConfigError(path + " = " + v.dump() + ": must be one of " + allowed);
}

template <typename E, size_t N>
std::vector<E> enum_list(const json& v, const std::string& path, const E (&values)[N]) {
  if (!v.is_array()) throw ConfigError(path + " = " + v.dump() + ": must be an array of names");
  std::vector<E> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const E e = enum_named(v[i], path + "[" + std::to_string(i) + "]", values);
    if (!contains(out, e)) out.push_back(e);
  }
  return out;
}

template <typename E>
json names(const std::vector<E>& v) {
  json a = json::array();
  for (E e : v) a.push_back(to_string(e));
  return a;
}

int64_t int_in(const json& v, const std::string& path, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    throw ConfigError(path + " = " + v.dump() + ": must be an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  }
  return v.get<int64_t>();
}

bool boolean(const json& v, const std::string& path) {
  if (!v.is_boolean()) throw ConfigError(path + " = " + v.dump() + ": must be true or false");
  return v.get<bool>();
}

constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8};
constexpr Int8Scheme kSchemes[] = {Int8Scheme::per_head, Int8Scheme::q8_0, Int8Scheme::static_tensor};
constexpr Rounding kRoundings[] = {Rounding::nearest_even, Rounding::half_away};
constexpr RopeStyle kStyles[] = {RopeStyle::none, RopeStyle::neox, RopeStyle::gptj};
constexpr RopeScaling kScalings[] = {RopeScaling::none, RopeScaling::linear, RopeScaling::ntk};
constexpr Precision kStorage[] = {Precision::f32, Precision::f16, Precision::bf16, Precision::fp8_e4m3,
                                  Precision::fp8_e5m2, Precision::int8};

constexpr const char* kFields[] = {
    "format",      "name",          "level",          "profile",        "k_dtypes",    "v_dtypes",
    "int8_schemes", "int8_roundings", "rope_styles",   "rope_scalings",  "head_dims",   "sinks",
    "sink_logits", "softcap",       "per_layer_rope", "partial_rotary", "settable_p0", "max_layers",
    "max_batch",   "max_sliding_windows", "min_window", "max_window",   "max_tokens",  "max_position",
    "k_storage",   "v_storage",     "kv_formats_differ", "rollback", "max_rollback_reserve"};

}  // namespace

bool fixed_storage_runs_f32(const std::optional<Precision>& fixed) {
  return fixed && (*fixed == Precision::f32 || *fixed == Precision::f16 || *fixed == Precision::bf16);
}

bool is_sliding(const LayerConfig& layer, const Config& config) { return layer.window < config.max_tokens; }

int64_t largest_sliding_window(const Config& config) {
  int64_t w = 0;
  for (const LayerConfig& l : config.layers) {
    if (is_sliding(l, config)) w = std::max(w, l.window);
  }
  return w;
}

int64_t smallest_sliding_window(const Config& config) {
  int64_t w = 0;
  for (const LayerConfig& l : config.layers) {
    if (is_sliding(l, config)) w = w == 0 ? l.window : std::min(w, l.window);
  }
  return w;
}

int distinct_sliding_windows(const Config& config) {
  std::set<int64_t> w;
  for (const LayerConfig& l : config.layers) {
    if (is_sliding(l, config)) w.insert(l.window);
  }
  return static_cast<int>(w.size());
}

std::string capability_gap(const Capabilities& caps, const Config& config) {
  std::vector<std::string> gaps;
  config_gaps(caps, config, gaps);
  for (int s = 0; s < config.batch; ++s) position_gaps(caps, start_position(config, s), config.max_tokens, gaps);
  return join(gaps);
}

std::string capability_gap(const Capabilities& caps, const Case& c) {
  std::vector<std::string> gaps;
  config_gaps(caps, c.config, gaps);
  for (int s = 0; s < c.config.batch; ++s) position_gaps(caps, start_position(c.config, s), c.config.max_tokens, gaps);
  for (const StepPlan& st : c.steps) {
    for (const ResetPlan& r : st.resets) position_gaps(caps, r.start_position, c.config.max_tokens, gaps);
  }
  if (ScheduleTracker::has_rollbacks(c) && !caps.rollback) add(gaps, "rollback (spec 1.1)");
  return join(gaps);
}

Capabilities core_capabilities(std::vector<DType> kv_dtypes) {
  for (DType d : kv_dtypes) {
    if (d != DType::f32 && d != DType::f16 && d != DType::bf16) {
      throw ConfigError(std::string("core_capabilities: K/V dtype ") + to_string(d) + " is not core (f32, f16, bf16)");
    }
  }
  Capabilities c;
  c.k_dtypes = c.v_dtypes = std::move(kv_dtypes);
  c.int8_schemes.clear();
  c.rope_styles = {RopeStyle::neox};
  c.rope_scalings = {RopeScaling::none};
  c.sinks = c.sink_logits = c.softcap = false;
  c.per_layer_rope = c.partial_rotary = false;
  c.kv_formats_differ = false;
  c.max_sliding_windows = 1;
  return c;
}

CapabilitiesFile capabilities_from_json(const json& j, const std::string& origin) {
  const std::string P = "capabilities";
  if (!j.is_object()) throw ConfigError(origin + ": " + P + ": must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kFields), std::end(kFields), key) == std::end(kFields)) {
      std::string allowed;
      for (const char* f : kFields) allowed += (allowed.empty() ? "" : ", ") + std::string(f);
      throw ConfigError(origin + ": " + P + "." + key + ": unknown field; a capabilities file has " + allowed);
    }
  }
  try {
    if (j.contains("format") && j["format"] != "ringkv-capabilities") {
      throw ConfigError(P + ".format = " + j["format"].dump() + ": must be \"ringkv-capabilities\"");
    }
    CapabilitiesFile f;
    f.name = origin;
    if (j.contains("name")) {
      if (!j["name"].is_string()) throw ConfigError(P + ".name = " + j["name"].dump() + ": must be a string");
      f.name = j["name"].get<std::string>();
    }
    const std::string level = j.contains("level") && j["level"].is_string() ? j["level"].get<std::string>() : "full";
    if (j.contains("level") && (!j["level"].is_string() || (level != "core" && level != "full"))) {
      throw ConfigError(P + ".level = " + j["level"].dump() + ": must be \"core\" or \"full\"");
    }
    Capabilities c = level == "core" ? core_capabilities() : Capabilities{};
    const auto has = [&](const char* k) { return j.contains(k); };
    const auto at = [&](const char* k) { return P + "." + k; };
    if (has("k_dtypes")) c.k_dtypes = enum_list(j["k_dtypes"], at("k_dtypes"), kDTypes);
    if (has("v_dtypes")) c.v_dtypes = enum_list(j["v_dtypes"], at("v_dtypes"), kDTypes);
    if (has("int8_schemes")) c.int8_schemes = enum_list(j["int8_schemes"], at("int8_schemes"), kSchemes);
    if (has("int8_roundings")) c.int8_roundings = enum_list(j["int8_roundings"], at("int8_roundings"), kRoundings);
    if (has("rope_styles")) c.rope_styles = enum_list(j["rope_styles"], at("rope_styles"), kStyles);
    if (has("rope_scalings")) c.rope_scalings = enum_list(j["rope_scalings"], at("rope_scalings"), kScalings);
    if (has("head_dims")) {
      const json& h = j["head_dims"];
      if (!h.is_array()) throw ConfigError(at("head_dims") + " = " + h.dump() + ": must be an array of integers in [1, 1024]");
      c.head_dims.clear();
      for (size_t i = 0; i < h.size(); ++i) {
        c.head_dims.push_back(static_cast<int>(int_in(h[i], at("head_dims") + "[" + std::to_string(i) + "]", 1, 1024)));
      }
    }
    for (auto [key, flag] : {std::pair{"sinks", &c.sinks}, std::pair{"sink_logits", &c.sink_logits},
                             std::pair{"softcap", &c.softcap}, std::pair{"per_layer_rope", &c.per_layer_rope},
                             std::pair{"partial_rotary", &c.partial_rotary}, std::pair{"settable_p0", &c.settable_p0},
                             std::pair{"kv_formats_differ", &c.kv_formats_differ}, std::pair{"rollback", &c.rollback}}) {
      if (has(key)) *flag = boolean(j[key], at(key));
    }
    const int64_t kMax = kMaxPosition - 1;
    if (has("max_layers")) c.max_layers = static_cast<int>(int_in(j["max_layers"], at("max_layers"), 1, 1024));
    if (has("max_batch")) c.max_batch = static_cast<int>(int_in(j["max_batch"], at("max_batch"), 1, 1 << 20));
    if (has("max_sliding_windows")) {
      c.max_sliding_windows = static_cast<int>(int_in(j["max_sliding_windows"], at("max_sliding_windows"), 1, 1 << 20));
    }
    if (has("min_window")) c.min_window = int_in(j["min_window"], at("min_window"), 1, kMax);
    if (has("max_window")) c.max_window = int_in(j["max_window"], at("max_window"), 1, kMax);
    if (has("max_tokens")) c.max_tokens = int_in(j["max_tokens"], at("max_tokens"), 1, kMax);
    if (has("max_position")) c.max_position = int_in(j["max_position"], at("max_position"), 0, kMax);
    if (has("max_rollback_reserve")) {
      c.max_rollback_reserve = int_in(j["max_rollback_reserve"], at("max_rollback_reserve"), 0, int64_t{1} << 30);
    }
    if (has("k_storage")) c.k_storage = enum_named(j["k_storage"], at("k_storage"), kStorage);
    if (has("v_storage")) c.v_storage = enum_named(j["v_storage"], at("v_storage"), kStorage);
    if (c.min_window > c.max_window) {
      throw ConfigError(at("min_window") + " = " + std::to_string(c.min_window) + ": must be <= max_window " +
                        std::to_string(c.max_window));
    }
    if (has("profile")) {
      f.profile = profile_from_json(j["profile"], P + ".profile");
      // A fixed storage in the profile is the capability to run f32 cases (Capabilities::k_storage).
      if (!has("k_storage") && f.profile->k_storage) c.k_storage = f.profile->k_storage;
      if (!has("v_storage") && f.profile->v_storage) c.v_storage = f.profile->v_storage;
    }
    f.capabilities = std::move(c);
    return f;
  } catch (const ConfigError& e) {
    throw ConfigError(origin + ": " + e.what());
  }
}

CapabilitiesFile read_capabilities_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("capabilities file " + path + ": cannot be read");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw ConfigError("capabilities file " + path + ": not JSON: " + e.what());
  }
  return capabilities_from_json(j, "capabilities file " + path);
}

json capabilities_to_json(const Capabilities& c) {
  json j = {{"format", "ringkv-capabilities"},
            {"k_dtypes", names(c.k_dtypes)},
            {"v_dtypes", names(c.v_dtypes)},
            {"int8_schemes", names(c.int8_schemes)},
            {"int8_roundings", names(c.int8_roundings)},
            {"rope_styles", names(c.rope_styles)},
            {"rope_scalings", names(c.rope_scalings)},
            {"head_dims", c.head_dims},
            {"sinks", c.sinks},
            {"sink_logits", c.sink_logits},
            {"softcap", c.softcap},
            {"per_layer_rope", c.per_layer_rope},
            {"partial_rotary", c.partial_rotary},
            {"settable_p0", c.settable_p0},
            {"kv_formats_differ", c.kv_formats_differ},
            {"max_layers", c.max_layers},
            {"max_batch", c.max_batch},
            {"max_sliding_windows", c.max_sliding_windows},
            {"min_window", c.min_window},
            {"max_window", c.max_window},
            {"max_tokens", c.max_tokens},
            {"max_position", c.max_position}};
  if (c.rollback || c.max_rollback_reserve > 0) {  // spec 1.1; absent means neither
    j["rollback"] = c.rollback;
    j["max_rollback_reserve"] = c.max_rollback_reserve;
  }
  if (c.k_storage) j["k_storage"] = to_string(*c.k_storage);
  if (c.v_storage) j["v_storage"] = to_string(*c.v_storage);
  return j;
}

}  // namespace ringkv::conformance
