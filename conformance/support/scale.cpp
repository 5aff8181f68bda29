#include "support/scale.hpp"

#include <algorithm>
#include <chrono>
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

Case shaped(std::vector<LayerConfig> layers, int Hq, int Hkv, int D, int batch, int64_t max_tokens, uint64_t seed,
            DataMode data) {
  Case c;
  c.config.layers = std::move(layers);
  c.config.num_q_heads = Hq;
  c.config.num_kv_heads = Hkv;
  c.config.head_dim = D;
  c.config.batch = batch;
  c.config.max_tokens = max_tokens;
  c.seed = seed;
  c.data = data;
  return c;
}

StepPlan step_of(std::vector<int64_t> tokens) { return StepPlan{{}, std::move(tokens), {}}; }

/// One long stream: chunked prefill in the given chunks (the one that crosses W shorter than W), then
/// decode; a second sequence at position 0 with a short prompt decoding beside it (mixed lengths).
Case long_prefill(Case c, const std::vector<int64_t>& chunks, int64_t decode, int64_t p0) {
  c.config.start_positions = {p0, 0};
  for (size_t i = 0; i < chunks.size(); ++i) c.steps.push_back(step_of({chunks[i], i == 0 ? int64_t{300} : 1}));
  for (int64_t i = 0; i < decode; ++i) c.steps.push_back(step_of({1, i % 2}));
  return c;
}

/// A wide batch at mixed lengths and positions, as a server's continuous batching runs it: prompts of
/// 1 to `max_prompt` tokens (every fifth sequence joins one step late), decode, a verify chunk of one
/// token and 3 drafts on even sequences whose 2 rejected drafts are rolled back the next step (when the
/// layers keep a reserve), and a sequence reset to a position just below 2^24 that crosses it.
Case wide_batch(Case c, int64_t max_prompt, bool drafts) {
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
  return c;
}

ScaleCase named(ScaleTier tier, const std::string& shape, const std::string& what, Case c, int64_t every = 64) {
  return ScaleCase{std::string("scale/") + to_string(tier) + "/" + shape, what, std::move(c), every};
}

std::vector<ScaleCase> ci_cases() {
  std::vector<ScaleCase> v;
  {  // Llama 3 / Mistral shaped sliding layer: the window edge inside a chunk, positions across 2^24.
    Case c = shaped({sliding(4096, 0, 500000)}, 32, 8, 128, 2, 4400, 2801, DataMode::needle);
    c.config.k_format = c.config.v_format = KvFormat::of(DType::f16);
    v.push_back(named(ScaleTier::ci, "gqa32x8_d128_w4096_f16_prefill",
                      "Hq 32 / Hkv 8, D 128, W 4096, f16: chunked prefill of 2600 + 1700 tokens from position "
                      "2^24 - 3000 (W = 4096 inside the second chunk), decode beside a 300-token sequence",
                      long_prefill(std::move(c), {2600, 1700}, 4, k2p24 - 3000)));
  }
  {  // A server's batch: 32 sequences, GQA 64/8, q8_0 K and V (llama.cpp's), sinks, drafts rolled back.
    Case c = shaped({sliding(4096, 4, 1000000, 8)}, 64, 8, 128, 32, 4096, 2802, DataMode::random);
    c.config.k_format = c.config.v_format = KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away);
    v.push_back(named(ScaleTier::ci, "gqa64x8_d128_b32_q8_0_sinks_drafts",
                      "Hq 64 / Hkv 8, D 128, W 4096, S 4, reserve 8, q8_0: 32 sequences at mixed lengths (1 to 96) "
                      "and positions up to 2^24, late joiners, sit-outs, verify chunks with 2 drafts rolled back, "
                      "a reset crossing 2^24",
                      wide_batch(std::move(c), 96, true), 16));
  }
  {  // Gemma 2 shaped: D 256, softcap 50, fp8 e4m3 storage, 8 sequences of a few hundred tokens.
    Case c = shaped({sliding(4096, 0, 10000)}, 32, 8, 256, 8, 4096, 2803, DataMode::random);
    c.config.softcap = 50.0;
    c.config.k_format = c.config.v_format = KvFormat::of(DType::fp8_e4m3, 0.5f);
    v.push_back(named(ScaleTier::ci, "gqa32x8_d256_b8_fp8_softcap",
                      "Hq 32 / Hkv 8, D 256, W 4096, softcap 50, fp8 e4m3 (scale 0.5): 8 sequences of up to 200 "
                      "tokens at mixed positions",
                      wide_batch(std::move(c), 200, false), 32));
  }
  return v;
}

