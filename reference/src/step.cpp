#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "ringkv/engine.hpp"
#include "ringkv/error.hpp"

namespace ringkv {
namespace {

[[noreturn]] void reject(const std::string& field, const std::string& value, const std::string& rule) {
  throw StepError(field + " = " + value + ": " + rule);
}

// Index of the first non-finite value among x[0..n), or -1.
int64_t first_non_finite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

}  // namespace

void validate_step(const Config& config, const StepBatch& batch, std::span<const int64_t> tokens_seen,
                   bool check_values) {
  // Messages are built only on the error path: a valid step allocates nothing.
  const int B = config.batch;
  const auto L = static_cast<int64_t>(config.layers.size());
  const auto field = [](const char* list, size_t k) { return std::string("step.") + list + "[" + std::to_string(k) + "]"; };
  const auto range = [B] { return "must be in [0, batch = " + std::to_string(B) + ")"; };
  // Entry k of a list names a sequence in [0, B) that no earlier entry of the list names.
  const auto check_sequence = [&](const auto& list, const char* name, size_t k, const char* twice) {
    const int seq = list[k].sequence;
    if (seq < 0 || seq >= B) reject(field(name, k) + ".sequence", std::to_string(seq), range());
    for (size_t o = 0; o < k; ++o) {
      if (list[o].sequence == seq) reject(field(name, k) + ".sequence", std::to_string(seq), twice);
    }
  };
  for (size_t r = 0; r < batch.resets.size(); ++r) {
    const SequenceReset& reset = batch.resets[r];
    check_sequence(batch.resets, "resets", r, "is reset twice in one step");
    if (reset.start_position < 0 || reset.start_position > kMaxPosition - config.max_tokens) {
      try {
        validate_start_position(config, reset.start_position, field("resets", r) + ".start_position");
      } catch (const ConfigError& e) {
        throw StepError(e.what());
      }
    }
  }
  for (size_t r = 0; r < batch.rollbacks.size(); ++r) {
    const SequenceRollback& rb = batch.rollbacks[r];
    check_sequence(batch.rollbacks, "rollbacks", r, "is rolled back twice in one step");
    for (const SequenceReset& reset : batch.resets) {
      if (reset.sequence == rb.sequence) {
        reject(field("rollbacks", r) + ".sequence", std::to_string(rb.sequence),
               "is rolled back and reset in one step; do one or the other");
      }
    }
    const int64_t held = tokens_seen[static_cast<size_t>(rb.sequence)];
    if (rb.n_tokens < 1 || rb.n_tokens > held) {
      reject(field("rollbacks", r) + ".n_tokens", std::to_string(rb.n_tokens),
             "must be in [1, " + std::to_string(held) + "]: sequence " + std::to_string(rb.sequence) + " holds " +
                 std::to_string(held) + " tokens");
    }
  }
  for (size_t a = 0; a < batch.appends.size(); ++a) {
    const SequenceStep& step = batch.appends[a];
    check_sequence(batch.appends, "appends", a, "appears twice in one step; append all its tokens as one chunk");
    bool reset_now = false;
    for (const SequenceReset& r : batch.resets) reset_now = reset_now || r.sequence == step.sequence;
    int64_t rolled_back = 0;
    for (const SequenceRollback& rb : batch.rollbacks) rolled_back += rb.sequence == step.sequence ? rb.n_tokens : 0;
    const int64_t seen = reset_now ? 0 : tokens_seen[static_cast<size_t>(step.sequence)] - rolled_back;
    const int64_t room = config.max_tokens - seen;
    if (step.n_tokens < 1 || step.n_tokens > room) {
      reject(field("appends", a) + ".n_tokens", std::to_string(step.n_tokens),
             "must be in [1, " + std::to_string(room) + "]: sequence " + std::to_string(step.sequence) +
                 " holds " + std::to_string(seen) + " of max_tokens = " + std::to_string(config.max_tokens) +
                 " tokens");
    }
    if (!step.q || !step.k || !step.v || !step.out) {
      reject(field("appends", a) + ".q/k/v/out", "null", "must all be non-null");
    }
    const int64_t D = config.head_dim;
    const auto check_finite = [&](const float* x, int64_t heads, const char* name) {
      const int64_t i = first_non_finite(x, L * step.n_tokens * heads * D);
      if (i < 0) return;
      const int64_t d = i % D, h = (i / D) % heads, t = (i / D / heads) % step.n_tokens;
      const int64_t l = i / D / heads / step.n_tokens;
      std::ostringstream where, value;
      where << "[layer " << l << "][token " << t << "][head " << h << "][dim " << d << "]";
      value << x[i];
      reject(field("appends", a) + "." + name + where.str(), value.str(), "must be finite");
    };
    if (!check_values) continue;
    check_finite(step.q, config.num_q_heads, "q");
    check_finite(step.k, config.num_kv_heads, "k");
    check_finite(step.v, config.num_kv_heads, "v");
  }
}

bool layer_honours_rollback(const LayerConfig& layer, int64_t max_tokens, int64_t m, int64_t high_water) {
  if (layer.window >= max_tokens) return true;  // a global layer never wraps
  const int64_t lo = std::max(layer.sinks, m - layer.window + 1);  // oldest non-sink key query m sees
  if (lo > m - 1) return true;                                      // it sees none: m <= S, or W = 1
  const int64_t non_sink_slots = ring_capacity(layer, max_tokens) - layer.sinks;
  return lo + non_sink_slots >= high_water;  // no later write has reached key lo's slot
}

RollbackReplay::RollbackReplay(const Config& config)
    : layers_(config.layers),
      max_tokens_(config.max_tokens),
      batch_(static_cast<size_t>(config.batch)),
      held_(batch_, 0),
      high_(layers_.size() * batch_, 0),
      need_(layers_.size() * batch_, 0) {}

// The reserve layer l needs to honour a rollback to m with the replay's H: 0 where it sees no old key.
int64_t RollbackReplay::need_of(size_t layer, size_t sequence, int64_t m) const {
  const LayerConfig& l = layers_[layer];
  if (l.window >= max_tokens_) return 0;  // a global layer never refuses
  const int64_t lo = std::max(l.sinks, m - l.window + 1);
  if (lo > m - 1) return 0;
  return std::max<int64_t>(0, high_[layer * batch_ + sequence] - lo - l.window);
}

void RollbackReplay::roll_back(size_t sequence, int64_t n_tokens) {
  int64_t& held = held_[sequence];
  if (held < n_tokens) {
    held = -1;  // it cannot follow this schedule; a reset starts it again
    return;
  }
  const int64_t m = held - n_tokens;
  for (size_t l = 0; l < layers_.size(); ++l) {
    int64_t& need = need_[l * batch_ + sequence];
    need = std::max(need, need_of(l, sequence, m));
    int64_t& H = high_[l * batch_ + sequence];
    H = high_water_after_rollback(layers_[l], m, H);
  }
  held = m;
}

void RollbackReplay::apply(const StepBatch& batch) {
  apply_refused(batch);
  for (const SequenceReset& r : batch.resets) {
    const auto b = static_cast<size_t>(r.sequence);
    held_[b] = 0;
    for (size_t l = 0; l < layers_.size(); ++l) high_[l * batch_ + b] = need_[l * batch_ + b] = 0;
  }
  for (const SequenceStep& a : batch.appends) {
    const auto b = static_cast<size_t>(a.sequence);
    if (held_[b] < 0) continue;
    held_[b] += a.n_tokens;
    for (size_t l = 0; l < layers_.size(); ++l) high_[l * batch_ + b] = std::max(high_[l * batch_ + b], held_[b]);
  }
}

void RollbackReplay::apply_refused(const StepBatch& batch) {
  for (const SequenceRollback& rb : batch.rollbacks) roll_back(static_cast<size_t>(rb.sequence), rb.n_tokens);
}

int64_t RollbackReplay::reserve_needed(int layer, int sequence, int64_t n_tokens) const {
  const auto l = static_cast<size_t>(layer), b = static_cast<size_t>(sequence);
  if (held_[b] < n_tokens) return -1;
  return std::max(need_[l * batch_ + b], need_of(l, b, held_[b] - n_tokens));
}

void check_rollbacks_honoured(const Config& config, const StepBatch& batch, std::span<const int64_t> tokens_seen,
                              std::span<const int64_t> high_water, RollbackReplay* replay) {
  const auto B = static_cast<size_t>(config.batch);
  for (size_t r = 0; r < batch.rollbacks.size(); ++r) {
    const SequenceRollback& rb = batch.rollbacks[r];
    const auto b = static_cast<size_t>(rb.sequence);
    const int64_t m = tokens_seen[b] - rb.n_tokens;
    for (size_t l = 0; l < config.layers.size(); ++l) {
      const LayerConfig& layer = config.layers[l];
      const int64_t H = high_water[l * B + b];
      if (layer_honours_rollback(layer, config.max_tokens, m, H)) continue;
      const int64_t lo = std::max(layer.sinks, m - layer.window + 1);
      const int64_t slots = ring_capacity(layer, config.max_tokens) - layer.sinks;
      // Q_needed (§5.1.4): replayed where the engine keeps the replay, else with this H.
      const int64_t needed = replay ? replay->reserve_needed(static_cast<int>(l), rb.sequence, rb.n_tokens)
                                    : H - lo - layer.window;
      const std::string reserve =
          needed < 0 ? "no rollback_reserve would honour it in this schedule (with its earlier refused rollbacks "
                       "honoured, sequence " + std::to_string(rb.sequence) + " would hold fewer tokens than one of "
                       "them takes back; it is " + std::to_string(layer.rollback_reserve) + ")"
                     : "rollback_reserve >= " + std::to_string(needed) + " would honour it (it is " +
                           std::to_string(layer.rollback_reserve) + ")";
      if (replay) replay->apply_refused(batch);  // the refused rollbacks are part of the replayed schedule
      reject("step.rollbacks[" + std::to_string(r) + "].n_tokens", std::to_string(rb.n_tokens),
             "refused: sequence " + std::to_string(rb.sequence) + " would keep " + std::to_string(m) +
                 " tokens, but layer " + std::to_string(l) + " no longer holds key " + std::to_string(lo) +
                 " (high-water mark " + std::to_string(H) + " > " + std::to_string(lo) + " + " +
                 std::to_string(slots) + " non-sink slots); " + reserve);
    }
  }
}

void validate_snapshot_request(const Config& config, int layer, int sequence) {
  if (layer < 0 || static_cast<size_t>(layer) >= config.layers.size()) {
    throw StepError("snapshot layer = " + std::to_string(layer) + ": must be in [0, " +
                    std::to_string(config.layers.size()) + ")");
  }
  if (sequence < 0 || sequence >= config.batch) {
    throw StepError("snapshot sequence = " + std::to_string(sequence) + ": must be in [0, " +
                    std::to_string(config.batch) + ")");
  }
}

}  // namespace ringkv
