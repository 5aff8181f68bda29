// Tests of the CUDA engine core (cuda/include/ringkv/cuda/engine_core.hpp) on the plan
// backend, which runs the kernels' launch plan on the host: split-K decode and long chunks
// against the reference engine, the device entry point (step_resident) with f16 and bf16
// inputs, constant memory, poisoning, the rejection of bad steps, and spec 1.1 rollback with a
// rollback reserve (decode over decode_slots, refusals, rollback then reset, long chunks).
//
// Outputs are compared with the reference within 1e-5 relative + 1e-6 absolute (unit-scale
// data); cache contents (snapshot) exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ringkv/config.hpp"
#include "ringkv/cuda/engine_core.hpp"
#include "ringkv/cuda/plan_backend.hpp"
#include "ringkv/cuda/ring.hpp"
#include "ringkv/cuda_engine.hpp"
#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/reference_engine.hpp"

namespace {

namespace cu = ringkv::cuda;
using ringkv::CacheSnapshot;
using ringkv::Config;
using ringkv::DType;
using ringkv::Int8Scheme;
using ringkv::KvFormat;
using ringkv::ReferenceEngine;
using ringkv::RopeStyle;
using ringkv::Rounding;
using ringkv::SequenceReset;
using ringkv::SequenceRollback;
using ringkv::SequenceStep;
using ringkv::StepBatch;
using ringkv::StepError;

uint32_t fbits(float x) { return std::bit_cast<uint32_t>(x); }

uint32_t ulp_distance32(float a, float b) {
  const auto ordered = [](float x) {
    const auto i = std::bit_cast<int32_t>(x);
    return i < 0 ? static_cast<int64_t>(std::numeric_limits<int32_t>::min()) - i : static_cast<int64_t>(i);
  };
  const int64_t d = ordered(a) - ordered(b);
  return static_cast<uint32_t>(d < 0 ? -d : d);
}

/// The inputs and output of one append: [L][n][H][D], unit-scale normal values.
struct Tensors {
  int sequence = 0;
  int64_t n = 0;
  std::vector<float> q, k, v, out;

  SequenceStep step() { return SequenceStep{sequence, n, q.data(), k.data(), v.data(), out.data()}; }
};

Tensors make_tensors(const Config& c, int sequence, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto L = static_cast<int64_t>(c.layers.size());
  Tensors t;
  t.sequence = sequence;
  t.n = n;
  t.q.resize(static_cast<size_t>(L * n * c.num_q_heads * c.head_dim));
  t.k.resize(static_cast<size_t>(L * n * c.num_kv_heads * c.head_dim));
  t.v.resize(t.k.size());
  t.out.assign(t.q.size(), std::numeric_limits<float>::quiet_NaN());
  for (float& x : t.q) x = normal(rng);
  for (float& x : t.k) x = normal(rng);
  for (float& x : t.v) x = normal(rng);
  return t;
}

/// |got − want| <= 1e-5·|want| + 1e-6 for every element; got finite. Returns the failures.
int expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isfinite(g) && std::fabs(g - w) <= 1e-5 * std::fabs(w) + 1e-6) continue;
    if (bad++ < 5) ADD_FAILURE() << what << ": output " << i << " = " << g << ", reference " << w;
  }
  return bad;
}

/// Bit-for-bit equal outputs.
int expect_bitwise(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (fbits(got[i]) == fbits(want[i])) continue;
    if (bad++ < 5) ADD_FAILURE() << what << ": output " << i << " = " << got[i] << ", expected " << want[i];
  }
  return bad;
}

/// Positions, codes and scales exactly; V bit for bit; K within `k_ulps` f32 ulps (0: bit for
/// bit). Counts the K elements that are not bit-identical into *k_differing.
void expect_same_snapshot(const CacheSnapshot& got, const CacheSnapshot& want, uint32_t k_ulps,
                          const std::string& what, int64_t* k_differing = nullptr) {
  ASSERT_EQ(got.capacity, want.capacity) << what;
  ASSERT_EQ(got.num_kv_heads, want.num_kv_heads) << what;
  ASSERT_EQ(got.head_dim, want.head_dim) << what;
  EXPECT_EQ(got.positions, want.positions) << what;
  ASSERT_EQ(got.k.size(), want.k.size()) << what;
  ASSERT_EQ(got.v.size(), want.v.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < want.k.size(); ++i) {
    if (fbits(got.k[i]) == fbits(want.k[i])) continue;
    if (k_differing) ++*k_differing;
    const bool finite = std::isfinite(got.k[i]) && std::isfinite(want.k[i]);
    if (k_ulps > 0 && finite && ulp_distance32(got.k[i], want.k[i]) <= k_ulps) continue;
    if (bad++ < 5) ADD_FAILURE() << what << ": K element " << i << " = " << got.k[i] << ", reference " << want.k[i];
  }
  for (size_t i = 0; i < want.v.size(); ++i) {
    if (fbits(got.v[i]) != fbits(want.v[i]) && bad++ < 5) {
      ADD_FAILURE() << what << ": V element " << i << " = " << got.v[i] << ", reference " << want.v[i];
    }
  }
  EXPECT_EQ(got.k_codes, want.k_codes) << what;
  EXPECT_EQ(got.v_codes, want.v_codes) << what;
  ASSERT_EQ(got.k_scales.size(), want.k_scales.size()) << what;
  ASSERT_EQ(got.v_scales.size(), want.v_scales.size()) << what;
  for (size_t i = 0; i < want.k_scales.size(); ++i) EXPECT_EQ(fbits(got.k_scales[i]), fbits(want.k_scales[i])) << what;
  for (size_t i = 0; i < want.v_scales.size(); ++i) EXPECT_EQ(fbits(got.v_scales[i]), fbits(want.v_scales[i])) << what;
}

std::unique_ptr<cu::EngineCore> make_core(const Config& c, cu::CoreOptions opts = {}) {
  return std::make_unique<cu::EngineCore>(c, std::make_unique<cu::PlanBackend>(), opts);
}

/// Options whose prefill scratch budget gives chunk_tile() == want (searched: chunk_tile is
/// monotone in the budget). Fails the test if no budget gives it.
cu::CoreOptions options_for_tile(const Config& c, int64_t want, cu::DecodePath path = cu::DecodePath::fused) {
  cu::CoreOptions o;
  o.path = path;
  size_t lo = 0, hi = size_t{1} << 32;  // smallest budget with chunk_tile() >= want
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    o.prefill_scratch_bytes = mid;
    if (make_core(c, o)->chunk_tile() >= want) hi = mid;
    else lo = mid + 1;
  }
  o.prefill_scratch_bytes = lo;
  EXPECT_EQ(make_core(c, o)->chunk_tile(), want) << "no prefill budget gives chunk_tile " << want;
  return o;
}

