// ringkv golden: classes as core plus features, and the coverage verdict (coverage.hpp).
#include "golden/coverage.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "support/capabilities.hpp"

namespace ringkv::golden {
namespace {

constexpr ClassLevel core = ClassLevel::core, feature = ClassLevel::feature;

template <typename T>
bool has(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool any_dtype(const Capabilities& c, DType d) { return has(c.k_dtypes, d) || has(c.v_dtypes, d); }

bool head_dim_ok(const Capabilities& c, int d) { return c.head_dims.empty() || has(c.head_dims, d); }

}  // namespace

const std::vector<ClassInfo>& class_catalogue() {
  static const std::vector<ClassInfo> classes{
      // ---- core, structural: the ring's own boundaries ----
      {"t<W", core, true, "queries before the window is full"},
      {"t=W-1", core, true, "the query that first sees W keys"},
      {"t=W", core, true, "the first query whose window drops a key (the wrap, without sinks)"},
      {"t=W+1", core, true, "one past the first drop"},
      {"t=kW", core, true, "queries at later multiples of W (the ring wrapped k times)"},
      {"chunk>W", core, true, "a chunk of more than W tokens in one step"},
      {"chunk-crosses-wrap", core, true, "a chunk whose tokens wrap the full ring"},
      {"W=1", core, true, "a window of one key: the query sees only itself (and sinks)"},
      {"W>=length", core, true, "a window at least as long as the sequence (full attention)"},
      {"batch-mixed", core, true, "sequences of one batch at different lengths"},
      {"sit-out", core, true, "a sequence that appends nothing in a step"},
      {"reset-reuse", core, true, "a sequence reset and reused"},
      {"reset-p0-down", core, true, "a reset to a start position below the old one"},
      {"reset-p0-same", core, true, "a reset to the same start position"},
      {"reset-p0-up", core, true, "a reset to a start position above the old one"},
      {"reset-shorter", core, true, "after a reset, a sequence shorter than the one before"},
      {"multi-layer", core, true, "several layers in one config"},
      {"sliding-and-full", core, true, "one sliding window beside full-attention layers"},
      {"mha", core, true, "one kv head per query head"},
      {"gqa", core, true, "query heads grouped over fewer kv heads"},
      {"mqa", core, true, "one kv head for all query heads"},
      {"needle-W+1", core, true, "a planted key that W + 1 would see and W must not"},
      {"needle-W-1", core, true, "a planted key that W - 1 would miss and W must see"},
      {"softmax-scale", core, true, "an explicit softmax scale instead of 1/sqrt(D)"},
      // ---- core, not structural: formats, shapes and positions a core engine may declare ----
      {"rope-neox", core, false, "neox (half-split) RoPE"},
      {"kv-f16", core, false, "K or V stored as f16"},
      {"kv-bf16", core, false, "K or V stored as bf16"},
      {"head_dim-64", core, false, "head dim 64"},
      {"head_dim-128", core, false, "head dim 128"},
      {"pos-2^20", core, false, "positions at or beyond 2^20"},
      {"pos-2^24", core, false, "positions at or beyond 2^24 (f32 positions lose integers)"},
      {"pos-2^31", core, false, "positions near the largest, 2^31 - 1"},
      // ---- core, not structural: serving schedules (issue 35, spec 1.2 §5.0); an engine that shares
      // nothing between sequences meets them as plain batches ----
      {"join-mid-run", core, false, "a prefill from index 0 in the same step as another sequence's decode (a request "
                                    "joining a running batch)"},
      {"prefix-shared", core, false, "a sequence whose first tokens repeat those of another that is still running (same "
                                     "positions and inputs), then diverge"},
      {"prefix-reused", core, false, "a new or reset sequence re-sending a prefix after the window evicted its early keys "
                                     "from the sequence that sent it first"},
      {"long-multi-seq", core, false, "at least 4 sequences in one window of W >= 128, 256+ cells in use at once, "
                                      "32+ decode steps past the window, learned sink logits (judged with that feature)"},
      // ---- features on top of the core ----
      {"sinks", feature, false, "sink tokens kept beside the window"},
      {"sink-logits", feature, false, "learned per-head sink logits"},
      {"softcap", feature, false, "logit softcap"},
      {"rope-gptj", feature, false, "gptj (interleaved) RoPE"},
      {"rope-none", feature, false, "a layer without RoPE"},
      {"partial-rotary", feature, false, "rotary dim below the head dim"},
      {"per-layer-rope", feature, false, "layers differing in RoPE"},
      {"rope-linear", feature, false, "linear RoPE scaling"},
      {"rope-ntk", feature, false, "NTK RoPE scaling"},
      {"several-windows", feature, false, "several distinct sliding windows in one config"},
      {"k-v-dtypes-differ", feature, false, "K and V in different formats"},
      {"kv-fp8-e4m3", feature, false, "K or V stored as fp8 e4m3"},
      {"kv-fp8-e5m2", feature, false, "K or V stored as fp8 e5m2"},
      {"int8-per_head", feature, false, "INT8, one scale per (token, kv head)"},
      {"int8-q8_0", feature, false, "INT8, blocks of 32 with an f16 scale (ggml q8_0)"},
      {"int8-static", feature, false, "INT8 with a static scale"},
      {"int8-half_away", feature, false, "INT8 rounding half away from zero"},
      // ---- spec 1.1 rollback (golden format 2): features, for engines that declare rollback ----
      {"rollback-before-wrap", feature, false, "a rollback before the sliding ring has wrapped"},
      {"rollback-at-wrap", feature, false, "a rollback of exactly the tokens from the wrap on (m = C)"},
      {"rollback-across-wrap", feature, false, "a rollback whose removed tokens lie on both sides of the wrap"},
      {"rollback-reserve-edge", feature, false, "an honoured rollback at the reserve's limit (lo + C - S = H)"},
      {"rollback-refused", feature, false, "a step the spec refuses (the engine must refuse it, and change nothing)"},
      {"rollback-repeated", feature, false, "a rollback counted from the high-water mark of an earlier one"},
      {"rollback-verify-partial", feature, false, "a verify chunk partly accepted: its rejected drafts rolled back "
                                                  "and the next chunk appended in one step"},
      {"rollback-batch", feature, false, "a rollback in a step where another sequence appends or rolls back"},
      {"rollback-multi-layer", feature, false, "a rollback of several layers together (sliding and full)"},
  };
  return classes;
}

const ClassInfo& class_info(const std::string& name) {
  for (const ClassInfo& c : class_catalogue()) {
    if (name == c.name) return c;
  }
  throw std::out_of_range("unknown boundary class \"" + name + "\"");
}

const std::vector<std::string>& boundary_classes() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const ClassInfo& c : class_catalogue()) n.emplace_back(c.name);
    return n;
  }();
  return names;
}

