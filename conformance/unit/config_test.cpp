// Tests of configuration validation (ringkv/config.hpp, spec §12.1): one test per
// rule. Each rejection must throw ringkv::ConfigError whose message names the
// field, shows the bad value and states the allowed range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "ringkv/config.hpp"
#include "ringkv/error.hpp"
#include "ringkv/precision.hpp"
#include "ringkv/reference_engine.hpp"

namespace {

using ringkv::Config;
using ringkv::DType;
using ringkv::Int8Scheme;
using ringkv::RopeScaling;
using ringkv::RopeStyle;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A small valid config: two layers (neox and partial gptj), GQA 4/2, D = 64, batch 2.
Config valid_config() {
  Config c;
  c.layers.resize(2);
  c.layers[0].window = 4;
  c.layers[0].sinks = 1;
  c.layers[0].rope.style = RopeStyle::neox;
  c.layers[1].window = 8;
  c.layers[1].sinks = 0;
  c.layers[1].rope.style = RopeStyle::gptj;
  c.layers[1].rope.theta = 1e6;
  c.layers[1].rope.rotary_dim = 4;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.batch = 2;
  c.max_tokens = 16;
  return c;
}

/// validate() must throw ConfigError whose message contains every part.
::testing::AssertionResult rejects(const Config& c, std::initializer_list<std::string> parts) {
  std::string message;
  try {
    ringkv::validate(c);
    return ::testing::AssertionFailure() << "validate() accepted the config";
  } catch (const ringkv::ConfigError& e) {
    message = e.what();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw something other than ConfigError: " << e.what();
  }
  for (const std::string& part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << part << "\"";
    }
  }
  return ::testing::AssertionSuccess() << message;
}

::testing::AssertionResult accepts(const Config& c) {
  try {
    ringkv::validate(c);
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "rejected: " << e.what();
  }
}

}  // namespace

TEST(ConfigValidation, ValidConfigPasses) {
  EXPECT_TRUE(accepts(valid_config()));
  EXPECT_NO_THROW(ringkv::ReferenceEngine{valid_config()});
}

TEST(ConfigValidation, BoundaryValuesPass) {
  Config c = valid_config();
  c.head_dim = 1024;
  c.layers[0].rope.rotary_dim = 1024;
  c.layers[0].window = (int64_t{1} << 31) - 1;
  c.layers[0].sinks = (int64_t{1} << 31) - 1;
  c.num_q_heads = 4096;
  c.num_kv_heads = 1;
  c.softmax_scale = std::ldexp(1.0, -64);
  c.softcap = std::ldexp(1.0, 64);
  c.k_format.dtype = DType::fp8_e4m3;
  c.k_format.scale = 0x1p-126f;
  c.v_format.dtype = DType::int8;
  c.v_format.int8_scheme = Int8Scheme::static_tensor;
  c.v_format.scale = 0x1p126f;
  c.start_positions = {0, (int64_t{1} << 31) - 16};
  EXPECT_TRUE(accepts(c));
  Config one = valid_config();
  one.layers.resize(1);
  one.num_q_heads = one.num_kv_heads = 1;
  one.head_dim = 1;
  one.layers[0].rope.style = RopeStyle::none;
  one.batch = 1;
  one.max_tokens = (int64_t{1} << 31) - 1;
  EXPECT_TRUE(accepts(one));
  one.batch = 1 << 20;
  one.max_tokens = 1;
  EXPECT_TRUE(accepts(one));
}

TEST(ConfigValidation, InvalidConfigIsRejectedByTheEngineConstructor) {
  Config c = valid_config();
  c.layers[1].window = 0;
  EXPECT_THROW(ringkv::ReferenceEngine{c}, ringkv::ConfigError);
  EXPECT_THROW(ringkv::make_reference_engine(c), ringkv::ConfigError);
}

TEST(ConfigValidation, WindowZero) {
  Config c = valid_config();
  c.layers[1].window = 0;
  EXPECT_TRUE(rejects(c, {"config.layers[1].window = 0", "[1, 2^31 - 1]"}));
  c.layers[1].window = int64_t{1} << 31;
  EXPECT_TRUE(rejects(c, {"config.layers[1].window = 2147483648", "[1, 2^31 - 1]"}));
}

