// The C ABI end to end: plugins loaded in a worker process and driven by the
// same properties as the in-process engines.
//
//  - the reference plugin passes every property on fixed cases and gives the
//    in-process reference's bits;
//  - every mutant plugin is killed, by the same property on the same case as
//    in process, and the controls pass;
//  - a plugin that crashes, aborts, hangs or writes out of bounds fails that
//    case with a message saying so, and the next case runs in a fresh worker;
//  - a bad ABI version is refused naming both versions;
//  - the window-left, rotated-q/k and C skeleton plugins pass;
//  - ABI 1.3: spec 1.1 rollback schedules run through the reference plugin exactly as in process
//    (outputs, refusals and their messages, snapshots), an ABI 1.2 plugin is never sent a rollback
//    or a reserve and is judged on the rest, and a reserve beyond the declared one is refused.
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "capabilities_check.hpp"
#include "golden/golden.hpp"
#include "mutants/mutants.hpp"
#include "plugin_engine.hpp"
#include "property/properties.hpp"
#include "ringkv/error.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/capabilities.hpp"
#include "support/rng.hpp"
#include "support/config_json.hpp"
#include "support/runner.hpp"

namespace ringkv::abi {
namespace {

using conformance::Case;
using conformance::PropertyInfo;
using conformance::all_properties;

constexpr int kCases = 10;  // fixed cases per property for the plugins that must pass

std::string plugin_path(const std::string& name) {
  return std::string(RINGKV_PLUGIN_DIR) + "/libringkv_plugin_" + name + ".so";
}

PluginOptions options(int timeout_ms = 10000) {
  PluginOptions o;
  o.worker_path = RINGKV_TEST_WORKER;
  o.timeout_ms = timeout_ms;
  return o;
}

using conformance::fixed_case;
using conformance::PropertyVerdict;

PropertyVerdict run_one(const PropertyInfo& p, const EngineFactory& f, const Case& c) {
  return conformance::run_property_once(p, f, c);
}

struct Kill {
  std::string property;
  int case_index = 0;
  std::string case_id, message;
};

// Case by case, every property in turn (those the filter keeps), until one fails.
template <typename Keep>
std::optional<Kill> hunt(const EngineFactory& f, const Capabilities& caps, int cases, Keep keep) {
  const auto& props = all_properties();
  for (int i = 0; i < cases; ++i) {
    for (size_t k = 0; k < props.size(); ++k) {
      if (!keep(props[k])) continue;
      const Case c = fixed_case(caps, props[k], k, i);
      const PropertyVerdict v = run_one(props[k], f, c);
      if (v.failed) return Kill{props[k].name, i, c.id(), v.message};
    }
  }
  return std::nullopt;
}
std::optional<Kill> hunt(const EngineFactory& f, int cases) {
  return hunt(f, ReferenceEngine::capabilities(), cases, [](const PropertyInfo&) { return true; });
}

const std::shared_ptr<Plugin>& reference_plugin() {
  static const std::shared_ptr<Plugin> p = Plugin::open(plugin_path("reference"), options());
  return p;
}

// A small case with enough steps to reach step 3; max_tokens 613 arms the fault plugins.
Case small_case(int64_t max_tokens) {
  Case c;
  c.config.layers = {LayerConfig{4, 1, RopeConfig{}}};
  c.config.num_q_heads = 2;
  c.config.num_kv_heads = 1;
  c.config.head_dim = 8;
  c.config.batch = 2;
  c.config.max_tokens = max_tokens;
  c.config.k_format.dtype = DType::f16;
  for (int s = 0; s < 6; ++s) c.steps.push_back(conformance::StepPlan{{}, {2, s % 2 == 0 ? 1 : 0}});
  c.seed = 77;
  return c;
}

// ---------------------------------------------------------------- the header and loading

TEST(EngineAbi, HeaderLayoutIsPinned) {
  static_assert(sizeof(ringkv_capabilities) == 392);
  static_assert(offsetof(ringkv_capabilities, max_rollback_reserve) == 376);  // ABI 1.3: after the 1.2 sizeof
  static_assert(offsetof(ringkv_capabilities, rollback) == 384);
  static_assert(offsetof(ringkv_batch, num_rollbacks) == 32);  // ABI 1.3: after the 1.2 sizeof
  static_assert(sizeof(ringkv_batch) == 48);
  static_assert(sizeof(ringkv_rollback) == 16);
  static_assert(offsetof(ringkv_capabilities, max_sliding_windows) == 332);  // ABI 1.2: after every 1.1 field
  static_assert(offsetof(ringkv_capabilities, precision2) == 312);  // ABI 1.1: after every 1.0 field
  static_assert(offsetof(ringkv_engine_info, precision2) == 104);
  static_assert(sizeof(ringkv_append) == 400);
  static_assert(sizeof(ringkv_tensor) == 96);
  static_assert(sizeof(ringkv_snapshot_result) == 80);
  static_assert(RINGKV_ABI_VERSION_GET_MAJOR(RINGKV_ABI_VERSION) == 1);
  EXPECT_STREQ(RINGKV_ENGINE_API_SYMBOL, "ringkv_engine_api_get");
}

// ABI 1.1 precision profile 2: a 1.0 plugin leaves precision2 as the host zeroed it, which means
// both accumulators are `accumulator` and q is not quantised; a 1.1 plugin splits them.
TEST(EngineAbi, PrecisionProfile2ReadsOldPluginsAsOneAccumulator) {
  Config c;
  c.k_format.dtype = DType::int8;
  ringkv_precision_profile p{};
  p.struct_size = sizeof p;
  p.q_dot = RINGKV_PRECISION_F16;
  p.k_storage = RINGKV_PRECISION_AS_CONFIGURED;
  p.v_storage = RINGKV_PRECISION_AS_CONFIGURED;
  p.accumulator = RINGKV_PRECISION_F16;
  p.p_before_pv = RINGKV_PRECISION_F16;
  p.output = RINGKV_PRECISION_F32;
  p.rope_angle = RINGKV_PRECISION_F64;
  ringkv_precision_profile2 p2{};  // a 1.0 plugin: as the host zeroed it
  const PrecisionProfile old = map_profile(p, p2, c);
  EXPECT_EQ(old.qk_accumulator, Precision::f16);
  EXPECT_EQ(old.pv_accumulator, Precision::f16);
  EXPECT_EQ(old.q_quant, QueryQuant::none);
  EXPECT_EQ(old.k_storage, Precision::int8);
  p2.split_accumulators = 1;
  p2.qk_accumulator = RINGKV_PRECISION_F32;
  p2.pv_accumulator = RINGKV_PRECISION_F16;
  p2.q_quant = RINGKV_Q_QUANT_Q8_0;
  const PrecisionProfile split = map_profile(p, p2, c);
  EXPECT_EQ(split.qk_accumulator, Precision::f32);
  EXPECT_EQ(split.pv_accumulator, Precision::f16);
  EXPECT_EQ(split.q_quant, QueryQuant::q8_0);
  p2.q_quant = 7;
  try {
    map_profile(p, p2, c);
    ADD_FAILURE() << "q_quant = 7 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("precision2.q_quant = 7"), std::string::npos) << e.what();
  }
}

// Through the worker: a control declaring f16-pv-accumulation reports its split accumulators, and
// an ABI 1.0 host (an info struct that ends before precision2) still gets its 1.0 fields, with the
// coarser accumulator in `accumulator`.
TEST(EngineAbi, PrecisionProfile2CrossesTheAbi) {
  const EngineFactory f = plugin_engine_factory(plugin_path("mutant_f16pv_engine"), options());
  const auto e = f.create(small_case(16).config);
  const PrecisionProfile got = e->info().precision;
  EXPECT_EQ(got.qk_accumulator, Precision::f32);
  EXPECT_EQ(got.pv_accumulator, Precision::f16);
  EXPECT_EQ(got.q_dot, Precision::f16);
  const EngineFactory q8 = plugin_engine_factory(plugin_path("mutant_q8_0dot_engine"), options());
  EXPECT_EQ(q8.create(small_case(16).config)->info().precision.q_quant, QueryQuant::q8_0);

  void* lib = dlopen(plugin_path("mutant_f16pv_engine").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  const auto get = reinterpret_cast<const ringkv_engine_api* (*)(uint32_t)>(dlsym(lib, RINGKV_ENGINE_API_SYMBOL));
  ASSERT_NE(get, nullptr);
  const ringkv_engine_api& api = *get(RINGKV_ABI_VERSION_MAJOR);
  const std::string json = conformance::config_to_json(small_case(16).config).dump();
  ringkv_engine* h = nullptr;
  char err[256] = {};
  ASSERT_EQ(api.create(json.c_str(), json.size(), &h, err, sizeof err), RINGKV_OK) << err;
  ringkv_engine_info info;
  std::memset(&info, 0xAB, sizeof info);
  info.struct_size = offsetof(ringkv_engine_info, precision2);  // an ABI 1.0 host
  ASSERT_EQ(api.get_info(h, &info), RINGKV_OK) << api.last_error(h);
  EXPECT_EQ(info.struct_size, offsetof(ringkv_engine_info, precision2));
  EXPECT_EQ(info.precision.accumulator, RINGKV_PRECISION_F16);
  EXPECT_EQ(info.precision2.struct_size, 0xABABABABu) << "wrote past the 1.0 struct";
  api.destroy(h);
  dlclose(lib);
}

TEST(EngineAbi, ReferencePluginDeclaresTheReferenceCapabilities) {
  const Capabilities& got = reference_plugin()->capabilities();
  const Capabilities want = ReferenceEngine::capabilities();
  EXPECT_EQ(got.k_dtypes, want.k_dtypes);
  EXPECT_EQ(got.v_dtypes, want.v_dtypes);
  EXPECT_EQ(got.int8_schemes, want.int8_schemes);
  EXPECT_EQ(got.rope_styles, want.rope_styles);
  EXPECT_EQ(got.rope_scalings, want.rope_scalings);
  EXPECT_EQ(got.head_dims, want.head_dims);
  EXPECT_EQ(got.sinks, want.sinks);
  EXPECT_EQ(got.sink_logits, want.sink_logits);
  EXPECT_EQ(got.softcap, want.softcap);
  EXPECT_EQ(got.max_layers, want.max_layers);
  EXPECT_EQ(got.max_batch, want.max_batch);
  EXPECT_EQ(got.int8_roundings, want.int8_roundings);
  EXPECT_EQ(got.max_sliding_windows, want.max_sliding_windows);
  EXPECT_EQ(got.per_layer_rope, want.per_layer_rope);
  EXPECT_EQ(got.partial_rotary, want.partial_rotary);
  EXPECT_EQ(got.settable_p0, want.settable_p0);
  EXPECT_EQ(got.min_window, want.min_window);
  EXPECT_EQ(got.kv_formats_differ, want.kv_formats_differ);
  EXPECT_EQ(got.max_position, want.max_position);
  EXPECT_EQ(got.k_storage, want.k_storage);
  EXPECT_EQ(got.v_storage, want.v_storage);
  EXPECT_TRUE(got.snapshot);
  EXPECT_EQ(got.max_window, want.max_window);
  EXPECT_EQ(got.max_tokens, want.max_tokens);
  EXPECT_TRUE(want.rollback);  // ABI 1.3: the reference's spec 1.1 rollback crosses the ABI
  EXPECT_EQ(got.rollback, want.rollback);
  EXPECT_EQ(got.max_rollback_reserve, want.max_rollback_reserve);
  EXPECT_EQ(reference_plugin()->raw_capabilities().rollback, 1);
  EXPECT_STREQ(reference_plugin()->raw_capabilities().name, "reference");
  EXPECT_EQ(reference_plugin()->abi_version(), RINGKV_ABI_VERSION);
  const EngineFactory f = plugin_engine_factory(reference_plugin());
  const auto e = f.create(small_case(16).config);
  EXPECT_EQ(e->info().name, "plugin:reference");
  EXPECT_TRUE(e->info().deterministic);
  EXPECT_EQ(e->info().precision, make_reference_engine(small_case(16).config)->info().precision);
}

TEST(EngineAbi, BadAbiVersionIsRefusedNamingBothVersions) {
  try {
    Plugin::open(plugin_path("bad_version"), options());
    FAIL() << "a plugin with ABI major 99 was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    std::printf("[bad_version] %s\n", m.c_str());
    EXPECT_NE(m.find("implements ringkv engine ABI 99.0"), std::string::npos) << m;
    EXPECT_NE(m.find("this ringkv speaks ABI 1.3"), std::string::npos) << m;
    EXPECT_NE(m.find("libringkv_plugin_bad_version.so"), std::string::npos) << m;
  }
}

TEST(EngineAbi, MissingPluginAndMissingWorkerAreClearErrors) {
  try {
    Plugin::open(plugin_path("does_not_exist"), options());
    FAIL() << "loaded a plugin that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load plugin"), std::string::npos) << e.what();
  }
  PluginOptions o = options();
  o.worker_path = "/nonexistent/ringkv_plugin_worker";
  try {
    Plugin::open(plugin_path("reference"), o);
    FAIL() << "started a worker that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker executable"), std::string::npos) << e.what();
  }
}

