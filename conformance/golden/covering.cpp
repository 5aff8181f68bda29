// ringkv golden: the covering cases (pairs.hpp, covering_cases): small cases the catalogue adds so that
// every value pair of every two feature axes is held by at least two committed cases.
//
// A row picks a value on each axis (K and V storage: one format, or two different ones). Rows are chosen
// greedily, one at a time: from candidates that each start at a pair still held by too few cases, the one
// with the most missing coverage per byte it adds to the golden set. The search is deterministic
// (std::mt19937_64, a fixed seed, raw draws only), so the set regenerates byte for byte.
#include "golden/pairs.hpp"
#include "golden/detail.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>

#include "ringkv/config.hpp"

namespace ringkv::golden {

using conformance::Case;
using conformance::DataMode;
using conformance::StepPlan;

namespace {

enum Axis { kStorage, kSinks, kSinkLogits, kSoftcap, kScale, kStyle, kScaling, kPartial, kPerLayer, kWindows, kFull,
            kRollback, kHeads, kHeadDim, kAxes };

// A row: the indices of its values in feature_axes() (storage: one or two formats).
struct Row {
  std::vector<int> storage;  // 1 or 2 indices into the kv-storage values
  std::vector<int> v;        // kAxes entries; v[kStorage] unused
  bool yes(Axis a) const { return v[a] == 1; }
};

const std::vector<std::string>& values(Axis a) { return feature_axes()[a].values; }

int index_of(Axis a, const std::string& value) {
  const auto& vs = values(a);
  return static_cast<int>(std::find(vs.begin(), vs.end(), value) - vs.begin());
}

// The storage choices: every format alone (K and V alike), and every two different ones (K, V).
const std::vector<std::vector<int>>& storage_choices() {
  static const std::vector<std::vector<int>> s = [] {
    std::vector<std::vector<int>> out;
    const int n = static_cast<int>(values(kStorage).size());
    for (int i = 0; i < n; ++i) out.push_back({i});
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) out.push_back({i, j});
    }
    return out;
  }();
  return s;
}

// A NoPE layer meets RoPE scaling or partial rotary only through another layer (with per-layer RoPE).
bool valid(const Row& r) {
  const bool none = values(kStyle)[r.v[kStyle]] == "none";
  return !(none && (values(kScaling)[r.v[kScaling]] != "none" || r.yes(kPartial)) && !r.yes(kPerLayer));
}

// The values the built case holds, per axis (as axis_values of its classes): a NoPE row with per-layer
// RoPE has a neox layer too.
std::vector<std::vector<int>> held(const Row& r) {
  std::vector<std::vector<int>> h(kAxes);
  h[kStorage] = r.storage;
  for (int a = 1; a < kAxes; ++a) h[a] = {r.v[a]};
  if (values(kStyle)[r.v[kStyle]] == "none" && r.yes(kPerLayer)) h[kStyle] = {index_of(kStyle, "neox"), r.v[kStyle]};
  return h;
}

int heads_q(const Row& r) { return values(kHeads)[r.v[kHeads]] == "mha" ? 1 : values(kHeads)[r.v[kHeads]] == "mqa" ? 2 : 4; }
int heads_kv(const Row& r) { return values(kHeads)[r.v[kHeads]] == "gqa" ? 2 : 1; }
int head_dim(const Row& r) { return values(kHeadDim)[r.v[kHeadDim]] == "other" ? 32 : std::stoi(values(kHeadDim)[r.v[kHeadDim]]); }
int layer_count(const Row& r) {
  const int n = 1 + (r.yes(kWindows) ? 1 : 0) + (r.yes(kFull) ? 1 : 0);
  return r.yes(kPerLayer) ? std::max(n, 2) : n;
}
// The schedule of a row without rollback: a chunk of 5 across the wrap of W = 4, then decodes to t = 2W.
std::vector<StepPlan> plain_steps() { return {StepPlan{{}, {5}}, StepPlan{{}, {1}}, StepPlan{{}, {1}}, StepPlan{{}, {2}}}; }
int64_t appended(const std::vector<StepPlan>& steps) {
  int64_t n = 0;
  for (const StepPlan& st : steps) n += st.tokens[0];
  return n;
}
int64_t rows_appended(const Row& r) {
  static const int64_t plain = appended(plain_steps()), rollback = appended(detail::one_layer_rollback_steps());
  return r.yes(kRollback) ? rollback : plain;
}

