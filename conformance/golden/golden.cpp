#include "golden/golden.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "golden/sha256.hpp"
#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/ring.hpp"
#include "support/config_json.hpp"
#include "support/oracle.hpp"

namespace ringkv::golden {

using conformance::Case;
using conformance::DataMode;
using conformance::DimStats;
using conformance::ResetPlan;
using conformance::ScoreStats;
using conformance::StepPlan;
using nlohmann::json;

namespace {

constexpr int64_t k2p20 = int64_t{1} << 20;
constexpr int64_t k2p24 = int64_t{1} << 24;
constexpr int64_t k2p30 = int64_t{1} << 30;

std::string fmt(double x) {
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}

template <typename T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// ---------------------------------------------------------------------------------------------
// Building blocks of the committed set.

RopeConfig neox(double theta = 10000.0) { return RopeConfig{RopeStyle::neox, theta, 0, RopeScaling::none, 1.0}; }
RopeConfig gptj(double theta = 10000.0) { return RopeConfig{RopeStyle::gptj, theta, 0, RopeScaling::none, 1.0}; }
RopeConfig no_rope() { return RopeConfig{RopeStyle::none, 10000.0, 0, RopeScaling::none, 1.0}; }

KvFormat fmt_of(DType d, float scale = 1.0f) {
  KvFormat f;
  f.dtype = d;
  f.scale = scale;
  return f;
}

Case shape(std::vector<LayerConfig> layers, int Hq, int Hkv, int D, DataMode data, uint64_t seed) {
  Case c;
  c.config.layers = std::move(layers);
  c.config.num_q_heads = Hq;
  c.config.num_kv_heads = Hkv;
  c.config.head_dim = D;
  c.data = data;
  c.seed = seed;
  return c;
}

// One sequence appending the given chunks (one step each), starting at p0.
Case& single(Case& c, const std::vector<int64_t>& chunks, int64_t p0 = 0) {
  c.config.batch = 1;
  c.config.start_positions = {p0};
  int64_t total = 0;
  for (int64_t n : chunks) {
    c.steps.push_back(StepPlan{{}, {n}});
    total += n;
  }
  c.config.max_tokens = total;
  return c;
}

std::vector<int64_t> repeat(int64_t n, int64_t value) { return std::vector<int64_t>(static_cast<size_t>(n), value); }

// Tokens per stream between resets: the max_tokens a schedule needs.
int64_t needed_max_tokens(const Case& c) {
  std::vector<int64_t> seen(static_cast<size_t>(c.config.batch), 0);
  int64_t most = 1;
  for (const StepPlan& st : c.steps) {
    for (const ResetPlan& r : st.resets) seen[static_cast<size_t>(r.sequence)] = 0;
    for (size_t s = 0; s < st.tokens.size(); ++s) {
      seen[s] += st.tokens[s];
      most = std::max(most, seen[s]);
    }
  }
  return most;
}

GoldenSpec spec(std::string name, std::vector<std::string> classes, Case c) {
  return GoldenSpec{std::move(name), std::move(classes), std::move(c)};
}

}  // namespace

const std::vector<std::string>& boundary_classes() {
  static const std::vector<std::string> classes{
      "t<W", "t=W-1", "t=W", "t=W+1", "t=kW", "chunk>W", "chunk-crosses-wrap", "sinks", "W=1", "W>=length",
      "mha", "gqa", "mqa", "batch-mixed", "sit-out", "reset-reuse", "rope-neox", "rope-gptj", "rope-none",
      "rope-linear", "rope-ntk", "partial-rotary", "pos-2^20", "pos-2^24", "kv-f16", "kv-bf16", "kv-fp8-e4m3",
      "kv-fp8-e5m2", "int8-per_head", "int8-q8_0", "int8-static", "softcap", "multi-layer", "mixed-windows",
      "per-layer-rope", "sink-logits", "k-v-dtypes-differ", "needle-W+1", "needle-W-1", "head_dim-64",
      "head_dim-128"};
  return classes;
}

std::vector<GoldenSpec> golden_set() {
  const DataMode needle = DataMode::needle, random = DataMode::random;
  std::vector<GoldenSpec> set;

  // ---- the window boundaries, decode and prefill (needles: W +- 1 moves outputs by O(1)) ----
  {
    Case c = shape({LayerConfig{8, 0, neox()}}, 4, 2, 32, needle, 101);
    single(c, repeat(33, 1));
    set.push_back(spec("decode_w8", {"t<W", "t=W-1", "t=W", "t=W+1", "t=kW", "needle-W+1", "needle-W-1", "gqa", "rope-neox"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 2, neox()}}, 4, 1, 32, needle, 102);
    single(c, repeat(28, 1), 5);
    set.push_back(spec("decode_w8_sinks2", {"t<W", "t=W", "t=W+1", "t=kW", "sinks", "mqa", "needle-W+1", "needle-W-1"}, c));
  }
  {
    Case c = shape({LayerConfig{16, 0, neox()}}, 4, 1, 32, needle, 103);
    single(c, {15, 16, 17, 1});
    set.push_back(spec("prefill_chunks_w16", {"t=W-1", "t=W", "t=kW", "chunk>W", "chunk-crosses-wrap", "mqa", "needle-W+1", "needle-W-1"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 1, neox()}}, 2, 2, 32, needle, 104);
    single(c, {5, 21, 1, 8});
    set.push_back(spec("chunk_2w_crosses_wrap", {"chunk>W", "chunk-crosses-wrap", "t=kW", "sinks", "mha", "needle-W+1"}, c));
  }
  {
    Case c = shape({LayerConfig{4, 4, neox()}}, 4, 2, 32, needle, 105);
    single(c, {3, 1, 5, 9, 1});
    set.push_back(spec("sinks4_w4", {"sinks", "chunk>W", "t=W", "t=kW", "gqa", "needle-W+1", "needle-W-1"}, c));
  }
  {
    Case c = shape({LayerConfig{32, 4, neox()}}, 2, 1, 32, needle, 106);
    single(c, {34, 1, 1, 1, 31}, 17);
    set.push_back(spec("needle_w32_s4", {"needle-W+1", "needle-W-1", "t=W", "t=W+1", "chunk>W", "sinks", "mqa"}, c));
  }
  {
    Case c = shape({LayerConfig{1, 0, neox()}, LayerConfig{1, 2, neox()}}, 2, 1, 16, random, 107);
    single(c, {1, 1, 3, 2});
    set.push_back(spec("window_1", {"W=1", "sinks", "multi-layer", "mqa"}, c));
  }
  {
    Case c = shape({LayerConfig{64, 0, neox()}, LayerConfig{24, 0, neox()}}, 4, 4, 16, random, 108);
    single(c, {7, 1, 16});
    set.push_back(spec("window_ge_length", {"W>=length", "multi-layer", "mha"}, c));
  }

  // ---- batches, sitting out, resets ----
  {
    Case c = shape({LayerConfig{6, 1, neox()}}, 4, 2, 16, random, 109);
    c.config.batch = 3;
    c.config.start_positions = {0, 100, 7};
    c.steps = {StepPlan{{}, {4, 1, 0}}, StepPlan{{}, {1, 0, 7}}, StepPlan{{}, {0, 1, 1}},
               StepPlan{{}, {3, 3, 0}}, StepPlan{{}, {1, 1, 1}}, StepPlan{{}, {0, 0, 2}}};
    c.config.max_tokens = needed_max_tokens(c);
    set.push_back(spec("batch_mixed_sit_out", {"batch-mixed", "sit-out", "sinks", "gqa"}, c));
  }
  {
    Case c = shape({LayerConfig{4, 1, neox()}}, 2, 1, 32, random, 110);
    c.config.batch = 2;
    c.config.start_positions = {0, 5};
    c.steps = {StepPlan{{}, {6, 3}},
               StepPlan{{}, {1, 1}},
               StepPlan{{ResetPlan{0, 1000, 2}}, {3, 1}},    // new p0 above the old positions
               StepPlan{{ResetPlan{1, 2, 3}}, {2, 2}},       // new p0 below them
               StepPlan{{}, {1, 1}},
               StepPlan{{ResetPlan{0, 0, 0}}, {5, 0}},       // reuse: stream 0 again from p0 = 0
               StepPlan{{ResetPlan{1, 300, 4}}, {0, 0}},     // reset while sitting out
               StepPlan{{}, {1, 2}}};
    c.config.max_tokens = needed_max_tokens(c);
    set.push_back(spec("reset_reuse", {"reset-reuse", "batch-mixed", "sit-out", "sinks", "mqa"}, c));
  }

  // ---- RoPE ----
  {
    Case c = shape({LayerConfig{8, 0, gptj()}}, 4, 2, 32, needle, 111);
    single(c, {9, 1, 1, 8}, 3);
    set.push_back(spec("rope_gptj", {"rope-gptj", "t=W", "t=W+1", "chunk>W", "needle-W+1"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 0, no_rope()}}, 4, 2, 32, random, 112);
    single(c, {9, 1, 1, 8});
    set.push_back(spec("rope_none", {"rope-none", "chunk>W"}, c));
  }
  {
    RopeConfig r = neox();
    r.scaling = RopeScaling::linear;
    r.factor = 4.0;
    Case c = shape({LayerConfig{8, 1, r}}, 4, 2, 32, random, 113);
    single(c, {9, 1, 1, 8}, 4096);
    set.push_back(spec("rope_linear", {"rope-linear", "rope-neox"}, c));
  }
  {
    RopeConfig r = neox(10000.0);
    r.scaling = RopeScaling::ntk;
    r.factor = 8.0;
    Case c = shape({LayerConfig{8, 0, r}}, 4, 2, 32, random, 114);
    single(c, {9, 1, 1, 8}, 20000);
    set.push_back(spec("rope_ntk", {"rope-ntk", "rope-neox"}, c));
  }
  {
    RopeConfig a = neox();
    a.rotary_dim = 16;
    RopeConfig b = gptj(500000.0);
    b.rotary_dim = 8;
    Case c = shape({LayerConfig{8, 0, a}, LayerConfig{8, 0, b}}, 4, 2, 32, random, 115);
    single(c, {9, 1, 1, 8}, 50);
    set.push_back(spec("partial_rotary", {"partial-rotary", "per-layer-rope", "rope-neox", "rope-gptj", "multi-layer"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 1, neox()}}, 4, 2, 32, needle, 116);
    single(c, {10, 1, 1, 7}, k2p20);
    set.push_back(spec("pos_2p20", {"pos-2^20", "needle-W+1"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 0, gptj(500000.0)}}, 4, 2, 32, needle, 117);
    single(c, {9, 1, 1, 8}, k2p24);
    set.push_back(spec("pos_2p24", {"pos-2^24", "rope-gptj", "needle-W+1"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 0, neox()}}, 4, 2, 32, random, 118);
    single(c, {9, 1, 1, 5});
    c.config.start_positions = {(int64_t{1} << 31) - c.config.max_tokens};
    set.push_back(spec("pos_max", {"pos-2^24", "pos-2^31"}, c));
  }

  // ---- storage formats ----
  const auto storage = [&](const char* name, std::vector<std::string> classes, KvFormat k, KvFormat v, uint64_t seed,
                           int D = 32) {
    Case c = shape({LayerConfig{8, 1, neox()}}, 4, 2, D, random, seed);
    c.config.k_format = k;
    c.config.v_format = v;
    single(c, {9, 1, 6, 1}, 3);
    set.push_back(spec(name, std::move(classes), c));
  };
  storage("kv_f16", {"kv-f16"}, fmt_of(DType::f16), fmt_of(DType::f16), 119);
  storage("kv_bf16", {"kv-bf16"}, fmt_of(DType::bf16), fmt_of(DType::bf16), 120);
  storage("kv_fp8_e4m3", {"kv-fp8-e4m3"}, fmt_of(DType::fp8_e4m3, 0.25f), fmt_of(DType::fp8_e4m3, 0.25f), 121);
  storage("kv_fp8_e5m2", {"kv-fp8-e5m2"}, fmt_of(DType::fp8_e5m2), fmt_of(DType::fp8_e5m2), 122);
  storage("int8_per_head", {"int8-per_head", "int8-half_away"},
          KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even), KvFormat::int8(Int8Scheme::per_head, Rounding::half_away), 123);
  storage("int8_q8_0", {"int8-q8_0", "int8-half_away"}, KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away),
          KvFormat::int8(Int8Scheme::q8_0, Rounding::nearest_even), 124, 64);
  storage("int8_static", {"int8-static"}, KvFormat::int8(Int8Scheme::static_tensor, Rounding::nearest_even, 0.02f),
          KvFormat::int8(Int8Scheme::static_tensor, Rounding::nearest_even, 0.01f), 125);
  storage("k_fp8_e4m3_v_f16", {"k-v-dtypes-differ", "kv-fp8-e4m3", "kv-f16"}, fmt_of(DType::fp8_e4m3, 0.5f),
          fmt_of(DType::f16), 126);
  storage("k_int8_v_bf16", {"k-v-dtypes-differ", "int8-per_head", "kv-bf16"},
          KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even), fmt_of(DType::bf16), 127);

  // ---- scores: softcap, sink logits; several layers ----
  {
    Case c = shape({LayerConfig{8, 0, neox()}}, 4, 2, 32, random, 128);
    c.config.softcap = 5.0;
    c.config.softmax_scale = 0.3;
    c.qk_amplitude = 3.0f;
    single(c, {9, 1, 1, 8});
    set.push_back(spec("softcap", {"softcap", "softmax-scale"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 0, neox()}, LayerConfig{4, 1, gptj()}}, 4, 2, 32, random, 129);
    c.config.sink_logits = {{0.5f, -1.0f, 2.0f, 3.0f}, {-3.0f, 0.0f, 1.0f, 4.0f}};
    single(c, {9, 1, 1, 8});
    set.push_back(spec("sink_logits", {"sink-logits", "multi-layer", "per-layer-rope"}, c));
  }
  {
    Case c = shape({LayerConfig{4, 0, neox()}, LayerConfig{16, 2, gptj(500000.0)}, LayerConfig{64, 0, no_rope()}}, 4, 2,
                   32, needle, 130);
    single(c, {5, 1, 12, 1, 1}, 11);
    set.push_back(spec("multi_layer_mixed", {"multi-layer", "mixed-windows", "per-layer-rope", "rope-none", "W>=length", "needle-W+1"}, c));
  }

  // ---- realistic head dims and head counts (real kernels reject tiny head dims) ----
  {
    Case c = shape({LayerConfig{16, 0, neox()}}, 8, 2, 64, needle, 131);
    c.config.k_format = c.config.v_format = fmt_of(DType::f16);
    single(c, {15, 1, 1, 1, 15});
    set.push_back(spec("d64_gqa_f16_needle", {"head_dim-64", "gqa", "kv-f16", "needle-W+1", "needle-W-1", "t=W-1", "t=W", "t=W+1", "t=kW"}, c));
  }
  {
    Case c = shape({LayerConfig{16, 2, neox()}}, 8, 2, 64, random, 132);
    single(c, {20, 1, 1, 4}, 1000);
    set.push_back(spec("d64_gqa_random", {"head_dim-64", "gqa", "sinks", "chunk>W"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 2, neox(500000.0)}}, 16, 4, 128, needle, 133);
    c.config.k_format = c.config.v_format = fmt_of(DType::bf16);
    single(c, {9, 1, 1, 1, 6});
    set.push_back(spec("d128_gqa_bf16_needle", {"head_dim-128", "gqa", "kv-bf16", "sinks", "needle-W+1", "needle-W-1"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 0, neox()}}, 8, 1, 128, random, 134);
    c.config.k_format = c.config.v_format = KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away);
    single(c, {10, 1, 5});
    set.push_back(spec("d128_mqa_int8_q8_0", {"head_dim-128", "mqa", "int8-q8_0", "chunk>W"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 1, neox()}}, 8, 2, 64, random, 135);
    c.config.k_format = c.config.v_format = KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
    c.config.batch = 2;
    c.config.start_positions = {0, 40};
    c.steps = {StepPlan{{}, {9, 4}}, StepPlan{{}, {1, 1}}, StepPlan{{ResetPlan{1, 500, 2}}, {1, 6}},
               StepPlan{{}, {1, 0}}, StepPlan{{}, {1, 1}}};
    c.config.max_tokens = needed_max_tokens(c);
    set.push_back(spec("d64_int8_batch_reset", {"head_dim-64", "int8-per_head", "reset-reuse", "batch-mixed", "sit-out", "gqa"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 0, gptj()}}, 16, 4, 128, random, 136);
    single(c, {9, 1}, k2p20 + 3);
    set.push_back(spec("d128_gqa_gptj_random", {"head_dim-128", "gqa", "rope-gptj", "pos-2^20", "chunk>W"}, c));
  }
  {
    Case c = shape({LayerConfig{8, 4, neox()}}, 8, 2, 64, random, 137);
    c.config.k_format = c.config.v_format = fmt_of(DType::fp8_e4m3, 0.5f);
    single(c, {12, 1, 1});
    set.push_back(spec("d64_gqa_fp8_e4m3", {"head_dim-64", "gqa", "kv-fp8-e4m3", "sinks", "chunk>W"}, c));
  }
  for (GoldenSpec& s : set) conformance::freeze_needles(s.c);
  return set;
}

