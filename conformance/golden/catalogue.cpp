// ringkv golden: the committed case catalogue and the boundary classes it must cover.
#include "golden/golden.hpp"
#include "golden/detail.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"

namespace ringkv::golden {

using conformance::Case;
using conformance::DataMode;
using conformance::ResetPlan;
using conformance::StepPlan;
using nlohmann::json;

using namespace detail;

namespace {

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

// Any schedule: p0 per sequence, then the steps (resets first, then tokens per sequence).
Case& schedule(Case& c, std::vector<int64_t> p0, std::vector<StepPlan> steps) {
  c.config.batch = static_cast<int>(p0.size());
  c.config.start_positions = std::move(p0);
  c.steps = std::move(steps);
  c.config.max_tokens = needed_max_tokens(c);
  return c;
}

StepPlan reset_then(int sequence, int64_t p0, int stream, std::vector<int64_t> tokens) {
  return StepPlan{{ResetPlan{sequence, p0, stream}}, std::move(tokens)};
}

std::vector<int64_t> repeat(int64_t n, int64_t value) { return std::vector<int64_t>(static_cast<size_t>(n), value); }

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

  // ---- interactions (issue 9): resets in several layers, scores, batches, storage edges ----
  // A reset must clear every layer's ring. Reset steps append a few tokens (mostly one), so the
  // cache check after them sees every layer's ring nearly empty. A stale cell can change outputs only
  // where the new p0 is above its position (its index p - p0 is then negative: a sink, or a key in
  // the window of the first queries). With p0 down, unchanged, or up but below the positions the
  // ring still holds, a stale cell's index is beyond every query that could see it before it is
  // overwritten (spec §2), so only the cache shows it.
  {
    Case c = shape({LayerConfig{4, 0, neox()}, LayerConfig{6, 2, gptj()}, LayerConfig{3, 1, no_rope()}}, 2, 1, 16,
                   random, 138);
    schedule(c, {30}, {StepPlan{{}, {7}}, StepPlan{{}, {2}},
                       reset_then(0, 11, 1, {1}), StepPlan{{}, {5}},    // p0 30 -> 11: down
                       reset_then(0, 3, 2, {2}), StepPlan{{}, {4}}});   // 11 -> 3: down again
    set.push_back(spec("layers_reset_p0_down", {"reset-reuse", "multi-layer", "mixed-windows", "per-layer-rope", "sinks",
                                                "mqa", "rope-none", "rope-gptj", "rope-neox"}, c));
  }
  {
    Case c = shape({LayerConfig{5, 1, neox()}, LayerConfig{3, 0, neox(500000.0)}}, 4, 2, 16, random, 139);
    schedule(c, {7, 7}, {StepPlan{{}, {5, 3}}, StepPlan{{}, {4, 1}},
                         reset_then(0, 7, 2, {1, 1}),     // p0 unchanged; the new sequence (3 tokens) is shorter
                         StepPlan{{}, {2, 0}},
                         reset_then(1, 7, 3, {0, 2}),     // p0 unchanged for the other sequence too
                         StepPlan{{}, {0, 3}}});
    set.push_back(spec("layers_reset_p0_same_shorter", {"reset-reuse", "multi-layer", "mixed-windows", "per-layer-rope",
                                                        "batch-mixed", "sit-out", "sinks", "gqa"}, c));
  }
  {
    Case c = shape({LayerConfig{6, 0, neox()}, LayerConfig{4, 2, neox()}, LayerConfig{8, 0, gptj()}}, 2, 2, 16, random,
                   140);
    schedule(c, {0}, {StepPlan{{}, {10}},
                      reset_then(0, 5, 1, {1}), StepPlan{{}, {3}},     // p0 0 -> 5: up, inside the old positions
                      reset_then(0, 9, 2, {1}), StepPlan{{}, {7}},     // 5 -> 9: up by 4
                      reset_then(0, 1000, 3, {2})});                    // far up: only the sinks' layer shows it
    set.push_back(spec("layers_reset_p0_up", {"reset-reuse", "multi-layer", "mixed-windows", "per-layer-rope", "sinks",
                                              "mha", "chunk>W"}, c));
  }
  {  // INT8 with resets both ways; every fourth K and V row is zero (all-zero INT8 groups: scale 0, codes 0)
    Case c = shape({LayerConfig{4, 1, neox()}, LayerConfig{6, 0, neox()}}, 2, 1, 32, random, 141);
    c.config.k_format = KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away);
    c.config.v_format = KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
    c.zero_rows_every = 4;
    schedule(c, {100}, {StepPlan{{}, {7}}, StepPlan{{}, {1}},
                        reset_then(0, 20, 1, {3}), StepPlan{{}, {2}},  // p0 100 -> 20: down
                        reset_then(0, 22, 2, {1}), StepPlan{{}, {6}}});  // 20 -> 22: up
    set.push_back(spec("int8_layers_reset_down_up", {"int8-q8_0", "int8-per_head", "int8-half_away", "k-v-dtypes-differ",
                                                     "reset-reuse", "multi-layer", "mixed-windows", "sinks", "mqa"}, c));
  }
  {  // static INT8 that clamps (|x| above 127 * scale), with softcap and an explicit softmax scale
    Case c = shape({LayerConfig{8, 1, gptj()}}, 4, 2, 32, random, 142);
    c.config.k_format = KvFormat::int8(Int8Scheme::static_tensor, Rounding::nearest_even, 0.02f);
    c.config.v_format = KvFormat::int8(Int8Scheme::static_tensor, Rounding::half_away, 0.006f);
    c.config.softcap = 6.0;
    c.config.softmax_scale = 0.2;
    c.qk_amplitude = 3.0f;
    single(c, {9, 1, 3});
    set.push_back(spec("int8_static_clamped_softcap", {"int8-static", "int8-half_away", "softcap", "softmax-scale",
                                                       "k-v-dtypes-differ", "sinks", "gqa", "chunk>W"}, c));
  }
  {  // q8_0 K scales below 2^-14 (subnormal in f16); the softmax scale brings the tiny logits to O(1)
    Case c = shape({LayerConfig{8, 0, neox()}}, 2, 1, 64, random, 143);
    c.config.k_format = c.config.v_format = KvFormat::int8(Int8Scheme::q8_0, Rounding::nearest_even);
    c.config.softmax_scale = 4000.0;
    c.qk_amplitude = 0.004f;
    single(c, {9, 1, 3});
    set.push_back(spec("q8_0_subnormal_scales", {"int8-q8_0", "softmax-scale", "head_dim-64", "mqa", "chunk>W"}, c));
  }
  {  // fp8 e4m3 past its largest finite value (448 * scale), scales not powers of two
    Case c = shape({LayerConfig{8, 1, neox()}}, 2, 1, 32, random, 144);
    c.config.k_format = fmt_of(DType::fp8_e4m3, 0.003f);   // |k| > 1.344 saturates
    c.config.v_format = fmt_of(DType::fp8_e4m3, 0.0017f);  // |v| > 0.7616 saturates
    single(c, {9, 1, 4});
    set.push_back(spec("fp8_e4m3_saturated", {"kv-fp8-e4m3", "k-v-dtypes-differ", "sinks", "mqa", "chunk>W"}, c));
  }
  {  // fp8 e5m2 past 57344 * scale, scales not powers of two, in two layers
    Case c = shape({LayerConfig{8, 0, neox()}, LayerConfig{5, 2, gptj()}}, 2, 1, 32, random, 145);
    c.config.k_format = fmt_of(DType::fp8_e5m2, 2.5e-5f);  // |k| > 1.4336 saturates
    c.config.v_format = fmt_of(DType::fp8_e5m2, 1.5e-5f);  // |v| > 0.86016 saturates
    single(c, {9, 1, 4});
    set.push_back(spec("fp8_e5m2_saturated", {"kv-fp8-e5m2", "k-v-dtypes-differ", "multi-layer", "mixed-windows",
                                              "per-layer-rope", "sinks", "mqa"}, c));
  }
  {  // softcap with learned sink logits, and a reset to a p0 just above the old positions
    Case c = shape({LayerConfig{8, 0, neox()}, LayerConfig{5, 0, gptj()}}, 2, 1, 32, random, 146);
    c.config.softcap = 4.0;
    c.config.sink_logits = {{1.5f, -0.5f}, {3.0f, 0.25f}};
    c.qk_amplitude = 3.0f;
    schedule(c, {0}, {StepPlan{{}, {9}}, StepPlan{{}, {1}}, reset_then(0, 12, 1, {1}), StepPlan{{}, {6}}});
    set.push_back(spec("softcap_sink_logits", {"softcap", "sink-logits", "multi-layer", "mixed-windows", "per-layer-rope",
                                               "reset-reuse", "mqa", "chunk>W"}, c));
  }
  {  // sink tokens together with sink logits (needles: the first sink competes with the learned logit)
    Case c = shape({LayerConfig{4, 2, neox()}, LayerConfig{6, 1, neox()}}, 2, 1, 32, needle, 147);
    c.config.sink_logits = {{2.0f, -1.0f}, {0.5f, 1.0f}};
    single(c, {5, 1, 1, 6, 1});
    set.push_back(spec("sinks_sink_logits", {"sinks", "sink-logits", "multi-layer", "mixed-windows", "mqa",
                                             "needle-W+1", "needle-W-1"}, c));
  }
  {  // linear and NTK scaling in one model, one of them on a partial rotary dimension
    RopeConfig a = neox();
    a.scaling = RopeScaling::linear;
    a.factor = 2.0;
    a.rotary_dim = 16;
    RopeConfig b = gptj(500000.0);
    b.scaling = RopeScaling::ntk;
    b.factor = 4.0;
    Case c = shape({LayerConfig{8, 1, a}, LayerConfig{8, 0, b}}, 2, 1, 32, random, 148);
    single(c, {9, 1, 4}, 3000);
    set.push_back(spec("rope_linear_ntk_partial", {"rope-linear", "rope-ntk", "partial-rotary", "per-layer-rope",
                                                   "rope-neox", "rope-gptj", "multi-layer"}, c));
  }
  {  // W = 1 next to a layer with sinks, reset to a higher p0 and then to the same one
    Case c = shape({LayerConfig{1, 0, neox()}, LayerConfig{3, 2, gptj()}}, 2, 1, 16, random, 149);
    schedule(c, {0}, {StepPlan{{}, {6}}, reset_then(0, 2, 1, {1}), StepPlan{{}, {2}}, reset_then(0, 2, 2, {3})});
    set.push_back(spec("window_1_layers_reset", {"W=1", "multi-layer", "mixed-windows", "per-layer-rope", "reset-reuse",
                                                 "sinks", "mqa"}, c));
  }
  {  // positions just below 2^31 in two layers, with resets up and down
    const int64_t top = int64_t{1} << 31;
    Case c = shape({LayerConfig{8, 1, neox()}, LayerConfig{4, 0, gptj(500000.0)}}, 2, 1, 32, random, 150);
    schedule(c, {top - 40}, {StepPlan{{}, {12}},
                             reset_then(0, top - 26, 1, {1}), StepPlan{{}, {5}},   // up, 3 above the old last
                             reset_then(0, top - 60, 2, {3})});                    // down
    set.push_back(spec("pos_max_layers_reset", {"pos-2^31", "pos-2^24", "multi-layer", "mixed-windows", "per-layer-rope",
                                                "reset-reuse", "sinks", "mqa", "chunk>W"}, c));
  }
  {  // three sequences at the same positions with different data and chunk sizes: a wrong batch
     // stride or one ring shared by the sequences changes outputs
    Case c = shape({LayerConfig{5, 1, neox()}, LayerConfig{3, 0, neox()}}, 4, 2, 16, random, 151);
    schedule(c, {0, 0, 0}, {StepPlan{{}, {3, 5, 2}}, StepPlan{{}, {1, 1, 1}}, StepPlan{{}, {4, 2, 6}},
                            StepPlan{{}, {1, 0, 1}}, StepPlan{{}, {2, 3, 1}}});
    set.push_back(spec("batch3_same_positions", {"batch-mixed", "sit-out", "multi-layer", "mixed-windows", "sinks", "gqa",
                                                 "chunk>W"}, c));
  }
  for (GoldenSpec& s : set) conformance::freeze_needles(s.c);
  return set;
}

}  // namespace ringkv::golden