TEST(EngineAbi, ConfigErrorsCrossAsConfigErrorAndTheWorkerStays) {
  const EngineFactory f = plugin_engine_factory(reference_plugin());
  Config bad = small_case(16).config;
  bad.k_format.dtype = DType::int8;
  bad.k_format.int8_scheme = Int8Scheme::q8_0;  // needs head_dim % 32 == 0
  EXPECT_THROW(f.create(bad), ConfigError);
  const int started = reference_plugin()->workers_started();
  const auto e = f.create(small_case(16).config);
  std::vector<float> q(16, 0.5f), k(8, 0.25f), v(8, 1.0f), out(16);
  const SequenceStep bad_seq{5, 1, q.data(), k.data(), v.data(), out.data()};
  try {
    e->step(StepBatch{{}, std::span<const SequenceStep>(&bad_seq, 1)});
    FAIL() << "sequence 5 of a batch of 2 was accepted";
  } catch (const StepError& ex) {
    EXPECT_NE(std::string(ex.what()).find("sequence"), std::string::npos) << ex.what();
  }
  EXPECT_EQ(reference_plugin()->workers_started(), started);
  EXPECT_THROW(e->snapshot(3, 0), StepError);
}

// ---------------------------------------------------------------- the reference plugin

class ReferencePluginProperty : public ::testing::TestWithParam<size_t> {};

TEST_P(ReferencePluginProperty, PassesTheFixedCases) {
  const PropertyInfo& p = all_properties()[GetParam()];
  const EngineFactory f = plugin_engine_factory(reference_plugin());
  for (int i = 0; i < kCases; ++i) {
    const Case c = fixed_case(f.capabilities, p, GetParam(), i);
    const PropertyVerdict v = run_one(p, f, c);
    ASSERT_FALSE(v.failed) << p.name << " failed on case " << i << ": " << c.id() << "\n" << v.message.substr(0, 3000);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ReferencePluginProperty, ::testing::Range<size_t>(0, all_properties().size()),
                         [](const ::testing::TestParamInfo<size_t>& p) { return std::string(all_properties()[p.param].name); });

TEST(ReferencePlugin, BitIdenticalToTheInProcessReference) {
  const EngineFactory plugin = plugin_engine_factory(reference_plugin());
  const EngineFactory local = reference_engine_factory();
  const auto& props = all_properties();
  int compared = 0;
  for (int i = 0; i < 6; ++i) {
    const Case c = fixed_case(local.capabilities, props[0], 0, i);
    conformance::RunOptions o;
    o.check_ring = true;  // the snapshots, rebuilt from positions, match the spec ring exactly too
    const conformance::RunResult a = conformance::run_case(local, c, o), b = conformance::run_case(plugin, c, o);
    ASSERT_TRUE(a.ok()) << a.failure;
    ASSERT_TRUE(b.ok()) << c.id() << ": " << b.failure;
    conformance::CompareOptions cmp;
    cmp.bitwise = true;
    EXPECT_EQ(conformance::compare_runs(a, b, c.config, cmp), "") << c.id();
    EXPECT_EQ(a.tokens.size(), b.tokens.size());
    EXPECT_EQ(a.cache_bytes_final, b.cache_bytes_final);
    compared += static_cast<int>(b.tokens.size());
  }
  EXPECT_GT(compared, 0);
}

TEST(ReferencePlugin, SnapshotsAgreeWithTheInProcessEngineIncludingInt8) {
  Case c = small_case(40);
  c.config.k_format = KvFormat{DType::int8, Int8Scheme::per_head, Rounding::nearest_even, 1.0f};
  c.config.v_format = KvFormat{DType::int8, Int8Scheme::static_tensor, Rounding::half_away, 0.01f};
  const auto remote = plugin_engine_factory(reference_plugin()).create(c.config);
  const auto local = make_reference_engine(c.config);
  std::vector<float> q(2 * 2 * 8), k(2 * 8), v(2 * 8), out(q.size());
  for (int t = 0; t < 9; ++t) {
    conformance::fill_chunk(c, conformance::Tensor::q, 0, 2 * t, 2, q.data());
    conformance::fill_chunk(c, conformance::Tensor::k, 0, 2 * t, 2, k.data());
    conformance::fill_chunk(c, conformance::Tensor::v, 0, 2 * t, 2, v.data());
    const SequenceStep s{0, 2, q.data(), k.data(), v.data(), out.data()};
    remote->step(StepBatch{{}, std::span<const SequenceStep>(&s, 1)});
    local->step(StepBatch{{}, std::span<const SequenceStep>(&s, 1)});
    for (int seq = 0; seq < 2; ++seq) {
      const CacheSnapshot a = *local->snapshot(0, seq), b = *remote->snapshot(0, seq);
      ASSERT_EQ(a.capacity, b.capacity);
      EXPECT_EQ(a.positions, b.positions) << "after step " << t;
      for (size_t slot = 0; slot < a.positions.size(); ++slot) {
        if (a.positions[slot] < 0) continue;
        const size_t row = 8;
        for (size_t e = slot * row; e < (slot + 1) * row; ++e) {
          EXPECT_EQ(std::memcmp(&a.k[e], &b.k[e], 4), 0);
          EXPECT_EQ(std::memcmp(&a.v[e], &b.v[e], 4), 0);
          EXPECT_EQ(a.k_codes[e], b.k_codes[e]);
          EXPECT_EQ(a.v_codes[e], b.v_codes[e]);
        }
        EXPECT_EQ(a.k_scales[slot], b.k_scales[slot]);
      }
      EXPECT_TRUE(b.v_scales.empty());  // static_tensor: no per-row scales
    }
  }
  EXPECT_EQ(remote->cache_bytes(), local->cache_bytes());
  // A reset through the ABI: the sequence starts empty at its new position.
  remote->reset(0, 1000);
  local->reset(0, 1000);
  EXPECT_EQ(remote->snapshot(0, 0)->positions, local->snapshot(0, 0)->positions);
}

// ---------------------------------------------------------------- mutants

}  // namespace
}  // namespace ringkv::abi

namespace ringkv::conformance {
// gtest prints a parameter with this instead of its bytes.
void PrintTo(const MutantInfo& m, std::ostream* os) { *os << m.name; }
}  // namespace ringkv::conformance

namespace ringkv::abi {
namespace {

class MutantPlugin : public ::testing::TestWithParam<conformance::MutantInfo> {};

TEST_P(MutantPlugin, IsKilledLikeInProcess) {
  const conformance::MutantInfo& m = GetParam();
  const std::string path = plugin_path(std::string("mutant_") + m.name);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << "no plugin for mutant " << m.name << " at " << path
                                         << " (abi/CMakeLists.txt reads the names from mutants.cpp)";
  const EngineFactory f = plugin_engine_factory(path, options());
  if (m.must_pass) {  // on cases inside what it declares (the core controls declare less than the reference)
    const std::optional<Kill> kill = hunt(f, f.capabilities, kCases, [](const PropertyInfo&) { return true; });
    ASSERT_FALSE(kill.has_value()) << m.name << " must pass but failed " << kill->property << " on case "
                                   << kill->case_index << ": " << kill->message.substr(0, 2000);
    return;
  }
  const std::optional<Kill> local = hunt(m.factory, 100);
  ASSERT_TRUE(local.has_value()) << "in process, mutant " << m.name << " survives";
  const std::optional<Kill> kill = hunt(f, local->case_index + 1);
  ASSERT_TRUE(kill.has_value()) << "mutant plugin " << m.name << " (" << m.bug << ") survived";
  EXPECT_EQ(kill->property, local->property) << m.name;
  EXPECT_EQ(kill->case_index, local->case_index) << m.name;
  std::printf("[killed] plugin %-24s by %-20s at case %d\n", m.name, kill->property.c_str(), kill->case_index);
}

INSTANTIATE_TEST_SUITE_P(All, MutantPlugin, ::testing::ValuesIn(conformance::all_mutants()),
                         [](const ::testing::TestParamInfo<conformance::MutantInfo>& p) { return std::string(p.param.name); });

// ---------------------------------------------------------------- faults

struct Fault {
  const char* plugin;
  int timeout_ms;
  std::vector<std::string> expected;  // substrings of the failure
};

void PrintTo(const Fault& f, std::ostream* os) { *os << f.plugin; }

class FaultPlugin : public ::testing::TestWithParam<Fault> {};

TEST_P(FaultPlugin, FailsThatCaseClearlyAndTheNextCaseRunsInAFreshWorker) {
  const Fault& fault = GetParam();
#if defined(__SANITIZE_ADDRESS__)
  ::setenv("ASAN_OPTIONS", "handle_segv=0:handle_abort=0", 1);  // let the worker die of the signal itself
#endif
  const std::shared_ptr<Plugin> plugin = Plugin::open(plugin_path(fault.plugin), options(fault.timeout_ms));
  const EngineFactory f = plugin_engine_factory(plugin);
  const int first_pid = plugin->worker_pid();
  // Unarmed (max_tokens != 613), the plugin is a correct engine.
  const conformance::RunResult before = conformance::run_case(f, small_case(612));
  ASSERT_TRUE(before.ok()) << before.failure;
  ASSERT_EQ(plugin->workers_started(), 1);
  // Armed: step 3 misbehaves; the case fails with a message that says how.
  const auto t0 = std::chrono::steady_clock::now();
  const conformance::RunResult bad = conformance::run_case(f, small_case(613));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(bad.ok()) << fault.plugin << " passed the armed case";
  for (const std::string& want : fault.expected) {
    EXPECT_NE(bad.failure.find(want), std::string::npos) << "failure: " << bad.failure << "\nexpected: " << want;
  }
  std::printf("[%s] %s (%.2f s)\n", fault.plugin, bad.failure.c_str(), seconds);
  EXPECT_LT(seconds, fault.timeout_ms / 1000.0 + 5.0);
  EXPECT_EQ(plugin->worker_pid(), -1);  // the worker is gone
  // The next case gets a fresh worker and passes.
  const conformance::RunResult next = conformance::run_case(f, small_case(612));
  EXPECT_TRUE(next.ok()) << next.failure;
  EXPECT_EQ(plugin->workers_started(), 2);
  EXPECT_NE(plugin->worker_pid(), first_pid);
  // A property runs on as well.
  const PropertyInfo& oracle = all_properties()[0];
  EXPECT_FALSE(run_one(oracle, f, fixed_case(f.capabilities, oracle, 0, 1)).failed);
}

TEST(FaultPlugin, AnEngineOfADeadWorkerSaysSo) {
#if defined(__SANITIZE_ADDRESS__)
  ::setenv("ASAN_OPTIONS", "handle_segv=0:handle_abort=0", 1);
#endif
  const std::shared_ptr<Plugin> plugin = Plugin::open(plugin_path("crash"), options());
  const EngineFactory f = plugin_engine_factory(plugin);
  const Case armed = small_case(613);
  const auto survivor = f.create(armed.config);
  EXPECT_FALSE(conformance::run_case(f, armed).ok());
  try {
    survivor->cache_bytes();
    FAIL() << "an engine of the crashed worker answered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker process of this engine is gone (crashed with SIGSEGV during step 3)"),
              std::string::npos)
        << e.what();
  }
}

// NaN in an output is a wrong answer, not a crash: that case fails naming the output and "got nan",
// the worker lives on, and the next case passes in the same worker.
TEST(FaultPlugin, NanInAnOutputFailsThatCaseAndTheWorkerLivesOn) {
  const std::shared_ptr<Plugin> plugin = Plugin::open(plugin_path("nan"), options());
  const EngineFactory f = plugin_engine_factory(plugin);
  const conformance::RunResult bad = conformance::run_case(f, small_case(613));
  ASSERT_FALSE(bad.ok());
  std::printf("[nan] %s\n", bad.failure.c_str());
  EXPECT_NE(bad.failure.find("step 3, sequence 0, token 6 (position 6), layer 0, q head 0, dim 0: expected "),
            std::string::npos) << bad.failure;
  EXPECT_NE(bad.failure.find(", got nan, |diff| nan > bound "), std::string::npos) << bad.failure;
  const int pid = plugin->worker_pid();
  EXPECT_GT(pid, 0);
  const conformance::RunResult next = conformance::run_case(f, small_case(612));
  EXPECT_TRUE(next.ok()) << next.failure;
  EXPECT_EQ(plugin->worker_pid(), pid);
  EXPECT_EQ(plugin->workers_started(), 1);
}

