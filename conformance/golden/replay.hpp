// ringkv golden: replaying a golden case on an engine, step by step, exactly as its schedule says:
// each step's resets, then its chunks (one per appending sequence), with the file's inputs. What
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

/// Runs every step of `g` on `engine`; after each, calls `after_step(step, chunks)` (false stops the
/// replay). Throws Error("step N: engine threw: ...") if the engine throws.
void replay_golden(Engine& engine, const GoldenCase& g,
                   const std::function<bool(size_t step, std::span<const ReplayedChunk> chunks)>& after_step);

/// The engine's outputs for every row, laid out like GoldenCase::expected ([L][R][Hq][D]).
std::vector<float> replay_outputs(Engine& engine, const GoldenCase& g);

}  // namespace ringkv::golden
