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
  for (size_t r = 0; r < batch.resets.size(); ++r) {
    const SequenceReset& reset = batch.resets[r];
    if (reset.sequence < 0 || reset.sequence >= B) {
      reject(field("resets", r) + ".sequence", std::to_string(reset.sequence), range());
    }
    for (size_t o = 0; o < r; ++o) {
      if (batch.resets[o].sequence == reset.sequence) {
        reject(field("resets", r) + ".sequence", std::to_string(reset.sequence), "is reset twice in one step");
      }
    }
    if (reset.start_position < 0 || reset.start_position > kMaxPosition - config.max_tokens) {
      try {
        validate_start_position(config, reset.start_position, field("resets", r) + ".start_position");
      } catch (const ConfigError& e) {
        throw StepError(e.what());
      }
    }
  }
  for (size_t a = 0; a < batch.appends.size(); ++a) {
    const SequenceStep& step = batch.appends[a];
    if (step.sequence < 0 || step.sequence >= B) {
      reject(field("appends", a) + ".sequence", std::to_string(step.sequence), range());
    }
    for (size_t o = 0; o < a; ++o) {
      if (batch.appends[o].sequence == step.sequence) {
        reject(field("appends", a) + ".sequence", std::to_string(step.sequence),
               "appears twice in one step; append all its tokens as one chunk");
      }
    }
    bool reset_now = false;
    for (const SequenceReset& r : batch.resets) reset_now = reset_now || r.sequence == step.sequence;
    const int64_t seen = reset_now ? 0 : tokens_seen[static_cast<size_t>(step.sequence)];
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