// ---------------------------------------------------------------------------------------------
// Classes that follow from a case's config and schedule (a tag must not claim what a case lacks).

std::vector<std::string> derive_classes(const Case& c) {
  const Config& cfg = c.config;
  std::set<std::string> out;
  const int L = static_cast<int>(cfg.layers.size());
  if (cfg.num_kv_heads == cfg.num_q_heads) out.insert("mha");
  else if (cfg.num_kv_heads == 1) out.insert("mqa");
  else out.insert("gqa");
  if (cfg.head_dim == 64) out.insert("head_dim-64");
  if (cfg.head_dim == 128) out.insert("head_dim-128");
  if (L > 1) out.insert("multi-layer");
  if (cfg.softcap) out.insert("softcap");
  if (cfg.softmax_scale) out.insert("softmax-scale");
  if (!cfg.sink_logits.empty()) out.insert("sink-logits");
  if (!(cfg.k_format == cfg.v_format)) out.insert("k-v-dtypes-differ");
  for (const KvFormat* f : {&cfg.k_format, &cfg.v_format}) {
    switch (f->dtype) {
      case DType::f32: break;
      case DType::f16: out.insert("kv-f16"); break;
      case DType::bf16: out.insert("kv-bf16"); break;
      case DType::fp8_e4m3: out.insert("kv-fp8-e4m3"); break;
      case DType::fp8_e5m2: out.insert("kv-fp8-e5m2"); break;
      case DType::int8:
        out.insert(f->int8_scheme == Int8Scheme::per_head ? "int8-per_head"
                   : f->int8_scheme == Int8Scheme::q8_0   ? "int8-q8_0"
                                                          : "int8-static");
        if (f->rounding == Rounding::half_away) out.insert("int8-half_away");
        break;
    }
  }
  std::set<int64_t> windows;
  std::set<std::string> ropes;
  for (const LayerConfig& l : cfg.layers) {
    windows.insert(l.window);
    if (l.sinks > 0) out.insert("sinks");
    if (l.window == 1) out.insert("W=1");
    if (l.window >= cfg.max_tokens) out.insert("W>=length");
    const RopeConfig& r = l.rope;
    ropes.insert(std::string(to_string(r.style)) + ":" + fmt(r.theta) + ":" + std::to_string(rotary_dim(r, cfg.head_dim)) +
                 ":" + to_string(r.scaling) + ":" + fmt(r.factor));
    out.insert(std::string("rope-") + to_string(r.style));
    if (r.style != RopeStyle::none) {
      if (r.scaling != RopeScaling::none) out.insert(std::string("rope-") + to_string(r.scaling));
      if (rotary_dim(r, cfg.head_dim) < cfg.head_dim) out.insert("partial-rotary");
    }
  }
  if (windows.size() > 1) out.insert("mixed-windows");
  if (ropes.size() > 1) out.insert("per-layer-rope");

  // The schedule: token indices, chunks, progress, positions.
  const int B = cfg.batch;
  std::vector<int64_t> seen(static_cast<size_t>(B), 0), p0(static_cast<size_t>(B));
  for (int s = 0; s < B; ++s) p0[static_cast<size_t>(s)] = start_position(cfg, s);
  for (const StepPlan& st : c.steps) {
    if (!st.resets.empty()) out.insert("reset-reuse");
    for (const ResetPlan& r : st.resets) {
      seen[static_cast<size_t>(r.sequence)] = 0;
      p0[static_cast<size_t>(r.sequence)] = r.start_position;
    }
    if (B > 1) {
      int active = 0;
      for (int64_t n : st.tokens) active += n > 0 ? 1 : 0;
      if (active < B) out.insert("sit-out");
      if (std::set<int64_t>(seen.begin(), seen.end()).size() > 1) out.insert("batch-mixed");
    }
    for (int s = 0; s < B; ++s) {
      const int64_t n = st.tokens[static_cast<size_t>(s)], a = seen[static_cast<size_t>(s)];
      if (n == 0) continue;
      const int64_t last = p0[static_cast<size_t>(s)] + a + n - 1;
      if (last >= k2p30) out.insert("pos-2^31");
      if (last >= k2p24) out.insert("pos-2^24");
      else if (last >= k2p20) out.insert("pos-2^20");
      for (const LayerConfig& l : cfg.layers) {
        const int64_t W = l.window, S = l.sinks;
        if (W < 2) continue;
        if (n > W) out.insert("chunk>W");
        const bool full_ring = ring_capacity(l, cfg.max_tokens) == S + W;
        for (int64_t i = a; i < a + n; ++i) {
          if (i < W - 1) out.insert("t<W");
          if (i == W - 1) out.insert("t=W-1");
          if (i == W) out.insert("t=W");
          if (i == W + 1) out.insert("t=W+1");
          if (i >= 2 * W && i % W == 0) out.insert("t=kW");
          if (full_ring && i > a && i >= S + W && (i - S) % W == 0) out.insert("chunk-crosses-wrap");
        }
      }
      seen[static_cast<size_t>(s)] += n;
    }
  }
  // Needles: some planted boundary target t (with t - W not a sink) is reached by the schedule.
  if (c.data == DataMode::needle) {
    const int64_t most = needed_max_tokens(c);
    for (int l = 0; l < L; ++l) {
      const int64_t W = conformance::needle_window(c, l), S = conformance::needle_sinks(c, l);
      for (int64_t t : conformance::needle_targets(c, l)) {
        if (t < most && t - W >= S && W >= 2) {
          out.insert("needle-W+1");
          out.insert("needle-W-1");
        }
      }
    }
  }
  return {out.begin(), out.end()};
}

