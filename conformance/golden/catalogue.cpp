// ringkv golden: the committed case catalogue and the boundary classes it must cover.
#include "golden/golden.hpp"
#include "golden/detail.hpp"
#include "golden/pairs.hpp"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"

namespace ringkv::golden {

using conformance::Case;
using conformance::DataMode;
using conformance::ResetPlan;
using conformance::shaped_case;
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

// K and V both in `d` (f32, f16 or bf16: the core's formats).
Case& kv(Case& c, DType d) {
  c.config.k_format = c.config.v_format = fmt_of(d);
  return c;
}

// The core's ring schedule (issue 14): two sequences over a sliding layer of W = 4 and a full-attention
// layer, every structural boundary in 30 rows. Sequence 0 starts at p0 = 100 (RoPE from the slot shows),
// sequence 1 at 7. Chunks of 6 and 5 cross the wrap (t = W, 2W inside them); sequences sit out and
// differ in progress; sequence 0 is reset down (100 -> 40), then up to 43, just above the positions
// 40, 41 the rings still hold (a stale cell gets index -3 or -2: visible to the first queries of the
// sliding layer and to every query of the full layer); sequence 1 is reset to its own p0 and then
// appends 3 tokens after 10 (shorter). With needle data the targets 3, 4, 5, 7, 8 of W = 4 are reached.
// `from_0`: the same schedule for an engine that starts every sequence at position 0 (issue 26): both
// sequences start at 0 and every reset is to 0 (the same p0; the new streams are shorter).
Case& core_ring_schedule(Case& c, bool from_0 = false) {
  const auto p0 = [from_0](int64_t p) { return from_0 ? 0 : p; };
  return schedule(c, {p0(100), p0(7)}, {StepPlan{{}, {3, 6}},
                                        StepPlan{{}, {6, 0}},
                                        StepPlan{{}, {1, 3}},
                                        reset_then(0, p0(40), 1, {2, 1}),   // down
                                        reset_then(1, p0(7), 2, {0, 2}),    // same p0
                                        reset_then(0, p0(43), 3, {5, 1})});  // up, just above the old positions
}

// The layers of a core case: one sliding window W beside a full-attention layer (W = 64 is at least
// every core case's length), both with the same neox RoPE.
std::vector<LayerConfig> sliding_and_full(int64_t W, double theta = 10000.0) {
  return {LayerConfig{W, 0, neox(theta)}, LayerConfig{64, 0, neox(theta)}};
}

// Serving (issue 35): three requests in a batch of three from position 0, W the smallest sliding window.
// Step 0 prefills them together: sequence 1's prompt repeats sequence 0's first W + 3 of W + 5 tokens (a shared
// prefix longer than the window), sequence 2's its first W - 1 (shorter), and both diverge after it
// (sequence 2 in its first decode step). All decode past the wrap. Then sequence 2's request ends and a
// new one takes the sequence (a reset to 0) whose prompt re-sends sequence 0's first W + 2 tokens after
// sequence 0's early keys left its window, while the others decode (a join mid-run). Sequence 0 then
// leaves (sits out) and comes back as a new request re-sending its own first W + 1 tokens. No prefix
// length is a multiple of 4, so an engine that shares whole blocks of 4 shares past a divergence.
Case& serving_prefix_schedule(Case& c) {
  int64_t W = c.config.layers[0].window;
  for (const LayerConfig& l : c.config.layers) W = std::min(W, l.window);
  c.shared_prefixes = {{1, 0, W + 3}, {2, 0, W - 1}, {3, 0, W + 2}, {4, 0, W + 1}};
  std::vector<StepPlan> steps{StepPlan{{}, {W + 5, W + 5, W - 1}}};
  for (int i = 0; i < W + 2; ++i) steps.push_back(StepPlan{{}, {1, 1, 1}});
  steps.push_back(reset_then(2, 0, 3, {1, 1, W + 4}));  // a new request joins: its prefill beside two decodes
  for (int i = 0; i < 3; ++i) steps.push_back(StepPlan{{}, {1, 1, 1}});
  steps.push_back(StepPlan{{}, {0, 1, 1}});  // sequence 0's request has ended: it sits out
  steps.push_back(reset_then(0, 0, 4, {W + 2, 1, 1}));  // and is taken by a request re-sending its old prefix
  for (int i = 0; i < 2; ++i) steps.push_back(StepPlan{{}, {1, 1, 1}});
  return schedule(c, {0, 0, 0}, std::move(steps));
}

// Serving scale (issue 35): one sequence per prompt, all from position 0; sequence s joins at step s
// with its whole prompt while the earlier ones decode, then every sequence decodes `decodes` tokens.
Case& long_multi_schedule(Case& c, const std::vector<int64_t>& prompts, int decodes) {
  const size_t B = prompts.size();
  std::vector<StepPlan> steps;
  for (size_t s = 0; s < B; ++s) {
    StepPlan st{{}, std::vector<int64_t>(B, 0)};
    for (size_t q = 0; q < s; ++q) st.tokens[q] = 1;
    st.tokens[s] = prompts[s];
    steps.push_back(st);
  }
  for (int i = 0; i < decodes; ++i) steps.push_back(StepPlan{{}, std::vector<int64_t>(B, 1)});
  return schedule(c, std::vector<int64_t>(B, 0), std::move(steps));
}

}  // namespace

