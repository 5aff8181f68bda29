// ringkv conformance: RapidCheck generators of cases, biased to the
// boundaries of the spec, within an engine's declared capabilities. Shapes
// and schedules shrink; tensor data comes from the case's seed (support/case.hpp).
#pragma once

#include <cstdint>
#include <optional>

#include <rapidcheck.h>

#include "ringkv/engine.hpp"
#include "support/case.hpp"

namespace ringkv::conformance {

struct CaseOptions {
  int64_t max_window = 64;       ///< W <= this for sliding layers (larger shapes belong to fixed cases)
  bool quantised = true;         ///< allow f16, bf16, fp8 and int8 storage
  bool resets = true;            ///< allow resets (with new p0 and stream)
  bool sit_out = true;           ///< allow sequences to sit out steps
  int max_batch = 3;
  int max_layers = 3;
  bool sinks = true;
  bool sink_logits = true;
  bool softcap = true;
  bool random_data_only = false; ///< no needles (metamorphic checks whose inputs must not depend on the plan)
  int64_t work_budget = 6'000'000;
  bool rollbacks = false;        ///< spec 1.1 rollback schedules (gen_rollback_case) where the engine has them  ///< cap on tokens * keys * Hq * D * layers * batch (keeps the oracle fast)
};

/// A case: config, schedule and seed.
rc::Gen<Case> gen_case(const Capabilities& caps, const CaseOptions& options = {});

/// A spec 1.1 rollback case (§5.1): small windows with a rollback reserve, verify-then-accept steps
/// (a chunk of k + 1 tokens, the rejected drafts rolled back with the next chunk), rollbacks beyond
/// the reserve (honoured or refused as the spec says; a refused step goes alone), repeated rollbacks
/// against the high-water mark, chunks longer than W, resets, sit-outs, and global or second sliding
/// layers. Without Capabilities::rollback: a spec 1 case of the same shape (no reserve, no rollback).
rc::Gen<Case> gen_rollback_case(const Capabilities& caps, const CaseOptions& options = {});

/// The token-by-token (n = 1) version of a case's schedule: same streams, same data.
Case token_by_token(const Case& c);
/// The one-chunk-per-stream version of a case's schedule (chunks > 2W that cross the wrap).
Case one_chunk_per_stream(const Case& c);

}  // namespace ringkv::conformance
