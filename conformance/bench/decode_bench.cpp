// ringkv: Google Benchmark of the reference engine's decode step.
//
// One decode step = engine.step() with one token of one sequence (batch 1), on
// a realistic attention shape: 1 layer, Hq = 32, Hkv = 8, head_dim = 128, neox
// RoPE, no sinks, max_tokens = 2^30 (so the ring capacity is
// min(S + W, max_tokens) = W, and the timed loop never reaches the limit).
//
// Every benchmark fills the ring ONCE (the engine is kept between the calls
// Google Benchmark makes while it sizes the iteration count), then times
// single-token steps on the full ring:
//   BM_Decode/f32/W:.../t_over_W:1     time against the window W
//   BM_Decode/f32/W:1024/t_over_W:...  time against the tokens seen t (must be flat)
//   BM_Decode/f16|int8_per_head/W:1024 the same step with a compressed KV cache
//
// The fill appends chunks of tokens through engine.step() exactly as a prefill
// would, except that the attention of the fill tokens is skipped (their
// outputs are never looked at): what a ring holds depends only on the K and V
// rows written into it, never on the attention, and attending while filling
// would cost O(min(t, W)) per fill token (about 3 minutes for W = 8192 and 8
// minutes for t = 100 W at W = 1024 on the machine of docs/performance.md). main() checks first that a skip-attention fill and a real fill give
// bit-identical rings and bit-identical decode outputs. The timed steps always
// run the engine's real step (validation, RoPE, write, attend).
//
// Counters (per decode step unless marked /s):
//   W, t                 window, tokens the sequence had seen when the run ended
//   visible              keys the step's query attends to: min(t + 1, W) (no sinks)
//   kv_bytes             K and V bytes read: visible * Hkv * D * (bytes(K) + bytes(V)) + INT8 scales
//   kv_bw                kv_bytes / step time (bytes/s)
//   tokens               decode tokens per second (batch 1: steps per second)
//   ring_cache_bytes     engine.cache_bytes(): the whole ring (K, V, scales, position table)
//   full_cache_bytes     what a full (non-windowed) cache needs at the same t:
//                        t * L * Hkv * (D * (bytes(K) + bytes(V)) + scale bytes)
//   full_over_ring       full_cache_bytes / ring_cache_bytes
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ringkv/config.hpp"
#include "ringkv/engine.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/reference_engine.hpp"

namespace {

using ringkv::Config;
using ringkv::DType;
using ringkv::KvFormat;

constexpr int kLayers = 1;
constexpr int kQHeads = 32;
constexpr int kKvHeads = 8;
constexpr int kHeadDim = 128;
constexpr int64_t kMaxTokens = int64_t{1} << 30;
constexpr int64_t kFillChunk = 512;  // tokens per fill step
constexpr int kDecodePool = 16;      // distinct decode tokens, cycled in the timed loop

// ---------------------------------------------------------------- deterministic inputs

/// splitmix64: a fixed-seed generator with no std distributions, so every run
/// and every platform sees the same inputs.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1): 24 random bits, exact in f32.
  float next_float() {
    const auto bits = static_cast<int32_t>(next() >> 40);  // [0, 2^24)
    return static_cast<float>(bits - (int32_t{1} << 23)) * (1.0f / static_cast<float>(int32_t{1} << 23));
  }
  void fill(std::vector<float>& x) {
    for (float& f : x) f = next_float();
  }

 private:
  uint64_t state_;
};

KvFormat format_of(DType dtype) {
  KvFormat f;
  f.dtype = dtype;
  f.int8_scheme = ringkv::Int8Scheme::per_head;
  f.rounding = ringkv::Rounding::nearest_even;
  return f;
}

Config bench_config(DType dtype, int64_t window) {
  Config c;
  ringkv::LayerConfig layer;
  layer.window = window;
  layer.sinks = 0;
  layer.rope.style = ringkv::RopeStyle::neox;
  layer.rope.theta = 10000.0;
  c.layers.assign(kLayers, layer);
  c.num_q_heads = kQHeads;
  c.num_kv_heads = kKvHeads;
  c.head_dim = kHeadDim;
  c.batch = 1;
  c.max_tokens = kMaxTokens;
  c.k_format = format_of(dtype);
  c.v_format = format_of(dtype);
  return c;
}

constexpr size_t q_floats(int64_t n) {
  return static_cast<size_t>(n) * kLayers * kQHeads * kHeadDim;
}
constexpr size_t kv_floats(int64_t n) {
  return static_cast<size_t>(n) * kLayers * kKvHeads * kHeadDim;
}

// ---------------------------------------------------------------- the engine under test

/// The reference engine, plus a fill mode that appends tokens (RoPE, encode,
/// ring write: write_token) without computing their attention. Outside fill
/// mode it is the reference engine unchanged.
class FillableEngine final : public ringkv::ReferenceEngine {
 public:
  using ringkv::ReferenceEngine::ReferenceEngine;