// ---------------------------------------------------------------------------------------------
// Layout: rows and chunks follow from the schedule alone.

namespace {

void layout_rows(const Case& c, std::vector<GoldenRow>* rows, std::vector<GoldenChunk>* chunks) {
  const int B = c.config.batch;
  std::vector<int> stream(static_cast<size_t>(B));
  std::vector<int64_t> seen(static_cast<size_t>(B), 0), p0(static_cast<size_t>(B));
  for (int s = 0; s < B; ++s) {
    stream[static_cast<size_t>(s)] = c.initial_stream(s);
    p0[static_cast<size_t>(s)] = start_position(c.config, s);
  }
  for (size_t st = 0; st < c.steps.size(); ++st) {
    const StepPlan& plan = c.steps[st];
    for (const ResetPlan& r : plan.resets) {
      stream[static_cast<size_t>(r.sequence)] = r.stream;
      seen[static_cast<size_t>(r.sequence)] = 0;
      p0[static_cast<size_t>(r.sequence)] = r.start_position;
    }
    for (int s = 0; s < B; ++s) {
      const int64_t n = plan.tokens[static_cast<size_t>(s)];
      if (n == 0) continue;
      chunks->push_back(GoldenChunk{static_cast<int>(st), s, static_cast<int64_t>(rows->size()), n});
      for (int64_t t = 0; t < n; ++t) {
        const int64_t index = seen[static_cast<size_t>(s)] + t;
        rows->push_back(GoldenRow{static_cast<int>(st), s, index, p0[static_cast<size_t>(s)] + index, stream[static_cast<size_t>(s)]});
      }
      seen[static_cast<size_t>(s)] += n;
    }
  }
}

struct Dims {
  int64_t L, R, Hq, Hkv, D, T, B;
  int64_t k_spr, v_spr;
};

Dims dims_of(const Case& c, int64_t R) {
  const Config& cfg = c.config;
  return Dims{static_cast<int64_t>(cfg.layers.size()), R, cfg.num_q_heads, cfg.num_kv_heads, cfg.head_dim,
              static_cast<int64_t>(c.steps.size()), cfg.batch, scales_per_row(cfg.k_format, cfg.head_dim),
              scales_per_row(cfg.v_format, cfg.head_dim)};
}

size_t count(std::initializer_list<int64_t> dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

}  // namespace

size_t GoldenCase::q_offset(int layer, int64_t row, int head) const {
  const Config& cfg = c.config;
  return ((static_cast<size_t>(layer) * rows.size() + static_cast<size_t>(row)) * static_cast<size_t>(cfg.num_q_heads) +
          static_cast<size_t>(head)) * static_cast<size_t>(cfg.head_dim);
}

size_t GoldenCase::kv_offset(int layer, int64_t row, int head) const {
  const Config& cfg = c.config;
  return ((static_cast<size_t>(layer) * rows.size() + static_cast<size_t>(row)) * static_cast<size_t>(cfg.num_kv_heads) +
          static_cast<size_t>(head)) * static_cast<size_t>(cfg.head_dim);
}

ScoreStats GoldenCase::score(int layer, int64_t row, int head) const {
  const size_t i = q_offset(layer, row, head) / static_cast<size_t>(c.config.head_dim);
  ScoreStats s;
  s.n_keys = static_cast<int64_t>(n_keys[i]);
  s.max_abs_dot = max_abs_dot[i];
  s.max_abs_score = max_abs_score[i];
  s.max_tie_dot = max_tie_dot[i];
  s.max_qk_norm = max_qk_norm[i];
  s.max_angle = max_angle[i];
  return s;
}

DimStats GoldenCase::dim(int layer, int64_t row, int head, int d) const {
  const size_t i = q_offset(layer, row, head) + static_cast<size_t>(d);
  return DimStats{spread[i], abs_mass[i], tie_mass[i], abs_out[i], max_abs_v[i]};
}

// ---------------------------------------------------------------------------------------------
// Generation.

GoldenCase make_golden(const GoldenSpec& spec) {
  GoldenCase g;
  g.name = spec.name;
  g.classes = spec.classes;
  g.c = spec.c;
  const Case& c = g.c;
  const Config& cfg = c.config;
  validate(cfg);
  try {
    conformance::check_schedule(c);
  } catch (const std::logic_error& e) {
    throw Error("golden case " + spec.name + ": " + e.what());
  }
  layout_rows(c, &g.rows, &g.chunks);
  const Dims d = dims_of(c, g.num_rows());
  const size_t nq = count({d.L, d.R, d.Hq, d.D}), nkv = count({d.L, d.R, d.Hkv, d.D}), ns = count({d.L, d.R, d.Hq});
  g.q.resize(nq);
  g.k.resize(nkv);
  g.v.resize(nkv);
  g.expected.resize(nq);
  g.expected_f64.resize(nq);
  for (std::vector<double>* t : {&g.n_keys, &g.max_abs_dot, &g.max_abs_score, &g.max_tie_dot, &g.max_qk_norm, &g.max_angle}) {
    t->resize(ns);
  }
  for (std::vector<double>* t : {&g.spread, &g.abs_mass, &g.tie_mass, &g.abs_out, &g.max_abs_v}) t->resize(nq);
  const bool k_int8 = cfg.k_format.dtype == DType::int8, v_int8 = cfg.v_format.dtype == DType::int8;
  g.k_stored.value.resize(nkv);
  g.v_stored.value.resize(nkv);
  if (k_int8) {
    g.k_stored.codes.resize(nkv);
    g.k_stored.tie.resize(nkv);
    g.k_stored.scales.resize(count({d.L, d.R, d.Hkv, d.k_spr}));
  }
  if (v_int8) {
    g.v_stored.codes.resize(nkv);
    g.v_stored.tie.resize(nkv);
    g.v_stored.scales.resize(count({d.L, d.R, d.Hkv, d.v_spr}));
  }

  conformance::Oracle oracle(cfg);
  size_t next_chunk = 0;
  std::vector<float> q, k, v;
  for (size_t st = 0; st < c.steps.size(); ++st) {
    for (const ResetPlan& r : c.steps[st].resets) oracle.reset(r.sequence, r.start_position);
    for (; next_chunk < g.chunks.size() && g.chunks[next_chunk].step == static_cast<int>(st); ++next_chunk) {
      const GoldenChunk& ch = g.chunks[next_chunk];
      const GoldenRow& first = g.rows[static_cast<size_t>(ch.row_begin)];
      const int64_t n = ch.n_tokens;
      q.resize(count({d.L, n, d.Hq, d.D}));
      k.resize(count({d.L, n, d.Hkv, d.D}));
      v.resize(k.size());
      conformance::fill_chunk(c, conformance::Tensor::q, first.stream, first.index, n, q.data());
      conformance::fill_chunk(c, conformance::Tensor::k, first.stream, first.index, n, k.data());
      conformance::fill_chunk(c, conformance::Tensor::v, first.stream, first.index, n, v.data());
      const std::vector<conformance::OracleOutput> out = oracle.append(ch.sequence, n, q.data(), k.data(), v.data());
      for (int l = 0; l < d.L; ++l) {
        const std::vector<conformance::OracleToken>& hist = oracle.history(l, ch.sequence);
        for (int64_t t = 0; t < n; ++t) {
          const int64_t row = ch.row_begin + t;
          const size_t src_q = count({l, n, d.Hq, d.D}) + count({t, d.Hq, d.D});
          const size_t src_kv = count({l, n, d.Hkv, d.D}) + count({t, d.Hkv, d.D});
          std::copy_n(q.begin() + static_cast<std::ptrdiff_t>(src_q), d.Hq * d.D,
                      g.q.begin() + static_cast<std::ptrdiff_t>(g.q_offset(l, row, 0)));
          std::copy_n(k.begin() + static_cast<std::ptrdiff_t>(src_kv), d.Hkv * d.D,
                      g.k.begin() + static_cast<std::ptrdiff_t>(g.kv_offset(l, row, 0)));
          std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(src_kv), d.Hkv * d.D,
                      g.v.begin() + static_cast<std::ptrdiff_t>(g.kv_offset(l, row, 0)));
          for (int h = 0; h < d.Hq; ++h) {
            const conformance::OracleOutput& o =
                out[(static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(t)) * static_cast<size_t>(d.Hq) +
                    static_cast<size_t>(h)];
            const size_t base = g.q_offset(l, row, h);
            const size_t si = base / static_cast<size_t>(d.D);
            g.n_keys[si] = static_cast<double>(o.score.n_keys);
            g.max_abs_dot[si] = o.score.max_abs_dot;
            g.max_abs_score[si] = o.score.max_abs_score;
            g.max_tie_dot[si] = o.score.max_tie_dot;
            g.max_qk_norm[si] = o.score.max_qk_norm;
            g.max_angle[si] = o.score.max_angle;
            for (int e = 0; e < d.D; ++e) {
              const size_t i = base + static_cast<size_t>(e);
              g.expected_f64[i] = o.o[static_cast<size_t>(e)];
              g.expected[i] = static_cast<float>(o.o[static_cast<size_t>(e)]);
              const DimStats& ds = o.dims[static_cast<size_t>(e)];
              g.spread[i] = ds.spread;
              g.abs_mass[i] = ds.abs_mass;
              g.tie_mass[i] = ds.tie_mass;
              g.abs_out[i] = ds.abs_out;
              g.max_abs_v[i] = ds.max_abs_v;
            }
          }
          // What the spec stores for this token: the newest entries of the oracle's history.
          const conformance::OracleToken& tok = hist[hist.size() - static_cast<size_t>(n - t)];
          if (tok.position != g.rows[static_cast<size_t>(row)].position) throw std::logic_error("make_golden: row/position mismatch");
          for (int pass = 0; pass < 2; ++pass) {
            const conformance::StoredRow& sr = pass == 0 ? tok.k : tok.v;
            GoldenStored& gs = pass == 0 ? g.k_stored : g.v_stored;
            const int64_t spr = pass == 0 ? d.k_spr : d.v_spr;
            const size_t off = g.kv_offset(l, row, 0);
            std::copy(sr.value.begin(), sr.value.end(), gs.value.begin() + static_cast<std::ptrdiff_t>(off));
            if (gs.codes.empty()) continue;
            std::copy(sr.codes.begin(), sr.codes.end(), gs.codes.begin() + static_cast<std::ptrdiff_t>(off));
            for (size_t e = 0; e < sr.tie.size(); ++e) gs.tie[off + e] = sr.tie[e] != 0.0f ? 1 : 0;
            const size_t soff = count({l, d.R, d.Hkv, spr}) + count({row, d.Hkv, spr});
            std::copy(sr.scales.begin(), sr.scales.end(), gs.scales.begin() + static_cast<std::ptrdiff_t>(soff));
          }
        }
      }
    }
  }
  return g;
}

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
  f.metadata["golden_format_version"] = kGoldenFormatVersion;
  f.metadata["spec_version"] = kSpecVersion;
  f.metadata["name"] = g.name;
  f.metadata["id"] = c.id();
  f.metadata["case"] = conformance::case_to_json(c).dump();
  f.metadata["classes"] = json(g.classes).dump();
  auto& t = f.tensors;
  t["schedule"] = make_tensor({d.T, d.B}, schedule_tensor(c));
  if (num_resets(c) > 0) t["resets"] = make_tensor({static_cast<int64_t>(num_resets(c)), 4}, resets_tensor(c));
  t["rows"] = make_tensor({d.R, 4}, rows_tensor(g.rows));
  t["positions"] = make_tensor({d.R}, positions_tensor(g.rows));
  t["chunks"] = make_tensor({static_cast<int64_t>(g.chunks.size()), 4}, chunks_tensor(g.chunks));
  t["q"] = make_tensor({d.L, d.R, d.Hq, d.D}, g.q);
  t["k"] = make_tensor({d.L, d.R, d.Hkv, d.D}, g.k);
  t["v"] = make_tensor({d.L, d.R, d.Hkv, d.D}, g.v);
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
    if (st.contains("tokens") && st["tokens"].is_array()) {
      for (const json& n : st["tokens"]) {
        if (n.is_number_integer() && n.get<int64_t>() < 0) throw Error(p + ".tokens: counts must be >= 0");
      }
    }
  }
}

}  // namespace

