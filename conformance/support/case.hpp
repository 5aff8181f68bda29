// ringkv conformance: a test case (config + schedule + seed) and its inputs.
//
// Inputs are a pure function of (seed, stream, layer, token index, tensor,
// head): a "stream" is the token sequence a sequence slot runs between resets.
// So re-chunking a schedule, reordering a batch or moving a stream to another
// slot leaves every token's q, k and v unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ringkv/config.hpp"

namespace ringkv::conformance {

enum class DataMode {
  random,  ///< q, k uniform in [-amp, amp), v uniform in [-1, 1)
  needle,  ///< planted keys at t - W, t - W + 1 and the first sink dominate the query at boundary targets t
};
const char* to_string(DataMode);

struct ResetPlan {
  int sequence = 0;
  int64_t start_position = 0;
  int stream = 0;  ///< the stream the sequence runs from now on (its data)
};

/// Spec 1.1: takes back the last n tokens of a sequence (§5.1); its next tokens come from `stream`,
/// so that re-appended indices carry fresh data (a mutant keeping stale slots cannot pass).
struct RollbackPlan {
  int sequence = 0;
  int64_t n_tokens = 1;
  int stream = 0;
};

/// One step of a schedule: rollbacks, then resets, then tokens[s] tokens appended to sequence s
/// (0 = sits out). If the spec refuses a rollback of the step, the whole step changes nothing.
struct StepPlan {
  std::vector<ResetPlan> resets;
  std::vector<int64_t> tokens;  ///< [batch]
  std::vector<RollbackPlan> rollbacks{};  ///< spec 1.1
};

/// Spec 1.2 (§5, identical inputs; golden format §3.1): stream `stream`'s tokens 0 .. tokens - 1 carry the
/// data of stream `from`'s tokens of the same indices, so that a sequence running `stream` from the same
/// start position repeats `from`'s first tokens bit for bit (a shared or re-sent prefix), then diverges.
struct SharedPrefix {
  int stream = 0;
  int from = 0;
  int64_t tokens = 0;
  bool operator==(const SharedPrefix&) const = default;
};

struct Case {
  Config config;
  std::vector<StepPlan> steps;
  std::vector<int> initial_streams;  ///< [batch]; empty: sequence s starts with stream s
  uint64_t seed = 1;
  DataMode data = DataMode::random;
  float qk_amplitude = 2.0f;        ///< random mode: q and k uniform in [-amp, amp)
  std::vector<uint64_t> layer_salt;  ///< [layers] or empty: changes one layer's data only
  std::vector<uint64_t> stream_salt; ///< [streams] or empty: changes one stream's data only
  /// Needle plan per layer, frozen so that variants that change W or S keep the same data;
  /// empty: the layers' own W and S.
  std::vector<int64_t> needle_windows, needle_sinks;
  int kv_head_repeat = 1;  ///< k/v data of kv head h is that of head h / kv_head_repeat (GQA as MHA)
  int64_t zero_rows_every = 0;  ///< > 0: k and v rows of tokens with index % n == n - 1 are all zero
  /// Spec 1.2: streams whose first tokens repeat another stream's (at most one entry per stream; `from`
  /// resolves through further entries, never in a cycle). Empty for every case before spec 1.2. A
  /// generator parameter only: neither id() nor the case JSON holds it (a golden file declares its
  /// effect as __metadata__ 'repeats', golden format §3.1, which readers before spec 1.2 ignore), so
  /// every case reads the same with or without it; the catalogue keeps such cases' names and seeds distinct.
  std::vector<SharedPrefix> shared_prefixes;

  /// Stable identity naming every parameter; usable in filters and reports.
  std::string id() const;
  /// Readable multi-line description: config, schedule, data.
  std::string describe() const;
  /// Stream of sequence s at the start.
  int initial_stream(int s) const { return initial_streams.empty() ? s : initial_streams[static_cast<size_t>(s)]; }
};

/// A case of these layers and heads, with batch 1, max_tokens 1 and no schedule yet: where the golden
/// catalogue and the scale cases start.
Case shaped_case(std::vector<LayerConfig> layers, int Hq, int Hkv, int D, DataMode data, uint64_t seed);

enum class Tensor : uint64_t { q = 1, k = 2, v = 3 };

/// The stream whose data token `index` of `stream` carries: `stream` itself, or through shared_prefixes
/// the stream it repeats at that index. Throws std::logic_error on a cycle.
int data_stream(const Case& c, int stream, int64_t index);
/// Checks shared_prefixes (throws std::logic_error naming the entry): streams and tokens in range, one
/// entry per stream, no entry naming its own stream, no cycle.
void check_shared_prefixes(const Case& c);

/// Writes the raw (unrotated) input row x[0..D) of one (tensor, layer, stream, token, head).
void input_row(const Case& c, Tensor t, int layer, int stream, int64_t index, int head, float* out);

/// Fills the step tensor of one sequence chunk: [layers][n][heads][D] for tokens first..first+n-1.
void fill_chunk(const Case& c, Tensor t, int stream, int64_t first, int64_t n, float* out);

/// Pins the needle plan to the current windows and sinks (call before changing them).
void freeze_needles(Case& c);
/// The W and S a layer's needles are planted for.
int64_t needle_window(const Case& c, int layer);
int64_t needle_sinks(const Case& c, int layer);

/// Targets of the needle plan of a layer: query indices whose window boundary keys are planted.
std::vector<int64_t> needle_targets(const Case& c, int layer);

/// Total tokens each stream receives in the schedule, and basic schedule checks (throws std::logic_error).
void check_schedule(const Case& c);

/// What a schedule does to each sequence, step by step, as the spec decides it: tokens held, the
/// stream of the next token, and per sliding layer the high-water mark (spec 1.1 §5.1.2), so that a
/// runner knows which steps an engine must refuse.
class ScheduleTracker {
 public:
  explicit ScheduleTracker(const Case& c);
  /// Whether every rollback of the step is honoured (the spec's rule); a step without rollbacks is.
  bool honoured(const StepPlan& step) const;
  /// Applies an honoured step (rollbacks, resets, appends); throws std::logic_error where it is not
  /// a valid step for the config (a count out of range, a sequence twice, max_tokens exceeded).
  void apply(const StepPlan& step);
  int64_t held(int sequence) const { return held_[static_cast<size_t>(sequence)]; }
  int stream(int sequence) const { return stream_[static_cast<size_t>(sequence)]; }
  /// H_l of a (layer, sequence): the most tokens it has held since its reset, as §5.1.2 keeps it.
  int64_t high_water(int layer, int sequence) const {
    return high_water_[static_cast<size_t>(layer) * held_.size() + static_cast<size_t>(sequence)];
  }
  /// True if any step of the case has a rollback (a spec 1.1 case).
  static bool has_rollbacks(const Case& c);

 private:
  const Config* config_;
  std::vector<int64_t> held_;        // [B]
  std::vector<int> stream_;          // [B]
  std::vector<int64_t> high_water_;  // [L][B]
};

/// One chunk of a schedule as the spec runs it: step `step` appends `n` tokens to `sequence`, at token
/// indices first .. first + n - 1 since its reset, whose position 0 is `start_position`.
struct AppendedChunk {
  int step = 0, sequence = 0;
  int64_t first = 0, n = 0, start_position = 0;
};
/// Every chunk the honoured steps of c append, in schedule order (a refused step appends none; a
/// rollback moves `first` back). Throws std::logic_error as ScheduleTracker::apply does.
std::vector<AppendedChunk> appended_chunks(const Case& c);

}  // namespace ringkv::conformance