  void set_write_only(bool on) { write_only_ = on; }

 protected:
  void process_chunk(int layer, int sequence, int64_t n, const float* q, const float* k, const float* v,
                     float* out) override {
    if (!write_only_) {
      ringkv::ReferenceEngine::process_chunk(layer, sequence, n, q, k, v, out);
      return;
    }
    const int64_t kvs = int64_t{config_.num_kv_heads} * config_.head_dim;
    const int64_t first = seen_of(sequence);
    for (int64_t t = 0; t < n; ++t) write_token(layer, sequence, first + t, k + t * kvs, v + t * kvs);
  }

 private:
  bool write_only_ = false;
};

/// Chunk buffers for the fill: K and V are regenerated for every chunk, Q (not
/// used in write-only mode, but validated) once.
struct FillBuffers {
  std::vector<float> q, k, v, out;
  explicit FillBuffers(SplitMix64& rng)
      : q(q_floats(kFillChunk)), k(kv_floats(kFillChunk)), v(kv_floats(kFillChunk)), out(q_floats(kFillChunk)) {
    rng.fill(q);
  }
};

/// Appends `tokens` tokens to sequence 0 in chunks of kFillChunk.
void fill_tokens(FillableEngine& engine, int64_t tokens, bool write_only, SplitMix64& rng) {
  FillBuffers buf(rng);
  engine.set_write_only(write_only);
  for (int64_t done = 0; done < tokens;) {
    const int64_t n = std::min(kFillChunk, tokens - done);
    rng.fill(buf.k);
    rng.fill(buf.v);
    const ringkv::SequenceStep s{0, n, buf.q.data(), buf.k.data(), buf.v.data(), buf.out.data()};
    engine.step(ringkv::StepBatch{{}, std::span<const ringkv::SequenceStep>(&s, 1)});
    done += n;
  }
  engine.set_write_only(false);
}

/// A pool of single decode tokens (q, k, v) cycled through by the timed loop.
struct DecodePool {
  std::vector<float> q, k, v, out;
  explicit DecodePool(uint64_t seed)
      : q(q_floats(kDecodePool)), k(kv_floats(kDecodePool)), v(kv_floats(kDecodePool)), out(q_floats(1)) {
    SplitMix64 rng(seed);
    rng.fill(q);
    rng.fill(k);
    rng.fill(v);
  }
  ringkv::SequenceStep token(int i) {
    const auto u = static_cast<size_t>(i % kDecodePool);
    return ringkv::SequenceStep{0, 1, q.data() + u * q_floats(1), k.data() + u * kv_floats(1),
                                v.data() + u * kv_floats(1), out.data()};
  }
};

void decode_one(FillableEngine& engine, DecodePool& pool, int i) {
  const ringkv::SequenceStep s = pool.token(i);
  engine.step(ringkv::StepBatch{{}, std::span<const ringkv::SequenceStep>(&s, 1)});
}

/// The engine of the benchmark instance now running, filled once. Google
/// Benchmark calls a benchmark function several times (to size the iteration
/// count); the same engine serves them all and is freed when the next instance
/// needs a different one.
struct Fixture {
  DType dtype = DType::f32;
  int64_t window = 0, fill = 0;
  std::unique_ptr<FillableEngine> engine;
  std::unique_ptr<DecodePool> pool;
  int next_token = 0;
};

Fixture& fixture_for(DType dtype, int64_t window, int64_t fill) {
  static Fixture f;
  if (!f.engine || f.dtype != dtype || f.window != window || f.fill != fill) {
    f.engine.reset();  // free the previous ring before allocating the next
    f.engine = std::make_unique<FillableEngine>(bench_config(dtype, window));
    f.pool = std::make_unique<DecodePool>(0xdec0deULL);
    SplitMix64 rng(0x5eed0000ULL + static_cast<uint64_t>(window));
    fill_tokens(*f.engine, fill, /*write_only=*/true, rng);
    f.dtype = dtype;
    f.window = window;
    f.fill = fill;
    f.next_token = 0;
  }
  return f;
}

// ---------------------------------------------------------------- the benchmark

