// Tests of the ring layout and the ring KV cache (ringkv/ring.hpp, spec §3).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "ringkv/config.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/ring.hpp"

namespace {

using ringkv::DType;
using ringkv::Int8Scheme;
using ringkv::KvFormat;
using ringkv::RingGeometry;
using ringkv::RingKvCache;

/// The spec geometry of a layer: {S, W, min(S + W, max_tokens)}.
RingGeometry spec_geometry(int64_t window, int64_t sinks, int64_t max_tokens) {
  ringkv::LayerConfig layer;
  layer.window = window;
  layer.sinks = sinks;
  return RingGeometry{sinks, window, ringkv::ring_capacity(layer, max_tokens)};
}

KvFormat format(DType d) {
  KvFormat f;
  f.dtype = d;
  return f;
}
KvFormat int8(Int8Scheme scheme) {
  KvFormat f;
  f.dtype = DType::int8;
  f.int8_scheme = scheme;
  f.scale = 0.5f;
  return f;
}

std::vector<float> random_row(std::mt19937& rng, int n) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

}  // namespace

// ---------------------------------------------------------------- geometry

TEST(RingGeometry, NoSinksWrapsModuloWindow) {
  const RingGeometry g = spec_geometry(3, 0, 100);
  EXPECT_EQ(g.capacity, 3);
  const int64_t want[] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0};
  for (int64_t j = 0; j < 10; ++j) EXPECT_EQ(g.slot_of(j), want[j]) << "token " << j;
  EXPECT_EQ(g.slot_of(99), 0);  // 99 mod 3
}

TEST(RingGeometry, SinksAreNeverOverwritten) {
  // S = 2, W = 3: tokens 0, 1 in slots 0, 1; token j >= 2 in 2 + ((j - 2) mod 3).
  const RingGeometry g = spec_geometry(3, 2, 100);
  EXPECT_EQ(g.capacity, 5);
  const int64_t want[] = {0, 1, 2, 3, 4, 2, 3, 4, 2, 3, 4, 2};
  for (int64_t j = 0; j < 12; ++j) EXPECT_EQ(g.slot_of(j), want[j]) << "token " << j;
  for (int64_t j = 2; j < 100; ++j) {
    EXPECT_GE(g.slot_of(j), 2) << "token " << j << " overwrote a sink";
    EXPECT_EQ(g.slot_of(j), 2 + (j - 2) % 3) << "token " << j;
  }
}

TEST(RingGeometry, SpecWorkedExampleS1W3) {
  // spec §3: S = 1, W = 3, C = 4. Tokens 4, 5, 6, 7 go to slots 1, 2, 3, 1.
  const RingGeometry g = spec_geometry(3, 1, 1000);
  EXPECT_EQ(g.capacity, 4);
  const int64_t want[] = {0, 1, 2, 3, 1, 2, 3, 1};
  for (int64_t j = 0; j < 8; ++j) EXPECT_EQ(g.slot_of(j), want[j]) << "token " << j;
}

TEST(RingGeometry, TokenSPlusWReplacesTokenJMinusW) {
  for (const int64_t S : {int64_t{0}, int64_t{1}, int64_t{4}}) {
    for (const int64_t W : {int64_t{1}, int64_t{2}, int64_t{5}}) {
      const RingGeometry g = spec_geometry(W, S, 1000);
      for (int64_t j = S + W; j < 200; ++j) EXPECT_EQ(g.slot_of(j), g.slot_of(j - W)) << S << " " << W << " " << j;
      // The first S + W tokens fill S + W distinct slots.
      std::set<int64_t> slots;
      for (int64_t j = 0; j < S + W; ++j) slots.insert(g.slot_of(j));
      EXPECT_EQ(static_cast<int64_t>(slots.size()), S + W);
    }
  }
}

TEST(RingGeometry, CapacityIsCappedByMaxTokens) {
  // S + W = 10 > max_tokens = 5: C = 5 and the ring never wraps, slot(j) = j.
  const RingGeometry g = spec_geometry(8, 2, 5);
  EXPECT_EQ(g.capacity, 5);
  for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(g.slot_of(j), j);
  // max_tokens below S: every token is a sink.
  const RingGeometry all_sinks = spec_geometry(8, 6, 4);
  EXPECT_EQ(all_sinks.capacity, 4);
  for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(all_sinks.slot_of(j), j);
  // Not capped: C = S + W.
  EXPECT_EQ(spec_geometry(8, 2, 10).capacity, 10);
  EXPECT_EQ(spec_geometry(8, 2, 11).capacity, 10);
  EXPECT_EQ(spec_geometry(1, 0, 1).capacity, 1);
}

