// ringkv: the one Engine interface. The reference engine, the CUDA engine and
// third-party plugins implement it; the conformance properties are written
// once against it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ringkv/config.hpp"
#include "ringkv/precision.hpp"

namespace ringkv {

/// Tokens appended to one sequence in one step (a prefill chunk, or n = 1 for decode).
/// All tensors are f32, contiguous, host memory, with layer as the outer dimension.
struct SequenceStep {
  int sequence = 0;        ///< in [0, batch)
  int64_t n_tokens = 0;    ///< n >= 1
  const float* q = nullptr;  ///< [layers][n_tokens][num_q_heads][head_dim], not yet rotated
  const float* k = nullptr;  ///< [layers][n_tokens][num_kv_heads][head_dim], not yet rotated
  const float* v = nullptr;  ///< [layers][n_tokens][num_kv_heads][head_dim]
  float* out = nullptr;      ///< [layers][n_tokens][num_q_heads][head_dim], written by step
};

/// Starts a sequence afresh at position p0: it sees nothing of what it held before.
struct SequenceReset {
  int sequence = 0;
  int64_t start_position = 0;  ///< p0 >= 0, p0 + max_tokens - 1 < 2^31
};

/// Takes back the last n tokens a sequence appended since its last reset (spec 1.1 §5.1): later
/// outputs are as if they had never been appended, and the next token takes the first one's index.
struct SequenceRollback {
  int sequence = 0;
  int64_t n_tokens = 1;  ///< n in [1, tokens held]
};

/// One step over a batch: rollbacks first, then resets, then appends. Sequences not named sit out.
struct StepBatch {
  std::span<const SequenceReset> resets;
  std::span<const SequenceStep> appends;
  std::span<const SequenceRollback> rollbacks{};  ///< spec 1.1; only for engines with Capabilities::rollback
};

/// What an engine's cache holds for one (layer, sequence), for the exact checks (spec §11).
struct CacheSnapshot {
  int64_t capacity = 0;
  int num_kv_heads = 0, head_dim = 0;
  std::vector<int64_t> positions;   ///< [capacity] true position per slot, -1 if empty
  std::vector<float> k, v;          ///< [capacity][num_kv_heads][head_dim] decoded stored values
  std::vector<int8_t> k_codes, v_codes;    ///< same shape, int8 formats only
  std::vector<float> k_scales, v_scales;   ///< [capacity][num_kv_heads][scales_per_row], int8 only
};

/// What configs an engine supports; generators stay inside it, and a golden case outside it is
/// "not judged" rather than failed (conformance/support/capabilities.hpp: capability_gap()). The
/// defaults are everything spec 1 allows; conformance::core_capabilities() is "spec 1 core" (spec §0).
/// A sliding layer is one with W < max_tokens; a layer with W >= max_tokens attends like full attention.
struct Capabilities {
  std::vector<DType> k_dtypes{DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8};
  std::vector<DType> v_dtypes{DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8};
  std::vector<Int8Scheme> int8_schemes{Int8Scheme::per_head, Int8Scheme::q8_0, Int8Scheme::static_tensor};
  std::vector<Rounding> int8_roundings{Rounding::nearest_even, Rounding::half_away};
  std::vector<RopeStyle> rope_styles{RopeStyle::none, RopeStyle::neox, RopeStyle::gptj};
  std::vector<RopeScaling> rope_scalings{RopeScaling::none, RopeScaling::linear, RopeScaling::ntk};
  std::vector<int> head_dims;  ///< empty: any in [1, 1024]
  bool sinks = true, sink_logits = true, softcap = true, snapshot = true;
  bool per_layer_rope = true;   ///< layers may differ in RoPE (style, theta, rotary dim, scaling)
  bool partial_rotary = true;   ///< rotary_dim < head_dim
  bool settable_p0 = true;      ///< start and reset positions other than 0
  bool kv_formats_differ = true;  ///< K and V in different formats (dtype, scheme, rounding or scale)
  int max_layers = 1024;
  int max_batch = 1 << 20;
  int max_sliding_windows = 1 << 20;  ///< most distinct W over the sliding layers of one config
  int64_t min_window = 1;             ///< smallest W (spec convention) of a sliding layer
  int64_t max_window = int64_t{1} << 30;  ///< largest W of a sliding layer
  int64_t max_tokens = int64_t{1} << 30;
  int64_t max_position = (int64_t{1} << 31) - 1;  ///< largest true position p0 + index
  /// Spec 1.1 rollback (§5.1): rollbacks in a step, and rollback_reserve up to max_rollback_reserve.
  /// Not part of spec 1, so off by default; an engine without it is never sent a rollback.
  bool rollback = false;
  int64_t max_rollback_reserve = 0;
  /// Storage the engine uses whatever the config asks (its profile's k_storage/v_storage), if fixed.
  /// Such an engine also runs f32-storage cases: the bound takes the declared storage (tolerances.md).
  std::optional<Precision> k_storage, v_storage;
};

struct EngineInfo {
  std::string name;
  PrecisionProfile precision;  ///< for the config this engine was created with
  bool deterministic = false;  ///< same inputs give the same bits whatever the chunking and batch
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual EngineInfo info() const = 0;
  virtual const Config& config() const = 0;
  /// Runs one step. Throws StepError (and changes nothing) if the batch is invalid.
  virtual void step(const StepBatch& batch) = 0;
  /// Same as a step with just this reset.
  virtual void reset(int sequence, int64_t start_position) = 0;
  /// Cache contents, if the engine exposes them.
  virtual std::optional<CacheSnapshot> snapshot(int layer, int sequence) const = 0;
  /// Bytes the engine's KV cache holds (all layers and sequences).
  virtual size_t cache_bytes() const = 0;
  /// Test hook: overwrite every empty slot's stored K/V (and scales) with NaN,
  /// so that attending to one shows in the outputs. False if unsupported.
  virtual bool poison_empty_slots() { return false; }
};

/// Checks a step against a config and the tokens each sequence holds since its reset
/// (`tokens_seen`, size batch), as spec §12.2 says: throws StepError naming the first bad
/// field, its value and the allowed range. A valid step allocates nothing. `check_values` false
/// skips the finiteness of q, k and v (tensors an engine cannot read on the host: device memory).
void validate_step(const Config& config, const StepBatch& batch, std::span<const int64_t> tokens_seen,
                   bool check_values = true);

/// The reserve a refusal's message names (spec 1.1 §5.1.4, Q_needed): per sequence, its schedule since
/// its last reset replayed with every rollback honoured, the refused ones too (the tokens it would
/// hold, each layer's high-water mark), and per layer the largest reserve any of those rollbacks
/// needed. A larger reserve can honour an earlier refused rollback and so change H; the replay follows
/// that schedule. Sized at construction; a step allocates nothing.
class RollbackReplay {
 public:
  RollbackReplay() = default;
  explicit RollbackReplay(const Config& config);
  /// An honoured step: its rollbacks, resets and appends, in that order.
  void apply(const StepBatch& batch);
  /// A refused step: its rollbacks, which the replay honours (nothing else of the step happened).
  void apply_refused(const StepBatch& batch);
  /// The smallest reserve of `layer` at which it honours every rollback of `sequence` since its reset
  /// and one of `n_tokens` more, all honoured; -1 when the replay cannot take them (with the earlier
  /// refused rollbacks honoured, the sequence would hold fewer tokens than one of them takes back).
  int64_t reserve_needed(int layer, int sequence, int64_t n_tokens) const;

