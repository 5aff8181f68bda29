#include "property/properties.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <rapidcheck.h>

#include "ringkv/quant.hpp"
#include "support/capabilities.hpp"
#include "support/oracle.hpp"
#include "support/rng.hpp"
#include "support/runner.hpp"
#include "support/show.hpp"

namespace ringkv::conformance {
namespace {

// What a property found on one case: nothing (it holds) or the report (the reason, then the case).
// Each property asserts it with RC_ASSERT(finding): it holds when the report is empty.
struct Finding {
  std::string report;
  explicit operator bool() const { return report.empty(); }
};

// RC_ASSERT's "Expands to:" shows a Finding as its report, verbatim (rc::show finds this by ADL);
// property_report() takes it back out of RapidCheck's message.
[[maybe_unused]] void showValue(const Finding& f, std::ostream& os) { os << f.report; }

// Nothing if `why` is empty, else the reason with the case id and description.
Finding report(const Case& c, const std::string& label, const std::string& why) {
  if (why.empty()) return {};
  return {label + ": " + why + "\n" + c.describe()};
}

int64_t longest_stream(const Case& c) {
  const int B = c.config.batch;
  std::vector<int64_t> seen(static_cast<size_t>(B), 0);
  int64_t longest = 0;
  for (const StepPlan& st : c.steps) {
    for (const ResetPlan& r : st.resets) seen[static_cast<size_t>(r.sequence)] = 0;
    for (int s = 0; s < B; ++s) {
      seen[static_cast<size_t>(s)] += st.tokens[static_cast<size_t>(s)];
      longest = std::max(longest, seen[static_cast<size_t>(s)]);
    }
  }
  return longest;
}

// The streams sequence s runs in a case.
std::vector<int> streams_of(const Case& c, int s) {
  std::vector<int> out{c.initial_stream(s)};
  for (const StepPlan& st : c.steps) {
    for (const ResetPlan& r : st.resets) {
      if (r.sequence == s) out.push_back(r.stream);
    }
  }
  return out;
}

// Run options for a property: it reports only the first failure (a failing run stops at its
// step), and never reads cache_bytes() (a plugin's two extra round trips per run).
RunOptions property_run(RunOptions o = {}) {
  o.stop_at_failure = true;
  o.cache_bytes = false;
  return o;
}

// A variant a property derives (another batch, start position, window, layer or format) that lies
// outside the engine's declared capabilities cannot be put to it: the property says nothing on this
// case, and must never fail an engine for what it declared it does not do.
bool expressible(const EngineFactory& f, const Case& c) { return capability_gap(f.capabilities, c).empty(); }

// Runs both cases and compares their selected outputs (bitwise for deterministic engines); "" when
// either lies outside the engine's capabilities.
std::string run_and_compare(const EngineFactory& f, const Case& a, const Case& b, const RunOptions& ob,
                            CompareOptions cmp, bool oracle_on_both) {
  if (!expressible(f, a) || !expressible(f, b)) return "";
  const RunResult ra = run_case(f, a, property_run());
  if (!ra.ok()) return "run A (the case as generated): " + ra.failure;
  RunOptions obb = property_run(ob);
  // A deterministic engine is compared bit for bit with run A, which already met the oracle:
  // run B needs no oracle of its own.
  if (!oracle_on_both && ra.info.deterministic && cmp.bitwise) obb.oracle = obb.compare_oracle = false;
  const RunResult rb = run_case(f, b, obb);
  if (!rb.ok()) return "run B (" + b.id() + "): " + rb.failure;
  cmp.bitwise = cmp.bitwise && ra.info.deterministic;
  const std::string diff = compare_runs(ra, rb, a.config, cmp);
  return diff.empty() ? "" : diff + "\n  run B is " + b.id();
}

// Drops per-head sink logits (for variants that change the head count).
void clear_sink_logits(Case& c) { c.config.sink_logits.clear(); }

// Spec 1.2 (§5, identical inputs): a case of two sequences from one start position, out of a's config.
// Sequence 1's prompt repeats sequence 0's first P tokens in the same step (P past every sliding layer's
// S + W, not a multiple of 4), then diverges; both decode past the window; then sequence 1 is reset to
// the same position and re-sends sequence 0's first P tokens while sequence 0 decodes (a request joining
// after the first one's early keys left its window), and diverges again.
Case identical_prefix_case(const Case& a) {
  Case c = a;
  c.config.batch = 2;
  const int64_t p0 = start_position(a.config, 0);
  c.config.start_positions = {p0, p0};
  c.initial_streams.clear();
  int64_t reach = 1;  // the longest S + W of a sliding layer
  for (const LayerConfig& l : a.config.layers) {
    if (is_sliding(l, a.config)) reach = std::max(reach, l.sinks + l.window);
  }
  int64_t P = reach + 1;
  if (P % 4 == 0) ++P;
  c.shared_prefixes = {{1, 0, P}, {2, 0, P}};
  c.steps = {StepPlan{{}, {P + 1, P + 2}}};
  for (int64_t i = 0; i < reach + 1; ++i) c.steps.push_back(StepPlan{{}, {1, 1}});
  c.steps.push_back(StepPlan{{ResetPlan{1, p0, 2}}, {1, P + 2}});
  for (int i = 0; i < 2; ++i) c.steps.push_back(StepPlan{{}, {1, 1}});
  int64_t longest = 0;
  for (int s = 0; s < 2; ++s) {
    int64_t n = 0;
    for (const StepPlan& st : c.steps) {
      for (const ResetPlan& r : st.resets) n = r.sequence == s ? 0 : n;
      n += st.tokens[static_cast<size_t>(s)];
      longest = std::max(longest, n);
    }
  }
  c.config.max_tokens = std::max(a.config.max_tokens, longest);
  return c;
}

// Every output is within the oracle's bound (the run checks it: a key served from another sequence's
// evicted slot, or shared past the divergence, is a wrong key), and every token of a repeated prefix
// gives the outputs of the token it repeats (bitwise for a deterministic engine, else within both
// bounds). One run: the isolation of different inputs is variants 1 and 2.
std::string check_identical_prefixes(const EngineFactory& f, const Case& a) {
  const Case c = identical_prefix_case(a);
  if (!expressible(f, c) || c.config.max_tokens > kMaxPosition - start_position(c.config, 0)) return "";
  const RunResult r = run_case(f, c, property_run());
  if (!r.ok()) return "identical prefixes: " + r.failure + "\n  in the variant " + c.describe();
  for (const auto& [key, rec] : r.tokens) {
    const int from = data_stream(c, key.stream, key.index);
    if (from == key.stream) continue;
    const auto src = r.tokens.find(TokenKey{from, key.index});
    if (src == r.tokens.end() || src->second.position != rec.position) continue;
    for (size_t e = 0; e < rec.got.size(); ++e) {
      const float x = rec.got[e], y = src->second.got[e];
      const bool same = r.info.deterministic ? std::memcmp(&x, &y, sizeof x) == 0
                                             : std::fabs(double{x} - y) <= rec.bound[e] + src->second.bound[e];
      if (!same) {
        return "identical prefixes: stream " + std::to_string(key.stream) + " token " + std::to_string(key.index) +
               " repeats stream " + std::to_string(from) + "'s (same position " + std::to_string(rec.position) +
               ", same q/k/v), but output element " + std::to_string(e) + " is " + show_number(x) + ", not " +
               show_number(y) + " (spec 1.2 §5: identical inputs, identical outputs)\n  in the variant " + c.describe();
      }
    }
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------- 1
void prop_oracle_equality(const EngineFactory& f, const Case& c) {
  const RunResult r = run_case(f, c, property_run());
  RC_ASSERT(report(c, "OracleEquality", r.failure));
}

// ---------------------------------------------------------------- 2
void prop_ring_holds_visible_set(const EngineFactory& f, const Case& c) {
  RunOptions o = property_run();
  o.compare_oracle = false;
  o.check_ring = true;
  o.sample_queries = [](int, int, int64_t) { return false; };  // the ring check needs the oracle's history, no outputs
  const RunResult r = run_case(f, c, o);
  RC_ASSERT(report(c, "RingHoldsVisibleSet", r.failure));
}

// ---------------------------------------------------------------- 3
void prop_constant_memory(const EngineFactory& f, const Case& c) {
  Case m = c;
  Config& cfg = m.config;
  cfg.batch = 1;
  cfg.start_positions = {start_position(c.config, 0)};
  if (cfg.head_dim > 32) {  // memory does not depend on the data: keep the 100 W tokens cheap
    cfg.head_dim = 32;
    for (LayerConfig& l : cfg.layers) {
      if (l.rope.rotary_dim > 32) l.rope.rotary_dim = 16;
    }
  }
  int64_t W = 1, S = 0;
  for (const LayerConfig& l : c.config.layers) {
    if (l.window < c.config.max_tokens) W = std::max(W, l.window);
    S = std::max(S, l.sinks);
  }
  const int64_t total = 100 * W + S;
  cfg.max_tokens = total;
  cfg.start_positions = {std::min(cfg.start_positions[0], kMaxPosition - total)};
  if (!capability_gap(f.capabilities, cfg).empty()) return;  // 100 W tokens are more than it takes
  std::unique_ptr<Engine> e;
  try {
    e = f.create(cfg);
  } catch (const std::exception& ex) {
    RC_ASSERT(report(m, "ConstantMemory", std::string("engine creation threw: ") + ex.what()));
    return;
  }
  const size_t at_construction = e->cache_bytes();
  size_t at_full = 0;
  std::string why;
  const auto L = static_cast<int64_t>(cfg.layers.size());
  std::vector<float> q, k, v, out;
  for (int64_t done = 0; done < total && why.empty();) {
    const int64_t n = std::min(done < S + W ? S + W - done : 4 * W, total - done);
    q.resize(static_cast<size_t>(L * n * cfg.num_q_heads * cfg.head_dim));
    k.resize(static_cast<size_t>(L * n * cfg.num_kv_heads * cfg.head_dim));
    v.resize(k.size());
    out.resize(q.size());
    fill_chunk(m, Tensor::q, 0, done, n, q.data());
    fill_chunk(m, Tensor::k, 0, done, n, k.data());
    fill_chunk(m, Tensor::v, 0, done, n, v.data());
    const SequenceStep step{0, n, q.data(), k.data(), v.data(), out.data()};
    try {
      e->step(StepBatch{{}, std::span<const SequenceStep>(&step, 1)});
    } catch (const std::exception& ex) {
      why = std::string("engine threw: ") + ex.what();
      break;
    }
    done += n;
    const size_t now = e->cache_bytes();
    if (done == S + W || (done > S + W && at_full == 0)) at_full = now;
    if (now != at_construction) {
      why = "cache_bytes() is " + std::to_string(now) + " after " + std::to_string(done) + " tokens, " +
            std::to_string(at_construction) + " at construction";
    }
  }
  if (why.empty() && at_full != e->cache_bytes()) {
    why = "cache_bytes() after S + W tokens is " + std::to_string(at_full) + ", after 100 W tokens " +
          std::to_string(e->cache_bytes());
  }
  RC_ASSERT(report(m, "ConstantMemory", why));
}

// ---------------------------------------------------------------- 4
void prop_chunking_invariance(const EngineFactory& f, const Case& c) {
  CompareOptions cmp;
  cmp.bitwise = true;
  std::string why = run_and_compare(f, c, token_by_token(c), {}, cmp, false);
  if (why.empty()) why = run_and_compare(f, c, one_chunk_per_stream(c), {}, cmp, false);
  RC_ASSERT(report(c, "ChunkingInvariance", why));
}

// ---------------------------------------------------------------- 5
void prop_batch_isolation(const EngineFactory& f, const Case& c) {
  Case a = c;
  if (a.config.batch == 1) {  // give sequence 0 a neighbour that runs alongside it
    a.config.batch = 2;
    const int64_t p0 = f.capabilities.settable_p0 ? 7 : 0;
    a.config.start_positions.push_back(std::min<int64_t>(p0, kMaxPosition - a.config.max_tokens));
    for (StepPlan& st : a.steps) st.tokens.push_back(st.tokens[0]);
    for (StepPlan& st : a.steps) {
      for (const ResetPlan& r : std::vector<ResetPlan>(st.resets)) {
        if (r.sequence == 0) st.resets.push_back({1, r.start_position, r.stream + 1000});
      }
    }
  }
  const std::vector<int> mine = streams_of(a, 0);
  CompareOptions cmp;
  cmp.bitwise = true;
  cmp.select = [mine](const TokenKey& k) { return std::find(mine.begin(), mine.end(), k.stream) != mine.end(); };
  // Variant 1: the others sit out every step and never reset; appends listed in reverse.
  Case alone = a;
  for (StepPlan& st : alone.steps) {
    for (size_t s = 1; s < st.tokens.size(); ++s) st.tokens[s] = 0;
    std::erase_if(st.resets, [](const ResetPlan& r) { return r.sequence != 0; });
  }
  RunOptions reverse;
  reverse.reverse_appends = true;
  std::string why = run_and_compare(f, a, alone, reverse, cmp, false);
  // Variant 2: the others see different data and take their steps one token at a time.
  if (why.empty()) {
    Case other = a;
    other.stream_salt.assign(1024, 0);
    for (size_t s = 0; s < other.stream_salt.size(); ++s) {
      if (std::find(mine.begin(), mine.end(), static_cast<int>(s)) == mine.end()) other.stream_salt[s] = 0xabcdef + s;
    }
    // Sequence 0 keeps its original chunking; every other token goes in a step of its own.
    Case merged = other;
    merged.steps.clear();
    for (const StepPlan& st : other.steps) {
      StepPlan first = st;  // sequence 0's chunk and every reset
      for (size_t s = 1; s < first.tokens.size(); ++s) first.tokens[s] = 0;
      merged.steps.push_back(first);
      for (size_t s = 1; s < st.tokens.size(); ++s) {
        for (int64_t i = 0; i < st.tokens[s]; ++i) {
          StepPlan one;
          one.tokens.assign(st.tokens.size(), 0);
          one.tokens[s] = 1;
          merged.steps.push_back(one);
        }
      }
    }
    why = run_and_compare(f, a, merged, {}, cmp, false);
  }
  // Variant 3 (spec 1.2): identical prefixes shared within a step and re-sent after a reset.
  if (why.empty()) why = check_identical_prefixes(f, a);
  RC_ASSERT(report(a, "BatchIsolation", why));
}

// ---------------------------------------------------------------- 6
void prop_reset_is_fresh(const EngineFactory& f, const Case& c) {
  // Fresh: sequence 0's first stream alone in a batch of 1.
  Case fresh = c;
  fresh.config.batch = 1;
  fresh.steps.clear();
  for (const StepPlan& st : c.steps) {
    bool reset0 = false;
    for (const ResetPlan& r : st.resets) reset0 = reset0 || r.sequence == 0;
    if (reset0) break;
    if (st.tokens[0] == 0) continue;
    fresh.steps.push_back(StepPlan{{}, {st.tokens[0]}});
  }
  const int64_t m = fresh.config.max_tokens;  // the previous occupant fills the whole ring and more
  const int kind = f.capabilities.settable_p0 ? static_cast<int>(c.seed % 3) : 0;  // else p0 stays 0
  int64_t p0 = start_position(c.config, 0);
  const int64_t hi = kMaxPosition - fresh.config.max_tokens;
  int64_t prev = p0;
  if (kind == 1) {  // old positions all below the new p0: stale slots would pass j <= i
    p0 = std::min(hi, std::max(p0, m + 8));
    prev = p0 - m - 8;
  } else if (kind == 2) {  // old positions above the new ones
    prev = std::min(hi, p0 + m);
  }
  fresh.config.start_positions = {p0};
  fresh.config.sink_logits = c.config.sink_logits;
  Case reused = fresh;
  reused.config.start_positions = {prev};
  reused.initial_streams = {777};
  reused.steps.clear();
  for (int64_t left = m; left > 0;) {
    const int64_t n = std::min<int64_t>(left, 1 + static_cast<int64_t>(c.seed % 7));
    reused.steps.push_back(StepPlan{{}, {n}});
    left -= n;
  }
  StepPlan rst{{ResetPlan{0, p0, 0}}, {0}};
  reused.steps.push_back(rst);
  for (const StepPlan& st : fresh.steps) reused.steps.push_back(st);
  CompareOptions cmp;
  cmp.bitwise = true;
  cmp.select = [](const TokenKey& k) { return k.stream == 0; };
  RC_ASSERT(report(reused, "ResetIsFresh", run_and_compare(f, fresh, reused, {}, cmp, false)));
}

// ---------------------------------------------------------------- 7
void prop_rope_relativity(const EngineFactory& f, const Case& c) {
  Case a = c;
  a.config.k_format = KvFormat{};
  a.config.v_format = KvFormat{};
  const int64_t hi = std::min(kMaxPosition, f.capabilities.max_position + 1) - a.config.max_tokens;
  int64_t lo_p = hi, hi_p = 0;
  const auto note = [&](int64_t p) { lo_p = std::min(lo_p, p), hi_p = std::max(hi_p, p); };
  for (int s = 0; s < a.config.batch; ++s) note(start_position(a.config, s));
  for (const StepPlan& st : a.steps) for (const ResetPlan& r : st.resets) note(r.start_position);
  const int64_t wanted = std::array<int64_t, 3>{1, 1000, int64_t{1} << 20}[c.seed % 3];
  const int64_t shift = hi_p + wanted <= hi ? wanted : -std::min(wanted, lo_p);
  Case b = a;
  for (int64_t& p : b.config.start_positions) p += shift;
  for (StepPlan& st : b.steps) for (ResetPlan& r : st.resets) r.start_position += shift;
  CompareOptions cmp;
  cmp.oracle_gap = false;  // the same data at shifted positions: no oracle slack between the runs
  RC_ASSERT(report(b, "RopeRelativity (shift " + std::to_string(shift) + ")",
                         run_and_compare(f, a, b, {}, cmp, true)));
}

// ---------------------------------------------------------------- 8
void prop_boundary_identities(const EngineFactory& f, const Case& c0) {
  Case c = c0;
  freeze_needles(c);  // the variants change W and S, not the data
  const int64_t length = longest_stream(c);
  std::string why;
  // (a) W = 1, S = 0, no sink logit: every output is the token's own stored v, exactly.
  {
    Case one = c;
    for (LayerConfig& l : one.config.layers) l.window = 1, l.sinks = 0;
    one.config.sink_logits.clear();
    const bool can = expressible(f, one);  // not for an engine whose smallest window is above 1
    const RunResult r = can ? run_case(f, one, property_run()) : RunResult{};  // the oracle's output is v itself
    why = r.failure;
    // With a single visible key, P = 1 exactly: an engine that keeps P, the P·V sum and the output
    // in f32 or wider returns the stored v bit for bit.
    const auto wide = [](Precision p) { return p == Precision::f32 || p == Precision::f64; };
    // And it stores V as the config says: an engine declaring a coarser V storage (bf16 for an f32
    // config) returns its own stored v, the spec's rounded, which the bound above already judged.
    const std::optional<Precision>& vs = r.info.precision.v_storage;
    const bool exact = wide(r.info.precision.p_before_pv) && wide(r.info.precision.pv_accumulator) &&
                       wide(r.info.precision.output) && (!vs || *vs == precision_of(one.config.v_format.dtype));
    for (const auto& [key, rec] : r.tokens) {
      if (!why.empty() || !exact || !can) break;
      for (size_t i = 0; i < rec.got.size(); ++i) {
        if (static_cast<double>(rec.got[i]) != rec.expected[i]) {
          why = "W = 1, S = 0: stream " + std::to_string(key.stream) + " token " + std::to_string(key.index) +
                " output element " + std::to_string(i) + " is " + std::to_string(rec.got[i]) +
                ", not the token's own stored v " + std::to_string(rec.expected[i]);
          break;
        }
      }
    }
    if (!why.empty()) why = "(W = 1, S = 0) " + why;
  }
  CompareOptions cmp;
  cmp.bitwise = true;
  cmp.oracle_gap = false;
  Case causal = c;
  for (LayerConfig& l : causal.config.layers) l.window = causal.config.max_tokens + 3, l.sinks = 0;
  // (b) W >= length: the window never bites, it is causal attention.
  if (why.empty()) {
    Case w = c;
    for (LayerConfig& l : w.config.layers) l.window = length, l.sinks = 0;
    why = run_and_compare(f, causal, w, {}, cmp, true);
    if (!why.empty()) why = "(W = length = " + std::to_string(length) + " vs causal) " + why;
  }
  // (c) S + W >= length: sinks plus window cover everything, it is causal attention.
  if (why.empty()) {
    Case sw = c;
    for (LayerConfig& l : sw.config.layers) {
      l.sinks = std::max<int64_t>(l.sinks, 1);
      l.window = std::max<int64_t>(1, length - l.sinks);
    }
    why = run_and_compare(f, causal, sw, {}, cmp, true);
    if (!why.empty()) why = "(S + W = length vs causal) " + why;
  }
  RC_ASSERT(report(c, "BoundaryIdentities", why));
}

// ---------------------------------------------------------------- 9
void prop_gqa_equals_mha(const EngineFactory& f, const Case& c) {
  Case gqa = c;
  Config& g = gqa.config;
  if (g.num_q_heads == g.num_kv_heads) {  // make it grouped: MQA, or 2 query heads per kv head
    if (g.num_q_heads == 1) {
      g.num_q_heads = 2;
      clear_sink_logits(gqa);
    } else {
      g.num_kv_heads = 1;
    }
  }
  Case mha = gqa;
  mha.config.num_kv_heads = g.num_q_heads;
  mha.kv_head_repeat = g.num_q_heads / g.num_kv_heads;
  CompareOptions cmp;
  cmp.oracle_gap = false;  // identical data: the oracles agree exactly
  RC_ASSERT(report(gqa, "GqaEqualsMha (Hq " + std::to_string(g.num_q_heads) + ", Hkv " +
                                  std::to_string(g.num_kv_heads) + ")",
                         run_and_compare(f, gqa, mha, {}, cmp, true)));
}

// ---------------------------------------------------------------- 10
void prop_int8_storage(const EngineFactory& f, const Case& c) {
  // Sequence 0 of the case, with INT8 K and V and no RoPE (so the stored K is quant(k) and x is known).
  Case m = c;
  Config& cfg = m.config;
  // A scheme and rounding the engine declares (q8_0 only where D is a multiple of 32).
  std::vector<Int8Scheme> schemes;
  for (Int8Scheme sc : f.capabilities.int8_schemes) {
    if (sc != Int8Scheme::q8_0 || cfg.head_dim % 32 == 0) schemes.push_back(sc);
  }
  const std::vector<Rounding>& roundings = f.capabilities.int8_roundings;
  if (schemes.empty() || roundings.empty()) return;  // no INT8 to check
  const Int8Scheme scheme = schemes[c.seed % schemes.size()];
  KvFormat fmt;
  fmt.dtype = DType::int8;
  fmt.int8_scheme = scheme;
  fmt.rounding = roundings[(c.seed / 3) % roundings.size()];
  fmt.scale = 0.01f;  // static_tensor: |x| beyond 1.27 clips
  cfg.k_format = cfg.v_format = fmt;
  for (LayerConfig& l : cfg.layers) l.rope.style = RopeStyle::none;
  cfg.batch = 1;
  cfg.start_positions = {start_position(c.config, 0)};
  m.steps.clear();
  for (const StepPlan& st : c.steps) {
    StepPlan one;
    for (const ResetPlan& r : st.resets) {
      if (r.sequence == 0) one.resets.push_back(r);
    }
    one.tokens = {st.tokens[0]};
    if (!one.resets.empty() || one.tokens[0] > 0) m.steps.push_back(one);
  }
  m.zero_rows_every = 5;  // every fifth token: all-zero K and V rows
  m.data = DataMode::random;
  // An engine without this INT8 scheme and rounding (or without rope-none layers) is not asked.
  if (!expressible(f, m)) return;
  const int D = cfg.head_dim, H = cfg.num_kv_heads;
  const int G = int8_group_size(scheme, D), spr = scales_per_row(fmt, D);
  const auto L = static_cast<int>(cfg.layers.size());

  // Checks one stored row against the x it was quantised from.
  std::vector<float> x(static_cast<size_t>(D));
  const auto check_row = [&](const CacheSnapshot& sn, int64_t slot, int h, bool key, int layer, int stream,
                             int64_t index) -> std::string {
    input_row(m, key ? Tensor::k : Tensor::v, layer, stream, index, h, x.data());
    const size_t row = (static_cast<size_t>(slot) * static_cast<size_t>(H) + static_cast<size_t>(h));
    const std::vector<float>& got = key ? sn.k : sn.v;
    const std::vector<int8_t>& codes = key ? sn.k_codes : sn.v_codes;
    const std::vector<float>& scales = key ? sn.k_scales : sn.v_scales;
    if (codes.size() != got.size()) return "snapshot has no INT8 codes";
    for (int g0 = 0; g0 < D; g0 += G) {
      float amax = 0.0f;
      for (int i = g0; i < g0 + G; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(i)]));
      Int8Group grp;
      grp.divisor_scale = scheme == Int8Scheme::static_tensor ? fmt.scale : amax / 127.0f;
      grp.stored_scale = scheme == Int8Scheme::static_tensor
                             ? fmt.scale
                             : scales[row * static_cast<size_t>(spr) + static_cast<size_t>(g0 / G)];
      for (int i = g0; i < g0 + G; ++i) {
        const size_t e = row * static_cast<size_t>(D) + static_cast<size_t>(i);
        const float xi = x[static_cast<size_t>(i)], xh = got[e];
        const std::string where = std::string(key ? "K" : "V") + " of token " + std::to_string(index) +
                                  " (layer " + std::to_string(layer) + ", slot " + std::to_string(slot) +
                                  ", head " + std::to_string(h) + ", dim " + std::to_string(i) + ")";
        if (codes[e] == -128) return where + ": code -128 is outside [-127, 127]";
        if (!std::isfinite(xh)) return where + ": dequantised value is not finite";
        const double err = std::fabs(double(xi) - double(xh));
        const double bound = int8_element_bound(fmt, xi, grp);
        if (!(err <= bound)) {
          return where + ": x = " + std::to_string(xi) + ", dequantised " + std::to_string(xh) + ", |x - x^| = " +
                 std::to_string(err) + " > the " + to_string(fmt) + " element bound " + std::to_string(bound);
        }
        const bool scale_ok = scheme == Int8Scheme::static_tensor || grp.stored_scale == 0.0f;
        if (amax == 0.0f && (xh != 0.0f || codes[e] != 0 || !scale_ok)) {
          return where + ": an all-zero group must store codes 0, value 0 and (unless static) scale 0";
        }
      }
    }
    return "";
  };

  std::string why;
  std::unique_ptr<Engine> e;
  try {
    e = f.create(cfg);
  } catch (const std::exception& ex) {
    why = std::string("engine creation threw: ") + ex.what();
  }
  int stream = m.initial_stream(0);
  int64_t p0 = cfg.start_positions[0], seen = 0;
  std::vector<float> q, k, v, out;
  for (size_t st = 0; st < m.steps.size() && why.empty(); ++st) {
    const StepPlan& plan = m.steps[st];
    std::vector<SequenceReset> resets;
    for (const ResetPlan& r : plan.resets) {
      resets.push_back({0, r.start_position});
      stream = r.stream;
      p0 = r.start_position;
      seen = 0;
    }
    const int64_t n = plan.tokens[0];
    std::vector<SequenceStep> appends;
    if (n > 0) {
      q.assign(static_cast<size_t>(L * n * cfg.num_q_heads * D), 0.0f);
      k.resize(static_cast<size_t>(L * n * H * D));
      v.resize(k.size());
      out.resize(q.size());
      fill_chunk(m, Tensor::q, stream, seen, n, q.data());
      fill_chunk(m, Tensor::k, stream, seen, n, k.data());
      fill_chunk(m, Tensor::v, stream, seen, n, v.data());
      appends.push_back({0, n, q.data(), k.data(), v.data(), out.data()});
    }
    try {
      e->step(StepBatch{resets, appends});
    } catch (const std::exception& ex) {
      why = std::string("engine threw: ") + ex.what();
      break;
    }
    seen += n;
    for (int l = 0; l < L && why.empty(); ++l) {
      const std::optional<CacheSnapshot> sn = e->snapshot(l, 0);
      if (!sn) {
        why = "engine has no snapshot()";
        break;
      }
      for (int64_t slot = 0; slot < sn->capacity && why.empty(); ++slot) {
        const int64_t pos = sn->positions[static_cast<size_t>(slot)];
        if (pos < p0 || pos >= p0 + seen) continue;  // empty (or wrong: property 2's business)
        for (int h = 0; h < H && why.empty(); ++h) {
          why = check_row(*sn, slot, h, true, l, stream, pos - p0);
          if (why.empty()) why = check_row(*sn, slot, h, false, l, stream, pos - p0);
        }
      }
    }
  }
  // Idempotence: quantising x^ again gives the same codes (one token per engine, so x^ is all it sees).
  if (why.empty()) {
    Config one = cfg;
    one.start_positions.clear();
    one.sink_logits.clear();
    one.max_tokens = 1;
    for (LayerConfig& l : one.layers) l.window = 1, l.sinks = 0;
    std::vector<float> q1(static_cast<size_t>(L * one.num_q_heads * D), 0.0f), o1(q1.size());
    std::vector<float> k1(static_cast<size_t>(L * H * D)), v1(k1.size());
    const int64_t tokens = std::min<int64_t>(seen, 8);
    for (int64_t t = 0; t < tokens && why.empty(); ++t) {
      try {
        std::unique_ptr<Engine> e1 = f.create(one), e2 = f.create(one);
        fill_chunk(m, Tensor::k, stream, t, 1, k1.data());
        fill_chunk(m, Tensor::v, stream, t, 1, v1.data());
        const SequenceStep s1{0, 1, q1.data(), k1.data(), v1.data(), o1.data()};
        e1->step(StepBatch{{}, std::span<const SequenceStep>(&s1, 1)});
        std::vector<CacheSnapshot> first;
        for (int l = 0; l < L; ++l) {
          first.push_back(*e1->snapshot(l, 0));
          std::copy(first.back().k.begin(), first.back().k.end(), k1.begin() + static_cast<std::ptrdiff_t>(l * H * D));
          std::copy(first.back().v.begin(), first.back().v.end(), v1.begin() + static_cast<std::ptrdiff_t>(l * H * D));
        }
        const SequenceStep s2{0, 1, q1.data(), k1.data(), v1.data(), o1.data()};
        e2->step(StepBatch{{}, std::span<const SequenceStep>(&s2, 1)});
        for (int l = 0; l < L && why.empty(); ++l) {
          const CacheSnapshot again = *e2->snapshot(l, 0);
          for (size_t i = 0; i < static_cast<size_t>(H * D) && why.empty(); ++i) {
            const CacheSnapshot& a = first[static_cast<size_t>(l)];
            if (a.k_codes[i] != again.k_codes[i] || a.v_codes[i] != again.v_codes[i]) {
              why = "requantising x^ changed an INT8 code (token " + std::to_string(t) + ", layer " +
                    std::to_string(l) + ", element " + std::to_string(i) + ": K " + std::to_string(a.k_codes[i]) +
                    " -> " + std::to_string(again.k_codes[i]) + ", V " + std::to_string(a.v_codes[i]) + " -> " +
                    std::to_string(again.v_codes[i]) + ")";
            }
          }
        }
      } catch (const std::exception& ex) {
        why = std::string("engine threw: ") + ex.what();
      }
    }
  }
  RC_ASSERT(report(m, "Int8Storage", why));
}

// ---------------------------------------------------------------- 11
void prop_poisoning(const EngineFactory& f, const Case& c) {
  RunOptions poison;
  poison.poison = true;
  CompareOptions cmp;
  cmp.bitwise = true;
  cmp.oracle_gap = false;
  RC_ASSERT(report(c, "Poisoning", run_and_compare(f, c, c, poison, cmp, true)));
}

// ---------------------------------------------------------------- 12
void prop_layer_independence(const EngineFactory& f, const Case& c) {
  Case a = c;
  freeze_needles(a);
  if (a.config.layers.size() == 1) {  // add a second layer with its own window
    LayerConfig extra = a.config.layers[0];
    if (f.capabilities.max_sliding_windows > 1) extra.window = std::max<int64_t>(1, extra.window / 2 + 1);
    a.config.layers.push_back(extra);
    a.needle_windows.push_back(extra.window);
    a.needle_sinks.push_back(extra.sinks);
    if (!a.config.sink_logits.empty()) a.config.sink_logits.push_back(a.config.sink_logits[0]);
  }
  const auto L = static_cast<int>(a.config.layers.size());
  const int changed = static_cast<int>(c.seed % static_cast<uint64_t>(L));
  Case b = a;
  b.layer_salt.assign(static_cast<size_t>(L), 0);
  b.layer_salt[static_cast<size_t>(changed)] = 0x5a17 + c.seed;
  CompareOptions cmp;
  cmp.bitwise = true;
  cmp.oracle_gap = false;  // the other layers' data is unchanged
  cmp.select_layer = [changed](int l) { return l != changed; };
  RC_ASSERT(report(b, "LayerIndependence (layer " + std::to_string(changed) + " changed)",
                         run_and_compare(f, a, b, {}, cmp, true)));
}

// ---------------------------------------------------------------- 13
void prop_rollback(const EngineFactory& f, const Case& c) {
  if (!expressible(f, c)) return;
  RunOptions o = property_run();
  o.check_ring = f.capabilities.snapshot;  // rolled-back slots empty, retained ones intact (§5.1.6)
  const RunResult r = run_case(f, c, o);
  RC_ASSERT(report(c, "Rollback", r.ok() ? "" : r.failure));
}

// ---------------------------------------------------------------- registry

const std::vector<PropertyInfo>& all_properties() {
  static const std::vector<PropertyInfo> props = [] {
    CaseOptions any;
    CaseOptions f32_only = any;
    f32_only.quantised = false;
    CaseOptions no_resets = any;
    no_resets.resets = false;
    CaseOptions multi = any;
    multi.max_layers = 3;
    CaseOptions rollbacks = any;
    rollbacks.rollbacks = true;
    return std::vector<PropertyInfo>{
        {"OracleEquality", "every output within the bound of the float64 oracle", prop_oracle_equality, any, false},
        {"RingHoldsVisibleSet", "after every step the ring holds exactly the spec's slots and values",
         prop_ring_holds_visible_set, any, true},
        {"ConstantMemory", "cache bytes constant from construction through 100 W tokens", prop_constant_memory, any,
         false},
        {"ChunkingInvariance", "any cut into chunks gives the same outputs", prop_chunking_invariance, any, false},
        {"BatchIsolation", "other sequences' activity does not change a sequence's outputs; identical prefixes "
                           "(shared in a step, re-sent after a reset) give identical outputs (spec 1.2)", prop_batch_isolation,
         any, false},
        {"ResetIsFresh", "a reset sequence behaves like a fresh one", prop_reset_is_fresh, no_resets, false},
        {"RopeRelativity", "shifting all positions leaves outputs unchanged (f32)", prop_rope_relativity, f32_only,
         false},
        {"BoundaryIdentities", "W = 1 is own v; W >= length and S + W >= length are causal",
         prop_boundary_identities, any, false},
        {"GqaEqualsMha", "GQA equals MHA with repeated kv heads", prop_gqa_equals_mha, any, false},
        {"Int8Storage", "INT8 element bound, code range, zero groups, idempotence", prop_int8_storage, any, true},
        {"Poisoning", "NaN in empty slots changes no output", prop_poisoning, any, false},
        {"LayerIndependence", "one layer's inputs do not change another layer's outputs", prop_layer_independence,
         multi, false},
        {"Rollback", "rolled-back tokens are as if never appended; exactly the spec's rollbacks are refused (1.1)",
         prop_rollback, rollbacks, false, true},
    };
  }();
  return props;
}

Case fixed_case(const Capabilities& caps, const PropertyInfo& p, size_t property_index, int i) {
  const uint64_t seed = hash_coords(0x6d7574616e74ull, property_index, static_cast<uint64_t>(i));
  return gen_case(caps, p.options)(rc::Random(seed), i % 100).value();
}

PropertyVerdict run_property_once(const PropertyInfo& p, const EngineFactory& f, const Case& c) {
  try {
    p.run(f, c);
  } catch (const rc::detail::CaseResult& r) {
    if (r.type == rc::detail::CaseResult::Type::Failure) return {true, property_report(r.description)};
  } catch (const std::exception& e) {
    return {true, std::string("threw: ") + e.what()};
  }
  return {};
}

std::string property_report(const std::string& description) {
  static const std::string kExpansion = "\n\nExpands to:\n";  // rc::detail::makeExpressionMessage
  const size_t at = description.find(kExpansion);
  return at == std::string::npos ? description : description.substr(at + kExpansion.size());
}

const PropertyInfo& property(const std::string& name) {
  for (const PropertyInfo& p : all_properties()) {
    if (name == p.name) return p;
  }
  throw std::invalid_argument("no property named " + name);
}

}  // namespace ringkv::conformance