TEST(RingGeometry, CappedAndUncappedFormulasAgreeForValidTokens) {
  // slot(j) = S + ((j - S) mod (C - S)) equals S + ((j - S) mod W) for every j < max_tokens.
  for (int64_t max_tokens = 1; max_tokens < 20; ++max_tokens) {
    for (const int64_t S : {int64_t{0}, int64_t{2}, int64_t{5}}) {
      for (const int64_t W : {int64_t{1}, int64_t{3}, int64_t{7}}) {
        const RingGeometry g = spec_geometry(W, S, max_tokens);
        for (int64_t j = 0; j < max_tokens; ++j) {
          const int64_t want = j < S ? j : S + (j - S) % W;
          EXPECT_EQ(g.slot_of(j), want) << "S " << S << " W " << W << " max " << max_tokens << " j " << j;
          EXPECT_LT(g.slot_of(j), g.capacity);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- cache

TEST(RingKvCache, StartsEmptyAndResetEmptiesEverySlot) {
  RingKvCache cache(spec_geometry(3, 1, 100), 2, 8, format(DType::f32), format(DType::f16));
  EXPECT_EQ(cache.capacity(), 4);
  EXPECT_EQ(cache.num_kv_heads(), 2);
  EXPECT_EQ(cache.head_dim(), 8);
  EXPECT_EQ(cache.k_format(), format(DType::f32));
  EXPECT_EQ(cache.v_format(), format(DType::f16));
  for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(cache.position(s), RingKvCache::kEmpty);
  for (int64_t s = 0; s < 4; ++s) cache.set_position(s, 100 + s);
  for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(cache.position(s), 100 + s);
  cache.reset();
  for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(cache.position(s), RingKvCache::kEmpty) << "slot " << s;
  EXPECT_EQ(RingKvCache::kEmpty, -1);
}

TEST(RingKvCache, FootprintF32) {
  // C = 5, H = 2, D = 8: K and V 5*2*8*4 bytes each, no scales, 5 positions of 8 bytes.
  const RingKvCache cache(spec_geometry(4, 1, 100), 2, 8, format(DType::f32), format(DType::f32));
  EXPECT_EQ(cache.footprint_bytes(), size_t{5 * 2 * 8 * 4 * 2 + 5 * 8});
}

TEST(RingKvCache, FootprintF16KeysAndPerHeadInt8Values) {
  // K f16: 2 bytes; V int8 per_head: 1 byte plus one f32 scale per (slot, head).
  const RingKvCache cache(spec_geometry(6, 0, 100), 3, 16, format(DType::f16), int8(Int8Scheme::per_head));
  const size_t C = 6, H = 3, D = 16;
  EXPECT_EQ(cache.footprint_bytes(), C * H * D * 2 + C * H * D * 1 + C * H * 1 * 4 + C * 8);
}

TEST(RingKvCache, FootprintQ80AndStatic) {
  // K int8 q8_0 with D = 64: 2 scales per row. V int8 static: no scales.
  const RingKvCache cache(spec_geometry(3, 2, 4), 2, 64, int8(Int8Scheme::q8_0), int8(Int8Scheme::static_tensor));
  const size_t C = 4, H = 2, D = 64;  // C capped by max_tokens = 4
  EXPECT_EQ(cache.capacity(), 4);
  EXPECT_EQ(cache.footprint_bytes(), C * H * D + C * H * D + C * H * 2 * 4 + C * 8);
}

TEST(RingKvCache, FootprintFp8AndBf16) {
  KvFormat e4 = format(DType::fp8_e4m3);
  e4.scale = 2.0f;
  const RingKvCache cache(spec_geometry(10, 0, 100), 1, 32, e4, format(DType::bf16));
  EXPECT_EQ(cache.footprint_bytes(), size_t{10 * 32 * 1 + 10 * 32 * 2 + 10 * 8});
}

TEST(RingKvCache, FootprintDoesNotChangeWithUseOrReset) {
  RingKvCache cache(spec_geometry(3, 1, 100), 2, 32, format(DType::f16), int8(Int8Scheme::q8_0));
  const size_t before = cache.footprint_bytes();
  std::mt19937 rng(1);
  for (int64_t j = 0; j < 20; ++j) {
    const int64_t slot = cache.geometry().slot_of(j);
    for (int h = 0; h < 2; ++h) {
      const std::vector<float> x = random_row(rng, 32);
      ringkv::encode_row(cache.k_format(), 32, x.data(), cache.k_bytes(slot, h), cache.k_scales(slot, h));
      ringkv::encode_row(cache.v_format(), 32, x.data(), cache.v_bytes(slot, h), cache.v_scales(slot, h));
    }
    cache.set_position(slot, j);
  }
  cache.reset();
  EXPECT_EQ(cache.footprint_bytes(), before);
}

TEST(RingKvCache, EncodedRowsRoundTripThroughTheCacheForEveryFormat) {
  KvFormat e4 = format(DType::fp8_e4m3);
  e4.scale = 0.25f;
  KvFormat e5 = format(DType::fp8_e5m2);
  e5.scale = 4.0f;
  const std::vector<KvFormat> formats{format(DType::f32),        format(DType::f16), format(DType::bf16), e4, e5,
                                      int8(Int8Scheme::per_head), int8(Int8Scheme::q8_0),
                                      int8(Int8Scheme::static_tensor)};
  constexpr int H = 3, D = 64;
  std::mt19937 rng(2);
  for (const KvFormat& kf : formats) {
    for (const KvFormat& vf : {format(DType::f32), int8(Int8Scheme::q8_0)}) {
      SCOPED_TRACE("K " + ringkv::to_string(kf) + " V " + ringkv::to_string(vf));
      RingKvCache cache(spec_geometry(4, 1, 100), H, D, kf, vf);
      // Write a distinct row into every (slot, head), then read every one back: no overlap.
      std::vector<std::vector<float>> ks, vs;
      for (int64_t slot = 0; slot < cache.capacity(); ++slot) {
        for (int h = 0; h < H; ++h) {
          ks.push_back(random_row(rng, D));
          vs.push_back(random_row(rng, D));
          ringkv::encode_row(kf, D, ks.back().data(), cache.k_bytes(slot, h), cache.k_scales(slot, h));
          ringkv::encode_row(vf, D, vs.back().data(), cache.v_bytes(slot, h), cache.v_scales(slot, h));
        }
      }
      size_t row = 0;
      for (int64_t slot = 0; slot < cache.capacity(); ++slot) {
        for (int h = 0; h < H; ++h, ++row) {
          std::vector<float> got(D), want(D);
          cache.decode_k(slot, h, got.data());
          ringkv::store_round_trip(kf, D, ks[row].data(), want.data());
          for (int d = 0; d < D; ++d) {
            ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(d)]),
                      std::bit_cast<uint32_t>(want[static_cast<size_t>(d)]))
                << "K slot " << slot << " head " << h << " dim " << d;
          }
          cache.decode_v(slot, h, got.data());
          ringkv::store_round_trip(vf, D, vs[row].data(), want.data());
          for (int d = 0; d < D; ++d) {
            ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(d)]),
                      std::bit_cast<uint32_t>(want[static_cast<size_t>(d)]))
                << "V slot " << slot << " head " << h << " dim " << d;
          }
        }
      }
    }
  }
}