/// The reference and a plan engine core fed the same steps.
struct Twin {
  Config config;
  ReferenceEngine ref;
  std::unique_ptr<cu::EngineCore> plan;
  uint32_t seed = 1000;
  int failures = 0;

  Twin(const Config& c, cu::CoreOptions opts) : config(c), ref(c), plan(make_core(c, opts)) {}

  /// One step with these resets and appends (sequence, n) on both engines; outputs compared.
  void step(const std::vector<SequenceReset>& resets, const std::vector<std::pair<int, int64_t>>& appends,
            const std::string& what, const std::vector<SequenceRollback>& rollbacks = {}) {
    std::vector<Tensors> a, b;
    for (const auto& [seq, n] : appends) {
      a.push_back(make_tensors(config, seq, n, ++seed));
      b.push_back(a.back());
    }
    std::vector<SequenceStep> sa, sb;
    for (Tensors& t : a) sa.push_back(t.step());
    for (Tensors& t : b) sb.push_back(t.step());
    ref.step(StepBatch{resets, sa, rollbacks});
    plan->step(StepBatch{resets, sb, rollbacks});
    for (size_t i = 0; i < a.size(); ++i) {
      failures += expect_close(b[i].out, a[i].out, what + ", sequence " + std::to_string(a[i].sequence));
    }
  }

  void expect_same_snapshots(uint32_t k_ulps, const std::string& what, int64_t* k_differing) {
    for (int l = 0; l < static_cast<int>(config.layers.size()); ++l) {
      for (int s = 0; s < config.batch; ++s) {
        expect_same_snapshot(*plan->snapshot(l, s), *ref.snapshot(l, s), k_ulps,
                             what + ", layer " + std::to_string(l) + " sequence " + std::to_string(s), k_differing);
      }
    }
  }
};

std::vector<std::vector<float>> random_sink_logits(const Config& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> s(c.layers.size(), std::vector<float>(static_cast<size_t>(c.num_q_heads)));
  for (auto& row : s) {
    for (float& x : row) x = normal(rng);
  }
  return s;
}

}  // namespace

// ================================================================ split-K decode

TEST(CudaPlanDecode, SplitKDecodeOverSeveralSplitsMatchesTheReference) {
  Config c;
  c.layers.resize(2);
  c.layers[0].window = 300;
  c.layers[0].sinks = 4;
  c.layers[0].rope.style = RopeStyle::neox;
  c.layers[1].window = 200;
  c.layers[1].sinks = 0;
  c.layers[1].rope.style = RopeStyle::gptj;
  c.layers[1].rope.rotary_dim = 16;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;  // decode_tile 32
  c.batch = 2;
  c.max_tokens = 520;
  c.start_positions = {0, 1000};
  c.sink_logits = random_sink_logits(c, 1);
  Twin t(c, cu::CoreOptions{});
  t.step({}, {{0, 100}, {1, 37}}, "prefill");
  int most_splits = 0;
  for (int i = 0; i < 330; ++i) {  // both sequences past the wrap of both layers
    t.step({}, {{0, 1}, {1, 1}}, "decode " + std::to_string(i));
    most_splits = std::max(most_splits, t.plan->last_splits());
    if (t.failures > 20) break;
  }
  EXPECT_EQ(t.failures, 0);
  EXPECT_GT(t.plan->last_splits(), 1) << "the last decode step used one split";
  EXPECT_GT(most_splits, 1);
  std::printf("[ split-K ] last decode used %d splits (most %d)\n", t.plan->last_splits(), most_splits);
  // K is rotated by rope_sincos, which may differ from the C library in the last f64 bit: 1 f32 ulp
  // allowed on K (reported), everything else exactly.
  int64_t k_differing = 0;
  t.expect_same_snapshots(1, "after decode", &k_differing);
  if (k_differing > 0) {
    std::printf("[ split-K ] %lld K elements 1 ulp from the reference\n", static_cast<long long>(k_differing));
  }
}

TEST(CudaPlanDecode, QuantisedStorageAndSoftcapDecodeMatchesTheReference) {
  Config c;
  c.layers.resize(1);
  c.layers[0].window = 150;
  c.layers[0].sinks = 2;
  c.layers[0].rope.style = RopeStyle::none;
  c.num_q_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.batch = 1;
  c.max_tokens = 400;
  c.softcap = 5.0;
  c.k_format = KvFormat::int8(Int8Scheme::q8_0, Rounding::nearest_even);
  c.v_format = KvFormat::of(DType::fp8_e4m3, 0.25f);
  Twin t(c, cu::CoreOptions{});
  t.step({}, {{0, 60}}, "prefill");
  for (int i = 0; i < 120; ++i) t.step({}, {{0, 1}}, "decode " + std::to_string(i));
  EXPECT_EQ(t.failures, 0);
  EXPECT_GT(t.plan->last_splits(), 1);
  t.expect_same_snapshots(0, "after decode", nullptr);
}

// ================================================================ long chunks across the wrap