// A runaway allocation under PluginOptions::memory_limit_mib (--memory-limit): the worker's allocation
// fails at once, the case fails naming the limit, and the next case runs in a fresh worker.
TEST(FaultPlugin, HugeAllocationUnderAMemoryLimitIsReportedAsOutOfMemory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "RLIMIT_AS cannot be combined with AddressSanitizer, which reserves terabytes of shadow "
                  "address space (the limit's reason to be off by default)";
#else
  PluginOptions o = options();
  o.memory_limit_mib = 1024;
  const std::shared_ptr<Plugin> plugin = Plugin::open(plugin_path("huge_alloc"), o);
  const EngineFactory f = plugin_engine_factory(plugin);
  const conformance::RunResult before = conformance::run_case(f, small_case(612));
  ASSERT_TRUE(before.ok()) << before.failure;  // unarmed, within the limit: a correct engine
  const conformance::RunResult bad = conformance::run_case(f, small_case(613));
  ASSERT_FALSE(bad.ok());
  std::printf("[huge_alloc] %s\n", bad.failure.c_str());
  for (const char* want : {"step 3: engine threw:", "failed with RINGKV_ERR_OUT_OF_MEMORY",
                           "out of memory? the worker runs under a memory limit of 1024 MiB (--memory-limit)"}) {
    EXPECT_NE(bad.failure.find(want), std::string::npos) << "missing \"" << want << "\" in: " << bad.failure;
  }
  const conformance::RunResult after = conformance::run_case(f, small_case(612));
  EXPECT_TRUE(after.ok()) << after.failure;
#endif
}

INSTANTIATE_TEST_SUITE_P(
    All, FaultPlugin,
    ::testing::Values(Fault{"crash", 10000, {"step 3: engine threw: plugin libringkv_plugin_crash.so crashed with SIGSEGV during step 3"}},
                      Fault{"abort", 10000, {"crashed with SIGABRT (abort) during step 3"}},
                      Fault{"hang", 2000, {"plugin libringkv_plugin_hang.so timed out after 2000 ms in step 3", "killed"}},
                      Fault{"oob", 10000, {"wrote out of bounds during step 3", "out of append 0 (sequence 0", "wrote past its end", "index 32"}},
                      Fault{"oob_far", 10000, {"wrote out of bounds during step 3", "out of append 0 (sequence 0",
                                               "wrote past its end, beyond its guard band, into a protected page at index 232"}},
                      Fault{"oob_before", 10000, {"wrote out of bounds during step 3", "out of append 0 (sequence 0",
                                                  "wrote before its start", "index -1"}},
                      Fault{"writes_input", 10000, {"wrote into its input during step 3", "k of append 0 (sequence 0",
                                                    "the engine wrote into this input, first at index 5"}},
                      Fault{"exit", 10000, {"step 3: engine threw: plugin libringkv_plugin_exit.so exited with status 3 "
                                            "during step 3 (the next engine gets a fresh worker)"}}),
    [](const ::testing::TestParamInfo<Fault>& p) { return std::string(p.param.plugin); });

// ---------------------------------------------------------------- conventions

TEST(WindowLeftPlugin, GetsWMinusOneAndPassesTheProperties) {
  const std::shared_ptr<Plugin> plugin = Plugin::open(plugin_path("window_left"), options());
  EXPECT_EQ(plugin->raw_capabilities().window_convention, RINGKV_WINDOW_LEFT);
  Config c = small_case(40).config;
  c.layers.push_back(LayerConfig{1, 0, RopeConfig{}});
  const nlohmann::json j = nlohmann::json::parse(plugin->config_json(c));
  EXPECT_EQ(j["window_convention"], "left");
  EXPECT_EQ(j["layers"][0]["window_left"], 3);
  EXPECT_EQ(j["layers"][1]["window_left"], 0);
  EXPECT_FALSE(j["layers"][0].contains("window"));
  const EngineFactory f = plugin_engine_factory(plugin);
  const std::optional<Kill> kill = hunt(f, 4);
  ASSERT_FALSE(kill.has_value()) << kill->property << " on case " << kill->case_index << ": " << kill->message.substr(0, 2000);
}

TEST(RotatedQkPlugin, IsRotatedByRingkvAndPassesTheProperties) {
  const std::shared_ptr<Plugin> plugin = Plugin::open(plugin_path("rotated_qk"), options());
  EXPECT_NE(plugin->raw_capabilities().wants_rotated_qk, 0);
  EXPECT_EQ(nlohmann::json::parse(plugin->config_json(small_case(40).config))["qk_rotated"], true);
  const EngineFactory f = plugin_engine_factory(plugin);
  const std::optional<Kill> kill = hunt(f, 4);
  ASSERT_FALSE(kill.has_value()) << kill->property << " on case " << kill->case_index << ": " << kill->message.substr(0, 2000);
  // ringkv rotates exactly as the reference does: the same bits.
  const Case c = fixed_case(f.capabilities, all_properties()[0], 0, 3);
  const conformance::RunResult a = conformance::run_case(reference_engine_factory(), c), b = conformance::run_case(f, c);
  ASSERT_TRUE(b.ok()) << b.failure;
  conformance::CompareOptions cmp;
  cmp.bitwise = true;
  EXPECT_EQ(conformance::compare_runs(a, b, c.config, cmp), "") << c.id();
}

// ---------------------------------------------------------------- the C skeleton of docs/engine-abi.md

TEST(SkeletonPlugin, TheDocsCEnginePassesInsideItsCapabilities) {
  const std::shared_ptr<Plugin> plugin = Plugin::open(plugin_path("skeleton"), options());
  const EngineFactory f = plugin_engine_factory(plugin);
  EXPECT_EQ(f.capabilities.k_dtypes, std::vector<DType>{DType::f32});
  EXPECT_FALSE(f.capabilities.snapshot);
  EXPECT_FALSE(f.capabilities.sink_logits);
  Config f16 = small_case(40).config;  // K in f16: outside what it declares
  try {
    f.create(f16);
    FAIL() << "created an engine outside the declared capabilities";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("K dtype f16 (supports f32)"), std::string::npos) << e.what();
  }
  const std::optional<Kill> kill =
      hunt(f, f.capabilities, 4, [](const PropertyInfo& p) { return !p.needs_snapshot; });
  ASSERT_FALSE(kill.has_value()) << kill->property << " on case " << kill->case_index << ": " << kill->case_id << "\n"
                                 << kill->message.substr(0, 2000);
}

TEST(SkeletonPlugin, TheDocsShowTheSkeletonVerbatim) {
  const auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string skeleton = read(std::string(RINGKV_SOURCE_DIR) + "/abi/examples/skeleton_plugin.c");
  const std::string docs = read(std::string(RINGKV_SOURCE_DIR) + "/docs/engine-abi.md");
  ASSERT_FALSE(skeleton.empty());
  EXPECT_NE(docs.find("```c\n" + skeleton + "```"), std::string::npos)
      << "docs/engine-abi.md must end with abi/examples/skeleton_plugin.c verbatim (paste it again)";
}

// ---------------------------------------------------------------- capability limits and ABI 1.2 (issue 14)

const std::vector<golden::GoldenCase>& committed_cases() {
  static const std::vector<golden::GoldenCase> cases = [] {
    std::vector<golden::GoldenCase> out;
    for (const golden::ManifestEntry& e : golden::read_manifest(RINGKV_GOLDEN_DIR)) {
      out.push_back(golden::read_golden(std::string(RINGKV_GOLDEN_DIR) + "/" + e.file));
    }
    return out;
  }();
  return cases;
}

// A plugin that declares a limit gets the committed cases beyond it as "not judged" (skipped, with the
// limit named), never as failures: its create() refuses them, and is never asked. One case inside passes.
void expect_limit_not_judged(const std::string& plugin, bool (*beyond)(const Config&), const std::string& gap_of_first) {
  const EngineFactory f = plugin_engine_factory(plugin_path(plugin), options());
  int beyond_cases = 0;
  bool judged_one = false;
  for (const golden::GoldenCase& g : committed_cases()) {
    if (beyond(g.c.config)) {
      ++beyond_cases;
      const golden::GoldenOutcome r = golden::check_golden(f, g);
      EXPECT_TRUE(r.skipped) << plugin << " on " << g.name << ": " << r.failure;
      EXPECT_EQ(r.failure, "") << plugin << " on " << g.name;
      if (beyond_cases == 1) {
        EXPECT_NE(r.skip_reason.find(gap_of_first), std::string::npos) << r.skip_reason;
      }
    } else if (!judged_one && conformance::capability_gap(f.capabilities, g.c).empty()) {
      const golden::GoldenOutcome r = golden::check_golden(f, g);
      EXPECT_TRUE(r.passed) << plugin << " on " << g.name << ": " << r.failure;
      judged_one = true;
    }
  }
  EXPECT_GE(beyond_cases, 2) << "the committed set has fewer than 2 cases beyond " << plugin << "'s limit";
  EXPECT_TRUE(judged_one) << plugin;
}

TEST(CapabilityLimits, MaxBatchOneGetsBatchCasesAsNotJudged) {
  EXPECT_EQ(Plugin::open(plugin_path("limit_max_batch_1"), options())->capabilities().max_batch, 1);
  const auto it = std::find_if(committed_cases().begin(), committed_cases().end(),
                               [](const golden::GoldenCase& g) { return g.c.config.batch > 1; });
  ASSERT_NE(it, committed_cases().end());
  expect_limit_not_judged("limit_max_batch_1", [](const Config& c) { return c.batch > 1; },
                          "batch " + std::to_string(it->c.config.batch) + " > max_batch 1");
}

TEST(CapabilityLimits, MinWindowTwoGetsWindowOneCasesAsNotJudged) {
  EXPECT_EQ(Plugin::open(plugin_path("limit_min_window_2"), options())->capabilities().min_window, 2);
  expect_limit_not_judged("limit_min_window_2",
                          [](const Config& c) { return conformance::smallest_sliding_window(c) == 1; },
                          "window 1 < min_window 2");
}

// An ABI 1.1 plugin knows nothing of the 1.2 fields: whatever lies there is ignored, and it is taken to
// support everything they describe (as ABI 1.1 assumed).
TEST(EngineAbi, AnAbi11PluginsBytesInThe12FieldsAreIgnored) {
  const std::shared_ptr<Plugin> p = Plugin::open(plugin_path("abi_1_1"), options());
  EXPECT_EQ(RINGKV_ABI_VERSION_GET_MINOR(p->abi_version()), 1u);
  const ringkv_capabilities& raw = p->raw_capabilities();
  ASSERT_EQ(raw.settable_p0, 0) << "the garbage did not cross: the test tests nothing";
  ASSERT_EQ(raw.min_window, 1000);
  ASSERT_EQ(raw.rollback, 1) << "the export helper wrote the reference's ABI 1.3 rollback: the test below tests nothing";
  const Capabilities& got = p->capabilities();
  const Capabilities all;
  EXPECT_EQ(got.max_sliding_windows, all.max_sliding_windows);
  EXPECT_TRUE(got.per_layer_rope);
  EXPECT_TRUE(got.partial_rotary);
  EXPECT_TRUE(got.settable_p0);
  EXPECT_EQ(got.min_window, 1);
  EXPECT_EQ(got.max_position, all.max_position);
  EXPECT_TRUE(got.kv_formats_differ);
  EXPECT_FALSE(got.rollback);  // and it has no rollback (ABI 1.3), whatever lies in those bytes
  EXPECT_EQ(got.max_rollback_reserve, 0);
  // The same bytes from a 1.2 plugin narrow it: the version gating is what keeps them out.
  const Capabilities as_12 = map_capabilities(raw, true, RINGKV_ABI_MAKE_VERSION(1, 2));
  EXPECT_FALSE(as_12.settable_p0);
  EXPECT_FALSE(as_12.per_layer_rope);
  EXPECT_EQ(as_12.min_window, 1000);
  EXPECT_EQ(as_12.max_position, 5);
  EXPECT_EQ(as_12.max_sliding_windows, 1);
  EXPECT_FALSE(as_12.kv_formats_differ);
  // Judged (and passing) on a committed case at a start position other than 0 and on one at W = 1.
  const EngineFactory f = plugin_engine_factory(p);
  bool p0_case = false, w1_case = false;
  for (const golden::GoldenCase& g : committed_cases()) {
    const bool p0 = !p0_case && start_position(g.c.config, 0) > 5;
    const bool w1 = !w1_case && conformance::smallest_sliding_window(g.c.config) == 1;
    if (!p0 && !w1) continue;
    const golden::GoldenOutcome r = golden::check_golden(f, g);
    EXPECT_TRUE(r.passed && !r.skipped) << g.name << ": " << r.failure << r.skip_reason;
    p0_case = p0_case || p0;
    w1_case = w1_case || w1;
  }
  EXPECT_TRUE(p0_case && w1_case);
}

