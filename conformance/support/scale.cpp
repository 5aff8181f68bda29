#include "support/scale.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>

#include "support/rng.hpp"
#include "support/runner.hpp"

namespace ringkv::conformance {
namespace {

constexpr int64_t k2p24 = int64_t{1} << 24;

LayerConfig sliding(int64_t window, int64_t sinks, double theta, int64_t reserve = 0) {
  LayerConfig l;
  l.window = window;
  l.sinks = sinks;
  l.rope.style = RopeStyle::neox;
  l.rope.theta = theta;
  l.rollback_reserve = reserve;
  return l;
}

/// A global (full-attention) layer of a case whose streams hold at most max_tokens tokens.
LayerConfig global(int64_t max_tokens, double theta) { return sliding(max_tokens, 0, theta); }

StepPlan step_of(std::vector<int64_t> tokens) { return StepPlan{{}, std::move(tokens), {}}; }

/// Writes a case's start positions and steps (its config, seed and data already set).
using Schedule = std::function<void(Case&)>;

/// One long stream: chunked prefill in the given chunks (the one that crosses W shorter than W), then
/// decode; a second sequence at position 0 with a short prompt decoding beside it (mixed lengths).
Schedule long_prefill(std::vector<int64_t> chunks, int64_t decode, int64_t p0) {
  return [=](Case& c) {
    c.config.start_positions = {p0, 0};
    for (size_t i = 0; i < chunks.size(); ++i) c.steps.push_back(step_of({chunks[i], i == 0 ? int64_t{300} : 1}));
    for (int64_t i = 0; i < decode; ++i) c.steps.push_back(step_of({1, i % 2}));
  };
}

/// One stream from p0 in chunks of `chunk` tokens up to `total`.
Schedule one_stream(int64_t chunk, int64_t total, int64_t p0) {
  return [=](Case& c) {
    c.config.start_positions = {p0};
    for (int64_t done = 0; done < total; done += chunk) c.steps.push_back(step_of({std::min(chunk, total - done)}));
  };
}

/// A wide batch at mixed lengths and positions, as a server's continuous batching runs it: prompts of
/// 1 to `max_prompt` tokens (every fifth sequence joins one step late), decode, a verify chunk of one
/// token and 3 drafts on even sequences whose 2 rejected drafts are rolled back the next step (when the
/// layers keep a reserve), and a sequence reset to a position just below 2^24 that crosses it.
Schedule wide_batch(int64_t max_prompt, bool drafts) {
  return [=](Case& c) {
    const int B = c.config.batch;
    CounterRng rng(c.seed ^ 0x5ca1e);
    std::vector<int64_t> prompt(static_cast<size_t>(B));
    for (int s = 0; s < B; ++s) {
      prompt[static_cast<size_t>(s)] = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_prompt)));
      c.config.start_positions.push_back(int64_t{s} * (k2p24 / B) + static_cast<int64_t>(rng.below(4096)));
    }
    StepPlan first, second, verify, accept, reset;
    for (int s = 0; s < B; ++s) {
      const auto z = static_cast<size_t>(s);
      const bool late = s % 5 == 4;
      first.tokens.push_back(late ? 0 : prompt[z]);
      second.tokens.push_back(late ? prompt[z] : 1);
      verify.tokens.push_back(drafts && s % 2 == 0 ? 4 : 1);
      accept.tokens.push_back(s % 3 == 2 ? 0 : 1);  // a third sit out
      if (drafts && s % 2 == 0) accept.rollbacks.push_back({s, 2, B + 1 + s});  // fresh data after the rollback
      reset.tokens.push_back(s == 3 ? 5 : 1);
    }
    reset.resets.push_back({3, k2p24 - 2, B});  // a fresh stream crossing 2^24
    c.steps = {first, second, verify, accept, reset, step_of(std::vector<int64_t>(static_cast<size_t>(B), 1))};
  };
}

/// One scale case as data: the model shape it stands for, its storage and its schedule.
struct ScaleSpec {
  ScaleTier tier;
  const char* shape;  ///< the name's last part
  const char* what;   ///< ScaleCase::what
  std::vector<LayerConfig> layers;
  int Hq, Hkv, D, batch;
  int64_t max_tokens;
  uint64_t seed;
  DataMode data;
  KvFormat kv;  ///< K and V storage
  std::optional<double> softcap;
  Schedule schedule;
  int64_t every;  ///< ScaleCase::sample_every
};

ScaleCase build(const ScaleSpec& spec) {
  Case c = shaped_case(spec.layers, spec.Hq, spec.Hkv, spec.D, spec.data, spec.seed);
  c.config.batch = spec.batch;
  c.config.max_tokens = spec.max_tokens;
  c.config.k_format = c.config.v_format = spec.kv;
  c.config.softcap = spec.softcap;
  spec.schedule(c);
  return ScaleCase{std::string("scale/") + to_string(spec.tier) + "/" + spec.shape, spec.what, std::move(c), spec.every};
}

const KvFormat kF16 = KvFormat::of(DType::f16), kBf16 = KvFormat::of(DType::bf16);
const KvFormat kQ8_0 = KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away);