namespace {

struct ChunkCase {
  const char* name;
  int64_t tile;  // chunk_tile() wanted: 1, 2 or 3; 0: the default budget (chunk_tile() = max_tokens)
  RopeStyle rope;
  KvFormat k, v;
  int head_dim;
};
void PrintTo(const ChunkCase& c, std::ostream* os) { *os << c.name; }

class CudaPlanChunk : public ::testing::TestWithParam<ChunkCase> {};

TEST_P(CudaPlanChunk, ChunksLongerThanWindowAndTileMatchTheReference) {
  const ChunkCase cc = GetParam();
  Config c;
  c.layers.resize(2);
  c.layers[0].window = 5;
  c.layers[0].sinks = 2;
  c.layers[0].rope.style = cc.rope;
  c.layers[1].window = 2;  // a sub-chunk of 3 tokens wraps this ring: the commit must skip the overwritten
  c.layers[1].sinks = 1;
  c.layers[1].rope.style = cc.rope;
  c.layers[1].rope.theta = 500000.0;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = cc.head_dim;
  c.batch = 2;
  c.max_tokens = cc.tile == 3 ? 48 : 64;  // chunk_tile() halves from min(max_tokens, 256)
  c.start_positions = {7, 123456};
  c.sink_logits = random_sink_logits(c, 2);
  c.k_format = cc.k;
  c.v_format = cc.v;
  const cu::CoreOptions opts = cc.tile > 0 ? options_for_tile(c, cc.tile) : cu::CoreOptions{};
  Twin t(c, opts);
  ASSERT_EQ(t.plan->chunk_tile(), cc.tile > 0 ? cc.tile : c.max_tokens);
  // K is rotated by rope_sincos, which may differ from the C library in the last f64 bit:
  // allow 1 f32 ulp on K then (and count); everything else exactly.
  const uint32_t k_ulps = cc.rope == RopeStyle::none ? 0 : 1;
  int64_t k_differing = 0;
  const auto check = [&](const std::string& what) { t.expect_same_snapshots(k_ulps, what, &k_differing); };
  t.step({}, {{0, 13}}, "chunk of 13 from empty");  // > W, > tile, wraps both layers
  check("after chunk 13");
  t.step({}, {{1, 9}, {0, 11}}, "chunks 9 and 11");
  check("after chunks 9 and 11");
  for (int i = 0; i < 4; ++i) t.step({}, {{0, 1}, {1, 1}}, "decode " + std::to_string(i));
  check("after decodes");
  t.step({}, {{0, 7}, {1, 1}}, "chunk 7 with a decode");
  check("after chunk 7");
  t.step({SequenceReset{0, 1000}}, {{0, 20}}, "reset then chunk 20");
  check("after reset and chunk 20");
  t.step({}, {{1, 25}}, "chunk 25 up to max_tokens - 1");
  check("after chunk 25");
  EXPECT_EQ(t.failures, 0);
  if (k_differing > 0) {
    std::printf("[ chunk %s ] %lld K elements 1 ulp from the reference\n", cc.name, static_cast<long long>(k_differing));
  }
}

INSTANTIATE_TEST_SUITE_P(
    CudaPlan, CudaPlanChunk,
    ::testing::Values(
        ChunkCase{"tile1_none_f32", 1, RopeStyle::none, KvFormat::of(DType::f32), KvFormat::of(DType::f32), 8},
        ChunkCase{"tile2_none_f32", 2, RopeStyle::none, KvFormat::of(DType::f32), KvFormat::of(DType::f32), 8},
        ChunkCase{"tile3_none_f32", 3, RopeStyle::none, KvFormat::of(DType::f32), KvFormat::of(DType::f32), 8},
        ChunkCase{"tile1_neox_f32", 1, RopeStyle::neox, KvFormat::of(DType::f32), KvFormat::of(DType::f32), 8},
        ChunkCase{"tile2_neox_f32", 2, RopeStyle::neox, KvFormat::of(DType::f32), KvFormat::of(DType::f32), 8},
        ChunkCase{"tile3_neox_f32", 3, RopeStyle::neox, KvFormat::of(DType::f32), KvFormat::of(DType::f32), 8},
        ChunkCase{"tile3_gptj_f32_int8", 3, RopeStyle::gptj, KvFormat::of(DType::f32),
                  KvFormat::int8(Int8Scheme::per_head, Rounding::half_away), 8},
        ChunkCase{"tile2_none_q8_0_bf16", 2, RopeStyle::none, KvFormat::int8(Int8Scheme::q8_0, Rounding::nearest_even),
                  KvFormat::of(DType::bf16), 32},
        ChunkCase{"tile3_none_fp8_static", 3, RopeStyle::none, KvFormat::of(DType::fp8_e5m2, 0.5f),
                  KvFormat::int8(Int8Scheme::static_tensor, Rounding::nearest_even, 0.03f), 8},
        ChunkCase{"tile1_none_f16_e4m3", 1, RopeStyle::none, KvFormat::of(DType::f16),
                  KvFormat::of(DType::fp8_e4m3, 0.3f), 8},
        ChunkCase{"whole_none_f32", 0, RopeStyle::none, KvFormat::of(DType::f32), KvFormat::of(DType::f32), 8},
        ChunkCase{"whole_neox_int8", 0, RopeStyle::neox, KvFormat::of(DType::f32),
                  KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away), 32}),
    [](const ::testing::TestParamInfo<ChunkCase>& param_info) { return std::string(param_info.param.name); });

}  // namespace

// ================================================================ step_resident with f16 / bf16 inputs