// An ABI 1.1 plugin recompiled against the 1.3 header (issue 26): its table says 1.3, so its 1.2 fields
// count, and they are all zero. The host keeps the declaration as it is (zero narrows), but says so at
// load, naming the four fields whose zero narrows it; a plugin that sets any 1.2 field is not warned.
TEST(EngineAbi, ARecompiledAbi11PluginIsWarnedAtLoadNamingTheZero12Fields) {
  const std::shared_ptr<Plugin> p = Plugin::open(plugin_path("abi_1_1_recompiled"), options());
  EXPECT_EQ(p->abi_version(), RINGKV_ABI_VERSION);
  EXPECT_FALSE(p->capabilities().settable_p0);  // as declared: zero narrows
  EXPECT_FALSE(p->capabilities().per_layer_rope);
  const std::optional<ZeroAbi12Fields>& zero = p->zero_abi_1_2_fields();
  ASSERT_TRUE(zero.has_value());
  EXPECT_EQ(zero->fields, (std::vector<std::string>{"per_layer_rope", "partial_rotary", "settable_p0", "kv_formats_differ"}));
  EXPECT_TRUE(zero->as_abi_1_1.settable_p0 && zero->as_abi_1_1.per_layer_rope && zero->as_abi_1_1.partial_rotary &&
              zero->as_abi_1_1.kv_formats_differ);
  EXPECT_FALSE(zero->as_abi_1_1.rollback);  // only the 1.2 fields are widened
  const std::string w = zero->warning("COST");
  EXPECT_NE(w.find("plugin libringkv_plugin_abi_1_1_recompiled.so (ABI 1.3) leaves every ABI 1.2 capability field at "
                   "zero, as a plugin written for ABI 1.1 and recompiled against a newer header does: zero in "
                   "per_layer_rope, partial_rotary, settable_p0 and kv_formats_differ narrows it"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("; COST. Declare what the engine supports"), std::string::npos) << w;
  EXPECT_NE(w.find("set min_window = 1"), std::string::npos) << w;
  // Not warned: an ABI 1.1 plugin (its 1.2 bytes are not read), the reference, the core control (it sets
  // max_sliding_windows and settable_p0), the C skeleton.
  for (const char* name : {"abi_1_1", "reference", "core_f32", "skeleton"}) {
    EXPECT_FALSE(Plugin::open(plugin_path(name), options())->zero_abi_1_2_fields().has_value()) << name;
  }
  // The rule itself: any nonzero 1.2 field says the plugin knows them; a minor below 2 is never read.
  ringkv_capabilities raw = p->raw_capabilities();
  EXPECT_TRUE(abi_1_2_fields_left_at_zero("x", raw, RINGKV_ABI_VERSION, p->capabilities()).has_value());
  EXPECT_FALSE(abi_1_2_fields_left_at_zero("x", raw, RINGKV_ABI_MAKE_VERSION(1, 1), p->capabilities()).has_value());
  raw.min_window = 1;  // the same as 0: the opt-out the warning names
  EXPECT_FALSE(abi_1_2_fields_left_at_zero("x", raw, RINGKV_ABI_VERSION, p->capabilities()).has_value());
  EXPECT_EQ(abi_1_2_zero_cost(20, 77, 88, {"reset-p0-up", "per-layer-rope"}, 1),
            "they cost 57 of the 88 golden cases (within the capabilities: 20 instead of 77) and 2 classes (1 of them "
            "core) not applicable: reset-p0-up, per-layer-rope");
}

// The two "spec 1 core" controls through the ABI: their declaration crosses it unchanged (the bf16 one's
// fixed storage too), and each passes every committed case inside it and skips the others.
class CorePlugin : public ::testing::TestWithParam<const char*> {};

TEST_P(CorePlugin, PassesEveryCommittedCaseWithinItsCapabilitiesAndSkipsTheOthers) {
  const std::string core = GetParam();
  const auto& all = conformance::all_mutants();
  const auto m = std::find_if(all.begin(), all.end(), [&](const conformance::MutantInfo& x) {
    return std::string(x.name) == "core_" + core + "_engine";
  });
  ASSERT_NE(m, all.end());
  ASSERT_TRUE(m->must_pass);
  const EngineFactory f = plugin_engine_factory(plugin_path("core_" + core), options());
  EXPECT_EQ(conformance::capabilities_to_json(f.capabilities), conformance::capabilities_to_json(m->factory.capabilities));
  int judged = 0, skipped = 0, judged_f32 = 0;
  for (const golden::GoldenCase& g : committed_cases()) {
    const bool inside = conformance::capability_gap(m->factory.capabilities, g.c).empty();
    const golden::GoldenOutcome r = golden::check_golden(f, g);
    EXPECT_EQ(r.skipped, !inside) << core << " on " << g.name << ": " << r.skip_reason;
    EXPECT_EQ(r.passed, inside) << core << " on " << g.name << ": " << r.failure;
    EXPECT_EQ(r.failure, "") << core << " on " << g.name;
    if (inside) {
      ++judged;
      judged_f32 += g.c.config.k_format.dtype == DType::f32;
      EXPECT_GT(r.stored_checked, 0) << core << " on " << g.name << ": the snapshot check did not run";
    } else {
      ++skipped;
    }
  }
  EXPECT_GT(judged, 0);
  EXPECT_GT(skipped, 0);
  EXPECT_GT(judged_f32, 0) << core << " is judged on no f32-storage case";
  std::printf("[core] plugin core_%s: %d committed cases judged and passed (%d with f32 K/V), %d not judged\n",
              core.c_str(), judged, judged_f32, skipped);
}

INSTANTIATE_TEST_SUITE_P(Both, CorePlugin, ::testing::Values("f32", "bf16"));

// ---------------------------------------------------------------- faulty tables, at load (issue 11)

// A table that hangs, is NULL, lacks a function or declares one it lacks: Plugin::open throws with
// exactly this, in bounded time, and the reference plugin in the same process still passes a case.
struct TableFault {
  const char* plugin;
  std::string expected;  // the whole message, after "plugin <path>" or "plugin <file name>"
};

void PrintTo(const TableFault& f, std::ostream* os) { *os << f.plugin; }

class FaultyTable : public ::testing::TestWithParam<TableFault> {};

TEST_P(FaultyTable, IsRefusedAtLoadWithAClearMessageAndTheRunGoesOn) {
  const TableFault& fault = GetParam();
  PluginOptions o = options();
  const bool hangs = std::string(fault.plugin).starts_with("hang");
  if (hangs) o.startup_timeout_ms = 1500;  // the others load in the default time (30 s), as under ASan they may need
  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  try {
    Plugin::open(plugin_path(fault.plugin), o);
    ADD_FAILURE() << fault.plugin << " was loaded";
  } catch (const Error& e) {
    message = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[%s] %s (%.2f s)\n", fault.plugin, message.c_str(), seconds);
  const std::string name = "libringkv_plugin_" + std::string(fault.plugin) + ".so";
  const std::string by_path = "plugin " + plugin_path(fault.plugin) + fault.expected;
  const std::string by_name = "plugin " + name + fault.expected;
  EXPECT_TRUE(message == by_path || message == by_name) << "got:      " << message << "\nexpected: " << by_name;
  EXPECT_LT(seconds, hangs ? 1.5 + 5.0 : 5.0);
  const conformance::RunResult next = conformance::run_case(plugin_engine_factory(reference_plugin()), small_case(612));
  EXPECT_TRUE(next.ok()) << next.failure;
}

INSTANTIATE_TEST_SUITE_P(
    All, FaultyTable,
    ::testing::Values(
        TableFault{"hang_at_load", " timed out after 1500 ms while loading (dlopen, ringkv_engine_api_get or get_capabilities "
                                   "never returned; the worker was killed): it cannot be used"},
        TableFault{"hang_in_capabilities", " timed out after 1500 ms while loading (dlopen, ringkv_engine_api_get or "
                                           "get_capabilities never returned; the worker was killed): it cannot be used"},
        TableFault{"null_table", ": ringkv_engine_api_get(1) returned NULL: the plugin has no table for ringkv engine ABI "
                                 "1.x (this ringkv speaks ABI 1.3; rebuild the plugin against this ringkv's engine_abi.h)"},
        TableFault{"null_step", ": required functions are NULL in its table: step"},
        TableFault{"null_snapshot", ": its capabilities declare snapshot = 1, but the snapshot function in its table is NULL "
                                    "(implement it, or declare snapshot = 0)"}),
    [](const ::testing::TestParamInfo<TableFault>& p) { return std::string(p.param.plugin); });

// ---------------------------------------------------------------- capabilities out of range (issue 36)

// One capability field outside its documented range (docs/engine-abi.md, "Capabilities"): Plugin::open
// throws, naming the field, its value and the range, and the reference plugin still passes a case. A
// num_head_dims of 1000000 was once read as "head dim 64" and passed with most cases skipped.
class FaultyCapabilities : public ::testing::TestWithParam<TableFault> {};

TEST_P(FaultyCapabilities, AreRefusedAtLoadNamingTheFieldItsValueAndTheRange) {
  const TableFault& fault = GetParam();
  const std::string plugin = "caps_" + std::string(fault.plugin);
  std::string message;
  try {
    Plugin::open(plugin_path(plugin), options());
    ADD_FAILURE() << plugin << " was loaded";
  } catch (const Error& e) {
    message = e.what();
  }
  std::printf("[%s] %s\n", plugin.c_str(), message.c_str());
  const std::string expected = ": its capabilities declare " + fault.expected + " (the ranges: docs/engine-abi.md, \"Capabilities\")";
  EXPECT_EQ(message, "plugin " + plugin_path(plugin) + expected);
  const conformance::RunResult next = conformance::run_case(plugin_engine_factory(reference_plugin()), small_case(613));
  EXPECT_TRUE(next.ok()) << next.failure;
}

INSTANTIATE_TEST_SUITE_P(
    EachKind, FaultyCapabilities,
    ::testing::Values(
        TableFault{"num_head_dims_1000000", "num_head_dims = 1000000: must be in [0, 32] (the entries used in head_dims[32]; "
                                            "0 = any head dim in [1, 1024])"},
        TableFault{"head_dim_0", "head_dims[1] = 0: must be in [1, 1024] (a head dim, num_head_dims = 2)"},
        TableFault{"max_batch_negative", "max_batch = -1: must be in [0, 1048576] (0 = any)"},
        TableFault{"rollback_reserve_negative", "max_rollback_reserve = -1: must be in [0, 1073741824] (up to 2^30)"},
        TableFault{"window_convention_7", "window_convention = 7: must be in [0, 1] (a ringkv_window_convention: 0 W, 1 LEFT)"},
        TableFault{"k_dtypes_bit_9", "k_dtypes = 0x23f: may set only bits 0 to 5 (1u << RINGKV_DTYPE_x, F32 0 to INT8 5); "
                                     "bit 9 names no such value"},
        TableFault{"accumulator_42", "precision.accumulator = 42: must be a ringkv_precision in [0, 7] (F64 to INT8)"},
        TableFault{"min_window_above_max", "min_window = 64: must be at most max_window = 16 (a min above its max "
                                           "leaves no sliding window)"}),
    [](const ::testing::TestParamInfo<TableFault>& p) { return std::string(p.param.plugin); });

// The reference plugin's declaration with one change, and the errors the range check gives for it.
struct RangeCase {
  const char* what;
  std::function<void(ringkv_capabilities&)> change;
  std::vector<std::string> expected;  // in header order; empty: in range
};

std::vector<RangeCase> range_cases() {
  using C = ringkv_capabilities&;
  const std::string dtypes = " (1u << RINGKV_DTYPE_x, F32 0 to INT8 5); ";
  const std::string precision = ": must be a ringkv_precision in [0, 7] (F64 to INT8)";
  return {
      {"a mask bit past the dtypes", [](C c) { c.k_dtypes |= 1u << 6; },
       {"k_dtypes = 0x7f: may set only bits 0 to 5" + dtypes + "bit 6 names no such value"}},
      {"two unknown mask bits", [](C c) { c.v_dtypes = 0x80000041u; },
       {"v_dtypes = 0x80000041: may set only bits 0 to 5" + dtypes + "bits 6, 31 name no such value"}},
      {"an INT8 scheme bit", [](C c) { c.int8_schemes = 0x8; },
       {"int8_schemes = 0x8: may set only bits 0 to 2 (1u << RINGKV_INT8_x, PER_HEAD 0 to STATIC_TENSOR 2); bit 3 names no such value"}},
      {"a rounding bit", [](C c) { c.int8_roundings = 0x5; },
       {"int8_roundings = 0x5: may set only bits 0 to 1 (1u << RINGKV_ROUNDING_x, NEAREST_EVEN 0 and HALF_AWAY 1); bit 2 names no such value"}},
      {"a RoPE style bit", [](C c) { c.rope_styles = 0xf; },
       {"rope_styles = 0xf: may set only bits 0 to 2 (1u << RINGKV_ROPE_x, NONE 0 to GPTJ 2); bit 3 names no such value"}},
      {"a RoPE scaling bit", [](C c) { c.rope_scalings = 0x10; },
       {"rope_scalings = 0x10: may set only bits 0 to 2 (1u << RINGKV_ROPE_SCALING_x, NONE 0 to NTK 2); bit 4 names no such value"}},
      {"an unknown window convention", [](C c) { c.window_convention = -1; },
       {"window_convention = -1: must be in [0, 1] (a ringkv_window_convention: 0 W, 1 LEFT)"}},
      {"an unknown threading", [](C c) { c.threading = 3; },
       {"threading = 3: must be in [0, 2] (a ringkv_threading: 0 ONE_ENGINE_PER_THREAD, 1 THREAD_SAFE, 2 SINGLE_THREAD)"}},
      {"a negative max_layers", [](C c) { c.max_layers = -1; }, {"max_layers = -1: must be in [0, 1024] (0 = any)"}},
      {"max_layers beyond the spec", [](C c) { c.max_layers = 1025; }, {"max_layers = 1025: must be in [0, 1024] (0 = any)"}},
      {"max_layers at the spec's limit", [](C c) { c.max_layers = 1024; }, {}},
      {"a negative max_batch", [](C c) { c.max_batch = -1; }, {"max_batch = -1: must be in [0, 1048576] (0 = any)"}},
      {"max_batch beyond the spec", [](C c) { c.max_batch = (1 << 20) + 1; },
       {"max_batch = 1048577: must be in [0, 1048576] (0 = any)"}},
      {"num_head_dims beyond head_dims", [](C c) { c.num_head_dims = 1000000; },
       {"num_head_dims = 1000000: must be in [0, 32] (the entries used in head_dims[32]; 0 = any head dim in [1, 1024])"}},
      {"num_head_dims one past head_dims", [](C c) { c.num_head_dims = 33; },
       {"num_head_dims = 33: must be in [0, 32] (the entries used in head_dims[32]; 0 = any head dim in [1, 1024])"}},
      {"every entry of head_dims used", [](C c) {
         c.num_head_dims = RINGKV_MAX_HEAD_DIMS;
         for (int32_t& d : c.head_dims) d = 64;
       }, {}},
      {"a head dim of 0", [](C c) { c.num_head_dims = 1, c.head_dims[0] = 0; },
       {"head_dims[0] = 0: must be in [1, 1024] (a head dim, num_head_dims = 1)"}},
      {"a head dim beyond the spec", [](C c) { c.num_head_dims = 2, c.head_dims[0] = 64, c.head_dims[1] = 1025; },
       {"head_dims[1] = 1025: must be in [1, 1024] (a head dim, num_head_dims = 2)"}},
      {"an unused head_dims entry is not read", [](C c) { c.num_head_dims = 1, c.head_dims[0] = 64, c.head_dims[1] = -7; }, {}},
      {"a negative max_window", [](C c) { c.max_window = -1; }, {"max_window = -1: must be in [0, 2147483647] (0 = any)"}},
      {"max_window at 2^31", [](C c) { c.max_window = int64_t{1} << 31; },
       {"max_window = 2147483648: must be in [0, 2147483647] (0 = any)"}},
      {"a negative max_tokens", [](C c) { c.max_tokens = -5; }, {"max_tokens = -5: must be in [0, 2147483647] (0 = any)"}},
      {"AS_CONFIGURED outside storage", [](C c) { c.precision.q_dot = RINGKV_PRECISION_AS_CONFIGURED; },
       {"precision.q_dot = 100" + precision}},
      {"an unknown storage precision", [](C c) { c.precision.k_storage = 8; },
       {"precision.k_storage = 8" + precision + " or 100 (AS_CONFIGURED)"}},
      {"a negative storage precision", [](C c) { c.precision.v_storage = -1; },
       {"precision.v_storage = -1" + precision + " or 100 (AS_CONFIGURED)"}},
      {"a fixed storage precision", [](C c) { c.precision.k_storage = RINGKV_PRECISION_BF16; }, {}},
      {"an unknown accumulator", [](C c) { c.precision.accumulator = 42; }, {"precision.accumulator = 42" + precision}},
      {"an unknown P precision", [](C c) { c.precision.p_before_pv = 8; }, {"precision.p_before_pv = 8" + precision}},
      {"an unknown output precision", [](C c) { c.precision.output = -2; }, {"precision.output = -2" + precision}},
      {"an unknown RoPE-angle precision", [](C c) { c.precision.rope_angle = 9; }, {"precision.rope_angle = 9" + precision}},
      {"split accumulators out of range", [](C c) {
         c.precision2.split_accumulators = 1, c.precision2.qk_accumulator = 8, c.precision2.pv_accumulator = 100;
       }, {"precision2.qk_accumulator = 8" + precision, "precision2.pv_accumulator = 100" + precision}},
      {"unsplit accumulators are not read", [](C c) { c.precision2.split_accumulators = 0, c.precision2.qk_accumulator = 8; }, {}},
      {"an unknown q quantisation", [](C c) { c.precision2.q_quant = 2; },
       {"precision2.q_quant = 2: must be in [0, 1] (a ringkv_q_quant: 0 none, 1 q8_0)"}},
      {"a negative max_sliding_windows", [](C c) { c.max_sliding_windows = -1; },
       {"max_sliding_windows = -1: must be in [0, 1024] (0 = any; at most the 1024 layers of a config)"}},
      {"a negative min_window", [](C c) { c.min_window = -1; }, {"min_window = -1: must be in [0, 2147483647] (0 = 1)"}},
      {"max_position at 2^31", [](C c) { c.max_position = int64_t{1} << 31; },
       {"max_position = 2147483648: must be in [0, 2147483647] (0 = any, below 2^31)"}},
      {"min_window above max_window", [](C c) { c.min_window = 64, c.max_window = 16; },
       {"min_window = 64: must be at most max_window = 16 (a min above its max leaves no sliding window)"}},
      {"min_window equal to max_window", [](C c) { c.min_window = 16, c.max_window = 16; }, {}},
      {"min_window with any max_window", [](C c) { c.min_window = 1 << 20, c.max_window = 0; }, {}},
      {"reserved_1_3 set", [](C c) { c.reserved_1_3 = 1; }, {"reserved_1_3 = 1: must be in [0, 0] (reserved)"}},
      {"rollback neither 0 nor 1", [](C c) { c.rollback = 2; }, {"rollback = 2: must be in [0, 1] (1: rollback, 0: none)"}},
      {"a negative rollback reserve", [](C c) { c.max_rollback_reserve = -1; },
       {"max_rollback_reserve = -1: must be in [0, 1073741824] (up to 2^30)"}},
      {"a rollback reserve beyond 2^30", [](C c) { c.max_rollback_reserve = (int64_t{1} << 30) + 1; },
       {"max_rollback_reserve = 1073741825: must be in [0, 1073741824] (up to 2^30)"}},
      {"a reserve without rollback is not read", [](C c) { c.rollback = 0, c.max_rollback_reserve = -1; }, {}},
      {"three at once, in header order", [](C c) { c.max_tokens = -1, c.threading = 9, c.num_head_dims = 40; },
       {"threading = 9: must be in [0, 2] (a ringkv_threading: 0 ONE_ENGINE_PER_THREAD, 1 THREAD_SAFE, 2 SINGLE_THREAD)",
        "num_head_dims = 40: must be in [0, 32] (the entries used in head_dims[32]; 0 = any head dim in [1, 1024])",
        "max_tokens = -1: must be in [0, 2147483647] (0 = any)"}},
  };
}

TEST(CapabilityRanges, EveryFieldOutOfItsRangeIsNamedWithItsValueAndTheRange) {
  const ringkv_capabilities& reference = reference_plugin()->raw_capabilities();
  ASSERT_EQ(reference.rollback, 1) << "the checks of the 1.3 fields below need a declaration with rollback";
  EXPECT_EQ(capability_range_errors(reference, RINGKV_ABI_VERSION), std::vector<std::string>{});
  for (const RangeCase& r : range_cases()) {
    ringkv_capabilities c = reference;
    r.change(c);
    EXPECT_EQ(capability_range_errors(c, RINGKV_ABI_VERSION), r.expected) << r.what;
  }
}

// The fields a minor appended are checked only from a plugin of that minor (as they are read).
TEST(CapabilityRanges, FieldsOfANewerMinorAreNotCheckedForAnOlderPlugin) {
  ringkv_capabilities c = reference_plugin()->raw_capabilities();
  c.max_sliding_windows = -1, c.min_window = -1, c.max_position = -1;  // ABI 1.2
  c.reserved_1_3 = 0x5a5a5a5a, c.rollback = 7, c.max_rollback_reserve = -1;  // ABI 1.3
  EXPECT_EQ(capability_range_errors(c, RINGKV_ABI_MAKE_VERSION(1, 1)), std::vector<std::string>{});
  EXPECT_EQ(capability_range_errors(c, RINGKV_ABI_MAKE_VERSION(1, 2)).size(), 3u);
  EXPECT_EQ(capability_range_errors(c, RINGKV_ABI_MAKE_VERSION(1, 3)).size(), 5u);  // rollback 7: the reserve is not read
}

// A plugin of ABI 1.<our minor + 1>, with a larger table: accepted, read as far as this host knows,
// and judged like the reference (and passing).
TEST(EngineAbi, ANewerMinorVersionIsAcceptedAndJudgedLikeTheReference) {
  const std::shared_ptr<Plugin> p = Plugin::open(plugin_path("abi_1_next"), options());
  EXPECT_EQ(p->abi_version(), RINGKV_ABI_MAKE_VERSION(RINGKV_ABI_VERSION_MAJOR, RINGKV_ABI_VERSION_MINOR + 1));
  EXPECT_EQ(conformance::capabilities_to_json(p->capabilities()), conformance::capabilities_to_json(reference_plugin()->capabilities()));
  const EngineFactory f = plugin_engine_factory(p);
  const std::optional<Kill> kill = hunt(f, 2);
  EXPECT_FALSE(kill.has_value()) << kill->property << " at case " << kill->case_index << ": " << kill->message;
  const EngineFactory ref = plugin_engine_factory(reference_plugin());
  const Case c = small_case(40);
  const conformance::RunResult a = conformance::run_case(f, c), b = conformance::run_case(ref, c);
  ASSERT_TRUE(a.ok() && b.ok()) << a.failure << b.failure;
  conformance::CompareOptions same_bits;
  same_bits.bitwise = true;
  EXPECT_EQ(conformance::compare_runs(a, b, c.config, same_bits), "");
}

// ---------------------------------------------------------------- capabilities that lie (issue 11)

// Claims more than it does: every committed case inside the declaration is judged; the batch and INT8
// K cases its create() refuses fail, saying the config lies inside the declared capabilities, the sink
// cases (it ignores sinks) fail, and the others pass. None is skipped for being outside.
TEST(LyingCapabilities, ClaimingMoreFailsTheCasesTheEngineRefusesOrGetsWrong) {
  const EngineFactory f = plugin_engine_factory(plugin_path("caps_lie_more"), options());
  int refused = 0, sinks_failed = 0, passed = 0;
  for (const golden::GoldenCase& g : committed_cases()) {
    if (!conformance::capability_gap(f.capabilities, g.c).empty()) continue;  // beyond the reference too (rollback)
    const golden::GoldenOutcome r = golden::check_golden(f, g);
    EXPECT_FALSE(r.skipped) << g.name << ": " << r.skip_reason;
    const Config& c = g.c.config;
    const bool has_sinks = std::any_of(c.layers.begin(), c.layers.end(), [](const LayerConfig& l) { return l.sinks > 0; });
    if (c.batch > 1 || c.k_format.dtype == DType::int8) {
      ++refused;
      EXPECT_FALSE(r.passed) << g.name;
      EXPECT_NE(r.failure.find("engine creation threw: plugin libringkv_plugin_caps_lie_more.so rejected a config inside its "
                               "declared capabilities: config."),
                std::string::npos) << g.name << ": " << r.failure;
      EXPECT_NE(r.failure.find("(the capabilities claim more than the engine does: fix the declaration or the engine)"),
                std::string::npos) << r.failure;
    } else if (has_sinks) {
      sinks_failed += !r.passed;
    } else {
      EXPECT_TRUE(r.passed) << g.name << ": " << r.failure;
      ++passed;
    }
  }
  EXPECT_GE(refused, 2);
  EXPECT_GE(sinks_failed, 2);
  EXPECT_GE(passed, 10);
  std::printf("[caps_lie_more] %d refused inside the declaration, %d sink cases failed, %d passed\n", refused, sinks_failed,
              passed);
}

// Claims less: the cases beyond the narrower declaration are not judged (skipped, naming the gap),
// the others pass.
TEST(LyingCapabilities, ClaimingLessGetsTheCasesBeyondAsNotJudged) {
  const EngineFactory f = plugin_engine_factory(plugin_path("caps_lie_less"), options());
  EXPECT_FALSE(f.capabilities.sinks);
  EXPECT_EQ(f.capabilities.max_batch, 1);
  int skipped = 0, passed = 0;
  for (const golden::GoldenCase& g : committed_cases()) {
    const std::string gap = conformance::capability_gap(f.capabilities, g.c);
    const golden::GoldenOutcome r = golden::check_golden(f, g);
    if (!gap.empty()) {
      ++skipped;
      EXPECT_TRUE(r.skipped) << g.name;
      EXPECT_EQ(r.skip_reason, gap);
    } else {
      ++passed;
      EXPECT_TRUE(r.passed) << g.name << ": " << r.failure;
    }
  }
  EXPECT_GE(skipped, 4);
  EXPECT_GE(passed, 10);
}

// ---------------------------------------------------------------- leaks (issue 11)

// The warnings of one case on a factory: run_case inside a CaseWarnings.
std::pair<conformance::RunResult, std::vector<std::string>> run_collecting(const EngineFactory& f, const Case& c) {
  CaseWarnings warnings;
  conformance::RunResult r = conformance::run_case(f, c);
  return {r, warnings.take()};
}

constexpr bool kAsan =
#if defined(__SANITIZE_ADDRESS__)
    true;
#else
    false;
#endif

// 4 MiB leaked per step, 6 steps: a warning at the end of the case naming the growth and the declared
// cache; the case itself passes, and the reference plugin in the same run has no warning.
TEST(LeakPlugin, GrowthBeyondTheDeclaredCacheIsAWarning) {
  if (kAsan) GTEST_SKIP() << "resident memory is not measured under AddressSanitizer (its quarantine is resident too)";
  const EngineFactory f = plugin_engine_factory(plugin_path("leak"), options());
  const auto [bad, warnings] = run_collecting(f, small_case(612));
  EXPECT_TRUE(bad.ok()) << bad.failure;
  ASSERT_EQ(warnings.size(), 1u);
  const std::string& w = warnings[0];
  std::printf("[leak] %s\n", w.c_str());
  for (const char* want : {"plugin libringkv_plugin_leak.so: worker resident memory grew 2", " MiB over the case, 2",
                           " MiB beyond the ", " its cache declares (cache_bytes), more than the 8 MiB allowed for allocator "
                           "noise: a leak? (6 steps; a failure above --leak-limit 256 MiB)"}) {
    EXPECT_NE(w.find(want), std::string::npos) << "missing \"" << want << "\" in: " << w;
  }
  const auto [good, none] = run_collecting(plugin_engine_factory(reference_plugin()), small_case(612));
  EXPECT_TRUE(good.ok()) << good.failure;
  EXPECT_TRUE(none.empty()) << none.front();
}

// Above --leak-limit the step fails, the worker is killed, and the next case runs in a fresh one.
TEST(LeakPlugin, GrowthAboveTheLeakLimitFailsTheStep) {
  if (kAsan) GTEST_SKIP() << "resident memory is not measured under AddressSanitizer (its quarantine is resident too)";
  PluginOptions o = options();
  o.leak_limit_mib = 10;
  const std::shared_ptr<Plugin> plugin = Plugin::open(plugin_path("leak"), o);
  const EngineFactory f = plugin_engine_factory(plugin);
  const conformance::RunResult bad = conformance::run_case(f, small_case(612));
  ASSERT_FALSE(bad.ok());
  std::printf("[leak, --leak-limit 10] %s\n", bad.failure.c_str());
  for (const char* want : {"step 2: engine threw: plugin libringkv_plugin_leak.so: worker resident memory grew 1",
                           " MiB by step 2, 1", " its cache declares (cache_bytes), above the leak limit of 10 MiB (--leak-limit): "
                           "it leaks (the worker was killed; the next engine gets a fresh one)"}) {
    EXPECT_NE(bad.failure.find(want), std::string::npos) << "missing \"" << want << "\" in: " << bad.failure;
  }
  EXPECT_EQ(plugin->worker_pid(), -1);
  Case two_steps = small_case(612);
  two_steps.steps.resize(2);  // 8 MiB and the noise: within the limit
  const conformance::RunResult next = conformance::run_case(f, two_steps);
  EXPECT_TRUE(next.ok()) << next.failure;
  EXPECT_EQ(plugin->workers_started(), 2);
}

// The slack is set from this measurement: the reference plugin's growth beyond its declared cache over
// every committed golden case and over fixed cases of every property (one worker each, in order, as
// `ringkv check` runs them), printed; with the default slack none of them warns.
TEST(LeakPlugin, TheReferencePluginNeverWarnsOnTheGoldensOrThePropertyCases) {
  if (kAsan) GTEST_SKIP() << "resident memory is not measured under AddressSanitizer (its quarantine is resident too)";
  PluginOptions measuring = options();
  measuring.leak_slack_mib = 0;  // every growth beyond the cache is reported: the noise, measured
  const EngineFactory all = plugin_engine_factory(plugin_path("reference"), measuring);
  const EngineFactory f = plugin_engine_factory(plugin_path("reference"), options());
  double worst = 0;
  std::string worst_case;
  const auto measure = [&](const std::string& name, const std::function<void(const EngineFactory&)>& run) {
    {
      CaseWarnings w;
      run(all);
      for (const std::string& text : w.take()) {
        const size_t mib = text.find(" MiB beyond"), kib = text.find(" KiB beyond");
        const size_t end = std::min(mib, kib);
        if (end == std::string::npos) continue;  // "N bytes beyond"
        const size_t start = text.rfind(", ", end) + 2;
        const double v = std::stod(text.substr(start, end - start)) / (mib < kib ? 1.0 : 1024.0);
        if (v > worst) worst = v, worst_case = name;
      }
    }
    CaseWarnings w;
    run(f);
    const std::vector<std::string> got = w.take();
    EXPECT_TRUE(got.empty()) << name << ": " << got.front();
  };
  for (const golden::GoldenCase& g : committed_cases()) {
    measure(g.name, [&](const EngineFactory& x) { golden::check_golden(x, g); });
  }
  const auto& props = all_properties();
  for (int i = 0; i < 3; ++i) {
    for (size_t k = 0; k < props.size(); ++k) {
      const Case c = fixed_case(f.capabilities, props[k], k, i);
      measure(std::string(props[k].name) + " case " + std::to_string(i),
              [&](const EngineFactory& x) { EXPECT_FALSE(run_one(props[k], x, c).failed); });
    }
  }
  std::printf("[leak] the reference plugin's largest growth beyond its declared cache over %zu committed goldens and "
              "%zu property cases: %.2f MiB (%s)\n",
              committed_cases().size(), 3 * props.size(), worst, worst_case.c_str());
}

// ---------------------------------------------------------------- the export helper, called directly

struct Library {
  void* handle = nullptr;
  const ringkv_engine_api* api = nullptr;
  explicit Library(const std::string& path) {
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return;
    void* sym = ::dlsym(handle, RINGKV_ENGINE_API_SYMBOL);
    ringkv_engine_api_get_fn get = nullptr;
    std::memcpy(&get, &sym, sizeof get);
    if (get) api = get(RINGKV_ABI_VERSION_MAJOR);
  }
  ~Library() {
    if (handle) ::dlclose(handle);
  }
};

ringkv_tensor tensor(float* data, int64_t L, int64_t n, int64_t H, int64_t D, int64_t row_pad) {
  ringkv_tensor t{};
  t.struct_size = sizeof t;
  t.dtype = RINGKV_DTYPE_F32;
  t.memory = RINGKV_MEMORY_HOST;
  t.ndim = 4;
  t.shape[0] = L, t.shape[1] = n, t.shape[2] = H, t.shape[3] = D;
  t.strides[3] = 1, t.strides[2] = D + row_pad, t.strides[1] = H * (D + row_pad), t.strides[0] = n * H * (D + row_pad);
  t.data = data;
  return t;
}

TEST(ExportHelper, StridedTensorsErrorsAndMessagesThroughTheCTable) {
  const Library lib(plugin_path("reference"));
  ASSERT_NE(lib.api, nullptr) << ::dlerror();
  const ringkv_engine_api& api = *lib.api;
  EXPECT_EQ(api.struct_size, sizeof(ringkv_engine_api));
  EXPECT_NE(api.snapshot, nullptr);
  EXPECT_NE(api.get_info, nullptr);

  char error[256] = "";
  ringkv_engine* e = nullptr;
  const std::string broken = "{\"config_version\": 1, \"layers\": [";
  EXPECT_EQ(api.create(broken.c_str(), broken.size(), &e, error, sizeof error), RINGKV_ERR_CONFIG);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(std::string(error).find("does not parse"), std::string::npos) << error;
  Config cfg = small_case(16).config;
  nlohmann::json j = conformance::config_to_json(cfg);
  j["num_q_heads"] = 3;  // not a multiple of num_kv_heads
  j["num_kv_heads"] = 2;
  const std::string invalid = j.dump();
  EXPECT_EQ(api.create(invalid.c_str(), invalid.size(), &e, error, sizeof error), RINGKV_ERR_CONFIG);
  EXPECT_NE(std::string(error).find("num_q_heads"), std::string::npos) << error;

  const std::string good = conformance::config_to_json(cfg).dump();
  ASSERT_EQ(api.create(good.c_str(), good.size(), &e, error, sizeof error), RINGKV_OK) << error;
  const int64_t Hq = cfg.num_q_heads, Hkv = cfg.num_kv_heads, D = cfg.head_dim, n = 3, pad = 5;
  // Strided inputs and output (each head row padded by 5 floats) against the in-process engine.
  Case c = small_case(16);
  std::vector<float> q(static_cast<size_t>(n * Hq * D)), k(static_cast<size_t>(n * Hkv * D)), v(k.size()), want(q.size());
  conformance::fill_chunk(c, conformance::Tensor::q, 0, 0, n, q.data());
  conformance::fill_chunk(c, conformance::Tensor::k, 0, 0, n, k.data());
  conformance::fill_chunk(c, conformance::Tensor::v, 0, 0, n, v.data());
  const auto strided = [&](const std::vector<float>& x, int64_t H) {
    std::vector<float> s(static_cast<size_t>(n * H * (D + pad)), -7.0f);
    for (int64_t r = 0; r < n * H; ++r) std::copy_n(x.begin() + r * D, D, s.begin() + r * (D + pad));
    return s;
  };
  std::vector<float> qs = strided(q, Hq), ks = strided(k, Hkv), vs = strided(v, Hkv), outs(qs.size(), -7.0f);
  ringkv_append a{};
  a.struct_size = sizeof a;
  a.sequence = 1;
  a.n_tokens = n;
  a.q = tensor(qs.data(), 1, n, Hq, D, pad);
  a.k = tensor(ks.data(), 1, n, Hkv, D, pad);
  a.v = tensor(vs.data(), 1, n, Hkv, D, pad);
  a.out = tensor(outs.data(), 1, n, Hq, D, pad);
  ringkv_batch b{};
  b.struct_size = sizeof b;
  b.num_appends = 1;
  b.appends = &a;
  ASSERT_EQ(api.step(e, &b), RINGKV_OK) << api.last_error(e);
  const auto local = make_reference_engine(cfg);
  const SequenceStep s{1, n, q.data(), k.data(), v.data(), want.data()};
  local->step(StepBatch{{}, std::span<const SequenceStep>(&s, 1)});
  for (int64_t r = 0; r < n * Hq; ++r) {
    for (int64_t d = 0; d < D + pad; ++d) {
      const float got = outs[static_cast<size_t>(r * (D + pad) + d)];
      if (d < D) {
        EXPECT_EQ(got, want[static_cast<size_t>(r * D + d)]);
      } else {
        EXPECT_EQ(got, -7.0f) << "wrote into the padding";
      }
    }
  }
  EXPECT_STREQ(api.last_error(e), "");
  // A bad shape is an invalid argument with a message naming it, valid until the next call.
  a.q.shape[2] = 7;
  EXPECT_EQ(api.step(e, &b), RINGKV_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(api.last_error(e)).find("step.appends[0].q.shape[2] = 7"), std::string::npos) << api.last_error(e);
  a.q.shape[2] = Hq;
  // Too many tokens is a step error, and changes nothing.
  a.n_tokens = 1;
  a.q.shape[1] = a.k.shape[1] = a.v.shape[1] = a.out.shape[1] = 1;
  EXPECT_EQ(api.reset(e, 9, 0), RINGKV_ERR_STEP);
  EXPECT_NE(std::string(api.last_error(e)).find("sequence"), std::string::npos) << api.last_error(e);
  uint64_t bytes = 0;
  EXPECT_EQ(api.cache_bytes(e, &bytes), RINGKV_OK);
  EXPECT_EQ(bytes, local->cache_bytes());
  EXPECT_STREQ(api.last_error(e), "");  // cleared by the successful call
  // Snapshot keyed by position: sequence 1 holds positions 0..2 (start positions are 0); 99 is absent.
  const int64_t positions[] = {2, 99, 0};
  std::vector<uint8_t> present(3, 7);
  std::vector<float> sk(static_cast<size_t>(3 * Hkv * D)), sv(sk.size());
  ringkv_snapshot_request req{};
  req.struct_size = sizeof req;
  req.layer = 0;
  req.sequence = 1;
  req.num_positions = 3;
  req.positions = positions;
  ringkv_snapshot_result res{};
  res.struct_size = sizeof res;
  res.present = present.data();
  res.k = sk.data();
  res.v = sv.data();
  ASSERT_EQ(api.snapshot(e, &req, &res), RINGKV_OK) << api.last_error(e);
  EXPECT_EQ(present, (std::vector<uint8_t>{1, 0, 1}));
  const CacheSnapshot ls = *local->snapshot(0, 1);
  for (int64_t d = 0; d < Hkv * D; ++d) {
    EXPECT_EQ(sk[static_cast<size_t>(d)], ls.k[static_cast<size_t>(2 * Hkv * D + d)]);  // position 2 is in slot 2
    EXPECT_EQ(sv[static_cast<size_t>(2 * Hkv * D + d)], ls.v[static_cast<size_t>(d)]);
  }
  EXPECT_EQ(res.capacity_rows, ls.capacity);
  EXPECT_EQ(res.codes_written, 0);
  ringkv_engine_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(api.get_info(e, &info), RINGKV_OK);
  EXPECT_STREQ(info.name, "reference");
  EXPECT_EQ(info.precision.k_storage, RINGKV_PRECISION_F16);
  EXPECT_EQ(api.poison_empty_slots(e), RINGKV_OK);
  api.destroy(e);
  api.destroy(nullptr);
}


// ---------------------------------------------------------------- ABI 1.3: spec 1.1 rollback (issue 15)

// A small spec 1.1 case: one layer with sinks, a window and a rollback reserve, perhaps a second one
// (a global layer or another window with its own reserve), and a schedule of appends, rollbacks
// within the reserve and beyond it, and resets. A step the spec refuses stays in the schedule as it
// is: the engine must refuse it whole, and the schedule goes on from the state before it.
rc::Gen<Case> gen_abi_rollback_case() {
  return rc::gen::exec([] {
    Case c;
    Config& cfg = c.config;
    const int64_t S = *rc::gen::inRange<int64_t>(0, 3), W = *rc::gen::inRange<int64_t>(1, 7);
    const int64_t Q = *rc::gen::inRange<int64_t>(0, 4);
    cfg.max_tokens = *rc::gen::inRange<int64_t>(S + W + 2, S + W + Q + 30);
    cfg.layers = {LayerConfig{W, S, RopeConfig{}, Q}};
    if (*rc::gen::arbitrary<bool>()) {
      const int64_t W2 = *rc::gen::element<int64_t>(1, W + 1, cfg.max_tokens);
      cfg.layers.push_back(LayerConfig{W2, 0, RopeConfig{}, *rc::gen::inRange<int64_t>(0, 3)});
    }
    cfg.num_kv_heads = 1;
    cfg.num_q_heads = *rc::gen::element(1, 2);
    cfg.head_dim = *rc::gen::element(4, 8);
    cfg.batch = *rc::gen::inRange(1, 3);
    const int format = *rc::gen::inRange(0, 3);
    cfg.k_format = cfg.v_format = format == 0   ? KvFormat::of(DType::f32)
                                  : format == 1 ? KvFormat::of(DType::bf16)
                                                : KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
    c.seed = *rc::gen::inRange<uint64_t>(1, 1000);
    conformance::ScheduleTracker tracker(c);
    int next_stream = cfg.batch;
    const int steps = *rc::gen::inRange(3, 25);
    for (int st = 0; st < steps; ++st) {
      conformance::StepPlan plan;
      plan.tokens.assign(static_cast<size_t>(cfg.batch), 0);
      for (int s = 0; s < cfg.batch; ++s) {
        const int64_t held = tracker.held(s);
        const int what = *rc::gen::inRange(0, 8);
        int64_t kept = held;
        if (what == 0 && held > 0) {
          plan.resets.push_back({s, *rc::gen::inRange<int64_t>(0, 20), next_stream++});
          kept = 0;
        } else if (what <= 3 && held > 0) {
          const int64_t n = *rc::gen::inRange<int64_t>(1, std::min(held, W + Q + 3) + 1);
          plan.rollbacks.push_back({s, n, next_stream++});
          kept = held - n;
        }
        plan.tokens[static_cast<size_t>(s)] = std::min(cfg.max_tokens - kept, *rc::gen::inRange<int64_t>(0, 5));
      }
      if (tracker.honoured(plan)) tracker.apply(plan);
      c.steps.push_back(plan);
    }
    return c;
  });
}

// The message of the StepError a step throws, "" if it throws none (any other exception says so).
std::string step_error(Engine& e, const StepBatch& batch) {
  try {
    e.step(batch);
  } catch (const StepError& ex) {
    return ex.what();
  } catch (const std::exception& ex) {
    return std::string("(not a StepError) ") + ex.what();
  }
  return "";
}

struct Lockstep {
  std::string difference;  ///< "" if the engines agreed on everything
  int honoured_rollbacks = 0, refused_steps = 0;
};

// Runs a case's schedule on two engines at once with the same inputs: every step must be taken by both
// or rejected by both with the same message (a refusal exactly where the spec refuses, saying
// "refused"), every output must have the same bits, and every (layer, sequence) the same positions
// and stored K/V after every step.
Lockstep lockstep(Engine& a, Engine& b, const Case& c) {
  Lockstep r;
  const Config& cfg = c.config;
  const int B = cfg.batch, L = static_cast<int>(cfg.layers.size());
  const size_t Hq = static_cast<size_t>(cfg.num_q_heads), Hkv = static_cast<size_t>(cfg.num_kv_heads);
  const size_t D = static_cast<size_t>(cfg.head_dim), row = Hkv * D;
  conformance::ScheduleTracker tracker(c);
  std::vector<int> stream(static_cast<size_t>(B));
  for (int s = 0; s < B; ++s) stream[static_cast<size_t>(s)] = c.initial_stream(s);
  std::vector<int64_t> held(static_cast<size_t>(B), 0);
  for (size_t st = 0; st < c.steps.size(); ++st) {
    const conformance::StepPlan& plan = c.steps[st];
    const std::string at = "step " + std::to_string(st) + ": ";
    const bool honoured = tracker.honoured(plan);
    std::vector<SequenceRollback> rollbacks;
    std::vector<SequenceReset> resets;
    std::vector<int64_t> first = held;
    std::vector<int> next_stream = stream;
    for (const conformance::RollbackPlan& rb : plan.rollbacks) {
      rollbacks.push_back({rb.sequence, rb.n_tokens});
      first[static_cast<size_t>(rb.sequence)] -= rb.n_tokens;
      next_stream[static_cast<size_t>(rb.sequence)] = rb.stream;
    }
    for (const conformance::ResetPlan& rs : plan.resets) {
      resets.push_back({rs.sequence, rs.start_position});
      first[static_cast<size_t>(rs.sequence)] = 0;
      next_stream[static_cast<size_t>(rs.sequence)] = rs.stream;
    }
    std::vector<std::vector<float>> q(static_cast<size_t>(B)), k(q.size()), v(q.size()), out_a(q.size()), out_b(q.size());
    std::vector<SequenceStep> appends_a, appends_b;
    for (int s = 0; s < B; ++s) {
      const auto su = static_cast<size_t>(s);
      const int64_t n = plan.tokens[su];
      if (n == 0) continue;
      const size_t tokens = static_cast<size_t>(L) * static_cast<size_t>(n);
      q[su].resize(tokens * Hq * D);
      k[su].resize(tokens * row);
      v[su].resize(tokens * row);
      out_a[su].assign(q[su].size(), std::nanf(""));
      out_b[su].assign(q[su].size(), std::nanf(""));
      conformance::fill_chunk(c, conformance::Tensor::q, next_stream[su], first[su], n, q[su].data());
      conformance::fill_chunk(c, conformance::Tensor::k, next_stream[su], first[su], n, k[su].data());
      conformance::fill_chunk(c, conformance::Tensor::v, next_stream[su], first[su], n, v[su].data());
      appends_a.push_back({s, n, q[su].data(), k[su].data(), v[su].data(), out_a[su].data()});
      appends_b.push_back({s, n, q[su].data(), k[su].data(), v[su].data(), out_b[su].data()});
    }
    const std::string ea = step_error(a, StepBatch{resets, appends_a, rollbacks});
    const std::string eb = step_error(b, StepBatch{resets, appends_b, rollbacks});
    if (ea != eb) {
      r.difference = at + "in process \"" + ea + "\", through the plugin \"" + eb + "\"";
      return r;
    }
    if (!honoured) {
      if (ea.find("refused") == std::string::npos) {
        r.difference = at + "the spec refuses its rollback, but the engines said \"" + ea + "\"";
        return r;
      }
      ++r.refused_steps;
      continue;  // nothing changed
    }
    if (!ea.empty()) {
      r.difference = at + "a valid step was rejected: " + ea;
      return r;
    }
    r.honoured_rollbacks += static_cast<int>(plan.rollbacks.size());
    for (int s = 0; s < B; ++s) {
      const auto su = static_cast<size_t>(s);
      if (!out_a[su].empty() && std::memcmp(out_a[su].data(), out_b[su].data(), out_a[su].size() * sizeof(float)) != 0) {
        r.difference = at + "the outputs of sequence " + std::to_string(s) + " differ";
        return r;
      }
      held[su] = first[su] + plan.tokens[su];
    }
    stream = next_stream;
    tracker.apply(plan);
    for (int l = 0; l < L; ++l) {
      for (int s = 0; s < B; ++s) {
        const CacheSnapshot sa = *a.snapshot(l, s), sb = *b.snapshot(l, s);
        const std::string where = at + "layer " + std::to_string(l) + ", sequence " + std::to_string(s) + ": ";
        if (sa.positions != sb.positions) {
          r.difference = where + "the slots hold other positions";
          return r;
        }
        for (size_t slot = 0; slot < sa.positions.size(); ++slot) {
          if (sa.positions[slot] < 0) continue;
          const size_t e = slot * row;
          if (std::memcmp(&sa.k[e], &sb.k[e], row * sizeof(float)) != 0 ||
              std::memcmp(&sa.v[e], &sb.v[e], row * sizeof(float)) != 0) {
            r.difference = where + "slot " + std::to_string(slot) + " stores other K/V";
            return r;
          }
        }
      }
    }
  }
  return r;
}

Lockstep reference_lockstep(const Case& c) {
  const auto local = make_reference_engine(c.config);
  const auto remote = plugin_engine_factory(reference_plugin()).create(c.config);
  return lockstep(*local, *remote, c);
}

conformance::RunOptions ring_checked() {
  conformance::RunOptions o;
  o.check_ring = true;
  o.stop_at_failure = true;
  return o;
}

RC_GTEST_PROP(RollbackThroughTheAbi, ReferencePluginRunsRollbackSchedulesLikeTheInProcessReference, ()) {
  const Case c = *gen_abi_rollback_case();
  const Lockstep r = reference_lockstep(c);
  RC_TAG(r.refused_steps > 0 ? "a refused step" : "none refused", r.honoured_rollbacks > 0 ? "rolled back" : "no rollback");
  if (!r.difference.empty()) RC_LOG() << r.difference << "\n" << c.describe();
  RC_ASSERT(r.difference.empty());
  // The runner's own checks through the plugin: the oracle, the spec ring, the refusals.
  const conformance::RunResult run = conformance::run_case(plugin_engine_factory(reference_plugin()), c, ring_checked());
  if (!run.ok()) RC_LOG() << run.failure << "\n" << c.describe();
  RC_ASSERT(run.ok());
}

// The property above says nothing if its cases never roll back or never refuse: 100 fixed ones do both.
TEST(RollbackThroughTheAbi, FixedSchedulesRollBackAndRefuseThroughThePlugin) {
  int honoured = 0, refused = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    const Case c = gen_abi_rollback_case()(rc::Random(seed * 7919), 50).value();
    const Lockstep r = reference_lockstep(c);
    EXPECT_EQ(r.difference, "") << c.describe();
    honoured += r.honoured_rollbacks;
    refused += r.refused_steps;
  }
  EXPECT_GT(honoured, 0);
  EXPECT_GT(refused, 0);
  std::printf("[rollback] 100 schedules through the plugin: %d rollbacks honoured, %d steps refused\n", honoured, refused);
}

// A generated case with rollbacks and a nonzero reserve (the first of the fixed seeds that has both).
Case reserve_and_rollback_case() {
  for (uint64_t seed = 1;; ++seed) {
    const Case c = gen_abi_rollback_case()(rc::Random(seed), 30).value();
    if (conformance::ScheduleTracker::has_rollbacks(c) && c.config.layers[0].rollback_reserve > 0) return c;
  }
}

// ABI 1.2 has no rollback: a plugin of minor 2 is listed without it (whatever lies where 1.3 appended
// its fields), gets rollback cases as not applicable, is never sent a rollback or a reserve (it aborts
// if it is), and is judged on the rest.
TEST(RollbackThroughTheAbi, AnAbi12PluginIsNeverSentARollbackAndIsJudgedOnTheRest) {
  const std::shared_ptr<Plugin> p = Plugin::open(plugin_path("abi_1_2"), options());
  EXPECT_EQ(RINGKV_ABI_VERSION_GET_MINOR(p->abi_version()), 2u);
  const ringkv_capabilities& raw = p->raw_capabilities();
  ASSERT_EQ(raw.rollback, 1) << "the 1.3 bytes did not cross: the test tests nothing";
  ASSERT_EQ(raw.max_rollback_reserve, 64);
  EXPECT_FALSE(p->capabilities().rollback);
  EXPECT_EQ(p->capabilities().max_rollback_reserve, 0);
  const Capabilities as_13 = map_capabilities(raw, true, RINGKV_ABI_MAKE_VERSION(1, 3));  // the gating keeps them out
  EXPECT_TRUE(as_13.rollback);
  EXPECT_EQ(as_13.max_rollback_reserve, 64);
  EXPECT_FALSE(conformance::capabilities_to_json(p->capabilities()).contains("rollback"));

  // Rollback cases are not applicable to it, naming why; its engine refuses the reserve before the plugin.
  const Case rb = reserve_and_rollback_case();
  const std::string gap = conformance::capability_gap(p->capabilities(), rb);
  EXPECT_NE(gap.find("rollback (spec 1.1)"), std::string::npos) << gap;
  EXPECT_NE(gap.find("rollback_reserve " + std::to_string(rb.config.layers[0].rollback_reserve) + " > max_rollback_reserve 0"),
            std::string::npos) << gap;
  EXPECT_EQ(conformance::capability_gap(reference_plugin()->capabilities(), rb), "");
  const EngineFactory f = plugin_engine_factory(p);
  try {
    f.create(rb.config);
    FAIL() << "a reserve was sent to an ABI 1.2 plugin";
  } catch (const ConfigError& e) {
    const std::string want = "config.layers[0].rollback_reserve = " + std::to_string(rb.config.layers[0].rollback_reserve) +
                             ": must be in [0, max_rollback_reserve = 0]";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("declares no rollback (ABI 1.2"), std::string::npos) << e.what();
  }

  // A rollback is a StepError on the host side: no request, the worker lives on, the engine too.
  const Case plain = small_case(40);
  const int started = p->workers_started(), pid = p->worker_pid();
  const auto e = f.create(plain.config);
  std::vector<float> q(2 * 8, 0.5f), k(8, 0.25f), v(8, 1.0f), out(q.size());
  const SequenceStep one{0, 1, q.data(), k.data(), v.data(), out.data()};
  e->step(StepBatch{{}, std::span<const SequenceStep>(&one, 1)});
  const SequenceRollback back{0, 1};
  try {
    e->step(StepBatch{{}, {}, std::span<const SequenceRollback>(&back, 1)});
    FAIL() << "a rollback was accepted for an ABI 1.2 plugin";
  } catch (const StepError& ex) {
    EXPECT_NE(std::string(ex.what()).find("step.rollbacks: plugin libringkv_plugin_abi_1_2.so declares no rollback (ABI 1.2"),
              std::string::npos)
        << ex.what();
  }
  EXPECT_EQ(p->workers_started(), started);
  EXPECT_EQ(p->worker_pid(), pid);
  const auto ref = make_reference_engine(plain.config);
  ref->step(StepBatch{{}, std::span<const SequenceStep>(&one, 1)});
  EXPECT_EQ(e->snapshot(0, 0)->positions, ref->snapshot(0, 0)->positions);  // the token is still there
  // Judged on the rest: a spec 1 case, and a committed golden case, pass.
  const conformance::RunResult run = conformance::run_case(f, plain, ring_checked());
  EXPECT_TRUE(run.ok()) << run.failure;
  const golden::GoldenOutcome g = golden::check_golden(f, committed_cases().front());
  EXPECT_TRUE(g.passed && !g.skipped) << g.failure << g.skip_reason;
  EXPECT_EQ(p->workers_started(), started);
}

