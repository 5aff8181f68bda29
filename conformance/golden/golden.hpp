// ringkv golden: golden cases (docs/golden-format.md).
//
// A golden case is a Case (config + schedule + seed) together with every
// input the float64 oracle saw, its expected outputs, the inputs of the
// tolerance bound and the stored K/V the spec prescribes, in one safetensors
// file. Engines in any language replay the inputs and compare; the bound is
// computed at check time from the stored inputs and the profile the engine
// declares. golden_set() is the committed set under golden/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "golden/safetensors.hpp"
#include "ringkv/engine.hpp"
#include "support/case.hpp"
#include "support/tolerance.hpp"

namespace ringkv::golden {

inline constexpr const char* kGoldenFormat = "ringkv-golden";
/// Format 1: spec 1 cases. Format 2 (spec 1.1): a case with rollback events; a case without them is
/// still written as format 1, byte for byte as before (docs/golden-format.md, "Format 2").
inline constexpr const char* kGoldenFormatVersion = "1";
inline constexpr const char* kSpecVersion = "1";
inline constexpr const char* kGoldenFormatVersion2 = "2";
inline constexpr const char* kSpecVersion11 = "1.1";
/// The spec this ringkv implements (docs/spec.md). Spec 1.2 adds no step semantics, so a case needs spec
/// 1 or 1.1 (its spec_version); 1.2's declared repeats (§3.1) are read by both golden formats.
inline constexpr const char* kSpecImplemented = "1.2";
inline constexpr const char* kOutputsFormat = "ringkv-golden-outputs";

/// One case of the committed set: a stable file name, its boundary classes, the case.
struct GoldenSpec {
  std::string name;                  ///< file name without extension; [a-z0-9_.-]
  std::vector<std::string> classes;  ///< boundary classes it covers, e.g. "t=W+1", "kv-f16"
  conformance::Case c;
};

/// The committed golden set, in a fixed order (fixed seeds; see golden/manifest.json).
std::vector<GoldenSpec> golden_set();
/// Every boundary class of the spec the set must cover (issue 3), in a fixed order.
const std::vector<std::string>& boundary_classes();
/// The classes a case's config, schedule and data actually exercise (sorted). A spec's tags
/// must be a subset of these (the test checks), so no tag claims what its case lacks.
std::vector<std::string> derive_classes(const conformance::Case& c);

/// One appended token: row r of every [L][R]... tensor.
struct GoldenRow {
  int step = 0;
  int sequence = 0;
  int64_t index = 0;     ///< token index since the sequence's last reset
  int64_t position = 0;  ///< true position p0 + index
  int stream = 0;        ///< the data stream (support/case.hpp)
};

/// The tokens one sequence appends in one step: rows [row_begin, row_begin + n_tokens).
struct GoldenChunk {
  int step = 0;
  int sequence = 0;
  int64_t row_begin = 0;
  int64_t n_tokens = 0;
};

/// What the spec says is stored for K or V, per (layer, row, kv head).
struct GoldenStored {
  std::vector<float> value;    ///< [L][R][Hkv][D] decoded stored value (K: after RoPE)
  std::vector<int8_t> codes;   ///< [L][R][Hkv][D], int8 only
  std::vector<float> scales;   ///< [L][R][Hkv][scales_per_row], int8 per_head and q8_0 only
  std::vector<uint8_t> tie;    ///< [L][R][Hkv][D] 1 inside the INT8 tie window (either code allowed), int8 only
};

struct GoldenCase {
  std::string name;
  std::vector<std::string> classes;
  conformance::Case c;
  /// A scale case's inputs (`ringkv golden generate --scale`, golden/scale_golden.hpp): the name of its
  /// scale case ("scale/ci/<shape>", __metadata__ "scale_case") and its sample_every. Such a case holds
  /// the schedule and the inputs only: no expected outputs, bound inputs or stored cache (`ringkv check`
  /// regenerates the oracle on the sampled rows, docs/scale.md). Empty for every other case.
  std::string scale_case;
  int64_t sample_every = 0;