// Bytes the case adds to the golden set, roughly: per output element about 56 bytes (expected values, their
// tolerance inputs, q), per layer and query head.
double cost(const Row& r) {
  return 3000.0 + static_cast<double>(rows_appended(r)) * layer_count(r) * heads_q(r) * head_dim(r) * 56.0;
}

// Pair counts, flat: count[offset(a, i, b, j)] for axes a < b.
class PairCounts {
 public:
  PairCounts() {
    const auto& axes = feature_axes();
    offsets_.assign(axes.size() * axes.size(), 0);
    size_t n = 0;
    for (size_t a = 0; a < axes.size(); ++a) {
      for (size_t b = a + 1; b < axes.size(); ++b) {
        offsets_[a * axes.size() + b] = n;
        n += axes[a].values.size() * axes[b].values.size();
      }
    }
    count_.assign(n, 0);
  }
  int& at(size_t a, int i, size_t b, int j) {
    const size_t nb = feature_axes()[b].values.size();
    return count_[offsets_[a * feature_axes().size() + b] + static_cast<size_t>(i) * nb + static_cast<size_t>(j)];
  }
  void add(const std::vector<std::vector<int>>& h) {
    for (size_t a = 0; a < h.size(); ++a) {
      for (size_t b = a + 1; b < h.size(); ++b) {
        for (int i : h[a]) {
          for (int j : h[b]) ++at(a, i, b, j);
        }
      }
    }
  }
  // Missing coverage the values would add (each pair short of `need` counts its shortfall, up to 2).
  int gain(const std::vector<std::vector<int>>& h, int need) {
    int g = 0;
    for (size_t a = 0; a < h.size(); ++a) {
      for (size_t b = a + 1; b < h.size(); ++b) {
        for (int i : h[a]) {
          for (int j : h[b]) g += std::max(0, need - at(a, i, b, j));
        }
      }
    }
    return g;
  }
  struct Short { size_t a; int i; size_t b; int j; };
  std::vector<Short> short_of(int need) {
    std::vector<Short> out;
    const auto& axes = feature_axes();
    for (size_t a = 0; a < axes.size(); ++a) {
      for (size_t b = a + 1; b < axes.size(); ++b) {
        for (int i = 0; i < static_cast<int>(axes[a].values.size()); ++i) {
          for (int j = 0; j < static_cast<int>(axes[b].values.size()); ++j) {
            if (at(a, i, b, j) < need) out.push_back({a, i, b, j});
          }
        }
      }
    }
    return out;
  }

 private:
  std::vector<size_t> offsets_;
  std::vector<int> count_;
};

std::vector<std::vector<int>> as_indices(const std::vector<std::vector<std::string>>& vals) {
  std::vector<std::vector<int>> h(vals.size());
  for (size_t a = 0; a < vals.size(); ++a) {
    for (const std::string& x : vals[a]) h[a].push_back(index_of(static_cast<Axis>(a), x));
  }
  return h;
}