/// Every scale case, tier by tier, in a fixed order.
const std::vector<ScaleSpec>& scale_specs() {
  static const std::vector<ScaleSpec> specs = {
      // Llama 3 / Mistral shaped sliding layer: the window edge inside a chunk, positions across 2^24.
      {ScaleTier::ci, "gqa32x8_d128_w4096_f16_prefill",
       "Hq 32 / Hkv 8, D 128, W 4096, f16: chunked prefill of 2600 + 1700 tokens from position 2^24 - 3000 "
       "(W = 4096 inside the second chunk), decode beside a 300-token sequence",
       {sliding(4096, 0, 500000)}, 32, 8, 128, 2, 4400, 2801, DataMode::needle, kF16, {},
       long_prefill({2600, 1700}, 4, k2p24 - 3000), 64},
      // A server's batch: 32 sequences, GQA 64/8, q8_0 K and V (llama.cpp's), sinks, drafts rolled back.
      {ScaleTier::ci, "gqa64x8_d128_b32_q8_0_sinks_drafts",
       "Hq 64 / Hkv 8, D 128, W 4096, S 4, reserve 8, q8_0: 32 sequences at mixed lengths (1 to 96) and "
       "positions up to 2^24, late joiners, sit-outs, verify chunks with 2 drafts rolled back, a reset "
       "crossing 2^24",
       {sliding(4096, 4, 1000000, 8)}, 64, 8, 128, 32, 4096, 2802, DataMode::random, kQ8_0, {},
       wide_batch(96, true), 16},
      // Gemma 2 shaped: D 256, softcap 50, fp8 e4m3 storage, 8 sequences of a few hundred tokens.
      {ScaleTier::ci, "gqa32x8_d256_b8_fp8_softcap",
       "Hq 32 / Hkv 8, D 256, W 4096, softcap 50, fp8 e4m3 (scale 0.5): 8 sequences of up to 200 tokens at "
       "mixed positions",
       {sliding(4096, 0, 10000)}, 32, 8, 256, 8, 4096, 2803, DataMode::random, KvFormat::of(DType::fp8_e4m3, 0.5f),
       50.0, wide_batch(200, false), 32},
      // Mistral-style W 8192 with a global layer beside it (Gemma 2 / 3's interleaving), bf16.
      {ScaleTier::host, "gqa32x8_d128_w8192_global_bf16_prefill",
       "Hq 32 / Hkv 8, D 128, a W 8192 layer and a global layer, bf16: chunked prefill of 3 x 2800 from "
       "2^24 - 5000, then decode",
       {sliding(8192, 0, 1000000), global(9000, 1000000)}, 32, 8, 128, 2, 9000, 2811, DataMode::needle, kBf16, {},
       long_prefill({2800, 2800, 2800}, 8, k2p24 - 5000), 128},
      // W 16384 with sinks and INT8 per head, chunks of 6000 tokens, GQA 64/8.
      {ScaleTier::host, "gqa64x8_d128_w16384_int8_sinks_prefill",
       "Hq 64 / Hkv 8, D 128, W 16384, S 4, reserve 16, INT8 per head: chunked prefill of 6000-token chunks "
       "past the window, then decode",
       {sliding(16384, 4, 1000000, 16)}, 64, 8, 128, 2, 17000, 2812, DataMode::needle,
       KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even), {}, long_prefill({6000, 6000, 4500}, 8, 1000), 256},
      {ScaleTier::host, "gqa32x8_d256_b64_fp8_softcap_drafts",
       "Hq 32 / Hkv 8, D 256, W 4096, S 4, softcap 50, fp8 e5m2: 64 sequences of up to 1500 tokens, drafts "
       "rolled back, a reset crossing 2^24",
       {sliding(4096, 4, 10000, 8)}, 32, 8, 256, 64, 4096, 2813, DataMode::random, KvFormat::of(DType::fp8_e5m2, 1.0f),
       50.0, wide_batch(1500, true), 64},
      {ScaleTier::gpu, "gqa64x8_d128_w32768_f16_sinks_prefill",
       "Hq 64 / Hkv 8, D 128, W 32768, S 4, f16: chunked prefill of 8192-token chunks to 40000",
       {sliding(32768, 4, 1000000, 16)}, 64, 8, 128, 2, 40000, 2821, DataMode::needle, kF16, {},
       long_prefill({8192, 8192, 8192, 8192, 7200}, 16, k2p24 - 20000), 512},
      {ScaleTier::gpu, "gqa64x8_d128_b64_q8_0_drafts",
       "Hq 64 / Hkv 8, D 128, W 32768, q8_0: 64 sequences of up to 4096 tokens, drafts rolled back",
       {sliding(32768, 4, 1000000, 8)}, 64, 8, 128, 64, 32768, 2822, DataMode::random, kQ8_0, {},
       wide_batch(4096, true), 256},
      {ScaleTier::gpu_long, "gqa32x8_d256_w131072_bf16_prefill",
       "Hq 32 / Hkv 8, D 256, W 131072, bf16: 140000 tokens in 8192-token chunks across 2^24",
       {sliding(131072, 0, 1000000)}, 32, 8, 256, 1, 140000, 2831, DataMode::needle, kBf16, {},
       one_stream(8192, 140000, k2p24 - 70000), 16384},
  };
  return specs;
}

}  // namespace