 private:
  int64_t need_of(size_t layer, size_t sequence, int64_t m) const;
  void roll_back(size_t sequence, int64_t n_tokens);
  std::vector<LayerConfig> layers_;
  int64_t max_tokens_ = 0;
  size_t batch_ = 0;
  std::vector<int64_t> held_;  // [sequence] tokens held in the replay; -1 once it cannot follow (until a reset)
  std::vector<int64_t> high_;  // [layer][sequence] H_l in the replay
  std::vector<int64_t> need_;  // [layer][sequence] the largest reserve a rollback since the reset needed
};

/// Spec 1.1 §5.1.2: throws StepError with §5.1.4's message if a rollback of the batch is refused.
/// Call after validate_step. `high_water` is [layers][batch]: H_l of every (layer, sequence). With
/// `replay`, the message's reserve is the replay's (and the refused rollbacks join the replay); without
/// it, the reserve that would honour this rollback with the same high-water mark.
void check_rollbacks_honoured(const Config& config, const StepBatch& batch, std::span<const int64_t> tokens_seen,
                              std::span<const int64_t> high_water, RollbackReplay* replay = nullptr);

/// Whether one sliding layer honours a rollback to m tokens given its high-water mark (spec 1.1
/// §5.1.2); a global layer (W >= max_tokens) always does.
bool layer_honours_rollback(const LayerConfig& layer, int64_t max_tokens, int64_t m, int64_t high_water);

/// H_l after an honoured rollback to m tokens (spec 1.1 §5.1.2): m if m <= S, else unchanged.
inline int64_t high_water_after_rollback(const LayerConfig& layer, int64_t m, int64_t high_water) {
  return m <= layer.sinks ? m : high_water;
}

/// Checks the arguments of Engine::snapshot(): throws StepError naming the bad one.
void validate_snapshot_request(const Config& config, int layer, int sequence);

/// How the conformance suite makes engines of one kind.
struct EngineFactory {
  std::string name;
  Capabilities capabilities;
  std::function<std::unique_ptr<Engine>(const Config&)> create;
};

}  // namespace ringkv