// The next row: the best of `candidates`, each seeded with one pair still short of `need`, its other axes
// set one by one (in axis order) to the value with the most gain per byte.
Row next_row(PairCounts& counts, const std::vector<PairCounts::Short>& todo, std::mt19937_64& rng, int need) {
  const auto pick = [&rng](size_t n) { return static_cast<size_t>(rng() % n); };
  std::optional<Row> best;
  double best_score = 0;
  for (int candidate = 0; candidate < 40; ++candidate) {
    const PairCounts::Short p = todo[pick(todo.size())];
    Row r;
    r.v.assign(kAxes, 0);
    r.storage = storage_choices()[pick(storage_choices().size())];
    for (int a = 1; a < kAxes; ++a) r.v[a] = static_cast<int>(pick(values(static_cast<Axis>(a)).size()));
    const auto fix = [&r](size_t axis, int value) {
      if (axis == kStorage) {
        if (std::find(r.storage.begin(), r.storage.end(), value) == r.storage.end()) r.storage = {value};
      } else {
        r.v[axis] = value;
      }
    };
    fix(p.a, p.i);
    fix(p.b, p.j);
    for (int a = 0; a < kAxes; ++a) {
      if (static_cast<size_t>(a) == p.a || static_cast<size_t>(a) == p.b) continue;
      Row trial = r, chosen = r;
      double chosen_score = -1;
      const size_t n = a == kStorage ? storage_choices().size() : values(static_cast<Axis>(a)).size();
      for (size_t k = 0; k < n; ++k) {
        if (a == kStorage) {
          trial.storage = storage_choices()[k];
        } else {
          trial.v[a] = static_cast<int>(k);
        }
        if (!valid(trial)) continue;
        const double s = counts.gain(held(trial), need) / cost(trial);
        if (s > chosen_score) {
          chosen_score = s;
          chosen = trial;
        }
      }
      r = chosen;
    }
    if (!valid(r)) continue;
    const int g = counts.gain(held(r), need);
    if (g == 0) continue;
    const double s = g / cost(r);
    if (!best || s > best_score) {
      best = r;
      best_score = s;
    }
  }
  if (!best) throw std::logic_error("covering_cases: no candidate row adds coverage");
  return *best;
}

KvFormat storage_format(const std::string& v) {
  if (v == "f32") return KvFormat::of(DType::f32);
  if (v == "f16") return KvFormat::of(DType::f16);
  if (v == "bf16") return KvFormat::of(DType::bf16);
  if (v == "fp8-e4m3") return KvFormat::of(DType::fp8_e4m3, 0.5f);
  if (v == "fp8-e5m2") return KvFormat::of(DType::fp8_e5m2, 1.0f);
  if (v == "int8-per_head") return KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
  if (v == "int8-q8_0") return KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away);
  return KvFormat::int8(Int8Scheme::static_tensor, Rounding::nearest_even, 0.025f);  // codes to 3.2: the data's range
}

std::string short_name(const std::string& storage) {
  std::string s = storage;
  for (const char* prefix : {"int8-", "fp8-"}) {
    if (s.rfind(prefix, 0) == 0) s = std::string(prefix[0] == 'i' ? "i8" : "") + s.substr(std::string(prefix).size());
  }
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  return s;
}