const char* to_string(ScaleTier tier) {
  switch (tier) {
    case ScaleTier::ci: return "ci";
    case ScaleTier::host: return "host";
    case ScaleTier::gpu: return "gpu";
    case ScaleTier::gpu_long: return "gpu-long";
  }
  return "?";
}

std::optional<ScaleTier> parse_scale_tier(const std::string& name) {
  for (ScaleTier t : {ScaleTier::ci, ScaleTier::host, ScaleTier::gpu, ScaleTier::gpu_long}) {
    if (name == to_string(t)) return t;
  }
  return std::nullopt;
}

std::string scale_tier_names() { return "ci, host, gpu, gpu-long"; }

std::vector<ScaleCase> scale_cases(ScaleTier tier) {
  std::vector<ScaleCase> cases;
  for (const ScaleSpec& spec : scale_specs()) {
    if (spec.tier == tier) cases.push_back(build(spec));
  }
  return cases;
}

namespace {

std::vector<std::set<int64_t>> sample_chunks(const Case& c, const std::vector<AppendedChunk>& chunks, int64_t every) {
  const Config& cfg = c.config;
  const size_t L = cfg.layers.size(), B = static_cast<size_t>(cfg.batch);
  std::vector<std::set<int64_t>> sample(L * B);  // [layer][sequence]
  // The boundaries of each layer, which every sequence that gets there meets at the same index.
  std::vector<std::vector<int64_t>> edges(L);
  for (size_t l = 0; l < L; ++l) {
    const LayerConfig& layer = cfg.layers[l];
    const int64_t S = layer.sinks, W = layer.window, C = S + W + layer.rollback_reserve;
    edges[l] = {0, 1, S - 1, S, S + 1, W - 1, W, W + 1, S + W - 1, S + W, S + W + 1, C - 1, C, C + 1, C + W};
    for (int64_t i : needle_targets(c, static_cast<int>(l))) edges[l].push_back(i);
  }
  // Each chunk the schedule appends (a refused step appends none): the edges it crosses, its first
  // and last token, the tokens at positions around 2^24, and one in `every` of the others by hash.
  for (const AppendedChunk& ch : chunks) {
    const auto s = static_cast<size_t>(ch.sequence);
    const int64_t first = ch.first, last = ch.first + ch.n - 1;
    for (size_t l = 0; l < L; ++l) {
      std::set<int64_t>& mine = sample[l * B + s];
      const auto add = [&](int64_t i) {
        if (i >= first && i <= last) mine.insert(i);
      };
      for (int64_t i : edges[l]) add(i);
      add(first);
      add(last);
      for (int64_t p : {k2p24 - 1, k2p24, k2p24 + 1}) add(p - ch.start_position);
      for (int64_t i = first; i <= last; ++i) {
        if (hash_coords(c.seed, 0x5a3b1e, l, s, static_cast<uint64_t>(i)) % static_cast<uint64_t>(every) == 0) add(i);
      }
    }
  }
  return sample;
}

}  // namespace

std::vector<std::set<int64_t>> sample_scale_queries(const Case& c, int64_t every) {
  return sample_chunks(c, appended_chunks(c), every);
}

ScaleOutcome run_scale_case(const EngineFactory& factory, const ScaleCase& sc) {
  ScaleOutcome out;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<AppendedChunk> chunks = appended_chunks(sc.c);
  const std::vector<std::set<int64_t>> sample = sample_chunks(sc.c, chunks, sc.sample_every);
  RunOptions opt;
  opt.keep_records = false;
  opt.cache_bytes = false;
  opt.stop_at_failure = true;
  const auto B = static_cast<size_t>(sc.c.config.batch);
  opt.sample_queries = [&sample, B](int layer, int sequence, int64_t index) {
    return sample[static_cast<size_t>(layer) * B + static_cast<size_t>(sequence)].count(index) > 0;
  };
  RunResult r;
  try {
    r = run_case(factory, sc.c, opt);
  } catch (const std::logic_error& e) {  // the oracle's or the schedule's own error: no verdict on the engine
    out.failure = std::string("ringkv's own error, no verdict on the engine: ") + e.what();
    out.oracle_error = true;
    return out;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.passed = r.ok();
  out.failure = r.failure;
  out.worst_ratio = r.worst_ratio;
  out.outputs_checked = r.outputs_checked;
  const int Hq = sc.c.config.num_q_heads, D = sc.c.config.head_dim;
  out.queries_sampled = r.outputs_checked / D;
  // Rows the engine computed: every appended token of every layer and q head (refused steps append none).
  for (const AppendedChunk& ch : chunks) out.queries_total += ch.n * Hq * static_cast<int64_t>(sc.c.config.layers.size());
  return out;
}

}  // namespace ringkv::conformance