std::vector<ScaleCase> host_cases() {
  std::vector<ScaleCase> v;
  {  // Mistral-style W 8192 with a global layer beside it (Gemma 2 / 3's interleaving), bf16.
    Case c = shaped({sliding(8192, 0, 1000000), global(9000, 1000000)}, 32, 8, 128, 2, 9000, 2811, DataMode::needle);
    c.config.k_format = c.config.v_format = KvFormat::of(DType::bf16);
    v.push_back(named(ScaleTier::host, "gqa32x8_d128_w8192_global_bf16_prefill",
                      "Hq 32 / Hkv 8, D 128, a W 8192 layer and a global layer, bf16: chunked prefill of 3 x 2800 "
                      "from 2^24 - 5000, then decode",
                      long_prefill(std::move(c), {2800, 2800, 2800}, 8, k2p24 - 5000), 128));
  }
  {  // W 16384 with sinks and INT8 per head, one chunk of 6000 tokens, GQA 64/8.
    Case c = shaped({sliding(16384, 4, 1000000, 16)}, 64, 8, 128, 2, 17000, 2812, DataMode::needle);
    c.config.k_format = c.config.v_format = KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
    v.push_back(named(ScaleTier::host, "gqa64x8_d128_w16384_int8_sinks_prefill",
                      "Hq 64 / Hkv 8, D 128, W 16384, S 4, reserve 16, INT8 per head: chunked prefill of 6000-token "
                      "chunks past the window, then decode",
                      long_prefill(std::move(c), {6000, 6000, 4500}, 8, 1000), 256));
  }
  {
    Case c = shaped({sliding(4096, 4, 10000, 8)}, 32, 8, 256, 64, 4096, 2813, DataMode::random);
    c.config.softcap = 50.0;
    c.config.k_format = c.config.v_format = KvFormat::of(DType::fp8_e5m2, 1.0f);
    v.push_back(named(ScaleTier::host, "gqa32x8_d256_b64_fp8_softcap_drafts",
                      "Hq 32 / Hkv 8, D 256, W 4096, S 4, softcap 50, fp8 e5m2: 64 sequences of up to 1500 tokens, "
                      "drafts rolled back, a reset crossing 2^24",
                      wide_batch(std::move(c), 1500, true), 64));
  }
  return v;
}