// The case of a row: one sequence from position 0 (so that an engine that cannot set p0 runs it) of 9
// tokens (a chunk of 5 across the wrap of W = 4, then decodes to t = 2W), or with rollback the one-layer
// rollback schedule (refused, repeated, at the reserve's edge, across the wrap). Layers: a sliding layer of
// W 4 (S 1 with sinks), W 3 beside it for several windows, a full layer (W 64) for sliding beside full;
// per-layer RoPE gives the last layer theta 500000 (a NoPE row: a neox layer instead).
GoldenSpec build(const Row& r, uint64_t seed) {
  const std::string style = values(kStyle)[r.v[kStyle]], scaling = values(kScaling)[r.v[kScaling]];
  const int D = head_dim(r), Hq = heads_q(r);
  RopeConfig rope{style == "gptj" ? RopeStyle::gptj : style == "none" ? RopeStyle::none : RopeStyle::neox, 10000.0, 0,
                  RopeScaling::none, 1.0};
  RopeConfig rotated = rope;  // the scaling and rotary dim of the row, on a rotating layer
  if (rotated.style == RopeStyle::none) rotated.style = RopeStyle::neox;
  if (scaling == "linear") {
    rotated.scaling = RopeScaling::linear;
    rotated.factor = 4.0;
  } else if (scaling == "ntk") {
    rotated.scaling = RopeScaling::ntk;
    rotated.factor = 8.0;
  }
  if (r.yes(kPartial)) rotated.rotary_dim = D / 2;
  if (rope.style != RopeStyle::none) rope = rotated;
  const int64_t reserve = r.yes(kRollback) ? 2 : 0;
  std::vector<LayerConfig> layers{LayerConfig{4, r.yes(kSinks) ? 1 : 0, rope, reserve}};
  if (r.yes(kWindows)) layers.push_back(LayerConfig{3, 0, rope, reserve});
  if (r.yes(kFull)) layers.push_back(LayerConfig{64, 0, rope, 0});
  if (r.yes(kPerLayer)) {
    if (layers.size() == 1) layers.push_back(LayerConfig{4, 0, rope, reserve});
    RopeConfig& last = layers.back().rope;
    if (rope.style == RopeStyle::none) {
      last = rotated;
    } else {
      last.theta = 500000.0;
    }
  }
  Case c = conformance::shaped_case(layers, Hq, heads_kv(r), D, DataMode::random, seed);
  const auto& st = values(kStorage);
  c.config.k_format = storage_format(st[r.storage.front()]);
  c.config.v_format = storage_format(st[r.storage.back()]);
  if (r.yes(kSoftcap)) {
    c.config.softcap = 5.0;
    c.qk_amplitude = 3.0f;  // scores beyond the cap
  }
  if (r.yes(kScale)) c.config.softmax_scale = 0.3;
  if (r.yes(kSinkLogits)) {
    for (size_t l = 0; l < layers.size(); ++l) {
      std::vector<float> per_head;
      for (int h = 0; h < Hq; ++h) per_head.push_back(static_cast<float>(h) - 0.5f * static_cast<float>(l) + 0.25f);
      c.config.sink_logits.push_back(per_head);
    }
  }
  c.config.batch = 1;
  c.config.start_positions = {0};
  if (r.yes(kRollback)) {
    c.steps = detail::one_layer_rollback_steps();
    c.config.max_tokens = 40;
  } else {
    c.steps = plain_steps();
    c.config.max_tokens = appended(c.steps);
  }
  // The name says the row: storage, then each feature present, heads and head dim.
  std::string name = "pairwise_" + (r.storage.size() == 1 ? "kv_" + short_name(st[r.storage[0]])
                                                          : "k_" + short_name(st[r.storage[0]]) + "_v_" +
                                                                short_name(st[r.storage[1]]));
  const auto tag = [&](Axis a, const char* word) {
    if (r.yes(a)) name += std::string("_") + word;
  };
  tag(kSinks, "sinks");
  tag(kSinkLogits, "sinklogits");
  tag(kSoftcap, "softcap");
  tag(kScale, "scale");
  if (style != "neox") name += "_" + (style == "none" ? std::string("nope") : style);
  if (scaling != "none") name += "_" + scaling;
  tag(kPartial, "partial");
  tag(kPerLayer, "perlayer");
  tag(kWindows, "windows2");
  tag(kFull, "full");
  tag(kRollback, "rollback");
  name += "_" + values(kHeads)[r.v[kHeads]] + "_d" + std::to_string(D);
  return GoldenSpec{name, {}, std::move(c)};
}

}  // namespace

std::vector<GoldenSpec> covering_cases(const std::vector<GoldenSpec>& base, int need) {
  PairCounts counts;
  for (const GoldenSpec& g : base) counts.add(as_indices(axis_values(g.classes)));
  std::mt19937_64 rng(35);
  std::vector<GoldenSpec> out;
  std::map<std::string, int> names;
  for (std::vector<PairCounts::Short> todo = counts.short_of(need); !todo.empty(); todo = counts.short_of(need)) {
    if (out.size() >= 200) throw std::logic_error("covering_cases: more than 200 rows");
    const Row r = next_row(counts, todo, rng, need);
    counts.add(held(r));
    GoldenSpec g = build(r, 300 + out.size());
    if (int n = ++names[g.name]; n > 1) g.name += "_" + std::to_string(n);
    g.classes = derive_classes(g.c);
    if (as_indices(axis_values(g.classes)) != held(r)) {
      throw std::logic_error("covering_cases: the case " + g.name + " does not hold the values of its row");
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace ringkv::golden