std::vector<std::string> case_features(const std::vector<std::string>& classes) {
  std::vector<std::string> out;
  for (const ClassInfo& c : class_catalogue()) {
    if (c.level == feature && has(classes, std::string(c.name))) out.emplace_back(c.name);
  }
  return out;
}

const char* case_level(const std::vector<std::string>& classes) { return case_features(classes).empty() ? "core" : "feature"; }

std::string class_not_applicable(const Capabilities& c, const std::string& name) {
  const bool layers = c.max_layers > 1, batch = c.max_batch > 1;
  const auto need = [](bool ok, const char* why) { return ok ? std::string() : std::string(why); };
  if (name == "W=1") return need(c.min_window <= 1, "min_window > 1");
  if (name == "batch-mixed" || name == "sit-out" || name == "join-mid-run" || name == "prefix-shared") {
    return need(batch, "max_batch 1");
  }
  if (name == "long-multi-seq") {
    if (!c.sink_logits) return "no sink logits";
    if (c.max_batch < 4) return "max_batch < 4";
    return need(c.max_window >= 128, "max_window < 128");
  }
  if (name == "multi-layer" || name == "sliding-and-full") return need(layers, "max_layers 1");
  if (name == "reset-p0-down" || name == "reset-p0-up") return need(c.settable_p0, "start positions not settable");
  if (name == "rope-neox") return need(has(c.rope_styles, RopeStyle::neox), "no neox RoPE");
  if (name == "rope-gptj") return need(has(c.rope_styles, RopeStyle::gptj), "no gptj RoPE");
  if (name == "rope-none") return need(has(c.rope_styles, RopeStyle::none), "no rope-none layers");
  if (name == "rope-linear") return need(has(c.rope_scalings, RopeScaling::linear), "no linear RoPE scaling");
  if (name == "rope-ntk") return need(has(c.rope_scalings, RopeScaling::ntk), "no NTK RoPE scaling");
  if (name == "partial-rotary") return need(c.partial_rotary, "no partial rotary");
  if (name == "per-layer-rope") return !layers ? "max_layers 1" : need(c.per_layer_rope, "no per-layer RoPE");
  if (name == "several-windows") return !layers ? "max_layers 1" : need(c.max_sliding_windows > 1, "max_sliding_windows 1");
  if (name == "kv-f16") return need(any_dtype(c, DType::f16), "no f16 K/V");
  if (name == "kv-bf16") return need(any_dtype(c, DType::bf16), "no bf16 K/V");
  if (name == "kv-fp8-e4m3") return need(any_dtype(c, DType::fp8_e4m3), "no fp8 e4m3 K/V");
  if (name == "kv-fp8-e5m2") return need(any_dtype(c, DType::fp8_e5m2), "no fp8 e5m2 K/V");
  if (name == "head_dim-64") return need(head_dim_ok(c, 64), "no head dim 64");
  if (name == "head_dim-128") return need(head_dim_ok(c, 128), "no head dim 128");
  // The position classes' cases start their sequences there: an engine that cannot set a start position
  // cannot run them, whatever its max_position.
  const auto position = [&](int log2, const char* why) {
    return !c.settable_p0 ? std::string("start positions not settable") : need(c.max_position >= (int64_t{1} << log2), why);
  };
  if (name == "pos-2^20") return position(20, "max_position < 2^20");
  if (name == "pos-2^24") return position(24, "max_position < 2^24");
  if (name == "pos-2^31") return position(30, "max_position < 2^30");
  if (name.rfind("rollback-", 0) == 0) {
    if (!c.rollback) return "no rollback (spec 1.1)";
    if (name == "rollback-batch") return need(batch, "max_batch 1");
    if (name == "rollback-multi-layer") return need(layers, "max_layers 1");
    if (name == "rollback-reserve-edge") return need(c.max_rollback_reserve > 0, "max_rollback_reserve 0");
    return "";
  }
  if (name == "sinks") return need(c.sinks, "no sink tokens");
  if (name == "sink-logits") return need(c.sink_logits, "no sink logits");
  if (name == "softcap") return need(c.softcap, "no softcap");
  const bool int8 = any_dtype(c, DType::int8);
  if (name == "int8-per_head") return need(int8 && has(c.int8_schemes, Int8Scheme::per_head), "no INT8 per_head");
  if (name == "int8-q8_0") return need(int8 && has(c.int8_schemes, Int8Scheme::q8_0), "no INT8 q8_0");
  if (name == "int8-static") return need(int8 && has(c.int8_schemes, Int8Scheme::static_tensor), "no INT8 static");
  if (name == "int8-half_away") return need(int8 && has(c.int8_roundings, Rounding::half_away), "no INT8 half-away rounding");
  if (name == "k-v-dtypes-differ") {
    if (!c.kv_formats_differ) return "K and V in one format only";
    for (DType k : c.k_dtypes) {
      for (DType v : c.v_dtypes) {
        if (k != v) return "";
      }
    }
    return "K and V in one format only";
  }
  return "";
}