std::vector<ScaleCase> gpu_cases(bool long_windows) {
  std::vector<ScaleCase> v;
  if (!long_windows) {
    Case c = shaped({sliding(32768, 4, 1000000, 16)}, 64, 8, 128, 2, 40000, 2821, DataMode::needle);
    c.config.k_format = c.config.v_format = KvFormat::of(DType::f16);
    v.push_back(named(ScaleTier::gpu, "gqa64x8_d128_w32768_f16_sinks_prefill",
                      "Hq 64 / Hkv 8, D 128, W 32768, S 4, f16: chunked prefill of 8192-token chunks to 40000",
                      long_prefill(std::move(c), {8192, 8192, 8192, 8192, 7200}, 16, k2p24 - 20000), 512));
    Case b = shaped({sliding(32768, 4, 1000000, 8)}, 64, 8, 128, 64, 32768, 2822, DataMode::random);
    b.config.k_format = b.config.v_format = KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away);
    v.push_back(named(ScaleTier::gpu, "gqa64x8_d128_b64_q8_0_drafts",
                      "Hq 64 / Hkv 8, D 128, W 32768, q8_0: 64 sequences of up to 4096 tokens, drafts rolled back",
                      wide_batch(std::move(b), 4096, true), 256));
    return v;
  }
  Case c = shaped({sliding(131072, 0, 1000000)}, 32, 8, 256, 1, 140000, 2831, DataMode::needle);
  c.config.k_format = c.config.v_format = KvFormat::of(DType::bf16);
  c.config.start_positions = {k2p24 - 70000};
  for (int i = 0; i < 17; ++i) c.steps.push_back(step_of({8192}));
  c.steps.push_back(step_of({int64_t{140000 - 17 * 8192}}));
  v.push_back(named(ScaleTier::gpu_long, "gqa32x8_d256_w131072_bf16_prefill",
                    "Hq 32 / Hkv 8, D 256, W 131072, bf16: 140000 tokens in 8192-token chunks across 2^24",
                    std::move(c), 16384));
  return v;
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
  switch (tier) {
    case ScaleTier::ci: return ci_cases();
    case ScaleTier::host: return host_cases();
    case ScaleTier::gpu: return gpu_cases(false);
    case ScaleTier::gpu_long: return gpu_cases(true);
  }
  return {};
}

std::vector<std::set<int64_t>> sample_scale_queries(const Case& c, int64_t every) {
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
  // Each sequence as the schedule runs it (a refused step changes nothing): the edges its chunks
  // cross, each chunk's first and last token, the tokens at positions around 2^24, and one in
  // `every` of the others by hash.
  ScheduleTracker tracker(c);
  std::vector<int64_t> p0(B);
  for (size_t s = 0; s < B; ++s) p0[s] = start_position(cfg, static_cast<int>(s));
  for (const StepPlan& step : c.steps) {
    if (!tracker.honoured(step)) continue;
    for (const ResetPlan& r : step.resets) p0[static_cast<size_t>(r.sequence)] = r.start_position;
    for (size_t s = 0; s < B; ++s) {
      const int64_t n = step.tokens[s];
      if (n == 0) continue;
      bool reset = false;
      int64_t rolled_back = 0;
      for (const ResetPlan& r : step.resets) reset = reset || r.sequence == static_cast<int>(s);
      for (const RollbackPlan& r : step.rollbacks) rolled_back += r.sequence == static_cast<int>(s) ? r.n_tokens : 0;
      const int64_t first = reset ? 0 : tracker.held(static_cast<int>(s)) - rolled_back, last = first + n - 1;
      for (size_t l = 0; l < L; ++l) {
        std::set<int64_t>& mine = sample[l * B + s];
        const auto add = [&](int64_t i) {
          if (i >= first && i <= last) mine.insert(i);
        };
        for (int64_t i : edges[l]) add(i);
        add(first);
        add(last);
        for (int64_t p : {k2p24 - 1, k2p24, k2p24 + 1}) add(p - p0[s]);
        for (int64_t i = first; i <= last; ++i) {
          if (hash_coords(c.seed, 0x5a3b1e, l, s, static_cast<uint64_t>(i)) % static_cast<uint64_t>(every) == 0) add(i);
        }
      }
    }
    tracker.apply(step);
  }
  return sample;
}

ScaleOutcome run_scale_case(const EngineFactory& factory, const ScaleCase& sc) {
  ScaleOutcome out;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::set<int64_t>> sample = sample_scale_queries(sc.c, sc.sample_every);
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
  ScheduleTracker tracker(sc.c);
  for (const StepPlan& step : sc.c.steps) {
    if (!tracker.honoured(step)) continue;
    for (int64_t n : step.tokens) out.queries_total += n * Hq * static_cast<int64_t>(sc.c.config.layers.size());
    tracker.apply(step);
  }
  return out;
}

}  // namespace ringkv::conformance
