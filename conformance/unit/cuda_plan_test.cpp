// Tests of the CUDA engine core (cuda/include/ringkv/cuda/engine_core.hpp) on the plan
// backend, which runs the kernels' launch plan on the host: split-K decode and long chunks
// against the reference engine, the device entry point (step_resident) with f16 and bf16
// inputs, constant memory, poisoning, and the rejection of bad steps.
//
// Outputs are compared with the reference within 1e-5 relative + 1e-6 absolute (unit-scale
// data); cache contents (snapshot) exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
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
            const std::string& what) {
    std::vector<Tensors> a, b;
    for (const auto& [seq, n] : appends) {
      a.push_back(make_tensors(config, seq, n, ++seed));
      b.push_back(a.back());
    }
    std::vector<SequenceStep> sa, sb;
    for (Tensors& t : a) sa.push_back(t.step());
    for (Tensors& t : b) sb.push_back(t.step());
    ref.step(StepBatch{resets, sa});
    plan->step(StepBatch{resets, sb});
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