/// Args: W, t_over_W. Fills t = t_over_W * W tokens, then times single-token steps.
void BM_Decode(benchmark::State& state, DType dtype) {
  const int64_t window = state.range(0);
  const int64_t fill = window * state.range(1);
  Fixture& f = fixture_for(dtype, window, fill);
  FillableEngine& engine = *f.engine;

  // Keys the timed steps read: the ring is full, so min(t + 1, W) = W (S = 0).
  const int64_t visible = std::min(engine.tokens_seen(0) + 1, window);
  const KvFormat& kf = engine.config().k_format;
  const KvFormat& vf = engine.config().v_format;
  const int64_t elem_bytes = ringkv::bytes_per_element(kf.dtype) + ringkv::bytes_per_element(vf.dtype);
  const int64_t scale_bytes =
      int64_t{sizeof(float)} * (ringkv::scales_per_row(kf, kHeadDim) + ringkv::scales_per_row(vf, kHeadDim));
  const int64_t row_bytes = int64_t{kHeadDim} * elem_bytes + scale_bytes;  // K+V of one (token, kv head)
  const int64_t kv_bytes = visible * kKvHeads * row_bytes * kLayers;

  for (auto _ : state) {
    decode_one(engine, *f.pool, f.next_token++);
    benchmark::DoNotOptimize(f.pool->out.data());
    benchmark::ClobberMemory();
  }

  const int64_t t = engine.tokens_seen(0);
  const auto ring_bytes = static_cast<double>(engine.cache_bytes());
  const auto full_bytes = static_cast<double>(t * kLayers * kKvHeads * row_bytes);
  using benchmark::Counter;
  state.counters["W"] = Counter(static_cast<double>(window));
  state.counters["t"] = Counter(static_cast<double>(t));
  state.counters["visible"] = Counter(static_cast<double>(visible));
  state.counters["kv_bytes"] = Counter(static_cast<double>(kv_bytes), Counter::kDefaults, Counter::kIs1024);
  state.counters["kv_bw"] =
      Counter(static_cast<double>(kv_bytes), Counter::kIsIterationInvariantRate, Counter::kIs1024);
  state.counters["tokens"] = Counter(1.0, Counter::kIsIterationInvariantRate);
  state.counters["ring_cache_bytes"] = Counter(ring_bytes, Counter::kDefaults, Counter::kIs1024);
  state.counters["full_cache_bytes"] = Counter(full_bytes, Counter::kDefaults, Counter::kIs1024);
  state.counters["full_over_ring"] = Counter(full_bytes / ring_bytes);
  state.SetLabel(ringkv::to_string(kf));
}

// The window sweep: W = 64 .. 8192, t = W (ring just full).
BENCHMARK_CAPTURE(BM_Decode, f32, DType::f32)
    ->ArgNames({"W", "t_over_W"})
    ->ArgsProduct({benchmark::CreateRange(64, 8192, 2), {1}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(1.0);
// The length sweep at W = 1024: t = 10 W and 100 W (t = W is in the window sweep).
BENCHMARK_CAPTURE(BM_Decode, f32, DType::f32)
    ->ArgNames({"W", "t_over_W"})
    ->Args({1024, 10})
    ->Args({1024, 100})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(1.0);
// Compressed KV caches at one window.
BENCHMARK_CAPTURE(BM_Decode, f16, DType::f16)
    ->ArgNames({"W", "t_over_W"})
    ->Args({1024, 1})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(1.0);
BENCHMARK_CAPTURE(BM_Decode, int8_per_head, DType::int8)
    ->ArgNames({"W", "t_over_W"})
    ->Args({1024, 1})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(1.0);

// ---------------------------------------------------------------- fill check

/// A skip-attention fill must leave the ring exactly as a real fill does, and
/// the decode step after it must give the same bits. Returns false otherwise.
bool check_write_only_fill(DType dtype) {
  constexpr int64_t window = 64, fill = 3 * window + 17;
  FillableEngine fast(bench_config(dtype, window)), real(bench_config(dtype, window));
  SplitMix64 rng_fast(42), rng_real(42);
  fill_tokens(fast, fill, /*write_only=*/true, rng_fast);
  fill_tokens(real, fill, /*write_only=*/false, rng_real);
  const auto a = fast.snapshot(0, 0), b = real.snapshot(0, 0);
  bool same = a && b && a->positions == b->positions && a->k == b->k && a->v == b->v &&
              a->k_codes == b->k_codes && a->v_codes == b->v_codes && a->k_scales == b->k_scales &&
              a->v_scales == b->v_scales;
  DecodePool pool_fast(7), pool_real(7);
  for (int i = 0; i < 3 && same; ++i) {
    decode_one(fast, pool_fast, i);
    decode_one(real, pool_real, i);
    same = std::memcmp(pool_fast.out.data(), pool_real.out.data(), sizeof(float) * pool_fast.out.size()) == 0;
  }
  if (!same) {
    std::fprintf(stderr, "ringkv_bench: the skip-attention fill differs from a real fill (%s)\n",
                 ringkv::to_string(dtype));
  }
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (DType d : {DType::f32, DType::f16, DType::int8}) {
    if (!check_write_only_fill(d)) return 1;
  }
  benchmark::AddCustomContext("ringkv_engine", "reference (f32 arithmetic, f64 RoPE)");
  benchmark::AddCustomContext("ringkv_shape", "L=1 Hq=32 Hkv=8 D=128 B=1 S=0 neox max_tokens=2^30");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