std::vector<GoldenSpec> golden_set() {
  const DataMode needle = DataMode::needle, random = DataMode::random;
  std::vector<GoldenSpec> set;

  // ---- the window boundaries, decode and prefill (needles: W +- 1 moves outputs by O(1)) ----
  {
    Case c = shaped_case({LayerConfig{8, 0, neox()}}, 4, 2, 32, needle, 101);
    single(c, repeat(33, 1));
    set.push_back(spec("decode_w8", {"t<W", "t=W-1", "t=W", "t=W+1", "t=kW", "needle-W+1", "needle-W-1", "gqa", "rope-neox"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 2, neox()}}, 4, 1, 32, needle, 102);
    single(c, repeat(28, 1), 5);
    set.push_back(spec("decode_w8_sinks2", {"t<W", "t=W", "t=W+1", "t=kW", "sinks", "mqa", "needle-W+1", "needle-W-1"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{16, 0, neox()}}, 4, 1, 32, needle, 103);
    single(c, {15, 16, 17, 1});
    set.push_back(spec("prefill_chunks_w16", {"t=W-1", "t=W", "t=kW", "chunk>W", "chunk-crosses-wrap", "mqa", "needle-W+1", "needle-W-1"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 1, neox()}}, 2, 2, 32, needle, 104);
    single(c, {5, 21, 1, 8});
    set.push_back(spec("chunk_2w_crosses_wrap", {"chunk>W", "chunk-crosses-wrap", "t=kW", "sinks", "mha", "needle-W+1"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{4, 4, neox()}}, 4, 2, 32, needle, 105);
    single(c, {3, 1, 5, 9, 1});
    set.push_back(spec("sinks4_w4", {"sinks", "chunk>W", "t=W", "t=kW", "gqa", "needle-W+1", "needle-W-1"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{32, 4, neox()}}, 2, 1, 32, needle, 106);
    single(c, {34, 1, 1, 1, 31}, 17);
    set.push_back(spec("needle_w32_s4", {"needle-W+1", "needle-W-1", "t=W", "t=W+1", "chunk>W", "sinks", "mqa"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{1, 0, neox()}, LayerConfig{1, 2, neox()}}, 2, 1, 16, random, 107);
    single(c, {1, 1, 3, 2});
    set.push_back(spec("window_1", {"W=1", "sinks", "multi-layer", "mqa"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{64, 0, neox()}, LayerConfig{24, 0, neox()}}, 4, 4, 16, random, 108);
    single(c, {7, 1, 16});
    set.push_back(spec("window_ge_length", {"W>=length", "multi-layer", "mha"}, c));
  }

  // ---- batches, sitting out, resets ----
  {
    Case c = shaped_case({LayerConfig{6, 1, neox()}}, 4, 2, 16, random, 109);
    c.config.batch = 3;
    c.config.start_positions = {0, 100, 7};
    c.steps = {StepPlan{{}, {4, 1, 0}}, StepPlan{{}, {1, 0, 7}}, StepPlan{{}, {0, 1, 1}},
               StepPlan{{}, {3, 3, 0}}, StepPlan{{}, {1, 1, 1}}, StepPlan{{}, {0, 0, 2}}};
    c.config.max_tokens = needed_max_tokens(c);
    set.push_back(spec("batch_mixed_sit_out", {"batch-mixed", "sit-out", "sinks", "gqa"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{4, 1, neox()}}, 2, 1, 32, random, 110);
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
    Case c = shaped_case({LayerConfig{8, 0, gptj()}}, 4, 2, 32, needle, 111);
    single(c, {9, 1, 1, 8}, 3);
    set.push_back(spec("rope_gptj", {"rope-gptj", "t=W", "t=W+1", "chunk>W", "needle-W+1"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 0, no_rope()}}, 4, 2, 32, random, 112);
    single(c, {9, 1, 1, 8});
    set.push_back(spec("rope_none", {"rope-none", "chunk>W"}, c));
  }
  {
    RopeConfig r = neox();
    r.scaling = RopeScaling::linear;
    r.factor = 4.0;
    Case c = shaped_case({LayerConfig{8, 1, r}}, 4, 2, 32, random, 113);
    single(c, {9, 1, 1, 8}, 4096);
    set.push_back(spec("rope_linear", {"rope-linear", "rope-neox"}, c));
  }
  {
    RopeConfig r = neox(10000.0);
    r.scaling = RopeScaling::ntk;
    r.factor = 8.0;
    Case c = shaped_case({LayerConfig{8, 0, r}}, 4, 2, 32, random, 114);
    single(c, {9, 1, 1, 8}, 20000);
    set.push_back(spec("rope_ntk", {"rope-ntk", "rope-neox"}, c));
  }
  {
    RopeConfig a = neox();
    a.rotary_dim = 16;
    RopeConfig b = gptj(500000.0);
    b.rotary_dim = 8;
    Case c = shaped_case({LayerConfig{8, 0, a}, LayerConfig{8, 0, b}}, 4, 2, 32, random, 115);
    single(c, {9, 1, 1, 8}, 50);
    set.push_back(spec("partial_rotary", {"partial-rotary", "per-layer-rope", "rope-neox", "rope-gptj", "multi-layer"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 1, neox()}}, 4, 2, 32, needle, 116);
    single(c, {10, 1, 1, 7}, k2p20);
    set.push_back(spec("pos_2p20", {"pos-2^20", "needle-W+1"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 0, gptj(500000.0)}}, 4, 2, 32, needle, 117);
    single(c, {9, 1, 1, 8}, k2p24);
    set.push_back(spec("pos_2p24", {"pos-2^24", "rope-gptj", "needle-W+1"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 0, neox()}}, 4, 2, 32, random, 118);
    single(c, {9, 1, 1, 5});
    c.config.start_positions = {(int64_t{1} << 31) - c.config.max_tokens};
    set.push_back(spec("pos_max", {"pos-2^24", "pos-2^31"}, c));
  }

  // ---- storage formats ----
  const auto storage = [&](const char* name, std::vector<std::string> classes, KvFormat k, KvFormat v, uint64_t seed,
                           int D = 32) {
    Case c = shaped_case({LayerConfig{8, 1, neox()}}, 4, 2, D, random, seed);
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
    Case c = shaped_case({LayerConfig{8, 0, neox()}}, 4, 2, 32, random, 128);
    c.config.softcap = 5.0;
    c.config.softmax_scale = 0.3;
    c.qk_amplitude = 3.0f;
    single(c, {9, 1, 1, 8});
    set.push_back(spec("softcap", {"softcap", "softmax-scale"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 0, neox()}, LayerConfig{4, 1, gptj()}}, 4, 2, 32, random, 129);
    c.config.sink_logits = {{0.5f, -1.0f, 2.0f, 3.0f}, {-3.0f, 0.0f, 1.0f, 4.0f}};
    single(c, {9, 1, 1, 8});
    set.push_back(spec("sink_logits", {"sink-logits", "multi-layer", "per-layer-rope"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{4, 0, neox()}, LayerConfig{16, 2, gptj(500000.0)}, LayerConfig{64, 0, no_rope()}}, 4, 2,
                   32, needle, 130);
    single(c, {5, 1, 12, 1, 1}, 11);
    set.push_back(spec("multi_layer_mixed", {"multi-layer", "per-layer-rope", "rope-none", "W>=length", "needle-W+1"}, c));
  }

  // ---- realistic head dims and head counts (real kernels reject tiny head dims) ----
  {
    Case c = shaped_case({LayerConfig{16, 0, neox()}}, 8, 2, 64, needle, 131);
    c.config.k_format = c.config.v_format = fmt_of(DType::f16);
    single(c, {15, 1, 1, 1, 15});
    set.push_back(spec("d64_gqa_f16_needle", {"head_dim-64", "gqa", "kv-f16", "needle-W+1", "needle-W-1", "t=W-1", "t=W", "t=W+1", "t=kW"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{16, 2, neox()}}, 8, 2, 64, random, 132);
    single(c, {20, 1, 1, 4}, 1000);
    set.push_back(spec("d64_gqa_random", {"head_dim-64", "gqa", "sinks", "chunk>W"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 2, neox(500000.0)}}, 16, 4, 128, needle, 133);
    c.config.k_format = c.config.v_format = fmt_of(DType::bf16);
    single(c, {9, 1, 1, 1, 6});
    set.push_back(spec("d128_gqa_bf16_needle", {"head_dim-128", "gqa", "kv-bf16", "sinks", "needle-W+1", "needle-W-1"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 0, neox()}}, 8, 1, 128, random, 134);
    c.config.k_format = c.config.v_format = KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away);
    single(c, {10, 1, 5});
    set.push_back(spec("d128_mqa_int8_q8_0", {"head_dim-128", "mqa", "int8-q8_0", "chunk>W"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 1, neox()}}, 8, 2, 64, random, 135);
    c.config.k_format = c.config.v_format = KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
    c.config.batch = 2;
    c.config.start_positions = {0, 40};
    c.steps = {StepPlan{{}, {9, 4}}, StepPlan{{}, {1, 1}}, StepPlan{{ResetPlan{1, 500, 2}}, {1, 6}},
               StepPlan{{}, {1, 0}}, StepPlan{{}, {1, 1}}};
    c.config.max_tokens = needed_max_tokens(c);
    set.push_back(spec("d64_int8_batch_reset", {"head_dim-64", "int8-per_head", "reset-reuse", "batch-mixed", "sit-out", "gqa"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 0, gptj()}}, 16, 4, 128, random, 136);
    single(c, {9, 1}, k2p20 + 3);
    set.push_back(spec("d128_gqa_gptj_random", {"head_dim-128", "gqa", "rope-gptj", "pos-2^20", "chunk>W"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 4, neox()}}, 8, 2, 64, random, 137);
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
    Case c = shaped_case({LayerConfig{4, 0, neox()}, LayerConfig{6, 2, gptj()}, LayerConfig{3, 1, no_rope()}}, 2, 1, 16,
                   random, 138);
    schedule(c, {30}, {StepPlan{{}, {7}}, StepPlan{{}, {2}},
                       reset_then(0, 11, 1, {1}), StepPlan{{}, {5}},    // p0 30 -> 11: down
                       reset_then(0, 3, 2, {2}), StepPlan{{}, {4}}});   // 11 -> 3: down again
    set.push_back(spec("layers_reset_p0_down", {"reset-reuse", "multi-layer", "per-layer-rope", "sinks",
                                                "mqa", "rope-none", "rope-gptj", "rope-neox"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{5, 1, neox()}, LayerConfig{3, 0, neox(500000.0)}}, 4, 2, 16, random, 139);
    schedule(c, {7, 7}, {StepPlan{{}, {5, 3}}, StepPlan{{}, {4, 1}},
                         reset_then(0, 7, 2, {1, 1}),     // p0 unchanged; the new sequence (3 tokens) is shorter
                         StepPlan{{}, {2, 0}},
                         reset_then(1, 7, 3, {0, 2}),     // p0 unchanged for the other sequence too
                         StepPlan{{}, {0, 3}}});
    set.push_back(spec("layers_reset_p0_same_shorter", {"reset-reuse", "multi-layer", "per-layer-rope",
                                                        "batch-mixed", "sit-out", "sinks", "gqa"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{6, 0, neox()}, LayerConfig{4, 2, neox()}, LayerConfig{8, 0, gptj()}}, 2, 2, 16, random,
                   140);
    schedule(c, {0}, {StepPlan{{}, {10}},
                      reset_then(0, 5, 1, {1}), StepPlan{{}, {3}},     // p0 0 -> 5: up, inside the old positions
                      reset_then(0, 9, 2, {1}), StepPlan{{}, {7}},     // 5 -> 9: up by 4
                      reset_then(0, 1000, 3, {2})});                    // far up: only the sinks' layer shows it
    set.push_back(spec("layers_reset_p0_up", {"reset-reuse", "multi-layer", "per-layer-rope", "sinks",
                                              "mha", "chunk>W"}, c));
  }
  {  // INT8 with resets both ways; every fourth K and V row is zero (all-zero INT8 groups: scale 0, codes 0)
    Case c = shaped_case({LayerConfig{4, 1, neox()}, LayerConfig{6, 0, neox()}}, 2, 1, 32, random, 141);
    c.config.k_format = KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away);
    c.config.v_format = KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
    c.zero_rows_every = 4;
    schedule(c, {100}, {StepPlan{{}, {7}}, StepPlan{{}, {1}},
                        reset_then(0, 20, 1, {3}), StepPlan{{}, {2}},  // p0 100 -> 20: down
                        reset_then(0, 22, 2, {1}), StepPlan{{}, {6}}});  // 20 -> 22: up
    set.push_back(spec("int8_layers_reset_down_up", {"int8-q8_0", "int8-per_head", "int8-half_away", "k-v-dtypes-differ",
                                                     "reset-reuse", "multi-layer", "sinks", "mqa"}, c));
  }
  {  // static INT8 that clamps (|x| above 127 * scale), with softcap and an explicit softmax scale
    Case c = shaped_case({LayerConfig{8, 1, gptj()}}, 4, 2, 32, random, 142);
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
    Case c = shaped_case({LayerConfig{8, 0, neox()}}, 2, 1, 64, random, 143);
    c.config.k_format = c.config.v_format = KvFormat::int8(Int8Scheme::q8_0, Rounding::nearest_even);
    c.config.softmax_scale = 4000.0;
    c.qk_amplitude = 0.004f;
    single(c, {9, 1, 3});
    set.push_back(spec("q8_0_subnormal_scales", {"int8-q8_0", "softmax-scale", "head_dim-64", "mqa", "chunk>W"}, c));
  }
  {  // fp8 e4m3 past its largest finite value (448 * scale), scales not powers of two
    Case c = shaped_case({LayerConfig{8, 1, neox()}}, 2, 1, 32, random, 144);
    c.config.k_format = fmt_of(DType::fp8_e4m3, 0.003f);   // |k| > 1.344 saturates
    c.config.v_format = fmt_of(DType::fp8_e4m3, 0.0017f);  // |v| > 0.7616 saturates
    single(c, {9, 1, 4});
    set.push_back(spec("fp8_e4m3_saturated", {"kv-fp8-e4m3", "k-v-dtypes-differ", "sinks", "mqa", "chunk>W"}, c));
  }
  {  // fp8 e5m2 past 57344 * scale, scales not powers of two, in two layers
    Case c = shaped_case({LayerConfig{8, 0, neox()}, LayerConfig{5, 2, gptj()}}, 2, 1, 32, random, 145);
    c.config.k_format = fmt_of(DType::fp8_e5m2, 2.5e-5f);  // |k| > 1.4336 saturates
    c.config.v_format = fmt_of(DType::fp8_e5m2, 1.5e-5f);  // |v| > 0.86016 saturates
    single(c, {9, 1, 4});
    set.push_back(spec("fp8_e5m2_saturated", {"kv-fp8-e5m2", "k-v-dtypes-differ", "multi-layer",
                                              "per-layer-rope", "sinks", "mqa"}, c));
  }
  {  // softcap with learned sink logits, and a reset to a p0 just above the old positions
    Case c = shaped_case({LayerConfig{8, 0, neox()}, LayerConfig{5, 0, gptj()}}, 2, 1, 32, random, 146);
    c.config.softcap = 4.0;
    c.config.sink_logits = {{1.5f, -0.5f}, {3.0f, 0.25f}};
    c.qk_amplitude = 3.0f;
    schedule(c, {0}, {StepPlan{{}, {9}}, StepPlan{{}, {1}}, reset_then(0, 12, 1, {1}), StepPlan{{}, {6}}});
    set.push_back(spec("softcap_sink_logits", {"softcap", "sink-logits", "multi-layer", "per-layer-rope",
                                               "reset-reuse", "mqa", "chunk>W"}, c));
  }
  {  // sink tokens together with sink logits (needles: the first sink competes with the learned logit)
    Case c = shaped_case({LayerConfig{4, 2, neox()}, LayerConfig{6, 1, neox()}}, 2, 1, 32, needle, 147);
    c.config.sink_logits = {{2.0f, -1.0f}, {0.5f, 1.0f}};
    single(c, {5, 1, 1, 6, 1});
    set.push_back(spec("sinks_sink_logits", {"sinks", "sink-logits", "multi-layer", "mqa",
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
    Case c = shaped_case({LayerConfig{8, 1, a}, LayerConfig{8, 0, b}}, 2, 1, 32, random, 148);
    single(c, {9, 1, 4}, 3000);
    set.push_back(spec("rope_linear_ntk_partial", {"rope-linear", "rope-ntk", "partial-rotary", "per-layer-rope",
                                                   "rope-neox", "rope-gptj", "multi-layer"}, c));
  }
  // Issue 26 item 6: every feature, and every two that meet in one score, angle or stored value, in
  // at least three cases where a bug of theirs changes an output (GoldenCheck.EveryInteractionMutant...):
  // softcap with sink logits large against the cap; NTK on a partial rotary dim (the exponent's R);
  // linear scaling on a partial rotary dim; fp8 past its largest finite value in each format; static
  // INT8 clamped on the negative side.
  const auto scaled = [](RopeConfig r, RopeScaling scaling, double factor, int rotary) {
    r.scaling = scaling;
    r.factor = factor;
    r.rotary_dim = rotary;
    return r;
  };
  {
    Case c = shaped_case({LayerConfig{4, 0, scaled(neox(), RopeScaling::ntk, 4.0, 16)},
                    LayerConfig{6, 1, scaled(gptj(500000.0), RopeScaling::ntk, 8.0, 8)}}, 2, 1, 32, random, 178);
    c.config.softcap = 3.0;
    c.config.sink_logits = {{2.5f, -1.5f}, {1.0f, 3.5f}};
    c.qk_amplitude = 3.0f;
    single(c, {5, 1, 3}, 5000);
    set.push_back(spec("softcap_sink_logits_ntk_partial", {"softcap", "sink-logits", "rope-ntk", "partial-rotary",
                                                           "multi-layer", "per-layer-rope", "mqa"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 0, scaled(neox(), RopeScaling::linear, 4.0, 16)}}, 4, 2, 32, random, 179);
    c.config.softcap = 5.0;
    c.config.sink_logits = {{3.0f, -2.0f, 4.5f, 1.0f}};
    c.qk_amplitude = 3.0f;
    single(c, {9, 1, 2}, 3000);
    set.push_back(spec("softcap_sink_logits_gqa_linear_partial", {"softcap", "sink-logits", "rope-linear",
                                                                  "partial-rotary", "gqa"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{8, 0, scaled(neox(), RopeScaling::ntk, 8.0, 32)},
                    LayerConfig{64, 0, scaled(gptj(), RopeScaling::ntk, 2.0, 16)}}, 2, 1, 64, random, 180);
    single(c, {9, 1, 3}, 20000);
    set.push_back(spec("rope_ntk_partial_d64", {"rope-ntk", "partial-rotary", "multi-layer", "per-layer-rope",
                                                "head_dim-64", "mqa"}, c));
  }
  {  // NTK on 8 of 16 dims, with sink tokens and GQA
    Case c = shaped_case({LayerConfig{8, 2, scaled(neox(), RopeScaling::ntk, 16.0, 8)}}, 4, 2, 16, random, 187);
    single(c, {10, 1, 2}, 100000);
    set.push_back(spec("rope_ntk_partial_gqa_sinks", {"rope-ntk", "partial-rotary", "sinks", "gqa", "chunk>W"}, c));
  }
  {  // K e4m3 past 448 * scale, V e5m2 past 57344 * scale, two sequences
    Case c = shaped_case({LayerConfig{8, 1, neox()}}, 2, 1, 32, random, 181);
    c.config.k_format = fmt_of(DType::fp8_e4m3, 0.003f);
    c.config.v_format = fmt_of(DType::fp8_e5m2, 1.5e-5f);
    schedule(c, {0, 30}, {StepPlan{{}, {6, 4}}, StepPlan{{}, {1, 1}}, StepPlan{{}, {4, 5}}});
    set.push_back(spec("fp8_saturated_k_e4m3_v_e5m2", {"kv-fp8-e4m3", "kv-fp8-e5m2", "k-v-dtypes-differ", "sinks",
                                                       "batch-mixed"}, c));
  }
  {  // K e5m2 past 57344 * scale, V e4m3 past 448 * scale, GQA in two layers
    Case c = shaped_case({LayerConfig{6, 0, neox()}, LayerConfig{64, 0, neox()}}, 4, 2, 32, random, 182);
    c.config.k_format = fmt_of(DType::fp8_e5m2, 2.5e-5f);
    c.config.v_format = fmt_of(DType::fp8_e4m3, 0.0017f);
    single(c, {7, 1, 4}, 11);
    set.push_back(spec("fp8_saturated_k_e5m2_v_e4m3", {"kv-fp8-e4m3", "kv-fp8-e5m2", "k-v-dtypes-differ", "multi-layer",
                                                       "gqa"}, c));
  }
  {  // static INT8 K clamped at |x| > 1.27 (both signs), V e5m2 saturated
    Case c = shaped_case({LayerConfig{8, 0, neox()}, LayerConfig{5, 2, neox()}}, 2, 1, 32, random, 183);
    c.config.k_format = KvFormat::int8(Int8Scheme::static_tensor, Rounding::nearest_even, 0.01f);
    c.config.v_format = fmt_of(DType::fp8_e5m2, 1.5e-5f);
    single(c, {9, 1, 3}, 40);
    set.push_back(spec("int8_static_clamped_k_e5m2_v", {"int8-static", "kv-fp8-e5m2", "k-v-dtypes-differ", "multi-layer",
                                                        "sinks", "mqa"}, c));
  }
  {  // W = 1 next to a layer with sinks, reset to a higher p0 and then to the same one
    Case c = shaped_case({LayerConfig{1, 0, neox()}, LayerConfig{3, 2, gptj()}}, 2, 1, 16, random, 149);
    schedule(c, {0}, {StepPlan{{}, {6}}, reset_then(0, 2, 1, {1}), StepPlan{{}, {2}}, reset_then(0, 2, 2, {3})});
    set.push_back(spec("window_1_layers_reset", {"W=1", "multi-layer", "per-layer-rope", "reset-reuse",
                                                 "sinks", "mqa"}, c));
  }
  {  // positions just below 2^31 in two layers, with resets up and down
    const int64_t top = int64_t{1} << 31;
    Case c = shaped_case({LayerConfig{8, 1, neox()}, LayerConfig{4, 0, gptj(500000.0)}}, 2, 1, 32, random, 150);
    schedule(c, {top - 40}, {StepPlan{{}, {12}},
                             reset_then(0, top - 26, 1, {1}), StepPlan{{}, {5}},   // up, 3 above the old last
                             reset_then(0, top - 60, 2, {3})});                    // down
    set.push_back(spec("pos_max_layers_reset", {"pos-2^31", "pos-2^24", "multi-layer", "per-layer-rope",
                                                "reset-reuse", "sinks", "mqa", "chunk>W"}, c));
  }
  {  // three sequences at the same positions with different data and chunk sizes: a wrong batch
     // stride or one ring shared by the sequences changes outputs
    Case c = shaped_case({LayerConfig{5, 1, neox()}, LayerConfig{3, 0, neox()}}, 4, 2, 16, random, 151);
    schedule(c, {0, 0, 0}, {StepPlan{{}, {3, 5, 2}}, StepPlan{{}, {1, 1, 1}}, StepPlan{{}, {4, 2, 6}},
                            StepPlan{{}, {1, 0, 1}}, StepPlan{{}, {2, 3, 1}}});
    set.push_back(spec("batch3_same_positions", {"batch-mixed", "sit-out", "multi-layer", "sinks", "gqa",
                                                 "chunk>W"}, c));
  }
  // ---- spec 1 core (issue 14): K/V f32, f16 or bf16, neox RoPE, no sinks, no sink logits, no softcap,
  // one sliding window beside full-attention layers. Every structural class has core cases at head
  // dims 64 and 128 in bf16 (kernel libraries take only those) and two f32 cases (f32-only engines);
  // positions near 2^20 and 2^31 in f32 at both head dims. Few heads and short schedules keep the
  // size down: bound statistics cost rows x Hq x D x L. ----
  const std::vector<std::string> ring_classes{"t<W", "t=W-1", "t=W", "t=W+1", "t=kW", "chunk>W", "chunk-crosses-wrap",
                                              "W>=length", "batch-mixed", "sit-out", "reset-reuse", "reset-p0-down",
                                              "reset-p0-same", "reset-p0-up", "reset-shorter", "multi-layer",
                                              "sliding-and-full", "needle-W+1", "needle-W-1"};
  const auto with = [](std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  {
    Case c = shaped_case(sliding_and_full(4, 500000.0), 2, 1, 128, needle, 152);
    kv(c, DType::bf16).config.softmax_scale = 0.125;
    core_ring_schedule(c);
    set.push_back(spec("core_d128_bf16_mqa_ring", with(ring_classes, {"head_dim-128", "kv-bf16", "mqa", "softmax-scale"}), c));
  }
  {
    Case c = shaped_case(sliding_and_full(4), 4, 2, 64, needle, 153);
    kv(c, DType::bf16).config.softmax_scale = 0.1;
    core_ring_schedule(c);
    set.push_back(spec("core_d64_bf16_gqa_ring", with(ring_classes, {"head_dim-64", "kv-bf16", "gqa", "softmax-scale"}), c));
  }
  {
    Case c = shaped_case(sliding_and_full(4), 2, 2, 16, needle, 154);
    core_ring_schedule(c);
    set.push_back(spec("core_f32_mha_ring", with(ring_classes, {"mha"}), c));
  }
  {
    Case c = shaped_case(sliding_and_full(4), 4, 2, 16, needle, 155);
    c.config.softmax_scale = 0.3;
    core_ring_schedule(c);
    set.push_back(spec("core_f32_gqa_ring", with(ring_classes, {"gqa", "softmax-scale"}), c));
  }
  {  // GQA at head dim 128 (a query head reading the wrong kv head shows), the wrap in one chunk
    Case c = shaped_case({LayerConfig{4, 0, neox(500000.0)}}, 4, 2, 128, needle, 156);
    kv(c, DType::bf16);
    single(c, {3, 5, 1}, 5);
    set.push_back(spec("core_d128_bf16_gqa_needle", {"head_dim-128", "kv-bf16", "gqa", "t=W", "t=W+1", "t=kW", "chunk>W",
                                                     "chunk-crosses-wrap", "needle-W+1", "needle-W-1"}, c));
  }
  {  // W = 1 beside a full-attention layer, two sequences, resets up (stale cells visible) and down
    Case c = shaped_case({LayerConfig{1, 0, neox()}, LayerConfig{64, 0, neox()}}, 2, 2, 128, random, 157);
    kv(c, DType::bf16);
    schedule(c, {0, 50}, {StepPlan{{}, {3, 1}},
                          StepPlan{{}, {0, 2}},
                          reset_then(0, 4, 1, {2, 1}),     // up: the old positions 0..2 get indices -4..-2
                          reset_then(1, 10, 2, {1, 1}),    // down; 1 token after 4: shorter
                          StepPlan{{}, {1, 0}}});
    set.push_back(spec("core_d128_bf16_w1_mha", {"head_dim-128", "kv-bf16", "mha", "W=1", "W>=length", "multi-layer",
                                                 "sliding-and-full", "batch-mixed", "sit-out", "reset-p0-up",
                                                 "reset-p0-down", "reset-shorter"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{1, 0, neox()}, LayerConfig{64, 0, neox()}}, 2, 2, 64, random, 158);
    kv(c, DType::bf16);
    schedule(c, {20, 0}, {StepPlan{{}, {2, 4}},
                          reset_then(1, 0, 1, {1, 0}),     // same p0, sitting out
                          reset_then(0, 9, 2, {1, 2}),     // down
                          StepPlan{{}, {0, 1}}});
    set.push_back(spec("core_d64_bf16_w1_mha", {"head_dim-64", "kv-bf16", "mha", "W=1", "W>=length", "multi-layer",
                                                "sliding-and-full", "batch-mixed", "sit-out", "reset-p0-same",
                                                "reset-p0-down", "reset-shorter"}, c));
  }
  {
    Case c = shaped_case({LayerConfig{4, 0, neox()}}, 2, 1, 64, needle, 159);
    kv(c, DType::f16);
    single(c, {2, 5, 1, 1}, 30);
    set.push_back(spec("core_d64_f16_mqa_needle", {"head_dim-64", "kv-f16", "mqa", "chunk>W", "chunk-crosses-wrap",
                                                   "needle-W+1", "needle-W-1"}, c));
  }
  // W = 1 and head dim 128 for engines of f32 or f16 K/V without sinks at positions below 2^17 (the
  // cases above are bf16, near 2^20 or 2^31, or carry sinks): RoPE halves of 16 and 64, multiples of 8.
  {  // W = 1 beside a full-attention layer, GQA, two sequences: reset up (stale cells visible) and same
    Case c = shaped_case({LayerConfig{1, 0, neox()}, LayerConfig{64, 0, neox()}}, 4, 2, 32, random, 170);
    schedule(c, {3, 60}, {StepPlan{{}, {2, 3}},
                          StepPlan{{}, {1, 0}},
                          reset_then(1, 65, 1, {1, 1}),    // up: the old positions 60..62 get indices -5..-3
                          reset_then(0, 3, 2, {2, 0})});   // same p0; 2 tokens after 3: shorter
    set.push_back(spec("core_f32_w1_gqa", {"W=1", "W>=length", "multi-layer", "sliding-and-full", "gqa", "batch-mixed",
                                           "sit-out", "reset-p0-up", "reset-p0-same", "reset-shorter"}, c));
  }
  {  // head dim 128 in f16, GQA, W = 2: every ring boundary in 5 rows (the wrap inside a chunk of 3)
    Case c = shaped_case({LayerConfig{2, 0, neox(500000.0)}}, 4, 2, 128, needle, 171);
    kv(c, DType::f16).config.softmax_scale = 0.125;
    single(c, {1, 3, 1}, 9);
    set.push_back(spec("core_d128_f16_gqa_ring", {"head_dim-128", "kv-f16", "gqa", "softmax-scale", "t<W", "t=W-1", "t=W",
                                                  "t=W+1", "t=kW", "chunk>W", "chunk-crosses-wrap"}, c));
  }
  // Positions near 2^20 and 2^31 in f32 at head dims 64 and 128 (W = 1 beside a full layer, so the
  // full layer's RoPE is judged over every key).
  const auto positions = [&](const char* name, std::vector<std::string> classes, int D, int64_t last, uint64_t seed) {
    Case c = shaped_case({LayerConfig{1, 0, neox()}, LayerConfig{64, 0, neox()}}, 2, 1, D, random, seed);
    single(c, {3, 1, 2});
    c.config.start_positions = {last - (c.config.max_tokens - 1)};  // the last token at `last`
    if (D == 128) c.config.softmax_scale = 0.1;
    set.push_back(spec(name, with(classes, {"W=1", "W>=length", "multi-layer", "sliding-and-full", "mqa"}), c));
  };
  positions("core_d64_pos_2p20", {"head_dim-64", "pos-2^20"}, 64, k2p20 + 1, 160);
  positions("core_d128_pos_2p20", {"head_dim-128", "pos-2^20", "softmax-scale"}, 128, k2p20 + 1, 161);
  positions("core_d64_pos_2p31", {"head_dim-64", "pos-2^24", "pos-2^31"}, 64, (int64_t{1} << 31) - 1, 162);
  positions("core_d128_pos_2p31", {"head_dim-128", "pos-2^24", "pos-2^31", "softmax-scale"}, 128, (int64_t{1} << 31) - 1,
            163);

  // ---- one feature on a core case: K and V in different core formats, next to sinks, sink logits or q8_0 ----
  const auto k_v_differ = [&](const char* name, std::vector<std::string> classes, std::vector<LayerConfig> layers,
                              KvFormat k, KvFormat v, uint64_t seed) {
    Case c = shaped_case(std::move(layers), 2, 1, 32, random, seed);
    c.config.k_format = k;
    c.config.v_format = v;
    single(c, {5, 1, 3}, 9);
    set.push_back(spec(name, with(classes, {"k-v-dtypes-differ", "mqa", "chunk>W"}), c));
  };
  k_v_differ("sinks_k_f16_v_bf16", {"sinks", "kv-f16", "kv-bf16"}, {LayerConfig{4, 2, neox()}}, fmt_of(DType::f16),
             fmt_of(DType::bf16), 164);
  k_v_differ("sinks_k_bf16_v_f32", {"sinks", "kv-bf16", "sliding-and-full"},
             {LayerConfig{4, 1, neox()}, LayerConfig{64, 0, neox()}}, fmt_of(DType::bf16), fmt_of(DType::f32), 165);
  {  // sink logits as the one feature: K and V in one half-precision format (K != V is a feature too)
    const auto logits = [&](const char* name, DType d, const char* cls, uint64_t seed) {
      Case c = shaped_case({LayerConfig{4, 0, neox()}}, 2, 1, 32, random, seed);
      c.config.k_format = c.config.v_format = fmt_of(d);
      c.config.sink_logits = {{1.0f, -0.5f}};
      single(c, {5, 1, 3}, 9);
      set.push_back(spec(name, {"sink-logits", cls, "mqa", "chunk>W"}, c));
    };
    logits("sink_logits_f16", DType::f16, "kv-f16", 166);
    logits("sink_logits_bf16", DType::bf16, "kv-bf16", 167);
  }
  k_v_differ("q8_0_k_int8_v_f16", {"int8-q8_0", "int8-half_away", "kv-f16"}, {LayerConfig{4, 0, neox()}},
             KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away), fmt_of(DType::f16), 168);
  k_v_differ("q8_0_k_bf16_v_int8", {"int8-q8_0", "int8-half_away", "kv-bf16"}, {LayerConfig{4, 0, neox()}},
             fmt_of(DType::bf16), KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away), 169);

  // ---- spec 1.1 rollback (golden format 2): a feature on small core cases. A sliding layer of W = 4
  // with a reserve Q = 2 (ring C = 6) beside a full-attention layer, so a mutant that rolls back only
  // the sliding layers, or only the first, shows in the outputs; every rollback brings a fresh stream
  // (re-appended indices get new data, so stale slot contents show). Refused steps hold rollbacks only,
  // and three cases refuse a rollback that counting from the current length would honour (the
  // high-water mark decides, spec 1.1 §5.1.2). max_tokens = 40 keeps the rings uncapped. ----
  const auto rb = [](int sequence, int64_t n, int stream) { return conformance::RollbackPlan{sequence, n, stream}; };
  const auto step = [](std::vector<int64_t> tokens, std::vector<conformance::RollbackPlan> rollbacks = {}) {
    return StepPlan{{}, std::move(tokens), std::move(rollbacks)};
  };
  const auto rollback_case = [&](const char* name, std::vector<std::string> classes, std::vector<LayerConfig> layers,
                                 int D, DType dtype, uint64_t seed, std::vector<int64_t> p0, std::vector<StepPlan> steps) {
    Case c = shaped_case(std::move(layers), 2, 1, D, random, seed);
    kv(c, dtype);
    schedule(c, std::move(p0), std::move(steps));
    c.config.max_tokens = 40;
    set.push_back(spec(name, std::move(classes), c));
  };
  const auto reserve = [](int64_t W, int64_t Q) { return LayerConfig{W, 0, neox(), Q}; };
  const auto core_rollback = [&] { return std::vector<LayerConfig>{reserve(4, 2), LayerConfig{64, 0, neox()}}; };
  rollback_case("rollback_before_and_across_wrap", {"rollback-before-wrap", "rollback-across-wrap", "rollback-verify-partial",
                                                    "rollback-multi-layer"},
                core_rollback(), 16, DType::f32, 201, {100},
                {step({3}), step({3}, {rb(0, 1, 10)}), step({1}, {rb(0, 2, 11)}), step({3}),
                 step({3}, {rb(0, 2, 12)}), step({1})});
  rollback_case("rollback_at_wrap", {"rollback-at-wrap", "rollback-reserve-edge", "rollback-multi-layer"}, core_rollback(),
                16, DType::f32, 202, {100},
                {step({6}), step({3}), step({2}, {rb(0, 3, 10)}), step({1}), step({2}, {rb(0, 1, 11)})});
  rollback_case("rollback_across_wrap_batch", {"rollback-across-wrap", "rollback-batch", "rollback-multi-layer"},
                core_rollback(), 16, DType::f32, 203, {0, 50},
                {step({5, 2}), step({3, 0}), step({4, 1}, {rb(0, 3, 10)}), step({2, 2}),
                 step({1, 1}, {rb(0, 2, 11), rb(1, 1, 12)})});
  rollback_case("rollback_reserve_edge_refused", {"rollback-reserve-edge", "rollback-refused", "rollback-repeated",
                                                  "rollback-multi-layer"},
                core_rollback(), 16, DType::f32, 204, {100},
                {step({12}), step({0}, {rb(0, 4, 10)}), step({2}, {rb(0, 3, 11)}), step({3}, {rb(0, 1, 12)})});
  rollback_case("rollback_repeated_refused", {"rollback-repeated", "rollback-refused", "rollback-verify-partial",
                                              "rollback-multi-layer"},
                core_rollback(), 16, DType::f32, 205, {100},
                {step({10}), step({1}, {rb(0, 3, 10)}), step({0}, {rb(0, 3, 11)}), step({2}, {rb(0, 1, 12)}), step({3})});
  rollback_case("rollback_batch_refused", {"rollback-batch", "rollback-refused", "rollback-before-wrap", "rollback-multi-layer"},
                core_rollback(), 16, DType::f32, 206, {100, 7},
                {step({5, 3}), step({4, 0}), step({1, 2}, {rb(0, 2, 10), rb(1, 1, 11)}), step({3, 4}),
                 step({0, 0}, {rb(0, 4, 12), rb(1, 1, 13)}), step({1, 1}, {rb(1, 2, 14)}), step({2, 0}, {rb(0, 1, 15)})});
  rollback_case("rollback_verify_k3", {"rollback-verify-partial", "rollback-at-wrap", "rollback-multi-layer"},
                core_rollback(), 16, DType::f32, 207, {30},
                {step({4}), step({4}, {rb(0, 2, 10)}), step({4}, {rb(0, 1, 11)}), step({4}, {rb(0, 3, 12)}), step({4}),
                 step({4}, {rb(0, 2, 13)}), step({1}, {rb(0, 1, 14)})});
  rollback_case("rollback_d128_bf16", {"head_dim-128", "kv-bf16", "rollback-refused", "rollback-repeated",
                                       "rollback-reserve-edge", "rollback-at-wrap"},
                {reserve(4, 2)}, 128, DType::bf16, 208, {1000},
                one_layer_rollback_steps());
  // Rollback with sink tokens (issue 26): into the sinks (m <= S: honoured whatever H, and H restarts
  // at m), between the sinks and the window (S < m < S + W - 1: honoured only before the wrap), and
  // with reserve 0 in a batch; from p0 = 0, so that an engine that starts at 0 runs them too.
  const auto sinks_reserve = [](int64_t W, int64_t S, int64_t Q) { return LayerConfig{W, S, neox(), Q}; };
  rollback_case("rollback_into_sinks", {"sinks", "rollback-refused", "rollback-verify-partial", "rollback-multi-layer"},
                {sinks_reserve(4, 2, 1), LayerConfig{64, 0, neox()}}, 16, DType::f32, 210, {0},
                {step({9}), step({2}, {rb(0, 8, 10)}), step({5}), step({0}, {rb(0, 3, 11)}), step({2}, {rb(0, 1, 12)}),
                 step({4}), step({1}, {rb(0, 11, 13)}), step({2})});
  rollback_case("rollback_sinks_reserve_0_batch", {"sinks", "rollback-batch", "rollback-refused"},
                {sinks_reserve(3, 1, 0)}, 64, DType::bf16, 211, {0, 0},
                {step({7, 5}), step({1, 1}, {rb(0, 6, 10), rb(1, 1, 11)}), step({3, 2}), step({0, 0}, {rb(1, 2, 12)}),
                 step({1, 2}, {rb(0, 1, 13)}), step({2, 1}, {rb(0, 4, 14), rb(1, 8, 15)})});
  rollback_case("rollback_two_windows", {"rollback-multi-layer", "rollback-refused", "rollback-reserve-edge",
                                         "several-windows"},
                {reserve(4, 2), reserve(3, 1), LayerConfig{64, 0, neox()}}, 16, DType::f32, 209, {100},
                {step({8}), step({1}, {rb(0, 2, 10)}), step({0}, {rb(0, 2, 11)}), step({3}), step({1}, {rb(0, 2, 12)}),
                 step({2})});

  // One-layer rollback (issue 26 item 6: an engine of one layer judges rollback only on these): the
  // schedule of rollback_d128_bf16 (refused, repeated, at the reserve's edge, across the wrap) at head dim
  // 64 in f16 and in f32 with GQA.
  const auto one_layer_rollback = [&](const char* name, std::vector<std::string> classes, int D, DType dtype,
                                      uint64_t seed, int64_t p0) {
    rollback_case(name, with(classes, {"rollback-refused", "rollback-repeated", "rollback-reserve-edge", "rollback-at-wrap"}),
                  {reserve(4, 2)}, D, dtype, seed, {p0},
                  one_layer_rollback_steps());
  };
  one_layer_rollback("rollback_one_layer_d64_f16", {"head_dim-64", "kv-f16"}, 64, DType::f16, 212, 0);
  one_layer_rollback("rollback_one_layer_f32", {}, 32, DType::f32, 213, 7);

  // ---- engines that start every sequence at position 0 (issue 26): transformers, mlx-lm and most model
  // code cannot set a start position (capabilities settable_p0 = false), and reset a sequence to 0. The
  // core ring schedule and W = 1 beside a full layer, from 0 with resets to 0, judge every structural
  // class such an engine can express: in bf16 at head dims 128 (MHA, MQA) and 64 (GQA), and in f32;
  // with one sequence (max_batch 1) too, and for one sequence that sets p0, resets down and up. ----
  const std::vector<std::string> ring_classes_from_0{"t<W", "t=W-1", "t=W", "t=W+1", "t=kW", "chunk>W",
                                                     "chunk-crosses-wrap", "W>=length", "batch-mixed", "sit-out",
                                                     "reset-reuse", "reset-p0-same", "reset-shorter", "multi-layer",
                                                     "sliding-and-full", "needle-W+1", "needle-W-1"};
  {
    Case c = shaped_case(sliding_and_full(4, 500000.0), 2, 2, 128, needle, 172);
    kv(c, DType::bf16).config.softmax_scale = 0.125;
    core_ring_schedule(c, true);
    set.push_back(spec("core_p0_0_d128_bf16_mha_ring", with(ring_classes_from_0, {"head_dim-128", "kv-bf16", "mha",
                                                                                "softmax-scale"}), c));
  }
  {
    Case c = shaped_case(sliding_and_full(4), 2, 1, 16, needle, 174);
    c.config.softmax_scale = 0.3;
    core_ring_schedule(c, true);
    set.push_back(spec("core_p0_0_f32_mqa_ring", with(ring_classes_from_0, {"mqa", "softmax-scale"}), c));
  }
  const std::vector<std::string> w1_from_0{"W=1", "W>=length", "multi-layer", "sliding-and-full", "reset-reuse",
                                           "reset-p0-same", "reset-shorter"};
  {  // W = 1 beside a full layer, two sequences from 0, each reset to 0 (shorter after it)
    Case c = shaped_case({LayerConfig{1, 0, neox()}, LayerConfig{64, 0, neox()}}, 2, 1, 128, random, 175);
    kv(c, DType::bf16).config.softmax_scale = 0.125;
    schedule(c, {0, 0}, {StepPlan{{}, {3, 1}},
                         StepPlan{{}, {0, 2}},
                         reset_then(0, 0, 1, {2, 1}),
                         reset_then(1, 0, 2, {1, 1}),
                         StepPlan{{}, {1, 0}}});
    set.push_back(spec("core_p0_0_d128_bf16_w1_mqa", with(w1_from_0, {"head_dim-128", "kv-bf16", "mqa", "batch-mixed",
                                                                     "sit-out", "softmax-scale"}), c));
  }
  // One sequence (max_batch 1): W = 1 beside a full layer, GQA, reset to 0 twice; in bf16 at head dim
  // 64 and in f32.
  const auto w1_one_sequence = [&](const char* name, std::vector<std::string> classes, int D, DType dtype,
                                   uint64_t seed) {
    Case c = shaped_case({LayerConfig{1, 0, neox()}, LayerConfig{64, 0, neox()}}, 4, 2, D, random, seed);
    kv(c, dtype).config.softmax_scale = 0.25;
    schedule(c, {0}, {StepPlan{{}, {3}}, StepPlan{{}, {1}}, reset_then(0, 0, 1, {2}), StepPlan{{}, {1}},
                      reset_then(0, 0, 2, {1})});
    set.push_back(spec(name, with(w1_from_0, with(classes, {"gqa", "softmax-scale"})), c));
  };
  w1_one_sequence("core_p0_0_d64_bf16_w1_gqa_one_sequence", {"head_dim-64", "kv-bf16"}, 64, DType::bf16, 173);
  w1_one_sequence("core_p0_0_f32_w1_gqa_one_sequence", {}, 32, DType::f32, 176);
  {  // one sequence (max_batch 1) through the ring, reset down, then up just above the positions held
    Case c = shaped_case(sliding_and_full(4), 4, 2, 16, needle, 177);
    schedule(c, {50}, {StepPlan{{}, {6}}, StepPlan{{}, {1}}, reset_then(0, 20, 1, {3}), StepPlan{{}, {1}},
                       reset_then(0, 23, 2, {5})});
    set.push_back(spec("core_f32_one_sequence_resets", {"gqa", "reset-reuse", "reset-p0-down", "reset-p0-up",
                                                        "reset-shorter", "multi-layer", "sliding-and-full", "chunk>W",
                                                        "t=W"}, c));
  }

  // Batch generation (issue 24): mlx-lm's BatchGenerator (BatchRotatingKVCache) and transformers' left-padded
  // generate() run a batch only when every sequence starts at 0 and appends in every step, with no reset
  // and no rollback: a prefill of unequal prompts, then one-token decode steps past the wrap. In f32 and
  // bf16 at head dim 128, and with sink tokens (mlx-lm's keep) at head dim 64.
  {
    Case c = shaped_case(sliding_and_full(4), 4, 2, 32, needle, 184);  // the default scale: llama.cpp's gemma2 runs it
    schedule(c, {0, 0, 0}, {StepPlan{{}, {5, 2, 7}}, StepPlan{{}, {1, 1, 1}}, StepPlan{{}, {1, 1, 1}},
                            StepPlan{{}, {1, 1, 1}}, StepPlan{{}, {1, 1, 1}}, StepPlan{{}, {1, 1, 1}},
                            StepPlan{{}, {1, 1, 1}}});
    set.push_back(spec("core_p0_0_batch_generation_f32_gqa", {"multi-layer", "sliding-and-full", "gqa"}, c));
  }
  {
    Case c = shaped_case(sliding_and_full(4, 500000.0), 2, 1, 128, needle, 185);
    kv(c, DType::bf16);
    schedule(c, {0, 0}, {StepPlan{{}, {6, 3}}, StepPlan{{}, {1, 1}}, StepPlan{{}, {1, 1}}, StepPlan{{}, {1, 1}},
                         StepPlan{{}, {1, 1}}, StepPlan{{}, {1, 1}}});
    set.push_back(spec("core_p0_0_batch_generation_d128_bf16_mqa", {"head_dim-128", "kv-bf16", "mqa", "multi-layer",
                                                                    "sliding-and-full"}, c));
  }
  {
    // needles: an evicted sink moves an output by O(1), beyond a bf16 engine's bound
    Case c = shaped_case({LayerConfig{4, 2, neox()}, LayerConfig{64, 0, neox()}}, 4, 2, 64, needle, 186);
    kv(c, DType::bf16);
    schedule(c, {0, 0, 0, 0}, {StepPlan{{}, {3, 7, 5, 2}}, StepPlan{{}, {1, 1, 1, 1}}, StepPlan{{}, {1, 1, 1, 1}},
                               StepPlan{{}, {1, 1, 1, 1}}, StepPlan{{}, {1, 1, 1, 1}}, StepPlan{{}, {1, 1, 1, 1}}});
    set.push_back(spec("batch_generation_sinks_d64_bf16", {"sinks", "head_dim-64", "kv-bf16", "gqa", "multi-layer",
                                                           "sliding-and-full"}, c));
  }
  {
    // The same layers with small q and k (|q||k| about 0.2): the weights are near uniform, so the scores'
    // error bound stays small even under bf16 RoPE angles (whose term grows with |q||k|, and hides the
    // needles of the case above from such an engine), and an evicted sink moves an output by about
    // (v_sink - v_other) / (S + W), beyond a bf16 engine's bound. Prompts of at most S + W tokens: no
    // query of the prefill reaches the window, so only the decode steps past the wrap can drop a sink.
    Case c = shaped_case({LayerConfig{4, 2, neox()}, LayerConfig{64, 0, neox()}}, 4, 2, 64, random, 187);
    c.qk_amplitude = 0.1f;
    kv(c, DType::bf16);
    schedule(c, {0, 0, 0, 0}, {StepPlan{{}, {3, 6, 5, 2}}, StepPlan{{}, {1, 1, 1, 1}}, StepPlan{{}, {1, 1, 1, 1}},
                               StepPlan{{}, {1, 1, 1, 1}}, StepPlan{{}, {1, 1, 1, 1}}, StepPlan{{}, {1, 1, 1, 1}},
                               StepPlan{{}, {1, 1, 1, 1}}});
    set.push_back(spec("batch_generation_sinks_small_qk_d64_bf16", {"sinks", "head_dim-64", "kv-bf16", "gqa",
                                                                    "multi-layer", "sliding-and-full"}, c));
  }

  // ---- serving schedules (issue 35, spec 1.2 §5.0): shared and re-sent prefixes, requests joining a
  // running batch, many sequences at serving scale. Every sequence starts at position 0 and every reset
  // is to 0, as a serving engine starts each request. ----
  const auto serving = [&](const char* name, std::vector<LayerConfig> layers, int Hq, int Hkv, int D, DType dtype,
                           uint64_t seed) {
    Case c = shaped_case(std::move(layers), Hq, Hkv, D, random, seed);
    kv(c, dtype);
    serving_prefix_schedule(c);
    set.push_back(spec(name, {"prefix-shared", "prefix-reused", "join-mid-run", "batch-mixed", "sit-out", "reset-reuse",
                              "reset-p0-same"}, c));
  };
  // Small shapes (the golden set's size is paid by every engine): f32 at D 16 / 32, and bf16 at D 64 and
  // 128 with one head (what a bf16 engine at the common head dims judges).
  serving("serving_prefixes_f32_w4_sliding_full", sliding_and_full(4), 2, 1, 16, DType::f32, 221);
  serving("serving_prefixes_f32_w8_d32", {LayerConfig{8, 0, neox()}}, 2, 1, 32, DType::f32, 222);
  serving("serving_prefixes_bf16_w4_d64", {LayerConfig{4, 0, neox()}}, 1, 1, 64, DType::bf16, 223);
  serving("serving_prefixes_bf16_w4_d128", {LayerConfig{4, 0, neox(500000.0)}}, 1, 1, 128, DType::bf16, 224);
  // The same schedule at block scale: every prefix (W - 1 .. W + 3 tokens at W 40) longer than a block of 32
  // tokens, the least block a paged cache keys its prefix cache on (vLLM's CPU_ATTN), so that the re-sent
  // prefixes can hit blocks the first request's window has already freed; sliding beside full (W 128 is at
  // least the case's length): a hybrid cache's two groups must both hit. Hq 1 and D 32 keep it to 1.7 MB.
  serving("serving_prefixes_f32_w40_sliding_full_d32", {LayerConfig{40, 0, neox()}, LayerConfig{128, 0, neox()}}, 1, 1,
          32, DType::f32, 228);
  // Many sequences at once (issue 35): four sequences joining at different steps into one window of 128,
  // about 320 cells in use at once, 32+ decodes past the window, learned sink logits.
  const auto long_multi = [&](const char* name, int Hq, int D, DType dtype, uint64_t seed, std::vector<int64_t> prompts,
                              int decodes) {
    Case c = shaped_case({LayerConfig{128, 0, neox()}}, Hq, 1, D, random, seed);
    kv(c, dtype);
    c.config.sink_logits = {Hq == 2 ? std::vector<float>{0.5f, -1.0f} : std::vector<float>{0.75f}};
    long_multi_schedule(c, prompts, decodes);
    set.push_back(spec(name, {"long-multi-seq", "join-mid-run", "sink-logits", "batch-mixed"}, c));
  };
  long_multi("serving_long_4seq_w128_f32_gqa", 2, 16, DType::f32, 225, {129, 40, 30, 20}, 32);
  long_multi("serving_long_4seq_w128_f32_d32", 1, 32, DType::f32, 226, {30, 129, 20, 40}, 32);
  long_multi("serving_long_4seq_w128_bf16_d32", 1, 32, DType::bf16, 227, {40, 20, 131, 30}, 33);

  // Each case carries every class it exercises (derive_classes); its hand-written tags say what it
  // was built for, and a tag it does not exercise is a bug of the catalogue.
  for (GoldenSpec& s : set) {
    conformance::freeze_needles(s.c);
    const std::vector<std::string> derived = derive_classes(s.c);
    for (const std::string& tag : s.classes) {
      if (std::find(derived.begin(), derived.end(), tag) == derived.end()) {
        throw std::logic_error("golden case " + s.name + " is tagged " + tag + " but does not exercise it");
      }
    }
    s.classes = derived;
  }
  // ---- the covering cases (issue 35): every value pair of every two feature axes in >= 2 cases ----
  std::vector<GoldenSpec> covering = covering_cases(set);
  for (GoldenSpec& g : covering) set.push_back(std::move(g));
  return set;
}

}  // namespace ringkv::golden