TEST(ConfigValidation, NegativeSinks) {
  Config c = valid_config();
  c.layers[0].sinks = -1;
  EXPECT_TRUE(rejects(c, {"config.layers[0].sinks = -1", "[0, 2^31 - 1]"}));
}

TEST(ConfigValidation, QHeadsNotAMultipleOfKvHeads) {
  Config c = valid_config();
  c.num_q_heads = 6;
  c.num_kv_heads = 4;
  EXPECT_TRUE(rejects(c, {"config.num_q_heads = 6", "multiple of num_kv_heads = 4"}));
}

TEST(ConfigValidation, HeadCountsOutOfRange) {
  Config c = valid_config();
  c.num_q_heads = 0;
  EXPECT_TRUE(rejects(c, {"config.num_q_heads = 0", "[1, 4096]"}));
  c = valid_config();
  c.num_kv_heads = 0;
  EXPECT_TRUE(rejects(c, {"config.num_kv_heads = 0", "[1, 4096]"}));
  c = valid_config();
  c.num_q_heads = 8192;
  c.num_kv_heads = 4096;
  EXPECT_TRUE(rejects(c, {"config.num_q_heads = 8192", "[1, 4096]"}));
}

TEST(ConfigValidation, HeadDimZeroAnd1025) {
  Config c = valid_config();
  c.head_dim = 0;
  EXPECT_TRUE(rejects(c, {"config.head_dim = 0", "[1, 1024]"}));
  c.head_dim = 1025;
  EXPECT_TRUE(rejects(c, {"config.head_dim = 1025", "[1, 1024]"}));
}

TEST(ConfigValidation, OddRotaryDim) {
  Config c = valid_config();
  c.layers[0].rope.rotary_dim = 3;
  EXPECT_TRUE(rejects(c, {"config.layers[0].rope.rotary_dim = 3", "even and in [2, head_dim = 64]"}));
}

TEST(ConfigValidation, RotaryDimAboveHeadDim) {
  Config c = valid_config();
  c.layers[1].rope.rotary_dim = 66;
  EXPECT_TRUE(rejects(c, {"config.layers[1].rope.rotary_dim = 66", "even and in [2, head_dim = 64]"}));
  c.layers[1].rope.rotary_dim = -2;
  EXPECT_TRUE(rejects(c, {"config.layers[1].rope.rotary_dim = -2", "[2, head_dim = 64]"}));
}