namespace {

struct ResidentCase {
  const char* name;
  int input_type;  // cu::kInF16 or cu::kInBF16
  cu::DecodePath path;
  int64_t tile;  // chunk_tile() (1 or 3: max_tokens is 48), 0 for the default budget
};
void PrintTo(const ResidentCase& c, std::ostream* os) { *os << c.name; }

class CudaPlanResident : public ::testing::TestWithParam<ResidentCase> {};

TEST_P(CudaPlanResident, HalfInputsEqualStepOnTheWidenedInputsBitwise) {
  const ResidentCase rc = GetParam();
  Config c;
  c.layers.resize(2);
  c.layers[0].window = 6;
  c.layers[0].sinks = 2;
  c.layers[0].rope.style = RopeStyle::neox;
  c.layers[1].window = 40;
  c.layers[1].sinks = 0;
  c.layers[1].rope.style = RopeStyle::gptj;
  c.layers[1].rope.scaling = ringkv::RopeScaling::linear;
  c.layers[1].rope.factor = 2.0;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.batch = 3;
  c.max_tokens = 48;
  c.softcap = 30.0;
  c.sink_logits = random_sink_logits(c, 3);
  c.k_format = KvFormat::int8(Int8Scheme::q8_0, Rounding::nearest_even);
  c.v_format = KvFormat::of(DType::f16);
  cu::CoreOptions opts = rc.tile > 0 ? options_for_tile(c, rc.tile, rc.path) : cu::CoreOptions{};
  opts.path = rc.path;
  auto resident = make_core(c, opts), plain = make_core(c, opts);
  const bool f16 = rc.input_type == cu::kInF16;
  const auto encode = [&](float x) { return f16 ? ringkv::f16_bits_from_f32(x) : ringkv::bf16_bits_from_f32(x); };
  const auto widen = [&](uint16_t h) { return f16 ? ringkv::f32_from_f16_bits(h) : ringkv::f32_from_bf16_bits(h); };
  uint32_t seed = 77;
  const auto run = [&](const std::vector<SequenceReset>& resets, const std::vector<std::pair<int, int64_t>>& appends,
                       const std::string& what) {
    std::vector<Tensors> wide;
    std::vector<std::vector<uint16_t>> hq, hk, hv;
    std::vector<std::vector<float>> rout;
    for (const auto& [seq, n] : appends) {
      Tensors t = make_tensors(c, seq, n, ++seed);
      hq.emplace_back();
      hk.emplace_back();
      hv.emplace_back();
      for (float& x : t.q) hq.back().push_back(encode(x)), x = widen(hq.back().back());
      for (float& x : t.k) hk.back().push_back(encode(x)), x = widen(hk.back().back());
      for (float& x : t.v) hv.back().push_back(encode(x)), x = widen(hv.back().back());
      rout.emplace_back(t.out.size(), std::numeric_limits<float>::quiet_NaN());
      wide.push_back(std::move(t));
    }
    std::vector<SequenceStep> steps;
    std::vector<cu::ResidentStep> rsteps;
    for (size_t i = 0; i < wide.size(); ++i) {
      steps.push_back(wide[i].step());
      rsteps.push_back(cu::ResidentStep{wide[i].sequence, wide[i].n, hq[i].data(), hk[i].data(), hv[i].data(),
                                        rout[i].data()});
    }
    plain->step(StepBatch{resets, steps});
    resident->step_resident(cu::ResidentBatch{resets, rsteps, rc.input_type});
    resident->backend().synchronize();
    for (size_t i = 0; i < wide.size(); ++i) {
      EXPECT_EQ(expect_bitwise(rout[i], wide[i].out, what + ", append " + std::to_string(i)), 0);
    }
    for (int l = 0; l < 2; ++l) {
      for (int s = 0; s < c.batch; ++s) {
        expect_same_snapshot(*resident->snapshot(l, s), *plain->snapshot(l, s), 0,
                             what + ": snapshot layer " + std::to_string(l) + " sequence " + std::to_string(s));
      }
    }
  };
  run({}, {{0, 5}, {1, 1}, {2, 12}}, "chunk, decode, chunk");
  for (int i = 0; i < 5; ++i) run({}, {{0, 1}, {1, 1}, {2, 1}}, "decode " + std::to_string(i));
  run({SequenceReset{1, 50}}, {{1, 9}, {0, 1}}, "reset and chunk");
  run({}, {{2, 7}, {1, 1}}, "chunk and decode");
  for (int i = 0; i < 20; ++i) run({}, {{1, 1}}, "decode of one " + std::to_string(i));
  if (rc.path == cu::DecodePath::fused) {
    EXPECT_GT(resident->last_splits(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(CudaPlan, CudaPlanResident,
                         ::testing::Values(ResidentCase{"f16_fused", cu::kInF16, cu::DecodePath::fused, 0},
                                           ResidentCase{"bf16_fused", cu::kInBF16, cu::DecodePath::fused, 0},
                                           ResidentCase{"f16_fused_tile3", cu::kInF16, cu::DecodePath::fused, 3},
                                           ResidentCase{"bf16_fused_tile1", cu::kInBF16, cu::DecodePath::fused, 1},
                                           ResidentCase{"f16_cublas", cu::kInF16, cu::DecodePath::cublas, 0},
                                           ResidentCase{"bf16_cublas_tile3", cu::kInBF16, cu::DecodePath::cublas, 3}),
                         [](const ::testing::TestParamInfo<ResidentCase>& param_info) {
                           return std::string(param_info.param.name);
                         });

}  // namespace

// ================================================================ memory and poisoning

TEST(CudaPlanMemory, CacheBytesConstantAndPoisonedEmptySlotsStayInvisible) {
  std::vector<KvFormat> formats{KvFormat::of(DType::f32),
                                KvFormat::of(DType::f16),
                                KvFormat::of(DType::bf16),
                                KvFormat::of(DType::fp8_e4m3, 0.5f),
                                KvFormat::of(DType::fp8_e5m2, 2.0f),
                                KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even),
                                KvFormat::int8(Int8Scheme::q8_0, Rounding::half_away),
                                KvFormat::int8(Int8Scheme::static_tensor, Rounding::nearest_even, 0.05f)};
  for (cu::DecodePath path : {cu::DecodePath::fused, cu::DecodePath::cublas}) {
    for (size_t fi = 0; fi < formats.size(); ++fi) {
      Config c;
      c.layers.resize(2);
      c.layers[0].window = 24;
      c.layers[0].sinks = 3;
      c.layers[1].window = 40;
      c.layers[1].sinks = 0;
      c.layers[1].rope.style = RopeStyle::none;
      c.num_q_heads = 4;
      c.num_kv_heads = 2;
      c.head_dim = 32;
      c.batch = 3;  // sequence 2 stays empty until late
      c.max_tokens = 200;
      c.sink_logits = random_sink_logits(c, 4);
      c.k_format = formats[fi];
      c.v_format = formats[(fi + 3) % formats.size()];
      const std::string what = std::string(path == cu::DecodePath::fused ? "fused " : "cublas ") +
                               ringkv::to_string(c.k_format) + "/" + ringkv::to_string(c.v_format);
      cu::CoreOptions opts;
      opts.path = path;
      auto poisoned = make_core(c, opts), clean = make_core(c, opts);
      const size_t bytes = poisoned->cache_bytes();
      EXPECT_EQ(bytes, ReferenceEngine(c).cache_bytes()) << what;
      uint32_t seed = 500;
      int bad = 0;
      const auto run = [&](const std::vector<SequenceReset>& resets, const std::vector<std::pair<int, int64_t>>& appends) {
        std::vector<Tensors> a, b;
        for (const auto& [seq, n] : appends) {
          a.push_back(make_tensors(c, seq, n, ++seed));
          b.push_back(a.back());
        }
        std::vector<SequenceStep> sa, sb;
        for (Tensors& t : a) sa.push_back(t.step());
        for (Tensors& t : b) sb.push_back(t.step());
        poisoned->step(StepBatch{resets, sa});
        clean->step(StepBatch{resets, sb});
        for (size_t i = 0; i < a.size(); ++i) {
          for (float x : a[i].out) {
            if (!std::isfinite(x) && bad++ < 3) ADD_FAILURE() << what << ": a non-finite output after poisoning";
          }
          bad += expect_bitwise(a[i].out, b[i].out, what + ", sequence " + std::to_string(a[i].sequence));
        }
        EXPECT_EQ(poisoned->cache_bytes(), bytes) << what;
        EXPECT_EQ(clean->cache_bytes(), bytes) << what;
      };
      ASSERT_TRUE(poisoned->poison_empty_slots());  // every slot empty
      run({}, {{0, 1}});
      for (int i = 0; i < 5; ++i) run({}, {{0, 1}, {1, 1}});
      ASSERT_TRUE(poisoned->poison_empty_slots());  // most slots still empty
      for (int i = 0; i < 10; ++i) run({}, {{0, 1}, {1, 1}});
      run({}, {{1, 9}});  // a chunk reads (masked) empty slots too
      ASSERT_TRUE(poisoned->poison_empty_slots());
      for (int i = 0; i < 40; ++i) run({}, {{0, 1}, {1, 1}});  // past the wrap of layer 0
      run({SequenceReset{0, 77}}, {});  // a reset empties the slots again (their bytes stay)
      ASSERT_TRUE(poisoned->poison_empty_slots());
      for (int i = 0; i < 30; ++i) run({}, {{0, 1}, {2, 1}});
      run({}, {{2, 12}, {1, 3}});
      for (int i = 0; i < 60; ++i) run({}, {{0, 1}, {1, 1}, {2, 1}});
      EXPECT_EQ(bad, 0) << what;
    }
  }
}

// ================================================================ bad steps

TEST(CudaPlanErrors, BadStepsThrowNamingTheFieldAndChangeNothing) {
  Config c;
  c.layers.resize(2);
  c.layers[0].window = 4;
  c.layers[0].sinks = 1;
  c.layers[1].window = 2;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.batch = 2;
  c.max_tokens = 12;
  c.k_format = KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
  auto e = make_core(c), twin = make_core(c);
  uint32_t seed = 9;
  const auto good = [&](int seq, int64_t n) {
    Tensors a = make_tensors(c, seq, n, ++seed), b = a;
    const SequenceStep sa = a.step(), sb = b.step();
    e->step(StepBatch{{}, std::span<const SequenceStep>(&sa, 1)});
    twin->step(StepBatch{{}, std::span<const SequenceStep>(&sb, 1)});
    EXPECT_EQ(expect_bitwise(a.out, b.out, "valid step after rejected ones"), 0);
  };
  good(0, 5);
  good(1, 1);
  const auto snapshots = [&] {
    std::vector<CacheSnapshot> s;
    for (int l = 0; l < 2; ++l) {
      for (int q = 0; q < c.batch; ++q) s.push_back(*e->snapshot(l, q));
    }
    return s;
  };
  const std::vector<CacheSnapshot> before = snapshots();
  const size_t bytes = e->cache_bytes();

  // Each bad batch: a valid reset and a valid append come first, so "nothing changes" is visible.
  const auto expect_rejected = [&](std::vector<Tensors> appends, const std::vector<SequenceReset>& resets,
                                   const std::string& field) {
    std::vector<SequenceStep> steps;
    for (Tensors& t : appends) steps.push_back(t.step());
    try {
      e->step(StepBatch{resets, steps});
      ADD_FAILURE() << "no StepError for a bad " << field;
    } catch (const StepError& err) {
      EXPECT_NE(std::string(err.what()).find(field), std::string::npos)
          << "the message does not name " << field << ": " << err.what();
    }
    for (const Tensors& t : appends) {
      for (float x : t.out) EXPECT_TRUE(std::isnan(x)) << field << ": an output was written";
    }
    const std::vector<CacheSnapshot> after = snapshots();
    for (size_t i = 0; i < after.size(); ++i) expect_same_snapshot(after[i], before[i], 0, "after a bad " + field);
    EXPECT_EQ(e->cache_bytes(), bytes);
  };
  const std::vector<SequenceReset> reset1{SequenceReset{1, 3}};
  expect_rejected({make_tensors(c, 0, 1, 1), make_tensors(c, 2, 1, 2)}, reset1, "step.appends[1].sequence");
  expect_rejected({make_tensors(c, -1, 1, 3)}, {}, "step.appends[0].sequence");
  expect_rejected({make_tensors(c, 1, 1, 4)}, {SequenceReset{5, 0}}, "step.resets[0].sequence");
  expect_rejected({make_tensors(c, 0, 8, 5)}, reset1, "step.appends[0].n_tokens");  // 5 + 8 > 12
  expect_rejected({make_tensors(c, 1, 13, 6)}, reset1, "step.appends[0].n_tokens");  // > max_tokens even after reset
  expect_rejected({make_tensors(c, 1, 0, 7)}, {}, "step.appends[0].n_tokens");
  for (const char* which : {"q", "k", "v"}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      std::vector<Tensors> ts{make_tensors(c, 1, 2, 8), make_tensors(c, 0, 3, 9)};
      Tensors& t = ts[1];
      std::vector<float>& x = which[0] == 'q' ? t.q : which[0] == 'k' ? t.k : t.v;
      x[x.size() - 3] = bad;  // last layer, last token
      expect_rejected(std::move(ts), reset1, std::string("step.appends[1].") + which + "[layer 1]");
    }
  }

  // step_resident: the same shape checks (values stay on the device and are not read).
  {
    Tensors t = make_tensors(c, 0, 1, 10);
    const auto expect_resident_rejected = [&](cu::ResidentStep s, int input_type, const std::string& field) {
      const std::vector<SequenceReset> resets{SequenceReset{1, 3}};
      try {
        e->step_resident(cu::ResidentBatch{resets, std::span<const cu::ResidentStep>(&s, 1), input_type});
        ADD_FAILURE() << "step_resident: no StepError for a bad " << field;
      } catch (const StepError& err) {
        EXPECT_NE(std::string(err.what()).find(field), std::string::npos)
            << "the message does not name " << field << ": " << err.what();
      }
      const std::vector<CacheSnapshot> after = snapshots();
      for (size_t i = 0; i < after.size(); ++i) {
        expect_same_snapshot(after[i], before[i], 0, "after a bad resident " + field);
      }
    };
    const cu::ResidentStep ok{0, 1, t.q.data(), t.k.data(), t.v.data(), t.out.data()};
    cu::ResidentStep s = ok;
    s.sequence = 2;
    expect_resident_rejected(s, cu::kInF32, "step.appends[0].sequence");
    s = ok;
    s.n_tokens = 8;
    expect_resident_rejected(s, cu::kInF32, "step.appends[0].n_tokens");
    s = ok;
    s.k = nullptr;
    expect_resident_rejected(s, cu::kInF32, "step.appends[0].q/k/v/out");
    expect_resident_rejected(ok, 7, "step.input_type");
  }

  // Nothing changed: the engines still agree, bit for bit, on what comes next.
  good(0, 3);
  good(1, 4);
  good(0, 1);
}

// ================================================================ spec 1.1: rollback and the reserve

namespace {

/// A sliding layer of window W with S sinks and reserve Q.
ringkv::LayerConfig layer_of(int64_t W, int64_t S, int64_t Q, RopeStyle rope) {
  ringkv::LayerConfig l;
  l.window = W;
  l.sinks = S;
  l.rollback_reserve = Q;
  l.rope.style = rope;
  return l;
}

/// A config of these layers and shapes (other fields at their defaults).
Config config_of(std::vector<ringkv::LayerConfig> layers, int q_heads, int kv_heads, int head_dim, int batch,
                 int64_t max_tokens) {
  Config c;
  c.layers = std::move(layers);
  c.num_q_heads = q_heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.batch = batch;
  c.max_tokens = max_tokens;
  return c;
}

struct ReserveCase {
  const char* name;
  int head_dim;
  KvFormat kv;  // K and V
  int64_t tile;  // chunk_tile() wanted, 0: the default budget
};
void PrintTo(const ReserveCase& c, std::ostream* os) { *os << c.name; }

/// Two sliding layers with reserves, Hq = 4 over Hkv = 2 (G = 2): with D = 64 and bf16 the warp
/// kernel's plan (tiles of 16 keys), with D = 32 and f32 the block kernel's (tiles of 32).
Config reserve_config(const ReserveCase& rc) {
  // the long window last: last_splits() reports the last layer's decode launch
  Config c = config_of({layer_of(9, 1, 3, RopeStyle::gptj), layer_of(150, 4, 21, RopeStyle::neox)}, 4, 2,
                       rc.head_dim, 2, 700);
  c.start_positions = {0, 5000};
  c.k_format = c.v_format = rc.kv;
  return c;
}

class CudaPlanRollback : public ::testing::TestWithParam<ReserveCase> {};

TEST_P(CudaPlanRollback, VerifyAndAcceptAcrossTheWrapMatchesTheReference) {
  // Speculative decoding: each round rolls back the rejected drafts of the last verify chunk and
  // appends the next chunk of k + 1 tokens (k = 0: a decode step on the fused path), for both
  // sequences, until both layers' rings have wrapped several times; outputs and rings as the
  // reference's after every step.
  const ReserveCase rc = GetParam();
  const Config c = reserve_config(rc);
  const cu::CoreOptions opts = rc.tile > 0 ? options_for_tile(c, rc.tile) : cu::CoreOptions{};
  Twin t(c, opts);
  const uint32_t k_ulps = 1;  // rope_sincos may differ from the C library in the last f64 bit
  int64_t k_differing = 0;
  t.step({}, {{0, 40}, {1, 1}}, "prefill");
  std::mt19937 rng(rc.head_dim);
  std::vector<int64_t> drafts(2, 0), held{40, 1};
  int most_splits = 0;
  for (int round = 0; round < 260 && t.failures == 0; ++round) {
    std::vector<SequenceRollback> rollbacks;
    std::vector<std::pair<int, int64_t>> appends;
    for (int s = 0; s < 2; ++s) {
      const auto su = static_cast<size_t>(s);
      const int64_t rejected = drafts[su] > 0 ? static_cast<int64_t>(rng() % static_cast<uint32_t>(drafts[su] + 1)) : 0;
      if (rejected > 0) rollbacks.push_back(SequenceRollback{s, rejected});
      const int64_t n = 1 + static_cast<int64_t>(rng() % 4);
      held[su] += n - rejected;
      drafts[su] = n - 1;
      appends.push_back({s, n});
    }
    t.step({}, appends, "round " + std::to_string(round), rollbacks);
    most_splits = std::max(most_splits, t.plan->last_splits());
    if (round % 20 == 0) t.expect_same_snapshots(k_ulps, "after round " + std::to_string(round), &k_differing);
  }
  EXPECT_EQ(t.failures, 0);
  EXPECT_GT(std::min(held[0], held[1]), 2 * (4 + 150 + 21)) << "both sequences past the wrap twice";
  EXPECT_GT(most_splits, 1) << "no decode used several splits";
  t.expect_same_snapshots(k_ulps, "at the end", &k_differing);
}

/// Tokens of one stream: index j's q, k and v depend only on (salt, j), so a token appended in a
/// chunk and the same token appended alone carry the same values.
Tensors stream_tokens(const Config& c, int sequence, int64_t first, int64_t n, uint32_t salt) {
  const auto L = static_cast<size_t>(c.layers.size());
  const size_t qr = static_cast<size_t>(c.num_q_heads * c.head_dim), kr = static_cast<size_t>(c.num_kv_heads * c.head_dim);
  Tensors t = make_tensors(c, sequence, n, 0);
  for (int64_t j = 0; j < n; ++j) {
    const Tensors one = make_tensors(c, sequence, 1, salt * 100003u + static_cast<uint32_t>(first + j));
    const auto ju = static_cast<size_t>(j), nu = static_cast<size_t>(n);
    for (size_t l = 0; l < L; ++l) {
      std::copy_n(one.q.begin() + static_cast<std::ptrdiff_t>(l * qr), qr, t.q.begin() + static_cast<std::ptrdiff_t>((l * nu + ju) * qr));
      std::copy_n(one.k.begin() + static_cast<std::ptrdiff_t>(l * kr), kr, t.k.begin() + static_cast<std::ptrdiff_t>((l * nu + ju) * kr));
      std::copy_n(one.v.begin() + static_cast<std::ptrdiff_t>(l * kr), kr, t.v.begin() + static_cast<std::ptrdiff_t>((l * nu + ju) * kr));
    }
  }
  return t;
}

/// Appends tokens [first, first + n) of stream `salt` to sequence 0 after the rollbacks; the outputs.
std::vector<float> append(cu::EngineCore& e, const Config& c, int64_t first, int64_t n, uint32_t salt,
                          const std::vector<SequenceRollback>& rollbacks = {}) {
  Tensors t = stream_tokens(c, 0, first, n, salt);
  const SequenceStep st = t.step();
  e.step(StepBatch{{}, std::span<const SequenceStep>(&st, 1), rollbacks});
  return t.out;
}

TEST_P(CudaPlanRollback, DecodeAfterRejectedDraftsIsBitIdenticalToNeverAppendingThem) {
  // Engine a verifies drafts (chunks whose rejected tokens carry other data) and rolls the
  // rejected ones back; engine b appends only the accepted tokens, one decode step at a time.
  // The decode steps that follow, on the fused path, see the same keys in the same slots through
  // decode_slots: bit-identical outputs (same batch, same split plan, same slot order).
  const ReserveCase rc = GetParam();
  Config c = reserve_config(rc);
  c.batch = 1;
  c.start_positions = {77};
  const cu::CoreOptions opts = rc.tile > 0 ? options_for_tile(c, rc.tile) : cu::CoreOptions{};
  auto a = make_core(c, opts), b = make_core(c, opts);
  std::mt19937 rng(7);
  int64_t held = 0;
  int compared = 0, bad = 0;
  append(*a, c, 0, 30, 1);
  append(*b, c, 0, 30, 1);
  held = 30;
  while (held < 600 && bad == 0) {
    const int64_t k = 1 + static_cast<int64_t>(rng() % 3), accepted = static_cast<int64_t>(rng() % static_cast<uint32_t>(k));
    // a: the verify chunk = the next `accepted` tokens of the stream, then k - accepted drafts of another stream
    Tensors chunk = stream_tokens(c, 0, held, k, 1);
    const Tensors junk = stream_tokens(c, 0, held, k, 2);
    const auto kv = static_cast<size_t>(c.num_kv_heads * c.head_dim), qv = static_cast<size_t>(c.num_q_heads * c.head_dim);
    for (size_t l = 0; l < c.layers.size(); ++l) {
      for (int64_t j = accepted; j < k; ++j) {
        const size_t row = l * static_cast<size_t>(k) + static_cast<size_t>(j);
        std::copy_n(junk.q.begin() + static_cast<std::ptrdiff_t>(row * qv), qv, chunk.q.begin() + static_cast<std::ptrdiff_t>(row * qv));
        std::copy_n(junk.k.begin() + static_cast<std::ptrdiff_t>(row * kv), kv, chunk.k.begin() + static_cast<std::ptrdiff_t>(row * kv));
        std::copy_n(junk.v.begin() + static_cast<std::ptrdiff_t>(row * kv), kv, chunk.v.begin() + static_cast<std::ptrdiff_t>(row * kv));
      }
    }
    const SequenceStep st = chunk.step();
    a->step(StepBatch{{}, std::span<const SequenceStep>(&st, 1)});
    for (int64_t j = 0; j < accepted; ++j) append(*b, c, held + j, 1, 1);
    held += accepted;
    // then decode steps: a's first one rolls the rejected drafts back in the same step
    const std::vector<SequenceRollback> back{SequenceRollback{0, k - accepted}};
    const int64_t decodes = 1 + static_cast<int64_t>(rng() % 4);
    for (int64_t d = 0; d < decodes; ++d, ++held) {
      const std::vector<float> oa = append(*a, c, held, 1, 1, d == 0 ? back : std::vector<SequenceRollback>{});
      const std::vector<float> ob = append(*b, c, held, 1, 1);
      bad += expect_bitwise(oa, ob, "decode of token " + std::to_string(held));
      ++compared;
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(compared, 200);
  for (int l = 0; l < 2; ++l) {  // the visible keys agree; a's ring differs only in emptied and retained slots
    const CacheSnapshot sa = *a->snapshot(l, 0), sb = *b->snapshot(l, 0);
    const int64_t W = c.layers[static_cast<size_t>(l)].window, S = c.layers[static_cast<size_t>(l)].sinks;
    for (size_t slot = 0; slot < sa.positions.size(); ++slot) {
      if (!cu::slot_visible(held - 1, sb.positions[slot], 77, S, W)) continue;
      EXPECT_EQ(sa.positions[slot], sb.positions[slot]) << "layer " << l << " slot " << slot;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CudaPlan, CudaPlanRollback,
                         ::testing::Values(ReserveCase{"warp_kernel_bf16_d64", 64, KvFormat::of(DType::bf16), 0},
                                           ReserveCase{"block_kernel_f32_d32", 32, KvFormat::of(DType::f32), 0},
                                           ReserveCase{"block_kernel_int8_d32_tile2", 32,
                                                       KvFormat::int8(Int8Scheme::q8_0, Rounding::nearest_even), 2}),
                         [](const ::testing::TestParamInfo<ReserveCase>& param_info) {
                           return std::string(param_info.param.name);
                         });

/// The spec's worked example (§5.1.2): S = 0, W = 4, Q = 4, C = 8.
Config worked_example() { return config_of({layer_of(4, 0, 4, RopeStyle::neox)}, 2, 1, 8, 2, 32); }

}  // namespace

TEST(CudaPlanRollbackRules, RefusalIsTheReferencesAndChangesNothing) {
  const Config c = worked_example();
  Twin t(c, cu::CoreOptions{});
  t.step({}, {{0, 20}, {1, 3}}, "20 tokens");
  t.step({}, {{0, 1}}, "rollback(4) honoured, then a token", {SequenceRollback{0, 4}});
  const std::vector<CacheSnapshot> before{*t.plan->snapshot(0, 0), *t.plan->snapshot(0, 1)};
  const std::vector<SequenceRollback> refused{SequenceRollback{1, 1}, SequenceRollback{0, 4}};  // m = 13: refused
  std::string ref_message, plan_message;
  try {
    t.ref.step(StepBatch{{}, {}, refused});
  } catch (const StepError& e) {
    ref_message = e.what();
  }
  try {
    t.plan->step(StepBatch{{}, {}, refused});
  } catch (const StepError& e) {
    plan_message = e.what();
  }
  EXPECT_NE(ref_message.find("refused"), std::string::npos) << ref_message;
  EXPECT_EQ(plan_message, ref_message);
  // resident steps refuse the same way; the same refused step again is a second refusal, whose reserve
  // counts the first one as honoured (spec 1.1 §5.1.4's replay), in both engines
  std::string resident_message, ref_again;
  try {
    t.plan->step_resident(cu::ResidentBatch{{}, {}, cu::kInF32, refused});
  } catch (const StepError& e) {
    resident_message = e.what();
  }
  try {
    t.ref.step(StepBatch{{}, {}, refused});
  } catch (const StepError& e) {
    ref_again = e.what();
  }
  EXPECT_NE(ref_again.find("rollback_reserve >= 10 would honour it"), std::string::npos) << ref_again;
  EXPECT_EQ(resident_message, ref_again);
  // nothing changed: not the other sequence's rollback either
  expect_same_snapshot(*t.plan->snapshot(0, 0), before[0], 0, "sequence 0 after the refused step");
  expect_same_snapshot(*t.plan->snapshot(0, 1), before[1], 0, "sequence 1 after the refused step");
  // an honoured rollback through step_resident (m = 16 = H - 4) rolls back as step() does
  const std::vector<SequenceRollback> honoured{SequenceRollback{0, 1}};
  t.plan->step_resident(cu::ResidentBatch{{}, {}, cu::kInF32, honoured});
  t.ref.step(StepBatch{{}, {}, honoured});
  t.expect_same_snapshots(1, "after a resident rollback", nullptr);
  t.step({}, {{0, 2}, {1, 1}}, "after the refusal");
  t.expect_same_snapshots(1, "after the refusal", nullptr);
  EXPECT_EQ(t.failures, 0);
}

TEST(CudaPlanRollbackRules, RollbackThenResetAndRollbackOfEverythingAreFresh) {
  const Config c = worked_example();
  Twin t(c, cu::CoreOptions{});
  t.step({}, {{0, 11}, {1, 6}}, "tokens");
  t.step({}, {}, "rollback of 3", {SequenceRollback{0, 3}});
  t.step({SequenceReset{0, 900}}, {{0, 5}}, "reset then 5");
  t.step({}, {{1, 2}}, "rollback of everything, then 2", {SequenceRollback{1, 6}});
  t.expect_same_snapshots(1, "after reset and full rollback", nullptr);
  // a reset and rollback(held) leave nothing of the old tokens: only the new ones' positions
  const CacheSnapshot s0 = *t.plan->snapshot(0, 0), s1 = *t.plan->snapshot(0, 1);
  for (int64_t pos : s0.positions) EXPECT_TRUE(pos == -1 || (pos >= 900 && pos < 905)) << pos;
  for (int64_t pos : s1.positions) EXPECT_TRUE(pos == -1 || pos < 2) << pos;
  const std::vector<SequenceReset> reset0{SequenceReset{0, 1}};
  const std::vector<SequenceRollback> back0{SequenceRollback{0, 1}};
  std::string message;
  try {
    t.plan->step(StepBatch{reset0, {}, back0});
  } catch (const StepError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("step.rollbacks[0]"), std::string::npos) << "a rollback and a reset of one sequence: " << message;
  for (int i = 0; i < 12; ++i) t.step({}, {{0, 1}, {1, 1}}, "decode " + std::to_string(i));
  t.expect_same_snapshots(1, "after decodes", nullptr);
  EXPECT_EQ(t.failures, 0);
}

TEST(CudaPlanRollbackRules, ChunksLongerThanTheWindowWithAReserve) {
  // S = 2, W = 5, Q = 3 (C = 10): chunks of Q + 1, of more than W and of more than C, across the wrap
  // and after rollbacks, on both paths and with sub-chunks of 2 tokens.
  Config c = config_of({layer_of(5, 2, 3, RopeStyle::neox), layer_of(3, 0, 3, RopeStyle::none)}, 4, 2, 8, 1, 64);
  c.start_positions = {31};
  for (cu::DecodePath path : {cu::DecodePath::fused, cu::DecodePath::cublas}) {
    for (int64_t tile : {int64_t{0}, int64_t{2}}) {
      cu::CoreOptions opts = tile > 0 ? options_for_tile(c, tile, path) : cu::CoreOptions{};
      opts.path = path;
      Twin t(c, opts);
      const std::string what = std::string(path == cu::DecodePath::fused ? "fused" : "cublas") + " tile " + std::to_string(tile);
      t.step({}, {{0, 13}}, what + ": 13 from empty");
      t.step({}, {{0, 4}}, what + ": rollback 2, chunk Q + 1", {SequenceRollback{0, 2}});
      t.step({}, {{0, 12}}, what + ": rollback 3, chunk 12", {SequenceRollback{0, 3}});
      t.step({}, {{0, 1}}, what + ": rollback 4, decode", {SequenceRollback{0, 4}});
      t.step({}, {{0, 9}}, what + ": chunk 9");
      t.step({}, {{0, 11}}, what + ": rollback 1, chunk 11", {SequenceRollback{0, 1}});
      t.expect_same_snapshots(1, what, nullptr);
      EXPECT_EQ(t.failures, 0) << what;
    }
  }
}

TEST(CudaPlanRollbackRules, PoisonHitsEmptiedSlotsNotRetainedOnes) {
  // After rollbacks, poison_empty_slots() writes NaN into the emptied slots (position −1) and leaves
  // the retained ones (occupied, beyond the window) alone, as the reference does; no output reads
  // a poisoned slot.
  Config c = config_of({layer_of(6, 1, 5, RopeStyle::neox)}, 4, 2, 64, 1, 80);
  c.k_format = c.v_format = KvFormat::of(DType::bf16);
  Twin t(c, cu::CoreOptions{});
  int64_t retained = 0, emptied = 0;
  const auto poison_and_check = [&](const std::string& what) {
    ASSERT_TRUE(t.plan->poison_empty_slots());
    const CacheSnapshot snap = *t.plan->snapshot(0, 0);
    const auto row = static_cast<size_t>(c.num_kv_heads * c.head_dim);
    for (size_t slot = 0; slot < snap.positions.size(); ++slot) {
      const bool empty = snap.positions[slot] == -1;
      for (size_t e = slot * row; e < (slot + 1) * row; ++e) {
        ASSERT_EQ(std::isnan(snap.k[e]), empty) << what << ": slot " << slot;
        ASSERT_EQ(std::isnan(snap.v[e]), empty) << what << ": slot " << slot;
      }
    }
  };
  t.step({}, {{0, 20}}, "20 tokens");
  int64_t held = 20;
  for (int round = 0; round < 15; ++round) {
    const int64_t back = 1 + round % 3, n = 1 + round % 4;
    t.step({}, {{0, n}}, "round " + std::to_string(round), {SequenceRollback{0, back}});
    held += n - back;
    poison_and_check("round " + std::to_string(round));
    const CacheSnapshot snap = *t.ref.snapshot(0, 0);
    for (int64_t pos : snap.positions) {
      emptied += pos == -1;
      retained += pos != -1 && !cu::slot_visible(held - 1, pos, 0, 1, 6);
    }
  }
  EXPECT_GT(emptied, 0);
  EXPECT_GT(retained, 0);
  EXPECT_EQ(t.failures, 0);
}
