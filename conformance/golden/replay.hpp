// ringkv golden: replaying a golden case on an engine, step by step, exactly as its schedule says:
// each step's rollbacks (format 2), resets, then its chunks (one per appending sequence), with the
// file's inputs, as one StepBatch. What
// check_golden judges, and what an engine written against the C++ API produces as an outputs file.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "golden/golden.hpp"
#include "ringkv/engine.hpp"

namespace ringkv::golden {

/// One chunk of a replayed step and the engine's outputs for it, [L][n_tokens][Hq][D].
struct ReplayedChunk {
  const GoldenChunk* chunk = nullptr;
  const float* out = nullptr;
};

/// How the engine took a step with rollbacks (spec 1.1).
enum class Refusal {
  none,         ///< it ran the step
  refused,      ///< it threw a StepError containing "refused" (§5.1.4): the step changed nothing
};

/// Runs every step of `g` on `engine`; after each, calls `after_step(step, chunks, refusal)` (false
/// stops the replay); `chunks` is empty when the engine refused the step. Throws Error("step N: engine
/// threw: ...") if the engine throws anything but a refusal of a step with rollbacks. Whether a refusal
/// was right is the caller's to judge (GoldenCase::refused).
void replay_golden(Engine& engine, const GoldenCase& g,
                   const std::function<bool(size_t step, std::span<const ReplayedChunk> chunks, Refusal refusal)>& after_step);

/// The engine's outputs for every row, laid out like GoldenCase::expected ([L][R][Hq][D]); the rows of
/// steps it refused stay NaN. `refused_steps` (may be null) gets the steps it refused, ascending: with
/// the outputs, what an outputs file holds.
std::vector<float> replay_outputs(Engine& engine, const GoldenCase& g, std::vector<int>* refused_steps = nullptr);

}  // namespace ringkv::golden