TEST(ConfigValidation, RotaryDimZeroWithOddHeadDim) {
  Config c = valid_config();
  c.head_dim = 5;
  c.layers[0].rope.rotary_dim = 0;  // R = D = 5, odd
  EXPECT_TRUE(rejects(c, {"config.layers[0].rope.rotary_dim = 0 (= head_dim = 5)", "even"}));
  // Without RoPE on that layer an odd head_dim is fine.
  c.layers[0].rope.style = RopeStyle::none;
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, NtkNeedsRotaryDimAboveTwo) {
  Config c = valid_config();
  c.layers[1].rope.rotary_dim = 2;
  c.layers[1].rope.scaling = RopeScaling::ntk;
  c.layers[1].rope.factor = 2.0;
  EXPECT_TRUE(rejects(c, {"config.layers[1].rope.rotary_dim = 2", "ntk scaling needs rotary_dim > 2"}));
  c.layers[1].rope.rotary_dim = 4;
  EXPECT_TRUE(accepts(c));
  c.layers[1].rope.scaling = RopeScaling::linear;
  c.layers[1].rope.rotary_dim = 2;
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, RopeFactorNotPositiveOrNaN) {
  for (const RopeScaling scaling : {RopeScaling::linear, RopeScaling::ntk}) {
    Config c = valid_config();
    c.layers[0].rope.scaling = scaling;
    c.layers[0].rope.factor = 0.0;
    EXPECT_TRUE(rejects(c, {"config.layers[0].rope.factor = 0", "finite and > 0"}));
    c.layers[0].rope.factor = -2.0;
    EXPECT_TRUE(rejects(c, {"config.layers[0].rope.factor = -2", "finite and > 0"}));
    c.layers[0].rope.factor = kNaN;
    EXPECT_TRUE(rejects(c, {"config.layers[0].rope.factor = nan", "finite and > 0"}));
    c.layers[0].rope.factor = kInf;
    EXPECT_TRUE(rejects(c, {"config.layers[0].rope.factor = inf", "finite and > 0"}));
  }
  // The factor is ignored without scaling.
  Config c = valid_config();
  c.layers[0].rope.factor = kNaN;
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, RopeThetaNotPositiveOrNotFinite) {
  Config c = valid_config();
  c.layers[1].rope.theta = 0.0;
  EXPECT_TRUE(rejects(c, {"config.layers[1].rope.theta = 0", "finite and > 0"}));
  c.layers[1].rope.theta = -10000.0;
  EXPECT_TRUE(rejects(c, {"config.layers[1].rope.theta = -10000", "finite and > 0"}));
  c.layers[1].rope.theta = kInf;
  EXPECT_TRUE(rejects(c, {"config.layers[1].rope.theta = inf", "finite and > 0"}));
  c.layers[1].rope.theta = kNaN;
  EXPECT_TRUE(rejects(c, {"config.layers[1].rope.theta = nan", "finite and > 0"}));
  // Ignored for style none.
  c.layers[1].rope.style = RopeStyle::none;
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, SoftmaxScaleOutOfRange) {
  Config c = valid_config();
  c.softmax_scale = kNaN;
  EXPECT_TRUE(rejects(c, {"config.softmax_scale = nan", "[2^-64, 2^64]"}));
  c.softmax_scale = kInf;
  EXPECT_TRUE(rejects(c, {"config.softmax_scale = inf", "[2^-64, 2^64]"}));
  c.softmax_scale = 0.0;
  EXPECT_TRUE(rejects(c, {"config.softmax_scale = 0", "[2^-64, 2^64]"}));
  c.softmax_scale = -0.125;
  EXPECT_TRUE(rejects(c, {"config.softmax_scale = -0.125", "[2^-64, 2^64]"}));
  c.softmax_scale = std::ldexp(1.0, -65);
  EXPECT_TRUE(rejects(c, {"config.softmax_scale = ", "[2^-64, 2^64]"}));
  c.softmax_scale = std::ldexp(1.0, 65);
  EXPECT_TRUE(rejects(c, {"config.softmax_scale = ", "[2^-64, 2^64]"}));
  c.softmax_scale = 0.3;
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, SoftcapNotPositive) {
  Config c = valid_config();
  c.softcap = 0.0;
  EXPECT_TRUE(rejects(c, {"config.softcap = 0", "[2^-64, 2^64]"}));
  c.softcap = -30.0;
  EXPECT_TRUE(rejects(c, {"config.softcap = -30", "[2^-64, 2^64]"}));
  c.softcap = kNaN;
  EXPECT_TRUE(rejects(c, {"config.softcap = nan", "[2^-64, 2^64]"}));
  c.softcap = kInf;
  EXPECT_TRUE(rejects(c, {"config.softcap = inf", "[2^-64, 2^64]"}));
  c.softcap = 30.0;
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, SinkLogitsWrongSize) {
  Config c = valid_config();
  c.sink_logits = {{0.0f, 0.0f, 0.0f, 0.0f}};  // 1 row for 2 layers
  EXPECT_TRUE(rejects(c, {"config.sink_logits.size() = 1", "must be 0 or layers.size() = 2"}));
  c.sink_logits = {{0.0f, 0.0f, 0.0f, 0.0f}, {1.0f, 2.0f, 3.0f}};  // 3 values for 4 q heads
  EXPECT_TRUE(rejects(c, {"config.sink_logits[1].size() = 3", "must be num_q_heads = 4"}));
  c.sink_logits = {{0.0f, 0.0f, 0.0f, 0.0f}, {1.0f, 2.0f, 3.0f, 4.0f}};
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, SinkLogitsNotFinite) {
  Config c = valid_config();
  c.sink_logits = {{0.0f, 0.0f, 0.0f, 0.0f}, {1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 4.0f}};
  EXPECT_TRUE(rejects(c, {"config.sink_logits[1][2] = nan", "must be finite"}));
  c.sink_logits = {{-std::numeric_limits<float>::infinity(), 0.0f, 0.0f, 0.0f}, {1.0f, 2.0f, 3.0f, 4.0f}};
  EXPECT_TRUE(rejects(c, {"config.sink_logits[0][0] = -inf", "must be finite"}));
}

