// The properties stay inside what an engine declares. A property derives variants of its case (a
// neighbour sequence at another start position, shifted positions, W = 1, a second layer with its
// own window, 100 W tokens, f32 storage); a variant outside the engine's capabilities is not put to
// it, so a correct engine that declares limits (batch 1, start positions fixed at 0, a smallest
// window of 2, one sliding window, bf16 storage only) passes every property. Before, such variants
// were run and their creation failed the engine.
#include <gtest/gtest.h>

#include "mutants/mutants.hpp"
#include "property/properties.hpp"
#include "ringkv/error.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/capabilities.hpp"

namespace ringkv::conformance {
namespace {

// The reference, refusing (as a real engine would) every config outside `caps`.
EngineFactory limited(const Capabilities& caps) {
  EngineFactory f = reference_engine_factory();
  f.name = "limited-reference";
  f.capabilities = caps;
  f.create = [caps](const Config& c) -> std::unique_ptr<Engine> {
    if (const std::string gap = capability_gap(caps, c); !gap.empty()) throw ConfigError("limited-reference: " + gap);
    return std::make_unique<ReferenceEngine>(c);
  };
  return f;
}

void expect_every_property_passes(const Capabilities& caps, const char* what) {
  const EngineFactory f = limited(caps);
  const std::vector<PropertyInfo>& props = all_properties();
  for (size_t p = 0; p < props.size(); ++p) {
    for (int i = 0; i < 25; ++i) {
      const Case c = fixed_case(caps, props[p], p, i);
      ASSERT_EQ(capability_gap(caps, c), "") << "the generator left the capabilities for " << props[p].name;
      const PropertyVerdict v = run_property_once(props[p], f, c);
      EXPECT_FALSE(v.failed) << what << ": " << props[p].name << " failed a correct engine on case " << i << ": "
                             << v.message.substr(0, 800);
      if (v.failed) break;
    }
  }
}

TEST(CapabilityScope, BatchOneEnginePassesEveryProperty) {
  Capabilities c;
  c.max_batch = 1;
  expect_every_property_passes(c, "max_batch 1");
}

TEST(CapabilityScope, FixedStartPositionEnginePassesEveryProperty) {
  Capabilities c;
  c.settable_p0 = false;
  expect_every_property_passes(c, "settable_p0 false");
}

TEST(CapabilityScope, LeftWindowEngineWithoutW1PassesEveryProperty) {
  Capabilities c;
  c.min_window = 2;
  expect_every_property_passes(c, "min_window 2");
}

TEST(CapabilityScope, CoreEngineWithOneSlidingWindowPassesEveryProperty) {
  Capabilities c = core_capabilities();
  c.max_position = int64_t{1} << 20;
  expect_every_property_passes(c, "core, positions below 2^20");
}

}  // namespace
}  // namespace ringkv::conformance
