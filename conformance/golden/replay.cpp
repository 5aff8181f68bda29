#include "golden/replay.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "golden/detail.hpp"
#include "ringkv/error.hpp"

namespace ringkv::golden {

using namespace detail;

void replay_golden(Engine& engine, const GoldenCase& g,
                   const std::function<bool(size_t step, std::span<const ReplayedChunk> chunks, Refusal refusal)>& after_step) {
  const Config& cfg = g.c.config;
  const int L = g.layers();
  const int64_t Hq = cfg.num_q_heads, Hkv = cfg.num_kv_heads, D = cfg.head_dim;
  struct Buffers {
    std::vector<float> q, k, v, out;
  };
  std::vector<Buffers> buf;
  std::vector<ReplayedChunk> done;
  size_t next_chunk = 0;
  for (size_t st = 0; st < g.c.steps.size(); ++st) {
    std::vector<SequenceRollback> rollbacks;
    for (const conformance::RollbackPlan& p : g.c.steps[st].rollbacks) rollbacks.push_back({p.sequence, p.n_tokens});
    std::vector<SequenceReset> resets;
    for (const conformance::ResetPlan& p : g.c.steps[st].resets) resets.push_back({p.sequence, p.start_position});
    const size_t chunk_begin = next_chunk;
    while (next_chunk < g.chunks.size() && g.chunks[next_chunk].step == static_cast<int>(st)) ++next_chunk;
    buf.assign(next_chunk - chunk_begin, Buffers{});
    std::vector<SequenceStep> appends;
    for (size_t ci = chunk_begin; ci < next_chunk; ++ci) {
      const GoldenChunk& ch = g.chunks[ci];
      Buffers& b = buf[ci - chunk_begin];
      const int64_t n = ch.n_tokens;
      b.q.resize(count({L, n, Hq, D}));
      b.k.resize(count({L, n, Hkv, D}));
      b.v.resize(b.k.size());
      b.out.assign(b.q.size(), std::numeric_limits<float>::quiet_NaN());
      for (int l = 0; l < L; ++l) {  // rows of a chunk are contiguous: one copy per layer
        std::copy_n(g.q.begin() + static_cast<std::ptrdiff_t>(g.q_offset(l, ch.row_begin, 0)), n * Hq * D,
                    b.q.begin() + static_cast<std::ptrdiff_t>(count({l, n, Hq, D})));
        std::copy_n(g.k.begin() + static_cast<std::ptrdiff_t>(g.kv_offset(l, ch.row_begin, 0)), n * Hkv * D,
                    b.k.begin() + static_cast<std::ptrdiff_t>(count({l, n, Hkv, D})));
        std::copy_n(g.v.begin() + static_cast<std::ptrdiff_t>(g.kv_offset(l, ch.row_begin, 0)), n * Hkv * D,
                    b.v.begin() + static_cast<std::ptrdiff_t>(count({l, n, Hkv, D})));
      }
      appends.push_back({ch.sequence, n, b.q.data(), b.k.data(), b.v.data(), b.out.data()});
    }
    Refusal refusal = Refusal::none;
    try {
      engine.step(StepBatch{resets, appends, rollbacks});
    } catch (const StepError& e) {
      // A refused rollback (spec 1.1 §5.1.4): the step changed nothing. Anything else is the engine's failure.
      if (rollbacks.empty() || std::string(e.what()).find("refused") == std::string::npos) {
        throw Error("step " + std::to_string(st) + ": engine threw: " + e.what());
      }
      refusal = Refusal::refused;
    } catch (const std::exception& e) {
      throw Error("step " + std::to_string(st) + ": engine threw: " + e.what());
    }
    done.clear();
    if (refusal == Refusal::none) {
      for (size_t ci = chunk_begin; ci < next_chunk; ++ci) done.push_back({&g.chunks[ci], buf[ci - chunk_begin].out.data()});
    }
    if (!after_step(st, done, refusal)) return;
  }
}

std::vector<float> replay_outputs(Engine& engine, const GoldenCase& g, std::vector<int>* refused_steps) {
  const Config& cfg = g.c.config;
  const int L = g.layers();
  const int64_t Hq = cfg.num_q_heads, D = cfg.head_dim;
  std::vector<float> out(g.q.size(), std::numeric_limits<float>::quiet_NaN());  // [L][R][Hq][D], the layout of q (and expected)
  if (refused_steps) refused_steps->clear();
  replay_golden(engine, g, [&](size_t st, std::span<const ReplayedChunk> chunks, Refusal refusal) {
    if (refusal == Refusal::refused && refused_steps) refused_steps->push_back(static_cast<int>(st));
    for (const ReplayedChunk& c : chunks) {
      const int64_t n = c.chunk->n_tokens;
      for (int l = 0; l < L; ++l) {
        std::copy_n(c.out + count({l, n, Hq, D}), n * Hq * D,
                    out.begin() + static_cast<std::ptrdiff_t>(g.q_offset(l, c.chunk->row_begin, 0)));
      }
    }
    return true;
  });
  return out;
}

}  // namespace ringkv::golden
