// ringkv golden: the boundary classes as "spec 1 core" plus named features (docs/spec.md §0), and
// the coverage verdict: on which classes an engine was judged.
//
// A class is core when an engine of the core level can express it (t = W + 1, reset-reuse, GQA,
// bf16 K/V, ...) and a feature otherwise (sinks, softcap, INT8 q8_0, gptj, ...). A case is core when
// all its classes are; its features are its feature classes. For one engine each class is
//   judged          at least one case carrying it was compared (passed, failed, or xpass),
//   not applicable  the engine's declared capabilities cannot express it (e.g. sinks, W = 1 for an
//                   engine with min_window 2, batch-mixed for max_batch 1),
//   not judged      it could, but no case within its capabilities carries it (or every one was
//                   xfail'd, unusable, skipped by the engine, or filtered out).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "golden/golden.hpp"
#include "ringkv/engine.hpp"

namespace ringkv::golden {

enum class ClassLevel { core, feature };

struct ClassInfo {
  const char* name;   ///< as in the manifest, e.g. "t=W+1"
  ClassLevel level;
  bool structural;    ///< a boundary of the ring itself (required by default when applicable)
  const char* what;   ///< one line for reports and docs
};

/// Every class, in report order: the structural core classes, the other core classes, the features.
const std::vector<ClassInfo>& class_catalogue();
/// The ClassInfo of a name; throws std::out_of_range for an unknown class.
const ClassInfo& class_info(const std::string& name);

/// The feature classes among a case's classes, in catalogue order; empty: a core case.
std::vector<std::string> case_features(const std::vector<std::string>& classes);
/// "core" or "feature".
const char* case_level(const std::vector<std::string>& classes);

/// Why an engine with `caps` cannot express the class ("" if it can): the capability it lacks.
std::string class_not_applicable(const Capabilities& caps, const std::string& name);

enum class Coverage { judged, not_applicable, not_judged };
const char* to_string(Coverage c);  ///< "judged", "not applicable", "not judged"

struct ClassCoverage {
  std::string name;
  Coverage status = Coverage::not_judged;
  int cases_judged = 0;  ///< cases carrying the class that were compared
  std::string why;       ///< not applicable: the missing capability
};

/// One case's contribution to coverage: its classes and whether it was compared.
struct CaseCoverageInput {
  std::vector<std::string> classes;
  bool judged = false;
};

/// Every class of the catalogue for one engine, in catalogue order.
std::vector<ClassCoverage> class_coverage(const Capabilities& caps, const std::vector<CaseCoverageInput>& cases);

/// The matrix of docs/golden-format.md: for a capability set, how many cases of `set` it runs
/// (capability_gap() empty) per class of the catalogue (0 for classes it runs no case of).
std::map<std::string, int> cases_per_class(const Capabilities& caps, const std::vector<GoldenSpec>& set);

/// The capability sets the matrix shows and the coverage test checks, in order: core f32; core f16
/// only; core bf16 only with head dims {64, 128}; core + q8_0 (with K and V in different formats,
/// as ggml allows); core + sinks; core + sink logits; core + rollback (spec 1.1); everything (rollback included). The f16-only and bf16-only sets declare that storage (so they also run f32 cases).
std::vector<std::pair<std::string, Capabilities>> matrix_capability_sets();

/// The matrix as a Markdown table (classes as rows, capability sets as columns), as
/// docs/golden-format.md shows it between its "matrix" markers.
std::string coverage_matrix_markdown(const std::vector<GoldenSpec>& set);

}  // namespace ringkv::golden