TEST(ConfigValidation, Q80NeedsHeadDimDivisibleBy32) {
  Config c = valid_config();
  c.head_dim = 48;
  c.k_format.dtype = DType::int8;
  c.k_format.int8_scheme = Int8Scheme::q8_0;
  EXPECT_TRUE(rejects(c, {"config.k_format.int8_scheme = q8_0", "group size 32", "head_dim = 48"}));
  c = valid_config();
  c.head_dim = 16;
  c.v_format.dtype = DType::int8;
  c.v_format.int8_scheme = Int8Scheme::q8_0;
  EXPECT_TRUE(rejects(c, {"config.v_format.int8_scheme = q8_0", "group size 32", "head_dim = 16"}));
  // per_head has no such rule.
  c.v_format.int8_scheme = Int8Scheme::per_head;
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, Fp8AndStaticInt8ScaleMustBeFinitePositive) {
  struct Kind {
    DType dtype;
    Int8Scheme scheme;
  };
  for (const Kind kind : {Kind{DType::fp8_e4m3, Int8Scheme::per_head}, Kind{DType::fp8_e5m2, Int8Scheme::per_head},
                          Kind{DType::int8, Int8Scheme::static_tensor}}) {
    for (const bool key : {true, false}) {
      Config c = valid_config();
      ringkv::KvFormat& f = key ? c.k_format : c.v_format;
      const std::string field = key ? "config.k_format.scale = " : "config.v_format.scale = ";
      f.dtype = kind.dtype;
      f.int8_scheme = kind.scheme;
      f.scale = std::numeric_limits<float>::quiet_NaN();
      EXPECT_TRUE(rejects(c, {field + "nan", "finite and in [2^-126, 2^126]"}));
      f.scale = 0.0f;
      EXPECT_TRUE(rejects(c, {field + "0", "finite and in [2^-126, 2^126]"}));
      f.scale = -1.0f;
      EXPECT_TRUE(rejects(c, {field + "-1", "finite and in [2^-126, 2^126]"}));
      f.scale = std::numeric_limits<float>::infinity();
      EXPECT_TRUE(rejects(c, {field + "inf", "finite and in [2^-126, 2^126]"}));
      f.scale = 0x1p-127f;
      EXPECT_TRUE(rejects(c, {field, "finite and in [2^-126, 2^126]"}));
      f.scale = 0x1p127f;
      EXPECT_TRUE(rejects(c, {field, "finite and in [2^-126, 2^126]"}));
      f.scale = 0.25f;
      EXPECT_TRUE(accepts(c));
    }
  }
  // The scale is ignored by other formats.
  Config c = valid_config();
  c.k_format.scale = std::numeric_limits<float>::quiet_NaN();
  c.v_format.dtype = DType::int8;
  c.v_format.int8_scheme = Int8Scheme::per_head;
  c.v_format.scale = 0.0f;
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, StartPositionsWrongSize) {
  Config c = valid_config();
  c.start_positions = {5};
  EXPECT_TRUE(rejects(c, {"config.start_positions.size() = 1", "must be 0 or batch = 2"}));
  c.start_positions = {1, 2, 3};
  EXPECT_TRUE(rejects(c, {"config.start_positions.size() = 3", "must be 0 or batch = 2"}));
}

TEST(ConfigValidation, NegativeStartPosition) {
  Config c = valid_config();
  c.start_positions = {0, -1};
  EXPECT_TRUE(rejects(c, {"config.start_positions[1] = -1", "must be in [0, 2147483632]", "max_tokens = 16",
                          "below 2^31"}));
}

