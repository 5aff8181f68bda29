// The capability rule (support/capabilities.hpp), issue 14: every field of Capabilities in
// capability_gap, naming the config's value and the declared limit; the capabilities file of the file
// exchange; and the generators staying inside every capability set they are given.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <rapidcheck.h>

#include "ringkv/error.hpp"
#include "support/capabilities.hpp"
#include "support/generators.hpp"

namespace ringkv::conformance {
namespace {

using nlohmann::json;

// A config inside spec 1 core: f32 K/V, neox RoPE over the whole head, one sliding layer (W 8 of 32).
Config core_config() {
  Config c;
  c.layers = {LayerConfig{8, 0, RopeConfig{}}};
  c.num_q_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 64;
  c.batch = 1;
  c.max_tokens = 32;
  return c;
}

LayerConfig layer(int64_t window) { return LayerConfig{window, 0, RopeConfig{}}; }

Case case_of(const Config& c) {
  Case k;
  k.config = c;
  StepPlan st;
  st.tokens.assign(static_cast<size_t>(c.batch), 4);
  k.steps = {st};
  return k;
}

// The gap for `caps` and `config`, which must hold every piece of `want` (and be non-empty).
void expect_gap(const Capabilities& caps, const Config& config, const std::vector<std::string>& want) {
  const std::string gap = capability_gap(caps, config);
  EXPECT_FALSE(gap.empty()) << "no gap, expected " << ::testing::PrintToString(want);
  for (const std::string& w : want) EXPECT_NE(gap.find(w), std::string::npos) << "gap \"" << gap << "\" lacks \"" << w << "\"";
}

TEST(CapabilityGap, TheCoreConfigIsInsideTheCoreAndEverything) {
  EXPECT_EQ(capability_gap(Capabilities{}, core_config()), "");
  EXPECT_EQ(capability_gap(core_capabilities(), core_config()), "");
  EXPECT_EQ(capability_gap(core_capabilities({DType::f32}), case_of(core_config())), "");
}

TEST(CapabilityGap, MaxBatch) {
  Capabilities caps;
  caps.max_batch = 1;
  Config c = core_config();
  c.batch = 3;
  expect_gap(caps, c, {"batch 3 > max_batch 1"});
  c.batch = 1;
  EXPECT_EQ(capability_gap(caps, c), "");
}

TEST(CapabilityGap, Int8Roundings) {
  Capabilities caps;
  caps.int8_roundings = {Rounding::half_away};
  Config c = core_config();
  c.k_format.dtype = DType::int8;
  c.k_format.rounding = Rounding::nearest_even;
  expect_gap(caps, c, {"int8 rounding rne", "supports away"});
  c.k_format.rounding = Rounding::half_away;
  EXPECT_EQ(capability_gap(caps, c), "");
  c.v_format = c.k_format;
  c.v_format.rounding = Rounding::nearest_even;
  expect_gap(caps, c, {"int8 rounding rne"});
}

TEST(CapabilityGap, MaxLayers) {
  Capabilities caps;
  caps.max_layers = 2;
  Config c = core_config();
  c.layers = {layer(8), layer(8), layer(8)};
  expect_gap(caps, c, {"3 layers > max_layers 2"});
  c.layers.pop_back();
  EXPECT_EQ(capability_gap(caps, c), "");
}

TEST(CapabilityGap, MaxSlidingWindowsCountsOnlySlidingLayers) {
  Capabilities caps;
  caps.max_sliding_windows = 1;
  Config c = core_config();
  c.layers = {layer(8), layer(4)};
  expect_gap(caps, c, {"2 distinct sliding windows > max_sliding_windows 1"});
  c.layers = {layer(8), layer(8), layer(32), layer(1000)};  // W >= max_tokens (32): full attention
  EXPECT_EQ(capability_gap(caps, c), "");
}

TEST(CapabilityGap, MaxWindowOverSlidingLayersOnly) {
  Capabilities caps;
  caps.max_window = 16;
  Config c = core_config();
  c.layers = {layer(8), layer(1 << 20)};  // a global layer with a huge W: not a sliding window
  EXPECT_EQ(capability_gap(caps, c), "");
  c.layers = {layer(8), layer(20)};
  expect_gap(caps, c, {"window 20 > max_window 16"});
}

TEST(CapabilityGap, MinWindowOverSlidingLayersOnly) {
  Capabilities caps;
  caps.min_window = 2;
  Config c = core_config();
  c.layers = {layer(1)};
  expect_gap(caps, c, {"window 1 < min_window 2"});
  c.layers = {layer(2), layer(32)};
  EXPECT_EQ(capability_gap(caps, c), "");
  c.max_tokens = 1;  // W = 1 = max_tokens: attends to everything the sequence holds, not a sliding window
  c.layers = {layer(1)};
  EXPECT_EQ(capability_gap(caps, c), "");
}

TEST(CapabilityGap, PerLayerRope) {
  Capabilities caps;
  caps.per_layer_rope = false;
  Config c = core_config();
  c.layers = {layer(8), layer(32)};
  EXPECT_EQ(capability_gap(caps, c), "");
  c.layers[1].rope.theta = 1e6;
  expect_gap(caps, c, {"per-layer RoPE"});
}

TEST(CapabilityGap, PartialRotary) {
  Capabilities caps;
  caps.partial_rotary = false;
  Config c = core_config();
  c.layers[0].rope.rotary_dim = 32;
  expect_gap(caps, c, {"partial rotary (rotary_dim 32 < head_dim"});
  c.layers[0].rope.rotary_dim = 64;
  EXPECT_EQ(capability_gap(caps, c), "");
}

TEST(CapabilityGap, SettableP0StartAndResetPositions) {
  Capabilities caps;
  caps.settable_p0 = false;
  Config c = core_config();
  EXPECT_EQ(capability_gap(caps, c), "");
  c.start_positions = {5};
  expect_gap(caps, c, {"start position 5 (p0 is not settable)"});
  Case k = case_of(core_config());
  StepPlan again;
  again.tokens = {2};
  again.resets = {ResetPlan{0, 7, 1}};
  k.steps.push_back(again);
  EXPECT_EQ(capability_gap(caps, k.config), "") << "the config alone has p0 = 0";
  const std::string gap = capability_gap(caps, k);
  EXPECT_NE(gap.find("start position 7 (p0 is not settable)"), std::string::npos) << gap;
  k.steps.back().resets[0].start_position = 0;
  EXPECT_EQ(capability_gap(caps, k), "");
}

TEST(CapabilityGap, MaxPositionStartAndResetPositions) {
  Capabilities caps;
  caps.max_position = int64_t{1} << 20;
  Config c = core_config();
  c.start_positions = {(int64_t{1} << 20) - 31};  // last position p0 + 31 = 2^20
  EXPECT_EQ(capability_gap(caps, c), "");
  c.start_positions = {(int64_t{1} << 20) - 10};
  expect_gap(caps, c, {"positions up to 1048597 > max_position 1048576"});
  Case k = case_of(core_config());
  StepPlan again;
  again.tokens = {2};
  again.resets = {ResetPlan{0, int64_t{1} << 20, 1}};
  k.steps.push_back(again);
  const std::string gap = capability_gap(caps, k);
  EXPECT_NE(gap.find("positions up to 1048607 > max_position 1048576"), std::string::npos) << gap;
}

TEST(CapabilityGap, HeadDims) {
  Capabilities caps;
  caps.head_dims = {64, 128};
  Config c = core_config();
  EXPECT_EQ(capability_gap(caps, c), "");
  c.head_dim = 32;
  expect_gap(caps, c, {"head_dim 32 (supports 64, 128)"});
}

TEST(CapabilityGap, DTypes) {
  Capabilities caps;
  caps.k_dtypes = {DType::f32};
  caps.v_dtypes = {DType::f32, DType::f16};
  Config c = core_config();
  c.k_format.dtype = DType::f16;
  expect_gap(caps, c, {"K dtype f16", "supports f32"});
  c.k_format.dtype = DType::f32;
  c.v_format.dtype = DType::f16;
  EXPECT_EQ(capability_gap(caps, c), "");
  c.v_format.dtype = DType::bf16;
  expect_gap(caps, c, {"V dtype bf16", "supports f32, f16"});
}

// An engine that stores bf16 whatever it is given, and says so, runs f32-storage cases (the bound takes
// the declared storage); not f16 ones, which it would store coarser than the case asks.
TEST(CapabilityGap, DeclaredFixedStorageRunsF32CasesOnly) {
  Capabilities caps;
  caps.k_dtypes = caps.v_dtypes = {DType::bf16};
  Config c = core_config();
  expect_gap(caps, c, {"K dtype f32", "V dtype f32"});
  caps.k_storage = caps.v_storage = Precision::bf16;
  EXPECT_EQ(capability_gap(caps, c), "");
  c.k_format.dtype = c.v_format.dtype = DType::bf16;
  EXPECT_EQ(capability_gap(caps, c), "");
  c.k_format.dtype = DType::f16;
  expect_gap(caps, c, {"K dtype f16"});
}

TEST(CapabilityGap, KvFormatsDiffer) {
  Capabilities caps;
  caps.kv_formats_differ = false;
  Config c = core_config();
  EXPECT_EQ(capability_gap(caps, c), "");
  c.v_format.dtype = DType::f16;
  expect_gap(caps, c, {"K and V in different formats"});
  caps.kv_formats_differ = true;
  EXPECT_EQ(capability_gap(caps, c), "");
}

TEST(CapabilityGap, MaxTokensSinksSinkLogitsSoftcapRope) {
  Capabilities caps = core_capabilities();
  caps.max_tokens = 16;
  Config c = core_config();
  expect_gap(caps, c, {"max_tokens 32 > max_tokens 16"});
  caps.max_tokens = 32;
  c.layers[0].sinks = 2;
  expect_gap(caps, c, {"sink tokens"});
  c.layers[0].sinks = 0;
  c.sink_logits = {{0.5f, 0.5f}};
  expect_gap(caps, c, {"sink logits"});
  c.sink_logits.clear();
  c.softcap = 30.0;
  expect_gap(caps, c, {"softcap"});
  c.softcap.reset();
  c.layers[0].rope.style = RopeStyle::gptj;
  expect_gap(caps, c, {"rope style gptj"});
  c.layers[0].rope.style = RopeStyle::neox;
  c.layers[0].rope.scaling = RopeScaling::linear;
  c.layers[0].rope.factor = 2.0;
  expect_gap(caps, c, {"rope scaling linear"});
}

// ---------------------------------------------------------------- the capabilities file

// A whole precision profile (profile_from_json requires every field), with `storage` for K and V.
json profile_json(const char* storage) {
  return {{"q_dot", "bf16"}, {"k_storage", storage}, {"v_storage", storage}, {"accumulator", "f32"},
          {"p_before_pv", "bf16"}, {"output", "bf16"}, {"rope_angle", "f32"}};
}

std::string error_of(const json& j) {
  try {
    capabilities_from_json(j, "caps.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CapabilitiesFile, EveryFieldIsRead) {
  const json j = json::parse(R"({
    "format": "ringkv-capabilities", "name": "kernels-0.1",
    "k_dtypes": ["bf16", "f16"], "v_dtypes": ["bf16"], "int8_schemes": ["q8_0"], "int8_roundings": ["away"],
    "rope_styles": ["neox", "gptj"], "rope_scalings": ["none", "ntk"], "head_dims": [64, 128, 256],
    "sinks": false, "sink_logits": true, "softcap": false, "per_layer_rope": false, "partial_rotary": true,
    "settable_p0": false, "max_layers": 7, "max_batch": 2, "max_sliding_windows": 3, "min_window": 2,
    "max_window": 4096, "max_tokens": 65536, "max_position": 1048576, "k_storage": "bf16", "v_storage": "f16",
    "kv_formats_differ": false})");
  const CapabilitiesFile f = capabilities_from_json(j, "caps.json");
  const Capabilities& c = f.capabilities;
  EXPECT_EQ(f.name, "kernels-0.1");
  EXPECT_EQ(c.k_dtypes, (std::vector<DType>{DType::bf16, DType::f16}));
  EXPECT_EQ(c.v_dtypes, std::vector<DType>{DType::bf16});
  EXPECT_EQ(c.int8_schemes, std::vector<Int8Scheme>{Int8Scheme::q8_0});
  EXPECT_EQ(c.int8_roundings, std::vector<Rounding>{Rounding::half_away});
  EXPECT_EQ(c.rope_styles, (std::vector<RopeStyle>{RopeStyle::neox, RopeStyle::gptj}));
  EXPECT_EQ(c.rope_scalings, (std::vector<RopeScaling>{RopeScaling::none, RopeScaling::ntk}));
  EXPECT_EQ(c.head_dims, (std::vector<int>{64, 128, 256}));
  EXPECT_FALSE(c.sinks);
  EXPECT_TRUE(c.sink_logits);
  EXPECT_FALSE(c.softcap);
  EXPECT_FALSE(c.per_layer_rope);
  EXPECT_TRUE(c.partial_rotary);
  EXPECT_FALSE(c.settable_p0);
  EXPECT_EQ(c.max_layers, 7);
  EXPECT_EQ(c.max_batch, 2);
  EXPECT_EQ(c.max_sliding_windows, 3);
  EXPECT_EQ(c.min_window, 2);
  EXPECT_EQ(c.max_window, 4096);
  EXPECT_EQ(c.max_tokens, 65536);
  EXPECT_EQ(c.max_position, 1048576);
  EXPECT_EQ(c.k_storage, Precision::bf16);
  EXPECT_EQ(c.v_storage, Precision::f16);
  EXPECT_FALSE(c.kv_formats_differ);
  EXPECT_FALSE(f.profile.has_value());
}

TEST(CapabilitiesFile, LevelCoreIsTheStartingPointAndFieldsReplaceIt) {
  const CapabilitiesFile core = capabilities_from_json(json{{"level", "core"}}, "caps.json");
  EXPECT_EQ(capabilities_to_json(core.capabilities), capabilities_to_json(core_capabilities()));
  const CapabilitiesFile bf16 =
      capabilities_from_json(json{{"level", "core"}, {"k_dtypes", {"bf16"}}, {"head_dims", {64, 128}}}, "caps.json");
  Capabilities want = core_capabilities();
  want.k_dtypes = {DType::bf16};
  want.head_dims = {64, 128};
  EXPECT_EQ(capabilities_to_json(bf16.capabilities), capabilities_to_json(want));
  const CapabilitiesFile full = capabilities_from_json(json::object(), "caps.json");  // default: everything
  EXPECT_EQ(capabilities_to_json(full.capabilities), capabilities_to_json(Capabilities{}));
  EXPECT_EQ(full.name, "caps.json");
}

TEST(CapabilitiesFile, BadInputNamesTheFieldAndTheAllowedValues) {
  struct Bad {
    json j;
    std::vector<std::string> want;
  };
  const std::vector<Bad> bad{
      {{{"bogus", 1}}, {"capabilities.bogus", "unknown field", "max_sliding_windows"}},
      {{{"format", "ringkv-outputs"}}, {"capabilities.format", "ringkv-capabilities"}},
      {{{"level", "extended"}}, {"capabilities.level", "\"core\" or \"full\""}},
      {{{"level", 1}}, {"capabilities.level", "\"core\" or \"full\""}},
      {{{"max_batch", "one"}}, {"capabilities.max_batch", "integer in [1, 1048576]"}},
      {{{"max_batch", 0}}, {"capabilities.max_batch", "integer in [1, 1048576]"}},
      {{{"max_layers", 2000}}, {"capabilities.max_layers", "[1, 1024]"}},
      {{{"max_sliding_windows", 0}}, {"capabilities.max_sliding_windows", "[1, "}},
      {{{"min_window", 0}}, {"capabilities.min_window", "[1, 2147483647]"}},
      {{{"max_window", -3}}, {"capabilities.max_window", "[1, 2147483647]"}},
      {{{"max_tokens", 1.5}}, {"capabilities.max_tokens", "integer"}},
      {{{"max_position", int64_t{1} << 31}}, {"capabilities.max_position", "[0, 2147483647]"}},
      {{{"min_window", 8}, {"max_window", 4}}, {"capabilities.min_window", "max_window 4"}},
      {{{"sinks", 1}}, {"capabilities.sinks", "true or false"}},
      {{{"settable_p0", "yes"}}, {"capabilities.settable_p0", "true or false"}},
      {{{"per_layer_rope", nullptr}}, {"capabilities.per_layer_rope", "true or false"}},
      {{{"partial_rotary", 0}}, {"capabilities.partial_rotary", "true or false"}},
      {{{"kv_formats_differ", "no"}}, {"capabilities.kv_formats_differ", "true or false"}},
      {{{"k_dtypes", "f32"}}, {"capabilities.k_dtypes", "array"}},
      {{{"v_dtypes", {"f64"}}}, {"capabilities.v_dtypes[0]", "f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8"}},
      {{{"int8_roundings", {"stochastic"}}}, {"capabilities.int8_roundings[0]", "rne, away"}},
      {{{"int8_schemes", {1}}}, {"capabilities.int8_schemes[0]", "per_head"}},
      {{{"rope_styles", {"yarn"}}}, {"capabilities.rope_styles[0]", "none, neox, gptj"}},
      {{{"rope_scalings", {"yarn"}}}, {"capabilities.rope_scalings[0]", "none, linear, ntk"}},
      {{{"head_dims", {64, 2048}}}, {"capabilities.head_dims[1]", "[1, 1024]"}},
      {{{"head_dims", 64}}, {"capabilities.head_dims", "array"}},
      {{{"k_storage", "as_configured"}}, {"capabilities.k_storage", "f32, f16, bf16"}},
      {{{"v_storage", 3}}, {"capabilities.v_storage", "f32, f16, bf16"}},
      {{{"name", 3}}, {"capabilities.name", "string"}},
      {{{"profile", [] { json p = profile_json("bf16"); p["q_dot"] = "f7"; return p; }()}}, {"capabilities.profile.q_dot"}},
  };
  for (const Bad& b : bad) {
    const std::string e = error_of(b.j);
    ASSERT_FALSE(e.empty()) << b.j.dump() << " was accepted";
    EXPECT_EQ(e.rfind("caps.json: ", 0), 0u) << e;
    for (const std::string& w : b.want) EXPECT_NE(e.find(w), std::string::npos) << b.j.dump() << ": \"" << e << "\" lacks \"" << w << "\"";
  }
  EXPECT_NE(error_of(json::array()).find("must be a JSON object"), std::string::npos);
}

// Every field differs from the default, so a field capabilities_to_json forgot or misnamed shows.
TEST(CapabilitiesFile, RoundTripGivesEqualFields) {
  Capabilities c;
  c.k_dtypes = {DType::bf16, DType::int8};
  c.v_dtypes = {DType::f16};
  c.int8_schemes = {Int8Scheme::static_tensor};
  c.int8_roundings = {Rounding::half_away};
  c.rope_styles = {RopeStyle::gptj};
  c.rope_scalings = {RopeScaling::linear, RopeScaling::none};
  c.head_dims = {80, 96};
  c.sinks = c.sink_logits = c.softcap = false;
  c.per_layer_rope = c.partial_rotary = c.settable_p0 = c.kv_formats_differ = false;
  c.max_layers = 3;
  c.max_batch = 4;
  c.max_sliding_windows = 2;
  c.min_window = 3;
  c.max_window = 99;
  c.max_tokens = 1000;
  c.max_position = 123456;
  c.k_storage = Precision::bf16;
  c.v_storage = Precision::f16;
  for (const Capabilities& in : {c, Capabilities{}, core_capabilities({DType::bf16})}) {
    const json j = capabilities_to_json(in);
    const Capabilities out = capabilities_from_json(j, "round trip").capabilities;
    EXPECT_EQ(out.k_dtypes, in.k_dtypes);
    EXPECT_EQ(out.v_dtypes, in.v_dtypes);
    EXPECT_EQ(out.int8_schemes, in.int8_schemes);
    EXPECT_EQ(out.int8_roundings, in.int8_roundings);
    EXPECT_EQ(out.rope_styles, in.rope_styles);
    EXPECT_EQ(out.rope_scalings, in.rope_scalings);
    EXPECT_EQ(out.head_dims, in.head_dims);
    EXPECT_EQ(out.sinks, in.sinks);
    EXPECT_EQ(out.sink_logits, in.sink_logits);
    EXPECT_EQ(out.softcap, in.softcap);
    EXPECT_EQ(out.per_layer_rope, in.per_layer_rope);
    EXPECT_EQ(out.partial_rotary, in.partial_rotary);
    EXPECT_EQ(out.settable_p0, in.settable_p0);
    EXPECT_EQ(out.max_layers, in.max_layers);
    EXPECT_EQ(out.max_batch, in.max_batch);
    EXPECT_EQ(out.max_sliding_windows, in.max_sliding_windows);
    EXPECT_EQ(out.min_window, in.min_window);
    EXPECT_EQ(out.max_window, in.max_window);
    EXPECT_EQ(out.max_tokens, in.max_tokens);
    EXPECT_EQ(out.max_position, in.max_position);
    EXPECT_EQ(out.k_storage, in.k_storage);
    EXPECT_EQ(out.v_storage, in.v_storage);
    EXPECT_EQ(out.kv_formats_differ, in.kv_formats_differ);
    EXPECT_EQ(capabilities_to_json(out), j);
  }
}

TEST(CapabilitiesFile, TheProfileIsReadAndItsFixedStorageIsTheCapability) {
  const json j = {{"level", "core"},
                  {"k_dtypes", {"bf16"}},
                  {"v_dtypes", {"bf16"}},
                  {"profile", profile_json("bf16")}};
  const CapabilitiesFile f = capabilities_from_json(j, "caps.json");
  ASSERT_TRUE(f.profile.has_value());
  EXPECT_EQ(f.profile->q_dot, Precision::bf16);
  EXPECT_EQ(f.profile->k_storage, Precision::bf16);
  EXPECT_EQ(f.capabilities.k_storage, Precision::bf16);
  EXPECT_EQ(f.capabilities.v_storage, Precision::bf16);
  EXPECT_EQ(capability_gap(f.capabilities, core_config()), "") << "an f32 case with declared bf16 storage";
  // A profile storing as configured fixes nothing: the engine then runs only its dtypes.
  const json k = {{"k_dtypes", {"bf16"}}, {"profile", profile_json("as_configured")}};
  const CapabilitiesFile g = capabilities_from_json(k, "caps.json");
  EXPECT_FALSE(g.capabilities.k_storage.has_value());
  EXPECT_NE(capability_gap(g.capabilities, core_config()).find("K dtype f32"), std::string::npos);
  // An explicit k_storage wins over the profile's.
  const json both = {{"k_storage", "f16"}, {"profile", profile_json("bf16")}};
  EXPECT_EQ(capabilities_from_json(both, "caps.json").capabilities.k_storage, Precision::f16);
}

// ---------------------------------------------------------------- the generators stay inside

struct NamedCaps {
  std::string name;
  Capabilities caps;
};

std::vector<NamedCaps> generator_capability_sets() {
  std::vector<NamedCaps> sets;
  sets.push_back({"core f32", core_capabilities({DType::f32})});
  Capabilities bf16 = core_capabilities({DType::bf16});
  bf16.head_dims = {64, 128};
  bf16.k_storage = bf16.v_storage = Precision::bf16;
  sets.push_back({"core bf16, head dims 64 and 128, bf16 storage", bf16});
  // Everything, but for one change.
  const auto but = [&sets](const std::string& name, void (*change)(Capabilities&)) {
    Capabilities c;
    change(c);
    sets.push_back({name, c});
  };
  but("max_batch 1", [](Capabilities& c) { c.max_batch = 1; });
  but("min_window 2", [](Capabilities& c) { c.min_window = 2; });
  but("settable_p0 false", [](Capabilities& c) { c.settable_p0 = false; });
  but("max_position 2^20", [](Capabilities& c) { c.max_position = int64_t{1} << 20; });
  but("max_position 40", [](Capabilities& c) { c.max_position = 40; });
  but("max_sliding_windows 1, max_layers 3", [](Capabilities& c) { c.max_sliding_windows = 1, c.max_layers = 3; });
  but("max_sliding_windows 2, max_layers 3", [](Capabilities& c) { c.max_sliding_windows = 2, c.max_layers = 3; });
  but("per_layer_rope false", [](Capabilities& c) { c.per_layer_rope = false; });
  but("partial_rotary false (an odd head dim too)", [](Capabilities& c) {
    c.partial_rotary = false;
    c.head_dims = {63, 64, 80};
  });
  but("int8 with half_away only", [](Capabilities& c) {
    c.k_dtypes = c.v_dtypes = {DType::f32, DType::int8};
    c.int8_roundings = {Rounding::half_away};
  });
  but("kv_formats_differ false", [](Capabilities& c) { c.kv_formats_differ = false; });
  but("min_window 100 (above the generators' usual W)", [](Capabilities& c) { c.min_window = 100, c.max_window = 128; });
  return sets;
}

TEST(Generators, GenCaseStaysInsideTheCapabilities) {
  for (const NamedCaps& s : generator_capability_sets()) {
    const Capabilities caps = s.caps;
    const bool ok = rc::check("gen_case within " + s.name, [caps] {
      const Case c = *gen_case(caps);
      RC_ASSERT(capability_gap(caps, c) == std::string());
      std::string invalid;
      try {
        validate(c.config);
      } catch (const ConfigError& e) {
        invalid = e.what();
      }
      RC_ASSERT(invalid == std::string());
    });
    EXPECT_TRUE(ok) << s.name;
    // And 2000 fixed seeds at every size, for the rarer shapes (three layers, two resets, ...).
    for (uint64_t seed = 0; seed < 2000; ++seed) {
      const Case c = gen_case(caps)(rc::Random(seed), static_cast<int>(seed % 100)).value();
      const std::string gap = capability_gap(caps, c);
      ASSERT_EQ(gap, "") << s.name << ", seed " << seed << ": " << c.id();
    }
  }
}

}  // namespace
}  // namespace ringkv::conformance