GoldenCase golden_from_safetensors(const StFile& f) {
  const std::string& src = f.source;
  const auto bad = [&](const std::string& why) -> Error { return Error(src + ": " + why); };
  if (f.meta("format") != kGoldenFormat) {
    throw bad("__metadata__ format = \"" + f.meta("format") + "\": not a ringkv golden case (expected \"" + kGoldenFormat + "\")");
  }
  if (f.meta("golden_format_version") != kGoldenFormatVersion) {
    throw bad("golden_format_version " + f.meta("golden_format_version") + ": this ringkv reads version " + kGoldenFormatVersion);
  }
  if (f.meta("spec_version") != kSpecVersion) {
    throw bad("spec_version " + f.meta("spec_version") + ": this ringkv implements spec " + kSpecVersion);
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
  layout_rows(g.c, &g.rows, &g.chunks);
  const Dims d = dims_of(g.c, g.num_rows());
  const Case& c = g.c;
  std::set<std::string> expected_names;
  const auto take = [&]<typename T>(const std::string& name, std::vector<int64_t> shape, std::vector<T>* out) {
    expected_names.insert(name);
    *out = f.values<T>(name, shape);
  };
  const auto same = [&]<typename T>(const std::string& name, std::vector<int64_t> shape, const std::vector<T>& want,
                                    const char* what) {
    std::vector<T> got;
    take(name, std::move(shape), &got);
    if (got != want) throw bad("tensor '" + name + "' does not match the " + std::string(what) + " in __metadata__ 'case'");
  };
  same("schedule", {d.T, d.B}, schedule_tensor(c), "schedule");
  if (num_resets(c) > 0) same("resets", {static_cast<int64_t>(num_resets(c)), 4}, resets_tensor(c), "resets");
  same("rows", {d.R, 4}, rows_tensor(g.rows), "schedule");
  same("positions", {d.R}, positions_tensor(g.rows), "start positions and schedule");
  same("chunks", {static_cast<int64_t>(g.chunks.size()), 4}, chunks_tensor(g.chunks), "schedule");
  take("q", {d.L, d.R, d.Hq, d.D}, &g.q);
  take("k", {d.L, d.R, d.Hkv, d.D}, &g.k);
  take("v", {d.L, d.R, d.Hkv, d.D}, &g.v);
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
  for (const auto& [name, t] : f.tensors) {
    (void)t;
    if (!expected_names.count(name)) throw bad("unexpected tensor '" + name + "' (not part of golden format " + kGoldenFormatVersion + ")");
  }
  for (double n : g.n_keys) {
    if (!(n >= 1)) throw bad("tensor 'score.n_keys' holds " + fmt(n) + ": every query sees at least its own key");
  }
  return g;
}

GoldenCase read_golden(const std::string& path) { return golden_from_safetensors(read_safetensors(path)); }

// ---------------------------------------------------------------------------------------------
// Checking an engine.

std::string capability_gap(const Capabilities& caps, const Config& cfg) {
  std::vector<std::string> gaps;
  if (!contains(caps.k_dtypes, cfg.k_format.dtype)) gaps.push_back(std::string("K dtype ") + to_string(cfg.k_format.dtype));
  if (!contains(caps.v_dtypes, cfg.v_format.dtype)) gaps.push_back(std::string("V dtype ") + to_string(cfg.v_format.dtype));
  for (const KvFormat* f : {&cfg.k_format, &cfg.v_format}) {
    if (f->dtype == DType::int8 && !contains(caps.int8_schemes, f->int8_scheme)) {
      const std::string g = std::string("int8 scheme ") + to_string(f->int8_scheme);
      if (!contains(gaps, g)) gaps.push_back(g);
    }
  }
  for (size_t l = 0; l < cfg.layers.size(); ++l) {
    const RopeConfig& r = cfg.layers[l].rope;
    if (!contains(caps.rope_styles, r.style)) {
      const std::string g = std::string("rope style ") + to_string(r.style);
      if (!contains(gaps, g)) gaps.push_back(g);
    }
    if (r.style != RopeStyle::none && !contains(caps.rope_scalings, r.scaling)) {
      const std::string g = std::string("rope scaling ") + to_string(r.scaling);
      if (!contains(gaps, g)) gaps.push_back(g);
    }
  }
  if (!caps.head_dims.empty() && !contains(caps.head_dims, cfg.head_dim)) {
    std::string list;
    for (int h : caps.head_dims) list += (list.empty() ? "" : ", ") + std::to_string(h);
    gaps.push_back("head_dim " + std::to_string(cfg.head_dim) + " (supports " + list + ")");
  }
  int64_t max_w = 0;
  bool sinks = false;
  for (const LayerConfig& l : cfg.layers) {
    max_w = std::max(max_w, l.window);
    sinks = sinks || l.sinks > 0;
  }
  if (sinks && !caps.sinks) gaps.push_back("sink tokens");
  if (!cfg.sink_logits.empty() && !caps.sink_logits) gaps.push_back("sink logits");
  if (cfg.softcap && !caps.softcap) gaps.push_back("softcap");
  if (cfg.layers.size() > 1 && !caps.multi_layer) gaps.push_back("several layers");
  if (max_w > caps.max_window) gaps.push_back("window " + std::to_string(max_w) + " > max_window " + std::to_string(caps.max_window));
  if (cfg.max_tokens > caps.max_tokens) {
    gaps.push_back("max_tokens " + std::to_string(cfg.max_tokens) + " > " + std::to_string(caps.max_tokens));
  }
  std::string s;
  for (const std::string& g : gaps) s += (s.empty() ? "unsupported: " : ", ") + g;
  return s;
}

namespace {

// Compares outputs one element at a time and keeps the first failure.
class OutputChecker {
 public:
  OutputChecker(const GoldenCase& g, const PrecisionProfile& profile, GoldenOutcome* outcome) : g_(g), r_(*outcome) {
    for (int l = 0; l < g.layers(); ++l) ctx_.push_back(conformance::make_bound_context(g.c.config, l, profile));
  }

  void check(int64_t row, int l, int h, int d, float got) {
    const size_t i = g_.q_offset(l, row, h) + static_cast<size_t>(d);
    const double e = g_.expected_f64[i];
    const double bound = conformance::output_bound(ctx_[static_cast<size_t>(l)], g_.score(l, row, h), g_.dim(l, row, h, d));
    const double err = std::fabs(double(got) - e);
    ++r_.outputs_checked;
    const double ratio = std::isnan(err) ? INFINITY : bound > 0 ? err / bound : (err == 0 ? 0.0 : INFINITY);
    r_.worst_ratio = std::max(r_.worst_ratio, ratio);
    if (err <= bound) return;
    ++r_.outputs_failed;
    if (!r_.failure.empty()) return;
    const GoldenRow& gr = g_.rows[static_cast<size_t>(row)];
    GoldenMismatch m;
    m.what = "output";
    m.step = gr.step;
    m.sequence = gr.sequence;
    m.token = gr.index;
    m.position = gr.position;
    m.layer = l;
    m.head = h;
    m.dim = d;
    m.expected = e;
    m.got = got;
    m.bound = bound;
    std::ostringstream os;
    os.precision(9);
    os << "step " << gr.step << ", sequence " << gr.sequence << ", token " << gr.index << " (position " << gr.position
       << "), layer " << l << ", q head " << h << ", dim " << d << ": expected " << e << ", got " << got << ", |diff| "
       << err << " > bound " << bound;
    r_.failure = os.str();
    r_.first = m;
  }

 private:
  const GoldenCase& g_;
  GoldenOutcome& r_;
  std::vector<conformance::BoundContext> ctx_;
};

bool same_bits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

// Relative precision (one ulp / |x|, at most) and the smallest step of a float storage format.
void format_quantum(const KvFormat& f, double* rel, double* floor_abs) {
  const double s = f.scale;
  switch (f.dtype) {
    case DType::f32: *rel = 0x1p-23; *floor_abs = 0x1p-149; return;
    case DType::f16: *rel = 0x1p-10; *floor_abs = 0x1p-24; return;
    case DType::bf16: *rel = 0x1p-7; *floor_abs = 0x1p-133; return;
    case DType::fp8_e4m3: *rel = 0x1p-3; *floor_abs = 0x1p-9 * s; return;
    case DType::fp8_e5m2: *rel = 0x1p-2; *floor_abs = 0x1p-16 * s; return;
    case DType::int8: *rel = 0; *floor_abs = 0; return;
  }
}

// The code step (stored scale) of element e of a row.
double int8_step(const KvFormat& f, int D, const float* row_scales, int e) {
  if (f.int8_scheme == Int8Scheme::static_tensor) return f.scale;
  return row_scales[e / int8_group_size(f.int8_scheme, D)];
}

// Compares one snapshot with what the file says the ring holds.
std::string check_snapshot(const GoldenCase& g, int layer, int seq, int step, const std::vector<int64_t>& hist_rows,
                           const CacheSnapshot& snap, const GoldenCheckOptions& opt, GoldenOutcome* r) {
  const Config& cfg = g.c.config;
  const LayerConfig& L = cfg.layers[static_cast<size_t>(layer)];
  const RingGeometry geo{L.sinks, L.window, ring_capacity(L, cfg.max_tokens)};
  const int D = cfg.head_dim, H = cfg.num_kv_heads;
  const std::string where = "after step " + std::to_string(step) + ", layer " + std::to_string(layer) + ", sequence " +
                            std::to_string(seq) + ": ";
  GoldenMismatch m;
  m.step = step;
  m.layer = layer;
  m.sequence = seq;
  const auto fail = [&](const std::string& what, const std::string& text) {
    m.what = what;
    r->first = m;
    return where + text;
  };
  if (snap.capacity != geo.capacity) {
    m.expected = static_cast<double>(geo.capacity);
    m.got = static_cast<double>(snap.capacity);
    return fail("ring capacity", "ring capacity " + std::to_string(snap.capacity) + ", spec says min(S + W, max_tokens) = " +
                                     std::to_string(geo.capacity));
  }
  const size_t cap = static_cast<size_t>(geo.capacity), row_elems = static_cast<size_t>(H) * static_cast<size_t>(D);
  if (snap.positions.size() != cap || snap.k.size() != cap * row_elems || snap.v.size() != cap * row_elems) {
    return fail("snapshot shape", "snapshot has " + std::to_string(snap.positions.size()) + " positions, " +
                                      std::to_string(snap.k.size()) + " K and " + std::to_string(snap.v.size()) +
                                      " V values; expected " + std::to_string(cap) + ", " + std::to_string(cap * row_elems) +
                                      " and " + std::to_string(cap * row_elems));
  }
  std::vector<int64_t> expect(cap, -1);  // slot -> index into hist_rows
  for (size_t j = 0; j < hist_rows.size(); ++j) expect[static_cast<size_t>(geo.slot_of(static_cast<int64_t>(j)))] = static_cast<int64_t>(j);
  const bool roped = L.rope.style != RopeStyle::none && !opt.exact_rotated_k;
  for (size_t slot = 0; slot < cap; ++slot) {
    const int64_t j = expect[slot];
    const int64_t row = j < 0 ? -1 : hist_rows[static_cast<size_t>(j)];
    const int64_t want = j < 0 ? RingKvCache::kEmpty : g.rows[static_cast<size_t>(row)].position;
    m.slot = static_cast<int64_t>(slot);
    if (snap.positions[slot] != want) {
      m.token = j;
      m.position = want;
      m.expected = static_cast<double>(want);
      m.got = static_cast<double>(snap.positions[slot]);
      return fail("ring position", "slot " + std::to_string(slot) + " holds position " + std::to_string(snap.positions[slot]) +
                                       ", spec says " + (j < 0 ? std::string("empty") : std::to_string(want) + " (token " + std::to_string(j) + ")"));
    }
    if (j < 0) continue;
    m.token = j;
    m.position = want;
    for (int pass = 0; pass < 2; ++pass) {
      const bool is_k = pass == 0;
      const GoldenStored& gs = is_k ? g.k_stored : g.v_stored;
      const KvFormat& f = is_k ? cfg.k_format : cfg.v_format;
      const std::vector<float>& got = is_k ? snap.k : snap.v;
      const std::vector<int8_t>& codes = is_k ? snap.k_codes : snap.v_codes;
      const std::vector<float>& scales = is_k ? snap.k_scales : snap.v_scales;
      const int spr = scales_per_row(f, D);
      const bool relaxed = is_k && roped;
      const char* KV = is_k ? "K" : "V";
      const bool int8 = f.dtype == DType::int8;
      double rel = 0, floor_abs = 0;
      format_quantum(f, &rel, &floor_abs);
      for (int h = 0; h < H; ++h) {
        const size_t src = g.kv_offset(layer, row, h);
        const size_t dst = slot * row_elems + static_cast<size_t>(h) * static_cast<size_t>(D);
        const float* want_scales = int8 && spr > 0
                                       ? gs.scales.data() + ((static_cast<size_t>(layer) * g.rows.size() + static_cast<size_t>(row)) *
                                                                 static_cast<size_t>(H) + static_cast<size_t>(h)) * static_cast<size_t>(spr)
                                       : nullptr;
        m.head = h;
        if (int8 && spr > 0 && scales.size() == cap * static_cast<size_t>(H) * static_cast<size_t>(spr)) {
          for (int e = 0; e < spr; ++e) {
            const float gsc = scales[(slot * static_cast<size_t>(H) + static_cast<size_t>(h)) * static_cast<size_t>(spr) + static_cast<size_t>(e)];
            const float wsc = want_scales[e];
            ++r->stored_checked;
            const bool ok = relaxed ? std::fabs(double(gsc) - double(wsc)) <=
                                          (f.int8_scheme == Int8Scheme::q8_0 ? 0x1p-9 : 0x1p-20) * std::fabs(double(wsc))
                                    : same_bits(gsc, wsc);
            if (!ok) {
              m.dim = e;
              m.expected = wsc;
              m.got = gsc;
              return fail(std::string(KV) + " scale", "slot " + std::to_string(slot) + " (token " + std::to_string(j) + ") " + KV +
                                                          " scale[head " + std::to_string(h) + "][group " + std::to_string(e) +
                                                          "] is " + fmt(gsc) + ", spec says " + fmt(wsc) + " (" + to_string(f) + ")");
            }
          }
        }
        for (int e = 0; e < D; ++e) {
          const float gv = got[dst + static_cast<size_t>(e)], wv = gs.value[src + static_cast<size_t>(e)];
          const bool tie = int8 && gs.tie[src + static_cast<size_t>(e)] != 0;
          const double step_e = int8 ? int8_step(f, D, want_scales, e) : 0.0;
          const double diff = std::fabs(double(gv) - double(wv));
          if (int8 && codes.size() == cap * row_elems) {  // codes first: they are what INT8 stores
            const int gc = codes[dst + static_cast<size_t>(e)], wc = gs.codes[src + static_cast<size_t>(e)];
            const int dc = gc - wc;
            ++r->stored_checked;
            if (!(dc == 0 || ((tie || relaxed) && (dc == 1 || dc == -1)))) {
              m.dim = e;
              m.expected = wc;
              m.got = gc;
              return fail(std::string(KV) + " code",
                          "slot " + std::to_string(slot) + " (token " + std::to_string(j) + ") " + KV + " code[head " +
                              std::to_string(h) + "][dim " + std::to_string(e) + "] is " + std::to_string(gc) +
                              ", spec says " + std::to_string(wc) + (tie ? " (tie window: +-1 allowed)" : "") + " (" +
                              to_string(f) + ")");
            }
          }
          bool ok;
          double allowed = 0;
          if (relaxed) {
            allowed = int8 ? 1.001 * step_e + 0x1p-20 * std::fabs(double(wv))
                           : 1.001 * (rel * std::fabs(double(wv)) + floor_abs) + 0x1p-20 * std::fabs(double(wv));
            ok = diff <= allowed;
          } else {
            allowed = tie ? 1.0001 * step_e : 0.0;
            // INT8 zero codes decode to a zero whose sign carries nothing (spec §10.4).
            ok = same_bits(gv, wv) || (int8 && gv == 0.0f && wv == 0.0f) || (tie && diff <= allowed);
          }
          const std::string what = std::string("stored ") + KV;
          ++r->stored_checked;
          if (!ok) {
            m.dim = e;
            m.expected = wv;
            m.got = gv;
            m.bound = allowed;
            return fail(what, "slot " + std::to_string(slot) + " (token " + std::to_string(j) + ") " + KV + "[head " +
                                  std::to_string(h) + "][dim " + std::to_string(e) + "] stores " + fmt(gv) + ", spec says " +
                                  fmt(wv) + " (" + to_string(f) + (relaxed ? ", rotated K: within " + fmt(allowed) : std::string()) +
                                  ")");
          }
        }
      }
    }
  }
  return "";
}

}  // namespace

GoldenOutcome check_golden(const EngineFactory& factory, const GoldenCase& g, const GoldenCheckOptions& opt) {
  GoldenOutcome r;
  const Config& cfg = g.c.config;
  r.skip_reason = capability_gap(factory.capabilities, cfg);
  if (!r.skip_reason.empty()) {
    r.skipped = true;
    return r;
  }
  std::unique_ptr<Engine> engine;
  try {
    engine = factory.create(cfg);
    if (!engine) throw Error("the factory returned no engine");
  } catch (const std::exception& e) {
    r.failure = std::string("engine creation threw: ") + e.what();
    return r;
  }
  OutputChecker checker(g, engine->info().precision, &r);
  const int B = cfg.batch, L = g.layers();
  const int64_t Hq = cfg.num_q_heads, Hkv = cfg.num_kv_heads, D = cfg.head_dim;
  bool snapshots = opt.snapshot && factory.capabilities.snapshot;
  std::vector<std::vector<int64_t>> since_reset(static_cast<size_t>(B));  // rows of each sequence since its reset
  size_t next_chunk = 0;
  struct Buffers {
    std::vector<float> q, k, v, out;
  };
  std::vector<Buffers> buf;
  for (size_t st = 0; st < g.c.steps.size(); ++st) {
    std::vector<SequenceReset> resets;
    for (const ResetPlan& p : g.c.steps[st].resets) {
      resets.push_back({p.sequence, p.start_position});
      since_reset[static_cast<size_t>(p.sequence)].clear();
    }
    const size_t chunk_begin = next_chunk;
    while (next_chunk < g.chunks.size() && g.chunks[next_chunk].step == static_cast<int>(st)) ++next_chunk;
    buf.assign(next_chunk - chunk_begin, Buffers{});
    std::vector<SequenceStep> appends;
    for (size_t ci = chunk_begin; ci < next_chunk; ++ci) {
      const GoldenChunk& ch = g.chunks[ci];
      Buffers& b = buf[ci - chunk_begin];
      const int64_t n = ch.n_tokens;
      b.q.resize(count({L, n, Hq, D}));
      b.k.resize(count({L, n, Hkv, D}));
      b.v.resize(b.k.size());
      b.out.assign(b.q.size(), std::numeric_limits<float>::quiet_NaN());
      for (int l = 0; l < L; ++l) {  // rows of a chunk are contiguous: one copy per layer
        std::copy_n(g.q.begin() + static_cast<std::ptrdiff_t>(g.q_offset(l, ch.row_begin, 0)), n * Hq * D,
                    b.q.begin() + static_cast<std::ptrdiff_t>(count({l, n, Hq, D})));
        std::copy_n(g.k.begin() + static_cast<std::ptrdiff_t>(g.kv_offset(l, ch.row_begin, 0)), n * Hkv * D,
                    b.k.begin() + static_cast<std::ptrdiff_t>(count({l, n, Hkv, D})));
        std::copy_n(g.v.begin() + static_cast<std::ptrdiff_t>(g.kv_offset(l, ch.row_begin, 0)), n * Hkv * D,
                    b.v.begin() + static_cast<std::ptrdiff_t>(count({l, n, Hkv, D})));
      }
      appends.push_back({ch.sequence, n, b.q.data(), b.k.data(), b.v.data(), b.out.data()});
    }
    try {
      engine->step(StepBatch{resets, appends});
    } catch (const std::exception& e) {
      if (r.failure.empty()) r.failure = "step " + std::to_string(st) + ": engine threw: " + e.what();
      r.passed = false;
      return r;
    }
    for (size_t ci = chunk_begin; ci < next_chunk; ++ci) {
      const GoldenChunk& ch = g.chunks[ci];
      const Buffers& b = buf[ci - chunk_begin];
      for (int l = 0; l < L; ++l) {
        for (int64_t t = 0; t < ch.n_tokens; ++t) {
          for (int h = 0; h < Hq; ++h) {
            const float* o = b.out.data() + count({l, ch.n_tokens, Hq, D}) + count({t, Hq, D}) + count({h, D});
            for (int d = 0; d < D; ++d) checker.check(ch.row_begin + t, l, h, d, o[d]);
          }
        }
      }
      for (int64_t t = 0; t < ch.n_tokens; ++t) since_reset[static_cast<size_t>(ch.sequence)].push_back(ch.row_begin + t);
    }
    if (snapshots && r.failure.empty()) {
      for (int l = 0; l < L && r.failure.empty() && snapshots; ++l) {
        for (int s = 0; s < B && r.failure.empty(); ++s) {
          const std::optional<CacheSnapshot> snap = engine->snapshot(l, s);
          if (!snap) {  // the engine does not expose its cache after all: outputs only
            snapshots = false;
            break;
          }
          r.failure = check_snapshot(g, l, s, static_cast<int>(st), since_reset[static_cast<size_t>(s)], *snap, opt, &r);
        }
      }
    }
  }
  r.passed = r.failure.empty();
  return r;
}

GoldenOutcome compare_golden_outputs(const GoldenCase& g, const std::vector<float>& out, const PrecisionProfile& profile) {
  GoldenOutcome r;
  if (out.size() != g.expected.size()) {
    r.failure = "outputs hold " + std::to_string(out.size()) + " values, the case has " + std::to_string(g.expected.size());
    return r;
  }
  OutputChecker checker(g, profile, &r);
  const Config& cfg = g.c.config;
  for (int64_t row = 0; row < g.num_rows(); ++row) {  // schedule order: the first failure is the earliest
    for (int l = 0; l < g.layers(); ++l) {
      for (int h = 0; h < cfg.num_q_heads; ++h) {
        const size_t base = g.q_offset(l, row, h);
        for (int d = 0; d < cfg.head_dim; ++d) checker.check(row, l, h, d, out[base + static_cast<size_t>(d)]);
      }
    }
  }
  r.passed = r.failure.empty();
  return r;
}

std::vector<double> golden_bounds(const GoldenCase& g, const PrecisionProfile& profile) {
  std::vector<double> b(g.expected.size());
  const Config& cfg = g.c.config;
  for (int l = 0; l < g.layers(); ++l) {
    const conformance::BoundContext ctx = conformance::make_bound_context(cfg, l, profile);
    for (int64_t row = 0; row < g.num_rows(); ++row) {
      for (int h = 0; h < cfg.num_q_heads; ++h) {
        const ScoreStats s = g.score(l, row, h);
        for (int d = 0; d < cfg.head_dim; ++d) {
          b[g.q_offset(l, row, h) + static_cast<size_t>(d)] = conformance::output_bound(ctx, s, g.dim(l, row, h, d));
        }
      }
    }
  }
  return b;
}

GoldenOutputs read_golden_outputs(const std::string& path, const GoldenCase& g) {
  const StFile f = read_safetensors(path);
  const Dims d = dims_of(g.c, g.num_rows());
  GoldenOutputs o;
  const auto meta = [&](const char* key) -> const std::string* {
    const auto it = f.metadata.find(key);
    return it == f.metadata.end() ? nullptr : &it->second;
  };
  if (const std::string* fm = meta("format"); fm && *fm != kOutputsFormat) {
    throw Error(path + ": __metadata__ format = \"" + *fm + "\": expected \"" + kOutputsFormat + "\"");
  }
  if (const std::string* id = meta("id"); id && *id != g.id()) {
    throw Error(path + ": outputs are for case \"" + *id + "\", not for " + g.name + " (\"" + g.id() + "\")");
  }
  o.out = f.values<float>("out", {d.L, d.R, d.Hq, d.D});
  for (const auto& [name, t] : f.tensors) {
    (void)t;
    if (name != "out") throw Error(path + ": unexpected tensor '" + name + "' (an outputs file holds only 'out')");
  }
  if (const std::string* e = meta("engine")) o.engine = *e;
  if (const std::string* p = meta("profile")) {
    try {
      o.profile = conformance::profile_from_json(json::parse(*p));
    } catch (const std::exception& e) {
      throw Error(path + ": __metadata__ 'profile' is not a valid precision profile: " + e.what());
    }
  }
  return o;
}

void write_golden_outputs(const std::string& path, const GoldenCase& g, const std::vector<float>& out,
                          const std::string& engine, const std::optional<PrecisionProfile>& profile) {
  const Dims d = dims_of(g.c, g.num_rows());
  StFile f;
  f.source = path;
  f.metadata["format"] = kOutputsFormat;
  f.metadata["id"] = g.id();
  f.metadata["name"] = g.name;
  if (!engine.empty()) f.metadata["engine"] = engine;
  if (profile) f.metadata["profile"] = conformance::profile_to_json(*profile).dump();
  f.tensors["out"] = make_tensor({d.L, d.R, d.Hq, d.D}, out);
  write_safetensors(path, f);
}

GoldenOutcome check_golden_outputs(const GoldenCase& g, const std::string& outputs_path, const PrecisionProfile& profile) {
  GoldenOutputs o;
  try {
    o = read_golden_outputs(outputs_path, g);
  } catch (const Error& e) {
    GoldenOutcome r;
    r.failure = e.what();
    return r;
  }
  return compare_golden_outputs(g, o.out, profile);
}

// ---------------------------------------------------------------------------------------------
// The committed set: generation, manifest, verification.

namespace {

namespace fs = std::filesystem;

std::string case_file(const std::string& name) { return "cases/" + name + ".safetensors"; }

std::string manifest_text(const std::vector<ManifestEntry>& entries) {
  json cases = json::array();
  int64_t total = 0;
  for (const ManifestEntry& e : entries) {
    cases.push_back(json{{"name", e.name}, {"id", e.id}, {"classes", e.classes}, {"file", e.file},
                         {"sha256", e.sha256}, {"bytes", e.bytes}});
    total += e.bytes;
  }
  const json m{{"format", "ringkv-golden-manifest"},
               {"golden_format_version", kGoldenFormatVersion},
               {"spec_version", kSpecVersion},
               {"total_bytes", total},
               {"cases", cases}};
  return m.dump(2) + "\n";
}

std::vector<ManifestEntry> entries_for(const std::vector<GoldenSpec>& specs, std::vector<std::vector<uint8_t>>* bytes) {
  std::vector<ManifestEntry> entries;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::vector<uint8_t>& b = (*bytes)[i];
    entries.push_back(ManifestEntry{specs[i].name, specs[i].c.id(), case_file(specs[i].name), sha256_hex(b),
                                    specs[i].classes, static_cast<int64_t>(b.size())});
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

}  // namespace

void generate_golden_set(const std::string& dir, void (*progress)(const std::string&, size_t)) {
  const std::vector<GoldenSpec> specs = golden_set();
  check_unique_names(specs);
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "cases", ec);
  if (ec) throw Error(dir + "/cases: cannot create: " + ec.message());
  std::set<std::string> wanted;
  std::vector<std::vector<uint8_t>> bytes;
  for (const GoldenSpec& s : specs) {
    bytes.push_back(serialize_golden(make_golden(s)));
    write_file_bytes((fs::path(dir) / case_file(s.name)).string(), bytes.back());
    wanted.insert(s.name + ".safetensors");
    if (progress) progress(s.name, bytes.back().size());
  }
  // Files of cases that are no longer in the set would linger: remove them.
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(dir) / "cases")) {
    const std::string f = e.path().filename().string();
    if (e.path().extension() == ".safetensors" && !wanted.count(f)) fs::remove(e.path());
  }
  const std::string text = manifest_text(entries_for(specs, &bytes));
  write_file_bytes((fs::path(dir) / "manifest.json").string(), std::vector<uint8_t>(text.begin(), text.end()));
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
    if (m.at("format").get<std::string>() != "ringkv-golden-manifest") throw Error("format is not ringkv-golden-manifest");
    if (m.at("golden_format_version").get<std::string>() != kGoldenFormatVersion) {
      throw Error("golden_format_version " + m.at("golden_format_version").dump() + ": this ringkv reads " + kGoldenFormatVersion);
    }
    for (const json& c : m.at("cases")) {
      ManifestEntry e;
      e.name = c.at("name").get<std::string>();
      e.id = c.at("id").get<std::string>();
      e.file = c.at("file").get<std::string>();
      e.sha256 = c.at("sha256").get<std::string>();
      e.classes = c.at("classes").get<std::vector<std::string>>();
      e.bytes = c.at("bytes").get<int64_t>();
      out.push_back(std::move(e));
    }
  } catch (const std::exception& e) {
    throw Error(path + ": " + e.what());
  }
  return out;
}

std::vector<std::string> verify_golden_set(const std::string& dir) {
  std::vector<std::string> problems;
  std::vector<ManifestEntry> manifest;
  try {
    manifest = read_manifest(dir);
  } catch (const Error& e) {
    return {e.what()};
  }
  const std::vector<GoldenSpec> specs = golden_set();
  std::map<std::string, const GoldenSpec*> by_name;
  for (const GoldenSpec& s : specs) by_name[s.name] = &s;
  std::set<std::string> listed;
  for (const ManifestEntry& e : manifest) listed.insert(e.name);
  for (const GoldenSpec& s : specs) {
    if (!listed.count(s.name)) problems.push_back("case " + s.name + " of golden_set() is missing from the manifest");
  }
  std::vector<std::vector<uint8_t>> regenerated(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) regenerated[i] = serialize_golden(make_golden(specs[i]));
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
  const std::string want = manifest_text(entries_for(specs, &regenerated));
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