TEST(ConfigValidation, StartPositionWhoseLastTokenReaches2To31) {
  Config c = valid_config();
  // p0 + max_tokens - 1 = 2^31 - 16 + 1 + 15 = 2^31: one too many.
  c.start_positions = {(int64_t{1} << 31) - 15, 0};
  EXPECT_TRUE(rejects(c, {"config.start_positions[0] = 2147483633", "must be in [0, 2147483632]"}));
  c.start_positions = {(int64_t{1} << 31) - 16, 0};
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, ValidateStartPositionNamesTheGivenField) {
  const Config c = valid_config();
  EXPECT_NO_THROW(ringkv::validate_start_position(c, 0, "x"));
  EXPECT_NO_THROW(ringkv::validate_start_position(c, 2147483632, "x"));
  try {
    ringkv::validate_start_position(c, 2147483633, "step.resets[3].start_position");
    ADD_FAILURE() << "no throw";
  } catch (const ringkv::ConfigError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("step.resets[3].start_position = 2147483633", 0), 0u) << m;
    EXPECT_NE(m.find("[0, 2147483632]"), std::string::npos) << m;
    EXPECT_NE(m.find("max_tokens = 16"), std::string::npos) << m;
  }
  EXPECT_THROW(ringkv::validate_start_position(c, -5, "y"), ringkv::ConfigError);
  EXPECT_THROW(ringkv::validate_start_position(c, std::numeric_limits<int64_t>::min(), "y"), ringkv::ConfigError);
}

TEST(ConfigValidation, MaxTokensZero) {
  Config c = valid_config();
  c.max_tokens = 0;
  EXPECT_TRUE(rejects(c, {"config.max_tokens = 0", "[1, 2^31 - 1]"}));
  c.max_tokens = int64_t{1} << 31;
  EXPECT_TRUE(rejects(c, {"config.max_tokens = 2147483648", "[1, 2^31 - 1]"}));
}

TEST(ConfigValidation, BatchZero) {
  Config c = valid_config();
  c.batch = 0;
  EXPECT_TRUE(rejects(c, {"config.batch = 0", "[1, 2^20]"}));
  c.batch = (1 << 20) + 1;
  EXPECT_TRUE(rejects(c, {"config.batch = 1048577", "[1, 2^20]"}));
}

TEST(ConfigValidation, LayersEmpty) {
  Config c = valid_config();
  c.layers.clear();
  EXPECT_TRUE(rejects(c, {"config.layers.size() = 0", "[1, 1024]"}));
  c.layers.resize(1025);
  EXPECT_TRUE(rejects(c, {"config.layers.size() = 1025", "[1, 1024]"}));
}

TEST(ConfigValidation, RingBufferTooLarge) {
  // C = 2^30 slots x 4096 kv heads x 1024 dims x 8 bytes (f32 K and V) = 2^55 bytes.
  Config c = valid_config();
  c.layers.resize(1);
  c.layers[0].window = int64_t{1} << 30;
  c.layers[0].sinks = 0;
  c.max_tokens = (int64_t{1} << 31) - 1;
  c.num_kv_heads = 4096;
  c.num_q_heads = 4096;
  c.head_dim = 1024;
  c.layers[0].rope.rotary_dim = 0;
  EXPECT_TRUE(rejects(c, {"config: a ring needs more than 2^48 bytes", "reduce"}));
  // The same ring with a tiny head fits (validation only; nothing is allocated).
  c.head_dim = 1;
  c.layers[0].rope.style = RopeStyle::none;
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, LayerCacheTooLargeAcrossTheBatch) {
  // One ring: 2^24 slots x 1 head x 8 dims x 8 bytes = 2^30; x batch 2^20 = 2^50.
  Config c = valid_config();
  c.layers.resize(1);
  c.layers[0].window = int64_t{1} << 24;
  c.layers[0].sinks = 0;
  c.max_tokens = int64_t{1} << 24;
  c.num_q_heads = c.num_kv_heads = 1;
  c.head_dim = 8;
  c.batch = 1 << 20;
  EXPECT_TRUE(rejects(c, {"more than 2^48 bytes", "reduce"}));
}