const char* to_string(Coverage c) {
  switch (c) {
    case Coverage::judged: return "judged";
    case Coverage::not_applicable: return "not applicable";
    case Coverage::not_judged: return "not judged";
  }
  return "?";
}

std::vector<ClassCoverage> class_coverage(const Capabilities& caps, const std::vector<CaseCoverageInput>& cases) {
  std::vector<ClassCoverage> out;
  for (const ClassInfo& info : class_catalogue()) {
    ClassCoverage c;
    c.name = info.name;
    for (const CaseCoverageInput& k : cases) {
      if (k.judged && has(k.classes, c.name)) ++c.cases_judged;
    }
    c.why = class_not_applicable(caps, c.name);
    c.status = c.cases_judged > 0 ? Coverage::judged : c.why.empty() ? Coverage::not_judged : Coverage::not_applicable;
    if (c.status == Coverage::judged) c.why.clear();
    out.push_back(std::move(c));
  }
  return out;
}

std::map<std::string, int> cases_per_class(const Capabilities& caps, const std::vector<GoldenSpec>& set) {
  std::map<std::string, int> n;
  for (const ClassInfo& c : class_catalogue()) n[c.name] = 0;
  for (const GoldenSpec& s : set) {
    if (!conformance::capability_gap(caps, s.c).empty()) continue;
    for (const std::string& c : s.classes) ++n[c];
  }
  return n;
}