// A plugin declaring rollback with max_rollback_reserve 4: a reserve of 5 is a config error naming the
// field and the range before any request; a reserve of 4 reaches the engine (its ring grows by it).
TEST(RollbackThroughTheAbi, AReserveAboveTheDeclaredMaximumIsAConfigErrorNamingTheField) {
  const std::shared_ptr<Plugin> p = Plugin::open(plugin_path("limit_max_rollback_reserve_4"), options());
  EXPECT_TRUE(p->capabilities().rollback);
  EXPECT_EQ(p->capabilities().max_rollback_reserve, 4);
  const EngineFactory f = plugin_engine_factory(p);
  Config c = small_case(40).config;
  c.layers.push_back(LayerConfig{3, 0, RopeConfig{}, 5});
  try {
    f.create(c);
    FAIL() << "a reserve of 5 was accepted with max_rollback_reserve 4";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("config.layers[1].rollback_reserve = 5: must be in [0, max_rollback_reserve = 4]"),
              std::string::npos)
        << e.what();
  }
  c.layers[1].rollback_reserve = 4;
  EXPECT_EQ(nlohmann::json::parse(p->config_json(c))["layers"][1]["rollback_reserve"], 4);
  const auto e = f.create(c);
  EXPECT_EQ(e->cache_bytes(), make_reference_engine(c)->cache_bytes());
  c.layers[1].rollback_reserve = 0;
  EXPECT_GT(e->cache_bytes(), make_reference_engine(c)->cache_bytes()) << "the reserve did not reach the engine";

  // The export helper refuses it too, for a host that does not check.
  const Library lib(plugin_path("limit_max_rollback_reserve_4"));
  ASSERT_NE(lib.api, nullptr);
  nlohmann::json j = conformance::config_to_json(c);
  j["layers"][1]["rollback_reserve"] = 5;
  const std::string json = j.dump();
  ringkv_engine* h = nullptr;
  char error[512] = "";
  EXPECT_EQ(lib.api->create(json.c_str(), json.size(), &h, error, sizeof error), RINGKV_ERR_CONFIG);
  EXPECT_EQ(h, nullptr);
  EXPECT_NE(std::string(error).find("config.layers[1].rollback_reserve = 5: must be in [0, max_rollback_reserve = 4]"),
            std::string::npos)
      << error;
}