TEST(ConfigValidation, TotalCacheTooLargeAcrossLayers) {
  // Per layer: 2^24 slots x 64 dims x 8 bytes x batch 64 = 2^39; 1024 layers = 2^49 > 2^48.
  Config c = valid_config();
  c.layers.assign(1024, ringkv::LayerConfig{});
  for (ringkv::LayerConfig& l : c.layers) {
    l.window = int64_t{1} << 24;
    l.rope.style = RopeStyle::none;
  }
  c.max_tokens = int64_t{1} << 24;
  c.num_q_heads = c.num_kv_heads = 1;
  c.head_dim = 64;
  c.batch = 64;
  EXPECT_TRUE(rejects(c, {"more than 2^48 bytes", "reduce"}));
  c.layers.resize(256);  // 2^47: fits
  EXPECT_TRUE(accepts(c));
}

TEST(ConfigValidation, ReportsTheFirstBadLayer) {
  Config c = valid_config();
  c.layers[0].window = 0;
  c.layers[1].window = -3;
  EXPECT_TRUE(rejects(c, {"config.layers[0].window = 0"}));
}

// ---------------------------------------------------------------- helpers and names

TEST(ConfigHelpers, SoftmaxScaleRotaryDimRingCapacityStartPosition) {
  Config c = valid_config();
  EXPECT_EQ(ringkv::softmax_scale(c), 0.125);  // 1/sqrt(64)
  c.softmax_scale = 0.3;
  EXPECT_EQ(ringkv::softmax_scale(c), 0.3);
  EXPECT_EQ(ringkv::rotary_dim(c.layers[0].rope, 64), 64);
  EXPECT_EQ(ringkv::rotary_dim(c.layers[1].rope, 64), 4);
  EXPECT_EQ(ringkv::ring_capacity(c.layers[0], 16), 5);   // S + W = 1 + 4
  EXPECT_EQ(ringkv::ring_capacity(c.layers[0], 3), 3);    // capped by max_tokens
  EXPECT_EQ(ringkv::ring_capacity(c.layers[1], 100), 8);
  EXPECT_EQ(ringkv::start_position(c, 1), 0);
  c.start_positions = {7, 1000};
  EXPECT_EQ(ringkv::start_position(c, 0), 7);
  EXPECT_EQ(ringkv::start_position(c, 1), 1000);
}

TEST(ConfigNames, EnumNames) {
  EXPECT_STREQ(ringkv::to_string(RopeStyle::none), "none");
  EXPECT_STREQ(ringkv::to_string(RopeStyle::neox), "neox");
  EXPECT_STREQ(ringkv::to_string(RopeStyle::gptj), "gptj");
  EXPECT_STREQ(ringkv::to_string(RopeScaling::none), "none");
  EXPECT_STREQ(ringkv::to_string(RopeScaling::linear), "linear");
  EXPECT_STREQ(ringkv::to_string(RopeScaling::ntk), "ntk");
  EXPECT_STREQ(ringkv::to_string(DType::f32), "f32");
  EXPECT_STREQ(ringkv::to_string(DType::f16), "f16");
  EXPECT_STREQ(ringkv::to_string(DType::bf16), "bf16");
  EXPECT_STREQ(ringkv::to_string(DType::fp8_e4m3), "fp8_e4m3");
  EXPECT_STREQ(ringkv::to_string(DType::fp8_e5m2), "fp8_e5m2");
  EXPECT_STREQ(ringkv::to_string(DType::int8), "int8");
  EXPECT_STREQ(ringkv::to_string(Int8Scheme::per_head), "per_head");
  EXPECT_STREQ(ringkv::to_string(Int8Scheme::q8_0), "q8_0");
  EXPECT_STREQ(ringkv::to_string(Int8Scheme::static_tensor), "static");
  EXPECT_STREQ(ringkv::to_string(ringkv::Rounding::nearest_even), "rne");
  EXPECT_STREQ(ringkv::to_string(ringkv::Rounding::half_away), "away");
}

