// ringkv golden: the boundary classes a case actually exercises, derived from its config, schedule and data.
#include "golden/golden.hpp"
#include "golden/detail.hpp"
#include "support/capabilities.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/ring.hpp"

namespace ringkv::golden {

using conformance::Case;
using conformance::DataMode;
using conformance::ResetPlan;
using conformance::RollbackPlan;
using conformance::StepPlan;
using nlohmann::json;

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Classes that follow from a case's config and schedule (a tag must not claim what a case lacks).

namespace {

// Spec 1.1 rollback classes (golden format 2), from the schedule as the spec decides it: per sliding
// layer its capacity C, and per sequence the tokens held, the high-water mark H (§5.1.2) and its last
// chunk. A refused step changes nothing.
void derive_rollback_classes(const Case& c, std::set<std::string>* out) {
  if (!conformance::ScheduleTracker::has_rollbacks(c)) return;
  const Config& cfg = c.config;
  const auto B = static_cast<size_t>(cfg.batch), L = cfg.layers.size();
  conformance::ScheduleTracker tracker(c);
  std::vector<int64_t> held(B, 0), last_chunk(B, 0), high(L * B, 0);
  for (const StepPlan& st : c.steps) {
    if (!st.rollbacks.empty() && !tracker.honoured(st)) {
      out->insert("rollback-refused");
      continue;
    }
    for (const conformance::RollbackPlan& r : st.rollbacks) {
      const auto s = static_cast<size_t>(r.sequence);
      const int64_t n = held[s], m = n - r.n_tokens;
      if (L > 1) out->insert("rollback-multi-layer");
      bool other = false;
      for (size_t q = 0; q < B; ++q) other = other || (q != s && st.tokens[q] > 0);
      for (const conformance::RollbackPlan& x : st.rollbacks) other = other || x.sequence != r.sequence;
      if (other) out->insert("rollback-batch");
      if (st.tokens[s] > 0 && r.n_tokens + 1 < last_chunk[s]) out->insert("rollback-verify-partial");
      for (size_t l = 0; l < L; ++l) {
        const LayerConfig& lay = cfg.layers[l];
        if (!conformance::is_sliding(lay, cfg)) continue;
        const int64_t C = ring_capacity(lay, cfg.max_tokens), S = lay.sinks, H = high[l * B + s];
        if (H > n) out->insert("rollback-repeated");
        if (C >= cfg.max_tokens) continue;  // a capped ring never wraps
        if (n <= C) out->insert("rollback-before-wrap");
        if (m == C) out->insert("rollback-at-wrap");
        if (m < C && C < n) out->insert("rollback-across-wrap");
        const int64_t lo = std::max(S, m - lay.window + 1);
        if (lay.rollback_reserve > 0 && lo <= m - 1 && H > C && lo + (C - S) == H) out->insert("rollback-reserve-edge");
      }
      held[s] = m;
      for (size_t l = 0; l < L; ++l) high[l * B + s] = high_water_after_rollback(cfg.layers[l], m, high[l * B + s]);
    }
    for (const ResetPlan& r : st.resets) {
      const auto s = static_cast<size_t>(r.sequence);
      held[s] = 0;
      for (size_t l = 0; l < L; ++l) high[l * B + s] = 0;
    }
    for (size_t s = 0; s < B; ++s) {
      if (st.tokens[s] == 0) continue;
      held[s] += st.tokens[s];
      last_chunk[s] = st.tokens[s];
      for (size_t l = 0; l < L; ++l) high[l * B + s] = std::max(high[l * B + s], held[s]);
    }
    tracker.apply(st);
  }
}

// Serving classes (issue 35, spec 1.2 §5.0), from the schedule and the declared repeats.
// join-mid-run: a sequence appends a chunk of 2+ tokens from index 0 (a prefill) in a step where another
// appends one token at an index >= 1 (a decode).
void derive_join_mid_run(const Case& c, std::set<std::string>* out) {
  const auto B = static_cast<size_t>(c.config.batch);
  conformance::ScheduleTracker tracker(c);
  for (const StepPlan& st : c.steps) {
    if (!tracker.honoured(st)) continue;  // a refused step appends nothing
    std::vector<int64_t> at(B);  // what each sequence holds when the step's appends begin
    for (size_t s = 0; s < B; ++s) at[s] = tracker.held(static_cast<int>(s));
    for (const RollbackPlan& r : st.rollbacks) at[static_cast<size_t>(r.sequence)] -= r.n_tokens;
    for (const ResetPlan& r : st.resets) at[static_cast<size_t>(r.sequence)] = 0;
    bool prefill = false, decode = false;
    for (size_t s = 0; s < B; ++s) {
      prefill = prefill || (at[s] == 0 && st.tokens[s] >= 2);
      decode = decode || (at[s] >= 1 && st.tokens[s] == 1);
    }
    if (prefill && decode) out->insert("join-mid-run");
    tracker.apply(st);
  }
}

// The prefix classes, from the declared repeats (repeat_rows). A run is one sequence on one stream (what
// it appends between resets); its shared prefix is its repeated tokens from index 0, all repeating one
// source run; it diverges when it appends an original token. prefix-shared: such a prefix whose source
// is still running (appending at or after the step the prefix begins) and which then diverges (the
// committed serving cases hold one longer and one shorter than W each). prefix-reused: a repeated token
// whose source run had, by the step it was repeated, held more than index + W tokens (so a sliding
// layer's window had dropped its key from the source's ring, index >= S).
void derive_prefix_classes(const Case& c, std::set<std::string>* out) {
  std::vector<GoldenRow> rows;
  std::vector<GoldenChunk> chunks;
  layout_rows(c, rollback_schedule(c), &rows, &chunks);
  const std::vector<int32_t> rep = repeat_rows(c, rows);
  using Run = std::pair<int, int>;  // (sequence, stream)
  struct Prefix {
    int64_t length = 0;
    int first_step = -1;
    Run source{-1, -1};
    bool broken = false;  // an original token came: the prefix ended (later repeats do not extend it)
    bool diverges = false;
  };
  std::map<Run, Prefix> prefix;
  std::map<Run, int> last_step;              // the last step a run appended in
  std::map<Run, int64_t> held, before;       // the most tokens a run held so far; and before this step
  int step = -1;
  for (size_t r = 0; r < rows.size(); ++r) {
    const GoldenRow& row = rows[r];
    const Run run{row.sequence, row.stream};
    if (row.step != step) {
      before = held;
      step = row.step;
    }
    last_step[run] = row.step;
    Prefix& p = prefix[run];
    if (rep[r] >= 0 && !p.broken && row.index == p.length) {
      const GoldenRow& src = rows[static_cast<size_t>(rep[r])];
      const Run from{src.sequence, src.stream};
      if (p.length == 0) p = Prefix{0, row.step, from, false, false};
      if (from != p.source) {
        p.broken = true;
        continue;
      }
      ++p.length;
      for (const LayerConfig& l : c.config.layers) {  // the source's key had left its own window by now
        if (src.step < row.step && conformance::is_sliding(l, c.config) && src.index >= l.sinks &&
            before[from] > src.index + l.window) {
          out->insert("prefix-reused");
        }
      }
    } else {
      p.diverges = p.diverges || (rep[r] < 0 && p.length > 0);
      p.broken = true;
    }
    held[run] = std::max(held[run], row.index + 1);
  }
  for (const auto& [run, p] : prefix) {
    if (p.length > 0 && p.diverges && last_step[p.source] >= p.first_step) out->insert("prefix-shared");
  }
}

// long-multi-seq: 4+ sequences, a sliding layer of W >= 128 in which 256+ cells are in use at once, 32+
// one-token decode steps of one sequence past index W, and learned sink logits.
void derive_long_multi_seq(const Case& c, std::set<std::string>* out) {
  const Config& cfg = c.config;
  if (cfg.batch < 4 || cfg.sink_logits.empty() || conformance::ScheduleTracker::has_rollbacks(c)) return;
  for (const LayerConfig& l : cfg.layers) {
    if (!conformance::is_sliding(l, cfg) || l.window < 128) continue;
    const int64_t C = ring_capacity(l, cfg.max_tokens);
    std::vector<int64_t> held(static_cast<size_t>(cfg.batch), 0), decodes(held.size(), 0);
    int64_t most_cells = 0, most_decodes = 0;
    for (const StepPlan& st : c.steps) {
      for (const ResetPlan& r : st.resets) held[static_cast<size_t>(r.sequence)] = 0;
      int64_t cells = 0;
      for (size_t s = 0; s < held.size(); ++s) {
        if (st.tokens[s] == 1 && held[s] >= l.window) most_decodes = std::max(most_decodes, ++decodes[s]);
        held[s] += st.tokens[s];
        cells += std::min(held[s], C);
      }
      most_cells = std::max(most_cells, cells);
    }
    if (most_cells >= 256 && most_decodes >= 32) out->insert("long-multi-seq");
  }
}

}  // namespace

std::vector<std::string> derive_classes(const Case& c) {
  const Config& cfg = c.config;
  std::set<std::string> out;
  const int L = static_cast<int>(cfg.layers.size());
  if (cfg.num_kv_heads == cfg.num_q_heads) out.insert("mha");
  else if (cfg.num_kv_heads == 1) out.insert("mqa");
  else out.insert("gqa");
  if (cfg.head_dim == 64) out.insert("head_dim-64");
  if (cfg.head_dim == 128) out.insert("head_dim-128");
  if (L > 1) out.insert("multi-layer");
  if (cfg.softcap) out.insert("softcap");
  if (cfg.softmax_scale) out.insert("softmax-scale");
  if (!cfg.sink_logits.empty()) out.insert("sink-logits");
  if (!(cfg.k_format == cfg.v_format)) out.insert("k-v-dtypes-differ");
  for (const KvFormat* f : {&cfg.k_format, &cfg.v_format}) {
    switch (f->dtype) {
      case DType::f32: break;
      case DType::f16: out.insert("kv-f16"); break;
      case DType::bf16: out.insert("kv-bf16"); break;
      case DType::fp8_e4m3: out.insert("kv-fp8-e4m3"); break;
      case DType::fp8_e5m2: out.insert("kv-fp8-e5m2"); break;
      case DType::int8:
        out.insert(f->int8_scheme == Int8Scheme::per_head ? "int8-per_head"
                   : f->int8_scheme == Int8Scheme::q8_0   ? "int8-q8_0"
                                                          : "int8-static");
        if (f->rounding == Rounding::half_away) out.insert("int8-half_away");
        break;
    }
  }
  std::set<std::string> ropes;
  for (const LayerConfig& l : cfg.layers) {
    if (l.sinks > 0) out.insert("sinks");
    if (l.window == 1) out.insert("W=1");
    if (l.window >= cfg.max_tokens) out.insert("W>=length");
    const RopeConfig& r = l.rope;
    ropes.insert(std::string(to_string(r.style)) + ":" + show_number(r.theta) + ":" + std::to_string(rotary_dim(r, cfg.head_dim)) +
                 ":" + to_string(r.scaling) + ":" + show_number(r.factor));
    out.insert(std::string("rope-") + to_string(r.style));
    if (r.style != RopeStyle::none) {
      if (r.scaling != RopeScaling::none) out.insert(std::string("rope-") + to_string(r.scaling));
      if (rotary_dim(r, cfg.head_dim) < cfg.head_dim) out.insert("partial-rotary");
    }
  }
  if (conformance::distinct_sliding_windows(cfg) > 1) out.insert("several-windows");
  bool sliding = false, full = false;
  for (const LayerConfig& l : cfg.layers) (conformance::is_sliding(l, cfg) ? sliding : full) = true;
  if (sliding && full) out.insert("sliding-and-full");
  if (ropes.size() > 1) out.insert("per-layer-rope");

  // The schedule: token indices, chunks, progress, positions.
  const int B = cfg.batch;
  std::vector<int64_t> seen(static_cast<size_t>(B), 0), p0(static_cast<size_t>(B));
  for (int s = 0; s < B; ++s) p0[static_cast<size_t>(s)] = start_position(cfg, s);
  // Per sequence, the length it had when it was last reset (-1: not reset yet).
  std::vector<int64_t> length_at_reset(static_cast<size_t>(B), -1);
  const auto close_epoch = [&](int s) {
    const auto su = static_cast<size_t>(s);
    if (length_at_reset[su] >= 0 && seen[su] < length_at_reset[su]) out.insert("reset-shorter");
  };
  const bool rollbacks = conformance::ScheduleTracker::has_rollbacks(c);
  conformance::ScheduleTracker tracker(c);  // spec 1.1: which steps are refused (they change nothing)
  for (const StepPlan& st : c.steps) {
    if (rollbacks) {
      if (!tracker.honoured(st)) continue;
      tracker.apply(st);
      for (const conformance::RollbackPlan& r : st.rollbacks) seen[static_cast<size_t>(r.sequence)] -= r.n_tokens;
    }
    if (!st.resets.empty()) out.insert("reset-reuse");
    for (const ResetPlan& r : st.resets) {
      const auto su = static_cast<size_t>(r.sequence);
      close_epoch(r.sequence);
      out.insert(r.start_position < p0[su] ? "reset-p0-down" : r.start_position == p0[su] ? "reset-p0-same" : "reset-p0-up");
      length_at_reset[su] = seen[su];
      seen[su] = 0;
      p0[su] = r.start_position;
    }
    if (B > 1) {
      int active = 0;
      for (int64_t n : st.tokens) active += n > 0 ? 1 : 0;
      if (active < B) out.insert("sit-out");
      if (std::set<int64_t>(seen.begin(), seen.end()).size() > 1) out.insert("batch-mixed");
    }
    for (int s = 0; s < B; ++s) {
      const int64_t n = st.tokens[static_cast<size_t>(s)], a = seen[static_cast<size_t>(s)];
      if (n == 0) continue;
      const int64_t last = p0[static_cast<size_t>(s)] + a + n - 1;
      if (last >= k2p30) out.insert("pos-2^31");
      if (last >= k2p24) out.insert("pos-2^24");
      else if (last >= k2p20) out.insert("pos-2^20");
      for (const LayerConfig& l : cfg.layers) {
        const int64_t W = l.window, S = l.sinks;
        if (W < 2) continue;
        if (n > W) out.insert("chunk>W");
        const bool full_ring = ring_capacity(l, cfg.max_tokens) == S + W;
        for (int64_t i = a; i < a + n; ++i) {
          if (i < W - 1) out.insert("t<W");
          if (i == W - 1) out.insert("t=W-1");
          if (i == W) out.insert("t=W");
          if (i == W + 1) out.insert("t=W+1");
          if (i >= 2 * W && i % W == 0) out.insert("t=kW");
          if (full_ring && i > a && i >= S + W && (i - S) % W == 0) out.insert("chunk-crosses-wrap");
        }
      }
      seen[static_cast<size_t>(s)] += n;
    }
  }
  for (int s = 0; s < B; ++s) close_epoch(s);
  derive_rollback_classes(c, &out);
  if (B > 1) derive_join_mid_run(c, &out);
  derive_prefix_classes(c, &out);
  derive_long_multi_seq(c, &out);
  // Needles: some planted boundary target t (with t - W not a sink) is reached by the schedule.
  if (c.data == DataMode::needle) {
    const int64_t most = needed_max_tokens(c);
    for (int l = 0; l < L; ++l) {
      const int64_t W = conformance::needle_window(c, l), S = conformance::needle_sinks(c, l);
      for (int64_t t : conformance::needle_targets(c, l)) {
        if (t < most && t - W >= S && W >= 2) {
          out.insert("needle-W+1");
          out.insert("needle-W-1");
        }
      }
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace ringkv::golden
