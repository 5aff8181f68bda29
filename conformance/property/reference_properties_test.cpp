// The property suite instantiated for the reference engine. Each property runs
// RapidCheck's default 100 cases (override with RC_PARAMS="max_success=N"),
// shrinks a failure to a minimal case and prints it with its reproduce string.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "property/properties.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/show.hpp"

namespace ringkv::conformance {
namespace {

const EngineFactory& engine() {
  static const EngineFactory f = reference_engine_factory();
  return f;
}

void run_property(const char* name) {
  const PropertyInfo& p = property(name);
  const Case c = *gen_case(engine().capabilities, p.options);
  p.run(engine(), c);
}

#define RINGKV_REFERENCE_PROPERTY(Name) \
  RC_GTEST_PROP(ReferenceEngine, Name, ()) { run_property(#Name); }

RINGKV_REFERENCE_PROPERTY(OracleEquality)
RINGKV_REFERENCE_PROPERTY(RingHoldsVisibleSet)
RINGKV_REFERENCE_PROPERTY(ConstantMemory)
RINGKV_REFERENCE_PROPERTY(ChunkingInvariance)
RINGKV_REFERENCE_PROPERTY(BatchIsolation)
RINGKV_REFERENCE_PROPERTY(ResetIsFresh)
RINGKV_REFERENCE_PROPERTY(RopeRelativity)
RINGKV_REFERENCE_PROPERTY(BoundaryIdentities)
RINGKV_REFERENCE_PROPERTY(GqaEqualsMha)
RINGKV_REFERENCE_PROPERTY(Int8Storage)
RINGKV_REFERENCE_PROPERTY(Poisoning)
RINGKV_REFERENCE_PROPERTY(LayerIndependence)
RINGKV_REFERENCE_PROPERTY(Rollback)

// Every registered property has a test above.
TEST(ReferenceEngine, EveryPropertyIsInstantiated) { EXPECT_EQ(all_properties().size(), 13u); }

}  // namespace
}  // namespace ringkv::conformance