TEST(ConfigNames, KvFormatNames) {
  ringkv::KvFormat f;
  EXPECT_EQ(ringkv::to_string(f), "f32");
  f.dtype = DType::f16;
  EXPECT_EQ(ringkv::to_string(f), "f16");
  f.dtype = DType::bf16;
  EXPECT_EQ(ringkv::to_string(f), "bf16");
  f.dtype = DType::fp8_e4m3;
  f.scale = 0.5f;
  EXPECT_EQ(ringkv::to_string(f), "fp8_e4m3@0.5");
  f.dtype = DType::fp8_e5m2;
  f.scale = 2.0f;
  EXPECT_EQ(ringkv::to_string(f), "fp8_e5m2@2");
  f.dtype = DType::int8;
  f.int8_scheme = Int8Scheme::q8_0;
  EXPECT_EQ(ringkv::to_string(f), "int8-q8_0-rne");
  f.int8_scheme = Int8Scheme::per_head;
  f.rounding = ringkv::Rounding::half_away;
  EXPECT_EQ(ringkv::to_string(f), "int8-per_head-away");
  f.int8_scheme = Int8Scheme::static_tensor;
  f.rounding = ringkv::Rounding::nearest_even;
  f.scale = 0.25f;
  EXPECT_EQ(ringkv::to_string(f), "int8-static-rne@0.25");
}

TEST(ConfigNames, DescribeNamesEveryPart) {
  Config c = valid_config();
  c.k_format.dtype = DType::f16;
  c.v_format.dtype = DType::int8;
  c.v_format.int8_scheme = Int8Scheme::q8_0;
  c.softcap = 30.0;
  c.start_positions = {3, 9};
  c.layers[1].rope.scaling = RopeScaling::linear;
  c.layers[1].rope.factor = 4.0;
  const std::string d = ringkv::describe(c);
  for (const char* part : {"layers=2", "Hq=4", "Hkv=2", "D=64", "batch=2", "max_tokens=16", "scale=0.125",
                           "softcap=30", "K=f16", "V=int8-q8_0-rne", "sink_logits=none",
                           "layer 0: W=4 S=1 rope=neox theta=10000 R=64 scaling=none",
                           "layer 1: W=8 S=0 rope=gptj theta=1000000 R=4 scaling=linearx4", "start_positions: 3 9"}) {
    EXPECT_NE(d.find(part), std::string::npos) << "missing \"" << part << "\" in:\n" << d;
  }
  Config plain = valid_config();
  plain.layers[0].rope.style = RopeStyle::none;
  const std::string p = ringkv::describe(plain);
  EXPECT_NE(p.find("layer 0: W=4 S=1 rope=none\n"), std::string::npos) << p;
  EXPECT_NE(p.find("softcap=none"), std::string::npos) << p;
  EXPECT_NE(p.find("start_positions: 0 0"), std::string::npos) << p;
}

TEST(PrecisionNames, UnitRoundoffAndParsing) {
  using ringkv::Precision;
  EXPECT_EQ(ringkv::unit_roundoff(Precision::f64), std::ldexp(1.0, -53));
  EXPECT_EQ(ringkv::unit_roundoff(Precision::f32), std::ldexp(1.0, -24));
  EXPECT_EQ(ringkv::unit_roundoff(Precision::tf32), std::ldexp(1.0, -11));
  EXPECT_EQ(ringkv::unit_roundoff(Precision::f16), std::ldexp(1.0, -11));
  EXPECT_EQ(ringkv::unit_roundoff(Precision::bf16), std::ldexp(1.0, -8));
  EXPECT_EQ(ringkv::unit_roundoff(Precision::fp8_e4m3), std::ldexp(1.0, -4));
  EXPECT_EQ(ringkv::unit_roundoff(Precision::fp8_e5m2), std::ldexp(1.0, -3));
  EXPECT_EQ(ringkv::unit_roundoff(Precision::int8), 0.0);
  for (const Precision p : {Precision::f64, Precision::f32, Precision::tf32, Precision::f16, Precision::bf16,
                            Precision::fp8_e4m3, Precision::fp8_e5m2, Precision::int8}) {
    EXPECT_EQ(ringkv::parse_precision(ringkv::to_string(p)), p);
  }
  try {
    (void)ringkv::parse_precision("fp7");
    ADD_FAILURE() << "no throw";
  } catch (const ringkv::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("\"fp7\""), std::string::npos) << e.what();
  }
  const std::string profile = ringkv::to_string(ringkv::PrecisionProfile{});
  EXPECT_NE(profile.find("q_dot=f32"), std::string::npos) << profile;
  EXPECT_NE(profile.find("rope_angle=f64"), std::string::npos) << profile;
}
