// The property suite instantiated for the CUDA engine's plan on the host:
// cuda-plan (fused split-K decode, the cuBLAS path for chunks) and
// cuda-plan-cublas (the cuBLAS path for every step). They run the launches the
// kernels run (cuda/src/plan_backend.cpp), so these tests are the CPU proof of
// the kernels' logic. RapidCheck's default 100 cases each. Spec 1.1: speculative-decoding
// schedules with a rollback reserve, through the runner (outputs, rings, refusals).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "property/properties.hpp"
#include "ringkv/cuda_engine.hpp"
#include "property/reserve_schedule.hpp"
#include "support/show.hpp"

namespace ringkv::conformance {
namespace {

const EngineFactory& fused() {
  static const EngineFactory f = cuda::plan_engine_factory();
  return f;
}
const EngineFactory& cublas() {
  static const EngineFactory f = cuda::plan_cublas_engine_factory();
  return f;
}

void run_property(const EngineFactory& f, const char* name) {
  const PropertyInfo& p = property(name);
  const Case c = *gen_case(f.capabilities, p.options);
  p.run(f, c);
}

#define RINGKV_PLAN_PROPERTY(Name)                                          \
  RC_GTEST_PROP(CudaPlanEngine, Name, ()) { run_property(fused(), #Name); } \
  RC_GTEST_PROP(CudaPlanCublasEngine, Name, ()) { run_property(cublas(), #Name); }

RINGKV_PLAN_PROPERTY(OracleEquality)
RINGKV_PLAN_PROPERTY(RingHoldsVisibleSet)
RINGKV_PLAN_PROPERTY(ConstantMemory)
RINGKV_PLAN_PROPERTY(ChunkingInvariance)
RINGKV_PLAN_PROPERTY(BatchIsolation)
RINGKV_PLAN_PROPERTY(ResetIsFresh)
RINGKV_PLAN_PROPERTY(RopeRelativity)
RINGKV_PLAN_PROPERTY(BoundaryIdentities)
RINGKV_PLAN_PROPERTY(GqaEqualsMha)
RINGKV_PLAN_PROPERTY(Int8Storage)
RINGKV_PLAN_PROPERTY(Poisoning)
RINGKV_PLAN_PROPERTY(LayerIndependence)
RINGKV_PLAN_PROPERTY(Rollback)

TEST(CudaPlanEngine, EveryPropertyIsInstantiated) { EXPECT_EQ(all_properties().size(), 13u); }

// ---- spec 1.1: rollback with a reserve ----

RC_GTEST_PROP(CudaPlanEngine, RollbackWithReserveMatchesTheOracleAndTheSpecRing, ()) {
  run_reserve_schedule(fused(), false);
}
RC_GTEST_PROP(CudaPlanCublasEngine, RollbackWithReserveMatchesTheOracleAndTheSpecRing, ()) {
  run_reserve_schedule(cublas(), false);
}
RC_GTEST_PROP(CudaPlanEngine, RollbackWithReserveNeverReadsAnEmptiedSlot, ()) { run_reserve_schedule(fused(), true); }

}  // namespace
}  // namespace ringkv::conformance