TEST(RingKvCache, RowsAreContiguousSlotMajor) {
  // [slot][kv_head][dim] bytes and [slot][kv_head][scales_per_row] scales.
  RingKvCache cache(spec_geometry(2, 1, 100), 2, 64, format(DType::f16), int8(Int8Scheme::q8_0));
  EXPECT_EQ(cache.k_bytes(0, 1) - cache.k_bytes(0, 0), 64 * 2);
  EXPECT_EQ(cache.k_bytes(1, 0) - cache.k_bytes(0, 0), 2 * 64 * 2);
  EXPECT_EQ(cache.v_bytes(2, 1) - cache.v_bytes(0, 0), (2 * 2 + 1) * 64);
  EXPECT_EQ(cache.v_scales(1, 1) - cache.v_scales(0, 0), 3 * 2);
}

TEST(RingKvCache, PoisonTouchesOnlyEmptySlots) {
  RingKvCache cache(spec_geometry(3, 0, 100), 1, 32, format(DType::f16), int8(Int8Scheme::q8_0));
  std::mt19937 rng(4);
  const std::vector<float> x = random_row(rng, 32);
  ringkv::encode_row(cache.k_format(), 32, x.data(), cache.k_bytes(1, 0), cache.k_scales(1, 0));
  ringkv::encode_row(cache.v_format(), 32, x.data(), cache.v_bytes(1, 0), cache.v_scales(1, 0));
  cache.set_position(1, 7);
  cache.poison_empty_slots();
  std::vector<float> got(32), want_k(32), want_v(32);
  ringkv::store_round_trip(cache.k_format(), 32, x.data(), want_k.data());
  ringkv::store_round_trip(cache.v_format(), 32, x.data(), want_v.data());
  cache.decode_k(1, 0, got.data());
  EXPECT_EQ(got, want_k);
  cache.decode_v(1, 0, got.data());
  EXPECT_EQ(got, want_v);
  for (const int64_t slot : {int64_t{0}, int64_t{2}}) {
    cache.decode_k(slot, 0, got.data());
    for (float v : got) EXPECT_TRUE(std::isnan(v)) << "K slot " << slot;
    cache.decode_v(slot, 0, got.data());
    for (float v : got) EXPECT_TRUE(std::isnan(v)) << "V slot " << slot;
  }
}