  /// [T] 1 where spec 1.1 refuses the step (§5.1.2): the engine must refuse it, and it changes nothing
  /// (format 2 holds such a step's rollbacks only). All 0 for a case without rollbacks.
  std::vector<uint8_t> refused;
  std::vector<GoldenRow> rows;      ///< [R] in schedule order: step, then sequence ascending, then token.
                                    ///< After a rollback (format 2) an index appears again: the latest row wins
  std::vector<GoldenChunk> chunks;  ///< [C] in the same order
  /// [R] spec 1.2 (golden format §3.1, __metadata__ 'repeats'): -1, or the first earlier row this row
  /// repeats (same position, bitwise-equal q, k and v in every layer). Empty when no row repeats.
  std::vector<int32_t> repeat_of;
  std::vector<float> q;             ///< [L][R][Hq][D] raw (unrotated) inputs, exactly what the oracle saw
  std::vector<float> k, v;          ///< [L][R][Hkv][D]
  std::vector<float> expected;      ///< [L][R][Hq][D] oracle output rounded to f32
  std::vector<double> expected_f64; ///< [L][R][Hq][D] oracle output
  // Bound inputs (conformance::ScoreStats) per [L][R][Hq].
  std::vector<double> n_keys, max_abs_dot, max_abs_score, max_tie_dot, max_qk_norm, max_angle;
  // Bound inputs (conformance::DimStats) per [L][R][Hq][D].
  std::vector<double> spread, abs_mass, tie_mass, abs_out, max_abs_v;
  GoldenStored k_stored, v_stored;