std::vector<std::pair<std::string, Capabilities>> matrix_capability_sets() {
  std::vector<std::pair<std::string, Capabilities>> sets;
  sets.emplace_back("core f32", conformance::core_capabilities({DType::f32}));
  Capabilities f16 = conformance::core_capabilities({DType::f16});
  f16.k_storage = f16.v_storage = Precision::f16;
  sets.emplace_back("core f16", f16);
  Capabilities bf16 = conformance::core_capabilities({DType::bf16});
  bf16.k_storage = bf16.v_storage = Precision::bf16;
  bf16.head_dims = {64, 128};
  sets.emplace_back("core bf16 d64/128", bf16);
  Capabilities q8 = conformance::core_capabilities();
  q8.k_dtypes.push_back(DType::int8);
  q8.v_dtypes.push_back(DType::int8);
  q8.int8_schemes = {Int8Scheme::q8_0};
  q8.int8_roundings = {Rounding::nearest_even, Rounding::half_away};
  q8.kv_formats_differ = true;  // as ggml's type_k and type_v: q8_0 K beside f16 V is common
  sets.emplace_back("core + q8_0", q8);
  Capabilities sinks = conformance::core_capabilities();
  sinks.sinks = true;
  sets.emplace_back("core + sinks", sinks);
  Capabilities logits = conformance::core_capabilities();
  logits.sink_logits = true;
  sets.emplace_back("core + sink logits", logits);
  Capabilities rollback = conformance::core_capabilities();
  rollback.rollback = true;  // spec 1.1 (golden format 2)
  rollback.max_rollback_reserve = int64_t{1} << 30;
  sets.emplace_back("core + rollback", rollback);
  Capabilities everything;
  everything.rollback = true;
  everything.max_rollback_reserve = int64_t{1} << 30;
  sets.emplace_back("everything", everything);
  return sets;
}

std::string coverage_matrix_markdown(const std::vector<GoldenSpec>& set) {
  const auto sets = matrix_capability_sets();
  std::vector<std::map<std::string, int>> counts;
  for (const auto& [name, caps] : sets) counts.push_back(cases_per_class(caps, set));
  std::ostringstream os;
  os << "| class | level |";
  for (const auto& s : sets) os << " " << s.first << " |";
  os << "\n|---|---|";
  for (size_t i = 0; i < sets.size(); ++i) os << "---:|";
  os << "\n";
  for (const ClassInfo& c : class_catalogue()) {
    os << "| `" << c.name << "` | " << (c.level == core ? (c.structural ? "core, structural" : "core") : "feature") << " |";
    for (size_t i = 0; i < sets.size(); ++i) {
      const std::string why = class_not_applicable(sets[i].second, c.name);
      if (why.empty()) {
        os << " " << counts[i].at(c.name) << " |";
      } else {
        os << " n/a |";
      }
    }
    os << "\n";
  }
  os << "| cases run | |";
  for (const auto& [name, caps] : sets) {
    int total = 0;
    for (const GoldenSpec& s : set) total += conformance::capability_gap(caps, s.c).empty() ? 1 : 0;
    os << " " << total << " |";
  }
  os << "\n";
  return os.str();
}

}  // namespace ringkv::golden