// The C table directly: rollbacks strided by their first element's struct_size (a newer host's larger
// ringkv_rollback), a refusal as RINGKV_ERR_STEP with the reference's message, and a 1.2 host's batch,
// which ends before the rollback fields (whatever follows it is not read).
TEST(ExportHelper, RollbacksThroughTheCTable) {
  const Library lib(plugin_path("reference"));
  ASSERT_NE(lib.api, nullptr);
  const ringkv_engine_api& api = *lib.api;
  Config cfg;
  cfg.layers = {LayerConfig{2, 0, RopeConfig{}}};  // W = 2, no reserve: a rollback after the wrap is refused
  cfg.num_q_heads = cfg.num_kv_heads = 1;
  cfg.head_dim = 4;
  cfg.batch = 2;
  cfg.max_tokens = 32;
  const std::string json = conformance::config_to_json(cfg).dump();
  ringkv_engine* h = nullptr;
  char error[256] = "";
  ASSERT_EQ(api.create(json.c_str(), json.size(), &h, error, sizeof error), RINGKV_OK) << error;
  const auto local = make_reference_engine(cfg);
  Case data;
  data.config = cfg;
  std::vector<float> q(6 * 4), k(q.size()), v(q.size()), out(q.size()), want(q.size());
  int64_t next = 0;  // the index of the next token of both sequences
  // One step of n tokens for both sequences through the table and in process, plus `rollbacks`.
  const auto step = [&](int64_t n, const ringkv_batch& tmpl, std::span<const SequenceRollback> rollbacks) {
    conformance::fill_chunk(data, conformance::Tensor::q, 0, next, n, q.data());
    conformance::fill_chunk(data, conformance::Tensor::k, 0, next, n, k.data());
    conformance::fill_chunk(data, conformance::Tensor::v, 0, next, n, v.data());
    ringkv_append a[2] = {};
    for (int s = 0; s < 2; ++s) {
      a[s].struct_size = sizeof a[s];
      a[s].sequence = s;
      a[s].n_tokens = n;
      a[s].q = tensor(q.data(), 1, n, 1, 4, 0);
      a[s].k = tensor(k.data(), 1, n, 1, 4, 0);
      a[s].v = tensor(v.data(), 1, n, 1, 4, 0);
      a[s].out = tensor(out.data(), 1, n, 1, 4, 0);  // both write the same outputs: the same inputs
    }
    ringkv_batch b = tmpl;
    b.num_appends = 2;
    b.appends = a;
    const ringkv_status st = api.step(h, &b);
    const SequenceStep local_steps[2] = {{0, n, q.data(), k.data(), v.data(), want.data()},
                                         {1, n, q.data(), k.data(), v.data(), want.data()}};
    const std::string local_error = step_error(*local, StepBatch{{}, local_steps, rollbacks});
    EXPECT_EQ(st == RINGKV_OK, local_error.empty()) << api.last_error(h) << " / " << local_error;
    if (st != RINGKV_OK) {
      EXPECT_EQ(st, RINGKV_ERR_STEP);
      EXPECT_EQ(std::string(api.last_error(h)), local_error);
      return std::string(api.last_error(h));
    }
    EXPECT_EQ(std::memcmp(out.data(), want.data(), static_cast<size_t>(n) * 4 * sizeof(float)), 0);
    return std::string();
  };
  ringkv_batch b{};
  b.struct_size = sizeof b;
  EXPECT_EQ(step(6, b, {}), "");
  next = 6;
  // Back 3 of 6 with W = 2 and no reserve: refused, and nothing changes.
  struct Wide {  // a later minor's ringkv_rollback, with a field this header does not know
    ringkv_rollback r;
    int64_t later = 0x7777777777777777;
  };
  Wide wide[2] = {{{sizeof(Wide), 0, 3}}, {{sizeof(Wide), 1, 1}}};
  b.num_rollbacks = 2;
  b.rollbacks = &wide[0].r;
  const SequenceRollback refused[2] = {{0, 3}, {1, 1}};
  const std::string m = step(1, b, refused);
  EXPECT_NE(m.find("step.rollbacks[0].n_tokens = 3: refused: sequence 0"), std::string::npos) << m;
  // Back 1 of each sequence (the second element read at stride sizeof(Wide)): honoured.
  wide[0].r.n_tokens = 1;
  wide[1].r.n_tokens = 1;
  const SequenceRollback honoured[2] = {{0, 1}, {1, 1}};
  next = 5;
  EXPECT_EQ(step(1, b, honoured), "");
  next = 6;
  // A 1.2 host's batch: struct_size 32, and what lies beyond it (a rollback of 1 here) is not read.
  b.struct_size = offsetof(ringkv_batch, num_rollbacks);
  EXPECT_EQ(step(1, b, {}), "");
  api.destroy(h);
}
}  // namespace
}  // namespace ringkv::abi
