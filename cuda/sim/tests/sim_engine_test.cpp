// cuda-sim: the CUDA engine's kernels, run from their own source by the host SIMT executor
// (cuda/sim), against the committed golden cases, the properties, and cuda-plan at the same
// simulated SM count (132 an H200, 114 an H100 PCIe, and a small one: 8), with every check of
// the executor on (races, barriers, shuffles, bounds, uninitialised shared memory).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "golden/golden.hpp"
#include "property/properties.hpp"
#include "ringkv/cuda/plan_backend.hpp"
#include "ringkv/cuda_engine.hpp"
#include "sim_backend.hpp"
#include "support/data_dir.hpp"
#include "support/runner.hpp"

namespace ringkv::conformance {
namespace {

using golden::check_golden;
using golden::GoldenCase;
using golden::GoldenOutcome;
using golden::load_manifest_case;
using golden::ManifestEntry;
using golden::read_manifest;

const std::string& golden_dir() {
  static const std::string d = data_dir("golden", std::string(RINGKV_SOURCE_DIR) + "/golden");
  return d;
}

/// Every committed golden case on `factory`: passed or skipped (capabilities), never failed.
void every_golden_case(const EngineFactory& factory) {
  int passed = 0, skipped = 0;
  for (const ManifestEntry& e : read_manifest(golden_dir())) {
    const GoldenCase g = load_manifest_case(golden_dir(), e);
    const GoldenOutcome o = check_golden(factory, g);
    if (o.skipped) {
      ++skipped;
      continue;
    }
    EXPECT_TRUE(o.passed) << factory.name << ": golden case " << e.name << ": " << o.failure;
    passed += o.passed ? 1 : 0;
  }
  std::printf("[cuda-sim] %s: %d golden cases passed, %d skipped\n", factory.name.c_str(), passed, skipped);
  EXPECT_GT(passed, 0);
}

class Goldens : public ::testing::TestWithParam<int> {};

TEST_P(Goldens, FusedPassesEveryGoldenCase) { every_golden_case(cuda::sim_engine_factory(GetParam())); }
INSTANTIATE_TEST_SUITE_P(SmCount, Goldens, ::testing::Values(132, 114, 8),
                         [](const ::testing::TestParamInfo<int>& i) { return "sm" + std::to_string(i.param); });

TEST(GoldensCublas, CublasPathPassesEveryGoldenCase) { every_golden_case(cuda::sim_cublas_engine_factory(132)); }

/// The properties' generator with a quarter of its work budget (tokens × keys × heads × D × layers
/// × batch) and windows up to 24 (ConstantMemory runs 100·W tokens): the simulator runs every
/// thread of every block, tens of times cuda-plan's time. Larger windows, tiles and splits are
/// in the golden cases, which all run.
CaseOptions sim_options(CaseOptions o) {
  o.work_budget = std::min<int64_t>(o.work_budget, 1'500'000);
  o.max_window = std::min<int64_t>(o.max_window, 24);
  return o;
}

// ---- the same outputs as cuda-plan at the same SM count (the plan is the kernels' contract) ----

void same_as_plan(int sm_count) {
  const EngineFactory sim = cuda::sim_engine_factory(sm_count);
  const EngineFactory plan{"cuda-plan@" + std::to_string(sm_count), cuda::core_capabilities(), [sm_count](const Config& c) {
                             return std::unique_ptr<Engine>(std::make_unique<cuda::EngineCore>(
                                 c, std::make_unique<cuda::PlanBackend>(sm_count), cuda::CoreOptions{}));
                           }};
  const Case c = *gen_case(sim.capabilities, sim_options(property("OracleEquality").options));
  const RunResult a = run_case(sim, c);
  RC_ASSERT(a.failure.empty());
  const RunResult b = run_case(plan, c);
  RC_ASSERT(b.failure.empty());
  const std::string diff = compare_runs(a, b, c.config, CompareOptions{});
  if (!diff.empty()) RC_FAIL("cuda-sim and cuda-plan at " + std::to_string(sm_count) + " SMs differ: " + diff);
}

RC_GTEST_PROP(SameAsCudaPlan, At132Sms, ()) { same_as_plan(132); }
RC_GTEST_PROP(SameAsCudaPlan, At114Sms, ()) { same_as_plan(114); }
RC_GTEST_PROP(SameAsCudaPlan, At8Sms, ()) { same_as_plan(8); }

// ---- the properties (a smaller case count than cuda-plan's: RC_PARAMS from the ctest) ----

void run_property(const EngineFactory& f, const char* name) {
  const PropertyInfo& p = property(name);
  const Case c = *gen_case(f.capabilities, sim_options(p.options));
  p.run(f, c);
}
const EngineFactory& fused() {
  static const EngineFactory f = cuda::sim_engine_factory(132);
  return f;
}
const EngineFactory& cublas() {
  static const EngineFactory f = cuda::sim_cublas_engine_factory(132);
  return f;
}

#define RINGKV_SIM_PROPERTY(Name)                                        \
  RC_GTEST_PROP(CudaSimEngine, Name, ()) { run_property(fused(), #Name); } \
  RC_GTEST_PROP(CudaSimCublasEngine, Name, ()) { run_property(cublas(), #Name); }

RINGKV_SIM_PROPERTY(OracleEquality)
RINGKV_SIM_PROPERTY(RingHoldsVisibleSet)
RINGKV_SIM_PROPERTY(ConstantMemory)
RINGKV_SIM_PROPERTY(ChunkingInvariance)
RINGKV_SIM_PROPERTY(BatchIsolation)
RINGKV_SIM_PROPERTY(ResetIsFresh)
RINGKV_SIM_PROPERTY(RopeRelativity)
RINGKV_SIM_PROPERTY(BoundaryIdentities)
RINGKV_SIM_PROPERTY(GqaEqualsMha)
RINGKV_SIM_PROPERTY(Int8Storage)
RINGKV_SIM_PROPERTY(Poisoning)
RINGKV_SIM_PROPERTY(LayerIndependence)
RINGKV_SIM_PROPERTY(Rollback)

// ---- one rule for what the engine core accepts, on every backend (issue 27 item 5) ----

/// What creating the engine throws, or "" when it does not.
std::string creation_error(const EngineFactory& f, const Config& c) {
  try {
    f.create(c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(GridLimits, ConfigsWhoseLaunchesExceedTheGridAreRefusedOnEveryBackend) {
  // gather: (C + 256)·Hkv > 2^31 − 1 with C = 2^30 + 16, Hkv = 2
  Config gather;
  gather.layers = {LayerConfig{}};
  gather.layers[0].window = (int64_t{1} << 30) + 16;
  gather.max_tokens = gather.layers[0].window;
  gather.num_q_heads = gather.num_kv_heads = 2;
  gather.head_dim = 4;
  // poison: B·C·Hkv > 2^31 − 1 with B = 3, C = 2^30 − 16, Hkv = 1 (gather's (C + 256)·1 fits)
  Config poison = gather;
  poison.num_q_heads = poison.num_kv_heads = 1;
  poison.batch = 3;
  poison.layers[0].window = poison.max_tokens = (int64_t{1} << 30) - 16;
  const EngineFactory plan = cuda::plan_engine_factory(), sim = cuda::sim_engine_factory(132);
  for (const EngineFactory* f : {&plan, &sim}) {
    const std::string g = creation_error(*f, gather), p = creation_error(*f, poison);
    EXPECT_NE(g.find("gather launch needs (C + 256) x num_kv_heads = 2147484192 blocks, above the grid limit"),
              std::string::npos)
        << f->name << ": " << g;
    EXPECT_NE(p.find("poison launch needs batch x C x num_kv_heads = 3221225424 blocks"), std::string::npos)
        << f->name << ": " << p;
  }
}

TEST(CudaSimEngine, EveryPropertyIsInstantiated) { EXPECT_EQ(all_properties().size(), 13u); }

}  // namespace
}  // namespace ringkv::conformance