  int layers() const { return static_cast<int>(c.config.layers.size()); }
  /// 2 for a case with rollback events (spec 1.1), else 1.
  int format_version() const;
  /// The steps the spec refuses, ascending.
  std::vector<int> refused_steps() const;
  int64_t num_rows() const { return static_cast<int64_t>(rows.size()); }
  std::string id() const { return c.id(); }
  /// Offset of element [layer][row][head][0] of a q-shaped ([L][R][Hq][D]) tensor.
  size_t q_offset(int layer, int64_t row, int head) const;
  /// Offset of element [layer][row][head][0] of a kv-shaped ([L][R][Hkv][D]) tensor.
  size_t kv_offset(int layer, int64_t row, int head) const;
  conformance::ScoreStats score(int layer, int64_t row, int head) const;
  conformance::DimStats dim(int layer, int64_t row, int head, int d) const;
};

/// Runs the oracle over the spec's schedule and records everything.
GoldenCase make_golden(const GoldenSpec& spec);

/// The safetensors form of a golden case (deterministic bytes).
StFile golden_to_safetensors(const GoldenCase& g);
/// Parses and validates a golden file: metadata, the case JSON, every tensor's
/// dtype and shape against the config and the schedule. Throws ringkv::Error.
GoldenCase golden_from_safetensors(const StFile& file);
std::vector<uint8_t> serialize_golden(const GoldenCase& g);
void write_golden(const std::string& path, const GoldenCase& g);
GoldenCase read_golden(const std::string& path);

/// The first thing that did not match.
struct GoldenMismatch {
  std::string what;  ///< "output", "stored K", "stored V", "K code", "V scale", "ring position", ...
  int step = -1, sequence = -1;
  int64_t token = -1, position = -1;  ///< token index since reset and its true position
  int layer = -1, head = -1, dim = -1;  ///< head: q head for outputs, kv head for stored values
  int64_t slot = -1;
  double expected = 0, got = 0, bound = 0;
};

/// The RoPE verdict of a case: the rotation checked apart from attention (docs/golden-format.md §7,
/// docs/engine-abi.md "Rotated q and k"). Computed by rope_verdict.cpp.
struct RopeVerdict {
  enum class Kind {
    conformant,         ///< q_rot/k_rot within the bound of spec §8's f64 rotation
    within_declared,    ///< beyond that, but within the bound of the declared rope_angle
    failed,             ///< beyond the declared rope_angle's bound too
    rotated_by_ringkv,  ///< the engine took q and k rotated by ringkv (ABI wants_rotated_qk)
    not_checked,        ///< no rotated values: the bound carries the RoPE term (today's check)
  };
  Kind kind = Kind::not_checked;
  std::string line;  ///< the verdict as one readable line
  // (a) the rotation, with q_rot/k_rot: the worst angle-equivalent error |engine pair - f64 pair| / |pair|.
  double worst_angle_error = 0;
  std::string worst_tensor;  ///< "q_rot" or "k_rot"
  int worst_layer = -1, worst_head = -1, worst_dim = -1;  ///< dim: the pair's first element
  int64_t worst_row = -1, worst_position = -1;
  std::string failure;  ///< the first rotation beyond the declared bound (kind failed), readable
  // (b) attention recomputed from the engine's own rotated values, bound with the RoPE term off.
  int64_t tight_checked = 0, tight_failed = 0;
  double tight_worst_ratio = 0;
  // Without rotated values: the (layer, row, q head) whose bound's RoPE term exceeded its other terms.
  int64_t rope_dominated = 0;
  int64_t rope_dominated_from = -1;  ///< the smallest position where it did
};
/// "conformant", "within_declared", "failed", "rotated_by_ringkv", "not_checked".
const char* to_string(RopeVerdict::Kind kind);

struct GoldenOutcome {
  bool passed = false;
  bool skipped = false;
  std::string skip_reason;        ///< what the engine's capabilities lack
  double worst_ratio = 0;         ///< max |got - expected| / bound over all outputs
  std::string failure;            ///< first failure, readable; empty if passed or skipped
  std::optional<GoldenMismatch> first;  ///< the first failure, structured (absent for a thrown engine)
  int64_t outputs_checked = 0;
  int64_t outputs_failed = 0;
  int64_t stored_checked = 0;     ///< stored elements compared through snapshot() or an outputs file
  std::optional<PrecisionProfile> profile;  ///< the profile the outputs were judged under
  bool profile_from_file = false;  ///< it came from the outputs file's metadata (not the caller's default)
  std::optional<RopeVerdict> rope; ///< the RoPE verdict, where there is one to give
};

struct GoldenCheckOptions {
  bool snapshot = true;  ///< compare the engine's cache (if it exposes one) after every step
  /// Stored K with RoPE: exact (same RoPE code and C library as the generator) instead of
  /// within one step of the storage format (spec §11.1).
  bool exact_rotated_k = false;
  /// ringkv rotated q and k before the engine saw them (ABI wants_rotated_qk): the rotation is
  /// spec §8's, so outputs are judged with the bound's RoPE term off and the verdict says so.
  bool qk_rotated_by_ringkv = false;
};

/// Drives a fresh engine through the case with the file's inputs and compares
/// every output within output_bound(), and (optionally) the cache exactly.
GoldenOutcome check_golden(const EngineFactory& factory, const GoldenCase& g, const GoldenCheckOptions& options = {});

struct GoldenOutputs;
/// File-exchange mode: an outputs file written by an external engine (docs/golden-format.md §7),
/// compared under the profile in its metadata, else under `default_profile`. A file that declares
/// its case unsupported gives a skipped outcome.
GoldenOutcome check_golden_outputs(const GoldenCase& g, const std::string& outputs_path,
                                   const PrecisionProfile& default_profile);
/// The same on outputs in memory ([L][R][Hq][D]).
GoldenOutcome compare_golden_outputs(const GoldenCase& g, const std::vector<float>& out, const PrecisionProfile& profile);
/// The same on everything an outputs file can hold (rotated q/k, stored cache), under `profile`.
GoldenOutcome compare_golden_outputs(const GoldenCase& g, const GoldenOutputs& o, const PrecisionProfile& profile);

/// The bound of every output under a declared profile, [L][R][Hq][D] (the layout of "expected"):
/// output_bound(make_bound_context(config, layer, profile), score(...), dim(...)).
std::vector<double> golden_bounds(const GoldenCase& g, const PrecisionProfile& profile);

/// What an outputs file holds (docs/golden-format.md §7).
struct GoldenOutputs {
  std::vector<float> out;                     ///< [L][R][Hq][D]; empty when the case is unsupported
  std::optional<PrecisionProfile> profile;    ///< from __metadata__ "profile", if present
  std::string engine;                         ///< __metadata__ "engine", if present
  std::string unsupported;                    ///< __metadata__ "unsupported": why the engine cannot run the case
  /// __metadata__ "refused_steps" (format 2 cases): the steps the engine refused (a StepError for a
  /// refused rollback, spec 1.1 §5.1.4), ascending; absent means none.
  std::vector<int> refused_steps;
  /// The engine's rotated q and k before storage rounding (tensors "q_rot", "k_rot"; both or neither):
  /// [L][R][Hq][D] and [L][R][Hkv][D], empty if absent.
  std::vector<float> q_rot, k_rot;
  /// The engine's stored cache per row, laid out like the golden's "k_stored"/"v_stored" and, for INT8,
  /// "*_codes" and "*_scales" (`tie` unused).
  std::optional<GoldenStored> k_stored, v_stored;
};
/// Reads and validates an outputs file against a case (shapes, dtypes, "id" if present).
GoldenOutputs read_golden_outputs(const std::string& path, const GoldenCase& g);
/// Writes an outputs file (what an external engine produces).
void write_golden_outputs(const std::string& path, const GoldenCase& g, const std::vector<float>& out,
                          const std::string& engine = "", const std::optional<PrecisionProfile>& profile = {});
/// Writes an outputs file with everything it holds ("id", "name" and "format" from the case).
void write_golden_outputs(const std::string& path, const GoldenCase& g, const GoldenOutputs& o);

/// Writes DIR/cases/<name>.safetensors for every case of golden_set() and DIR/manifest.json.
/// `progress` (may be null) is called after each case with its name and size.
void generate_golden_set(const std::string& dir, void (*progress)(const std::string& name, size_t bytes) = nullptr);

/// `n` random cases from the property generators within `caps` (golden/random_set.cpp), named
/// random_<seed>_<i>, classes derived; the same (n, seed, caps) give the same cases.
std::vector<GoldenSpec> random_golden_set(int n, uint64_t seed, const Capabilities& caps);
/// Writes such a set like generate_golden_set; its manifest records {"random": n, "seed": seed,
/// "capabilities": {...}} as "generator", so `verify` regenerates it and reports name it.
void generate_random_golden_set(const std::string& dir, int n, uint64_t seed, const Capabilities& caps,
                                void (*progress)(const std::string& name, size_t bytes) = nullptr);
/// The command that regenerates the set in DIR ("" for the committed set), e.g.
/// "ringkv golden generate --random 200 --seed 7 --capabilities FILE --out DIR".
std::string golden_set_generator(const std::string& dir);
/// Checks DIR against the manifest (hashes, sizes) and against a fresh in-memory
/// regeneration (bytes); returns the problems found (empty: OK).
std::vector<std::string> verify_golden_set(const std::string& dir);

/// One manifest entry.
struct ManifestEntry {
  std::string name, id, file, sha256;
  std::vector<std::string> classes;
  int64_t bytes = 0;
  std::string level;                  ///< "core" or "feature" (golden/coverage.hpp: case_level)
  std::vector<std::string> features;  ///< its feature classes (empty for a core case)
  /// "requires" (format 2 entries only; absent for format 1): what a reader and an engine need.
  int golden_format_version = 1;
  std::string spec_version = "1";
  std::vector<std::string> required_capabilities;  ///< e.g. {"rollback"}
};
/// Reads DIR/manifest.json (throws ringkv::Error naming the problem).
std::vector<ManifestEntry> read_manifest(const std::string& dir);

/// A golden file that cannot be used: unreadable, not the size or sha256 its manifest says, or
/// malformed. Unusable input, never a verdict on an engine.
class GoldenInputError : public Error {
 public:
  using Error::Error;
};
/// Reads the case of a manifest entry (its `file` relative to DIR, or absolute) after checking the
/// file's size and sha256 against the entry; throws GoldenInputError naming the file and the problem.
GoldenCase load_manifest_case(const std::string& dir, const ManifestEntry& entry);

}  // namespace ringkv::golden
