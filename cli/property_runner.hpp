// ringkv CLI: runs the RapidCheck properties against any engine, with a bounded,
// visible shrink.
//
// The search and the shrink are driven here, with RapidCheck's generators and its
// recipe shrinking (rc::gen::detail), instead of rc::detail::checkTestable:
//   - the search is RapidCheck's (the same seeds give the same cases);
//   - the first failing case is reported (stderr) before the shrink starts;
//   - the shrink is RapidCheck's (accept the first failing shrink, restart from it), but
//     each candidate runs once (RapidCheck runs every accepted one a second time to find
//     its shrinks, and the final case a third time), it has a time budget, and it prints
//     its progress;
//   - every case is named by a replay token (property, seed, case index, size, shrink
//     path) that `ringkv check --replay TOKEN` runs again exactly, shrunk or not.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ringkv/engine.hpp"

namespace ringkv::cli {

struct PropertyRunOptions {
  int cases = 100;        ///< cases per property
  uint64_t seed = 1;      ///< the search's seed (RapidCheck's Random)
  std::string filter, exclude;
  /// Shrink budget per property, in seconds: 0 = no shrinking, infinity = until done.
  double shrink_time = 60;
  bool progress = false;  ///< stderr: the first failing case, shrink progress
  /// Non-empty: run only the case this token names (a report's replay token), nothing else.
  std::string replay;
  /// Non-empty: run only the property of this exact name (filter and exclude are not used): one
  /// shard of `ringkv check --jobs N`.
  std::string only;
  /// What the reproduce lines start with, e.g. "ringkv check --engine 'x.so'" (then " --no-golden
  /// --replay TOKEN"); a command holding "{token}" is the whole line, with the quoted token there.
  std::string command;
  /// Called once before the first property and after each: the warnings raised since (by the caller's
  /// engine: a plugin's worker that grew beyond its cache over a case, a leak?), drained, so each
  /// property gets those of its own cases (PropertyOutcome::warnings). Unset: none collected.
  std::function<std::vector<std::string>()> take_warnings;
};

/// One failing case of a property, as the report shows it.
struct FailingCase {
  std::string id;      ///< Case::id() of the generated case
  std::string shape;   ///< its size, e.g. "T=18 tokens in 5 steps, B=2, L=1, Hq=2, Hkv=1, D=4"
  int64_t tokens = 0;  ///< tokens appended over every sequence (the size in the benchmark)
  int64_t steps = 0;
  std::string step;    ///< the first failing step as the reason names it ("step 3"), or ""
  std::string reason;  ///< the property's message (reason, then the case's description)
  std::string replay;  ///< the replay token
};

struct PropertyOutcome {
  std::string name;
  bool passed = false;
  bool skipped = false;
  int cases_run = 0;
  std::string report;  ///< failure: the full text (first case, shrink result, reproduce lines)
  // ---- failures ----
  int failing_case = -1;      ///< index of the first failing case in the search (0-based)
  FailingCase first, shrunk;  ///< shrunk == first when nothing was shrunk
  bool shrink_attempted = false;
  bool fully_shrunk = false;  ///< the shrink ran to its end (no smaller failing case exists)
  int shrink_steps = 0;       ///< accepted shrinks
  int shrink_tries = 0;       ///< candidates run
  double seconds = 0;            ///< the whole property: search and shrink
  double seconds_to_first = 0;   ///< search time until the first failing case
  double seconds_shrinking = 0;  ///< shrink time
  bool replayed = false;         ///< a --replay run
  std::string error;             ///< the run itself failed (a replay token that does not fit, ...)
  /// Not a failure: the warnings its cases raised (PropertyRunOptions::take_warnings), the first
  /// kMaxPropertyWarnings verbatim, then one line saying how many more.
  std::vector<std::string> warnings;
};

/// How many of a property's warnings its outcome keeps verbatim (a leak warns on every case).
constexpr size_t kMaxPropertyWarnings = 3;

/// Runs every property (whose name matches the filter) against the engine.
std::vector<PropertyOutcome> run_properties(const EngineFactory& factory, const PropertyRunOptions& options);

/// The property a replay token names; throws std::invalid_argument if it is malformed.
std::string replay_property(const std::string& token);

/// The names of the properties run_properties runs (filter, exclude, only; not replay), in its order.
std::vector<std::string> property_names(const PropertyRunOptions& options);

/// A PropertyOutcome as one line of JSON, and back (every field, exactly): how a property run in
/// another process (`ringkv check --jobs N`) reports. outcome_from_json throws std::invalid_argument.
std::string outcome_to_json(const PropertyOutcome& outcome);
PropertyOutcome outcome_from_json(const std::string& json);

/// Writes text to stderr with one write(2), so that the progress lines of properties and golden
/// cases running at once (`ringkv check --jobs N`) never interleave within a line.
void write_stderr(const std::string& text);

}  // namespace ringkv::cli
