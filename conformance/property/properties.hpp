// ringkv conformance: the properties, written once against ringkv::Engine.
//
// Each property takes an engine factory and a generated Case, derives the
// variants it needs, and asserts with RapidCheck (RC_ASSERT), so that it can
// run under rc::check with shrinking, or outside it (the mutant test catches
// rc::detail::CaseResult). On failure the message holds the reason, the case
// id and a readable description of config and schedule.
#pragma once

#include <string>
#include <vector>

#include "ringkv/engine.hpp"
#include "support/case.hpp"
#include "support/generators.hpp"

namespace ringkv::conformance {

using PropertyFn = void (*)(const EngineFactory& factory, const Case& c);

struct PropertyInfo {
  const char* name;        ///< stable name, e.g. "OracleEquality"
  const char* summary;     ///< one line: what it asserts
  PropertyFn run;
  CaseOptions options;     ///< generator options the property wants
  bool needs_snapshot = false;
  bool needs_rollback = false;  ///< says nothing on an engine without Capabilities::rollback (spec 1.1)
};

/// The thirteen properties of docs/spec.md's conformance section, in order (the 13th, Rollback, is
/// spec 1.1's: it checks an engine without Capabilities::rollback on spec 1 cases only).
const std::vector<PropertyInfo>& all_properties();
const PropertyInfo& property(const std::string& name);

/// The i-th fixed case of a property (seeded, no shrinking): what the mutant checks run, so a
/// kill never depends on chance. Sizes ramp like RapidCheck's (i % 100).
Case fixed_case(const Capabilities& caps, const PropertyInfo& p, size_t property_index, int i);

struct PropertyVerdict {
  bool failed = false;
  std::string message;
};
/// Runs a property once outside RapidCheck: a failed RC_ASSERT or an exception is a failure.
PropertyVerdict run_property_once(const PropertyInfo& p, const EngineFactory& f, const Case& c);
/// The report of a failed property, out of RapidCheck's description of the failure: each property
/// asserts RC_ASSERT(finding), whose message is "file:line:\nRC_ASSERT(...)\n\nExpands to:\n" and then
/// the report (the reason, then the case); any other description is returned whole.
std::string property_report(const std::string& description);

// 1. every output within the bound of the oracle's, for every storage format
void prop_oracle_equality(const EngineFactory& f, const Case& c);
// 2. after every step the ring holds exactly the visible set, sinks intact, nothing stale
void prop_ring_holds_visible_set(const EngineFactory& f, const Case& c);
// 3. cache bytes constant from construction through 100 W tokens
void prop_constant_memory(const EngineFactory& f, const Case& c);
// 4. chunking invariance (bit-identical for deterministic engines)
void prop_chunking_invariance(const EngineFactory& f, const Case& c);
// 5. batch isolation: other sequences' activity does not change a sequence's outputs
void prop_batch_isolation(const EngineFactory& f, const Case& c);
// 6. a reset sequence behaves like a fresh one
void prop_reset_is_fresh(const EngineFactory& f, const Case& c);
// 7. shifting every position by a constant leaves outputs unchanged within tolerance (f32)
void prop_rope_relativity(const EngineFactory& f, const Case& c);
// 8. W >= length is causal; W = 1, S = 0 is the token's own v; S + W >= length is causal
void prop_boundary_identities(const EngineFactory& f, const Case& c);
// 9. GQA equals MHA with each kv head repeated
void prop_gqa_equals_mha(const EngineFactory& f, const Case& c);
// 10. INT8 storage: element bound, code range, zero groups, idempotent requantisation
void prop_int8_storage(const EngineFactory& f, const Case& c);
// 11. NaN in empty and evicted slots changes no output
void prop_poisoning(const EngineFactory& f, const Case& c);
// 12. changing one layer's inputs leaves the other layers' outputs unchanged
void prop_layer_independence(const EngineFactory& f, const Case& c);
// 13. spec 1.1: verify-then-accept schedules with rollbacks match the oracle (rolled-back tokens as if
//     never appended, re-appended ones at their indices), the ring holds the spec's slots after every
//     step, and the engine refuses exactly the steps the high-water rule refuses
void prop_rollback(const EngineFactory& f, const Case& c);

}  // namespace ringkv::conformance
