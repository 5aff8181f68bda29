// ringkv golden: judging an engine against a case: capabilities, outputs within the bound, the stored cache.
#include "golden/golden.hpp"
#include "support/capabilities.hpp"
#include "golden/detail.hpp"
#include "golden/replay.hpp"
#include "golden/rope_verdict.hpp"
#include "support/stored_rule.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/ring.hpp"

namespace ringkv::golden {

using conformance::ResetPlan;
using conformance::ScoreStats;
using nlohmann::json;

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Checking an engine.

namespace {

// A mismatch located at one row's (step, sequence, token, position), layer and head.
GoldenMismatch mismatch_at(const GoldenRow& gr, int layer, int head) {
  GoldenMismatch m;
  m.step = gr.step;
  m.sequence = gr.sequence;
  m.token = gr.index;
  m.position = gr.position;
  m.layer = layer;
  m.head = head;
  return m;
}

// Compares outputs one element at a time and keeps the first failure.
class OutputChecker {
 public:
  /// rope_term false: the bound's RoPE term off (the rotation is known to be spec §8's, or judged apart).
  OutputChecker(const GoldenCase& g, const PrecisionProfile& profile, GoldenOutcome* outcome, bool rope_term = true)
      : g_(g), r_(*outcome) {
    for (int l = 0; l < g.layers(); ++l) {
      ctx_.push_back(conformance::make_bound_context(g.c.config, l, profile));
      ctx_.back().rope = ctx_.back().rope && rope_term;
    }
  }

  /// Against the file's expected output and bound inputs.
  void check(int64_t row, int l, int h, int d, float got) {
    const size_t i = g_.q_offset(l, row, h) + static_cast<size_t>(d);
    check(row, l, h, d, got, g_.expected_f64[i], g_.score(l, row, h), g_.dim(l, row, h, d));
  }

  /// Against an expected output and bound inputs computed otherwise (rope_verdict.hpp's RotatedOracle).
  void check(int64_t row, int l, int h, int d, float got, double e, const ScoreStats& score, const conformance::DimStats& dim) {
    const double bound = conformance::output_bound(ctx_[static_cast<size_t>(l)], score, dim);
    const double err = std::fabs(double(got) - e);
    ++r_.outputs_checked;
    const double ratio = std::isnan(err) ? INFINITY : bound > 0 ? err / bound : (err == 0 ? 0.0 : INFINITY);
    r_.worst_ratio = std::max(r_.worst_ratio, ratio);
    if (err <= bound) return;
    ++r_.outputs_failed;
    if (!r_.failure.empty()) return;
    const GoldenRow& gr = g_.rows[static_cast<size_t>(row)];
    GoldenMismatch m = mismatch_at(gr, l, h);
    m.what = "output";
    m.dim = d;
    m.expected = e;
    m.got = got;
    m.bound = bound;
    std::ostringstream os;
    os.precision(9);
    os << "step " << gr.step << ", sequence " << gr.sequence << ", token " << gr.index << " (position " << gr.position
       << "), layer " << l << ", q head " << h << ", dim " << d << ": expected " << e << ", got " << got << ", |diff| "
       << err << " > bound " << bound;
    r_.failure = os.str();
    r_.first = m;
  }

 private:
  const GoldenCase& g_;
  GoldenOutcome& r_;
  std::vector<conformance::BoundContext> ctx_;
};

// Per element of K row (layer, row, kv head): how far the engine's rotated K may lie from the file's
// before storage (rotation_bound.hpp's stored_k_slack): the declared rope_angle's angle part (none for
// f64 angles) and one f32 step for another C library's sin and cos.
std::vector<double> k_slack(const GoldenCase& g, int layer, int64_t row, int h, Precision rope_angle) {
  const RopeConfig& rope = g.c.config.layers[static_cast<size_t>(layer)].rope;
  std::vector<double> slack(static_cast<size_t>(g.c.config.head_dim), 0.0);
  conformance::stored_k_slack(rope, g.c.config.head_dim, g.rows[static_cast<size_t>(row)].position,
                              rope_angle == Precision::f64 ? 0.0 : unit_roundoff(rope_angle),
                              g.k.data() + g.kv_offset(layer, row, h), slack.data());
  return slack;
}

// The rule one stored row of K or V is judged by (support/stored_rule.hpp): the engine's declared
// storage; for K with RoPE (`roped`, unless the comparison wants it exact) within a rounding of each
// side plus k_slack (*slack holds it).
conformance::StoredRule stored_rule_for(const GoldenCase& g, int layer, int64_t row, int h, bool is_k, bool roped,
                                        const PrecisionProfile& profile, std::vector<double>* slack) {
  const Config& cfg = g.c.config;
  conformance::StoredRule rule =
      conformance::stored_rule(is_k ? cfg.k_format : cfg.v_format, is_k ? profile.k_storage : profile.v_storage);
  if (is_k && roped) {
    *slack = k_slack(g, layer, row, h, profile.rope_angle);
    const std::string why = profile.rope_angle != Precision::f64
                                ? "the declared rope_angle"
                                : "RoPE (f64 sin and cos may differ between C libraries in the last bit)";
    rule.why = rule.relaxed ? why + " and " + rule.why : why;
    rule.relaxed = true;
    rule.slack = slack->data();
  }
  return rule;
}

// Compares one stored row (one token, one kv head) with `want` (spec §6) by `rule`: `src` is the row's
// offset in want's [L][R][Hkv][D] tensors, `at` names the row in messages. Returns "" or the failure
// (and fills m's what, dim, expected, got, bound).
std::string compare_stored_row(const conformance::StoredRule& rule, int D, const GoldenStored& want, size_t src,
                               const float* got, const int8_t* got_codes, const float* got_scales, bool is_k, int h,
                               const std::string& at, GoldenMismatch* m, int64_t* checked) {
  const size_t spr = static_cast<size_t>(scales_per_row(rule.format, D));
  conformance::StoredRowView w{want.value.data() + src, nullptr, nullptr, nullptr};
  if (!want.codes.empty()) w.codes = want.codes.data() + src;
  if (spr > 0 && !want.scales.empty()) w.scales = want.scales.data() + src / static_cast<size_t>(D) * spr;
  if (!want.tie.empty()) w.tie = want.tie.data() + src;
  const conformance::StoredRowView gv{got, got_codes, got_scales, nullptr};
  const std::optional<conformance::StoredMismatch> mm = conformance::compare_stored_row(rule, D, h, is_k, w, gv, checked);
  if (!mm) return "";
  m->what = mm->what;
  m->dim = mm->dim;
  m->expected = mm->expected;
  m->got = mm->got;
  m->bound = mm->bound;
  return at + " " + mm->text;
}

// The spec's ring of one (layer, sequence) as the rows of the file fill it: slot -> row, or -1. Kept
// token by token (spec §3), emptied by a reset and, for the slots of removed tokens, by a rollback
// (spec 1.1 §5.1.6). So a stored-cache look-up of (sequence, index) finds the latest row of that index
// at or before the step (format 2: a re-appended index has a new row).
struct SpecSlots {
  RingGeometry geo;
  std::vector<int64_t> row;  // [C]
  SpecSlots(const LayerConfig& L, int64_t max_tokens)
      : geo{L.sinks, L.window, ring_capacity(L, max_tokens)}, row(static_cast<size_t>(geo.capacity), -1) {}
  void write(const GoldenCase& g, int64_t r) { row[static_cast<size_t>(geo.slot_of(g.rows[static_cast<size_t>(r)].index))] = r; }
  void roll_back(const GoldenCase& g, int64_t m) {
    for (int64_t& r : row) r = r >= 0 && g.rows[static_cast<size_t>(r)].index >= m ? -1 : r;
  }
  void reset() { std::fill(row.begin(), row.end(), -1); }
};

// Compares one snapshot with what the file says the ring holds.
std::string check_snapshot(const GoldenCase& g, int layer, int seq, int step, const SpecSlots& ring,
                           const CacheSnapshot& snap, const GoldenCheckOptions& opt, const PrecisionProfile& profile,
                           GoldenOutcome* r) {
  const Config& cfg = g.c.config;
  const LayerConfig& L = cfg.layers[static_cast<size_t>(layer)];
  const RingGeometry& geo = ring.geo;
  const int D = cfg.head_dim, H = cfg.num_kv_heads;
  const std::string where = "after step " + std::to_string(step) + ", layer " + std::to_string(layer) + ", sequence " +
                            std::to_string(seq) + ": ";
  GoldenMismatch m;
  m.step = step;
  m.layer = layer;
  m.sequence = seq;
  const auto fail = [&](const std::string& what, const std::string& text) {
    m.what = what;
    r->first = m;
    return where + text;
  };
  if (snap.capacity != geo.capacity) {
    m.expected = static_cast<double>(geo.capacity);
    m.got = static_cast<double>(snap.capacity);
    return fail("ring capacity", "ring capacity " + std::to_string(snap.capacity) +
                                     ", spec says min(S + W + rollback_reserve, max_tokens) = " + std::to_string(geo.capacity));
  }
  const size_t cap = static_cast<size_t>(geo.capacity), row_elems = static_cast<size_t>(H) * static_cast<size_t>(D);
  if (snap.positions.size() != cap || snap.k.size() != cap * row_elems || snap.v.size() != cap * row_elems) {
    return fail("snapshot shape", "snapshot has " + std::to_string(snap.positions.size()) + " positions, " +
                                      std::to_string(snap.k.size()) + " K and " + std::to_string(snap.v.size()) +
                                      " V values; expected " + std::to_string(cap) + ", " + std::to_string(cap * row_elems) +
                                      " and " + std::to_string(cap * row_elems));
  }
  const bool roped = L.rope.style != RopeStyle::none && !opt.exact_rotated_k;
  for (size_t slot = 0; slot < cap; ++slot) {
    const int64_t row = ring.row[slot];
    const int64_t j = row < 0 ? -1 : g.rows[static_cast<size_t>(row)].index;
    const int64_t want = j < 0 ? RingKvCache::kEmpty : g.rows[static_cast<size_t>(row)].position;
    m.slot = static_cast<int64_t>(slot);
    if (snap.positions[slot] != want) {
      m.token = j;
      m.position = want;
      m.expected = static_cast<double>(want);
      m.got = static_cast<double>(snap.positions[slot]);
      return fail("ring position", "slot " + std::to_string(slot) + " holds position " + std::to_string(snap.positions[slot]) +
                                       ", spec says " + (j < 0 ? std::string("empty") : std::to_string(want) + " (token " + std::to_string(j) + ")"));
    }
    if (j < 0) continue;
    m.token = j;
    m.position = want;
    const std::string at = "slot " + std::to_string(slot) + " (token " + std::to_string(j) + ")";
    for (int pass = 0; pass < 2; ++pass) {
      const bool is_k = pass == 0;
      const KvFormat& f = is_k ? cfg.k_format : cfg.v_format;
      const std::vector<int8_t>& codes = is_k ? snap.k_codes : snap.v_codes;
      const std::vector<float>& scales = is_k ? snap.k_scales : snap.v_scales;
      const size_t spr = static_cast<size_t>(scales_per_row(f, D));
      const bool with_codes = f.dtype == DType::int8 && codes.size() == cap * row_elems;
      const bool with_scales = f.dtype == DType::int8 && spr > 0 && scales.size() == cap * static_cast<size_t>(H) * spr;
      for (int h = 0; h < H; ++h) {
        const size_t dst = slot * row_elems + static_cast<size_t>(h) * static_cast<size_t>(D);
        m.head = h;
        std::vector<double> slack;
        const conformance::StoredRule rule = stored_rule_for(g, layer, row, h, is_k, roped, profile, &slack);
        const std::string text = compare_stored_row(
            rule, D, is_k ? g.k_stored : g.v_stored, g.kv_offset(layer, row, h), (is_k ? snap.k : snap.v).data() + dst,
            with_codes ? codes.data() + dst : nullptr,
            with_scales ? scales.data() + (slot * static_cast<size_t>(H) + static_cast<size_t>(h)) * spr : nullptr, is_k, h,
            at, &m, &r->stored_checked);
        if (!text.empty()) return fail(m.what, text);
      }
    }
  }
  return "";
}

// Spec 1.1 §5.1.4: the engine refuses exactly the steps the spec refuses. Returns "" or the failure
// (and fills r->first), naming step `st` and what the engine did.
std::string refusal_failure(const GoldenCase& g, int st, bool engine_refused, GoldenOutcome* r) {
  const bool spec_refuses = g.refused[static_cast<size_t>(st)] != 0;
  if (spec_refuses == engine_refused) return "";
  GoldenMismatch m;
  m.what = "refusal";
  m.step = st;
  std::string rolls;
  for (const conformance::RollbackPlan& p : g.c.steps[static_cast<size_t>(st)].rollbacks) {
    if (m.sequence < 0) m.sequence = p.sequence;
    rolls += (rolls.empty() ? "" : ", ") + std::string("sequence ") + std::to_string(p.sequence) + " by " + std::to_string(p.n_tokens);
  }
  m.expected = spec_refuses ? 1 : 0;
  m.got = engine_refused ? 1 : 0;
  r->first = m;
  return "step " + std::to_string(st) + " (roll back " + rolls + "): " +
         (spec_refuses ? "the spec refuses this rollback (spec 1.1 §5.1.2: a key a later query sees has been overwritten), "
                         "but the engine did not refuse the step"
                       : "the engine refused this rollback, but the spec honours it (spec 1.1 §5.1.2)");
}

// A scale case's file holds no expected outputs: it is judged on its sampled rows (golden/scale_golden.hpp).
void refuse_scale_case(const GoldenCase& g) {
  if (!g.scale_case.empty()) {
    throw GoldenInputError("golden case " + g.name + " is the scale case " + g.scale_case +
                           " (inputs only, no expected outputs): judge it with run_scale_case or check_scale_outputs "
                           "(ringkv check --scale)");
  }
}

}  // namespace

GoldenOutcome check_golden(const EngineFactory& factory, const GoldenCase& g, const GoldenCheckOptions& opt) {
  refuse_scale_case(g);
  GoldenOutcome r;
  const Config& cfg = g.c.config;
  r.skip_reason = conformance::capability_gap(factory.capabilities, g.c);
  if (!r.skip_reason.empty()) {
    r.skipped = true;
    return r;
  }
  std::unique_ptr<Engine> engine;
  try {
    engine = factory.create(cfg);
    if (!engine) throw Error("the factory returned no engine");
  } catch (const std::exception& e) {
    r.failure = std::string("engine creation threw: ") + e.what();
    return r;
  }
  const PrecisionProfile profile = engine->info().precision;
  r.profile = profile;
  OutputChecker checker(g, profile, &r, !opt.qk_rotated_by_ringkv);
  if (opt.qk_rotated_by_ringkv) {
    r.rope = rotated_by_ringkv_verdict();
  } else if (RopeVerdict v = rope_dominance(g, profile); v.rope_dominated > 0) {
    r.rope = v;
  }
  const int B = cfg.batch, L = g.layers();
  const int64_t Hq = cfg.num_q_heads, D = cfg.head_dim;
  bool snapshots = opt.snapshot && factory.capabilities.snapshot;
  std::vector<SpecSlots> rings;  // [L][B]: the spec's ring, row per slot
  for (int l = 0; l < L; ++l) {
    for (int s = 0; s < B; ++s) rings.emplace_back(cfg.layers[static_cast<size_t>(l)], cfg.max_tokens);
  }
  const auto ring = [&](int l, int s) -> SpecSlots& { return rings[static_cast<size_t>(l * B + s)]; };
  std::vector<int64_t> held(static_cast<size_t>(B), 0);
  try {
    replay_golden(*engine, g, [&](size_t st, std::span<const ReplayedChunk> chunks, Refusal refusal) {
      const conformance::StepPlan& plan = g.c.steps[st];
      if (const std::string text = refusal_failure(g, static_cast<int>(st), refusal == Refusal::refused, &r); !text.empty()) {
        if (r.failure.empty()) r.failure = text;
        return false;  // the engine's state is no longer the spec's: nothing after this step is comparable
      }
      if (refusal == Refusal::none) {
        for (const conformance::RollbackPlan& p : plan.rollbacks) {
          held[static_cast<size_t>(p.sequence)] -= p.n_tokens;
          for (int l = 0; l < L; ++l) ring(l, p.sequence).roll_back(g, held[static_cast<size_t>(p.sequence)]);
        }
        for (const ResetPlan& p : plan.resets) {
          held[static_cast<size_t>(p.sequence)] = 0;
          for (int l = 0; l < L; ++l) ring(l, p.sequence).reset();
        }
      }
      for (const ReplayedChunk& c : chunks) {
        const GoldenChunk& ch = *c.chunk;
        for (int l = 0; l < L; ++l) {
          for (int64_t t = 0; t < ch.n_tokens; ++t) {
            for (int h = 0; h < Hq; ++h) {
              const float* o = c.out + count({l, ch.n_tokens, Hq, D}) + count({t, Hq, D}) + count({h, D});
              for (int d = 0; d < D; ++d) checker.check(ch.row_begin + t, l, h, d, o[d]);
            }
          }
        }
        for (int64_t t = 0; t < ch.n_tokens; ++t) {
          for (int l = 0; l < L; ++l) ring(l, ch.sequence).write(g, ch.row_begin + t);
        }
        held[static_cast<size_t>(ch.sequence)] += ch.n_tokens;
      }
      if (snapshots && r.failure.empty()) {
        for (int l = 0; l < L && r.failure.empty() && snapshots; ++l) {
          for (int s = 0; s < B && r.failure.empty(); ++s) {
            const std::optional<CacheSnapshot> snap = engine->snapshot(l, s);
            if (!snap) {  // the engine does not expose its cache after all: outputs only
              snapshots = false;
              break;
            }
            r.failure = check_snapshot(g, l, s, static_cast<int>(st), ring(l, s), *snap, opt, profile, &r);
          }
        }
      }
      return true;
    });
  } catch (const Error& e) {  // the engine threw in a step: replay_golden names the step
    if (r.failure.empty()) r.failure = e.what();
  }
  r.passed = r.failure.empty();
  return r;
}

GoldenOutcome compare_golden_outputs(const GoldenCase& g, const std::vector<float>& out, const PrecisionProfile& profile) {
  GoldenOutputs o;
  o.out = out;
  return compare_golden_outputs(g, o, profile);
}

namespace {

// The engine's stored cache of an outputs file, row by row, against `want_k` and the file's V (§6).
void compare_stored_rows(const GoldenCase& g, const GoldenOutputs& o, const GoldenStored& want_k, bool k_exact,
                         const PrecisionProfile& profile, GoldenOutcome* r) {
  const Config& cfg = g.c.config;
  const int D = cfg.head_dim, H = cfg.num_kv_heads;
  for (int64_t row = 0; row < g.num_rows(); ++row) {  // schedule order: the first failure is the earliest
    const GoldenRow& gr = g.rows[static_cast<size_t>(row)];
    for (int l = 0; l < g.layers(); ++l) {
      const bool roped = cfg.layers[static_cast<size_t>(l)].rope.style != RopeStyle::none;
      for (int pass = 0; pass < 2; ++pass) {
        const bool is_k = pass == 0;
        const std::optional<GoldenStored>& got = is_k ? o.k_stored : o.v_stored;
        if (!got) continue;
        const KvFormat& f = is_k ? cfg.k_format : cfg.v_format;
        const size_t spr = static_cast<size_t>(scales_per_row(f, D));
        for (int h = 0; h < H; ++h) {
          const size_t src = g.kv_offset(l, row, h);
          GoldenMismatch m = mismatch_at(gr, l, h);
          const std::string at = "stored cache, layer " + std::to_string(l) + ", step " + std::to_string(gr.step) +
                                 ", sequence " + std::to_string(gr.sequence) + ": row " + std::to_string(row) + " (token " +
                                 std::to_string(gr.index) + ", position " + std::to_string(gr.position) + ")";
          std::vector<double> slack;
          const conformance::StoredRule rule = stored_rule_for(g, l, row, h, is_k, roped && !k_exact, profile, &slack);
          const std::string text = compare_stored_row(
              rule, D, is_k ? want_k : g.v_stored, src, got->value.data() + src,
              got->codes.empty() ? nullptr : got->codes.data() + src,
              got->scales.empty() ? nullptr : got->scales.data() + src / static_cast<size_t>(D) * spr, is_k, h, at, &m,
              &r->stored_checked);
          if (!text.empty()) {
            r->failure = text;
            r->first = m;
            return;
          }
        }
      }
    }
  }
}

}  // namespace

GoldenOutcome compare_golden_outputs(const GoldenCase& g, const GoldenOutputs& o, const PrecisionProfile& profile) {
  refuse_scale_case(g);
  GoldenOutcome r;
  r.profile = profile;
  if (o.out.size() != g.expected.size()) {
    r.failure = "outputs hold " + std::to_string(o.out.size()) + " values, the case has " + std::to_string(g.expected.size());
    return r;
  }
  const bool rotated = !o.q_rot.empty();
  if (rotated && (o.q_rot.size() != g.q.size() || o.k_rot.size() != g.k.size())) {
    r.failure = "q_rot/k_rot hold " + std::to_string(o.q_rot.size()) + "/" + std::to_string(o.k_rot.size()) +
                " values, the case's q/k " + std::to_string(g.q.size()) + "/" + std::to_string(g.k.size());
    return r;
  }
  // Refusals (spec 1.1 §5.1.4), from the file's "refused_steps": the earliest step where the engine and the
  // spec disagree comes first, since everything after it ran on another state.
  for (size_t st = 0; st < g.refused.size() && r.failure.empty(); ++st) {
    const bool engine_refused = std::find(o.refused_steps.begin(), o.refused_steps.end(), static_cast<int>(st)) != o.refused_steps.end();
    r.failure = refusal_failure(g, static_cast<int>(st), engine_refused, &r);
    if (!r.failure.empty()) r.failure += " (outputs file: __metadata__ refused_steps)";
  }
  if (!r.failure.empty()) return r;
  // (a) The rotation on its own, first: a wrong rotation is the cause of what follows.
  std::optional<RopeVerdict> rope;
  if (rotated) {
    rope = check_rotation(g, o.q_rot, o.k_rot, profile.rope_angle);
    if (rope->kind == RopeVerdict::Kind::failed) r.failure = "RoPE: " + rope->failure;
  }
  OutputChecker checker(g, profile, &r);
  const Config& cfg = g.c.config;
  for (int64_t row = 0; row < g.num_rows(); ++row) {  // schedule order: the first failure is the earliest
    for (int l = 0; l < g.layers(); ++l) {
      for (int h = 0; h < cfg.num_q_heads; ++h) {
        const size_t base = g.q_offset(l, row, h);
        for (int d = 0; d < cfg.head_dim; ++d) checker.check(row, l, h, d, o.out[base + static_cast<size_t>(d)]);
      }
    }
  }
  std::optional<RotatedOracle> oracle;
  if (!rotated) {
    if (RopeVerdict v = rope_dominance(g, profile); v.rope_dominated > 0) r.rope = v;
  } else {
    // (b) Attention from the engine's own rotated values, the bound's RoPE term off.
    RopeVerdict& v = *rope;
    oracle.emplace(g, o.q_rot, o.k_rot);
    GoldenOutcome tight;
    check_attention_tightly(g, o, profile, *oracle, {}, &v, &tight);
    if (!tight.failure.empty() && r.failure.empty()) {
      r.failure = "attention from the engine's own q_rot/k_rot (bound's RoPE term off): " + tight.failure;
      r.first = tight.first;
      if (r.first) r.first->what = "output (own q_rot/k_rot)";
    }
    r.rope = v;
  }
  // The stored cache: K against the storage of the engine's own k_rot when it gave one (exact, spec §11.1:
  // "given the f32 vector being stored"), else against the file's within one step where RoPE applies.
  if (r.failure.empty()) {
    compare_stored_rows(g, o, oracle ? oracle->k_stored() : g.k_stored, oracle.has_value(), profile, &r);
  }
  r.passed = r.failure.empty();
  return r;
}

void check_attention_tightly(const GoldenCase& g, const GoldenOutputs& o, const PrecisionProfile& profile,
                             const RotatedOracle& oracle, const std::function<bool(int, int64_t)>& judged, RopeVerdict* v,
                             GoldenOutcome* tight) {
  OutputChecker tight_checker(g, profile, tight, false);
  const Config& cfg = g.c.config;
  for (int64_t row = 0; row < g.num_rows(); ++row) {  // schedule order: the first failure is the earliest
    for (int l = 0; l < g.layers(); ++l) {
      if (judged && !judged(l, row)) continue;
      for (int h = 0; h < cfg.num_q_heads; ++h) {
        const conformance::OracleOutput want = oracle.attend(l, row, h);
        const size_t base = g.q_offset(l, row, h);
        for (int d = 0; d < cfg.head_dim; ++d) {
          tight_checker.check(row, l, h, d, o.out[base + static_cast<size_t>(d)], want.o[static_cast<size_t>(d)],
                              want.score, want.dims[static_cast<size_t>(d)]);
        }
      }
    }
  }
  v->tight_checked = tight->outputs_checked;
  v->tight_failed = tight->outputs_failed;
  v->tight_worst_ratio = tight->worst_ratio;
  describe_rope_verdict(v, profile.rope_angle);
}

std::vector<double> golden_bounds(const GoldenCase& g, const PrecisionProfile& profile) {
  std::vector<double> b(g.expected.size());
  const Config& cfg = g.c.config;
  for (int l = 0; l < g.layers(); ++l) {
    const conformance::BoundContext ctx = conformance::make_bound_context(cfg, l, profile);
    for (int64_t row = 0; row < g.num_rows(); ++row) {
      for (int h = 0; h < cfg.num_q_heads; ++h) {
        const ScoreStats s = g.score(l, row, h);
        for (int d = 0; d < cfg.head_dim; ++d) {
          b[g.q_offset(l, row, h) + static_cast<size_t>(d)] = conformance::output_bound(ctx, s, g.dim(l, row, h, d));
        }
      }
    }
  }
  return b;
}


GoldenOutcome check_golden_outputs(const GoldenCase& g, const std::string& outputs_path,
                                   const PrecisionProfile& default_profile) {
  GoldenOutputs o;
  try {
    o = read_golden_outputs(outputs_path, g);
  } catch (const Error& e) {
    GoldenOutcome r;
    r.failure = e.what();
    return r;
  }
  const PrecisionProfile profile = o.profile.value_or(default_profile);  // the file's own declaration first
  GoldenOutcome r;
  if (!o.unsupported.empty()) {
    r.skipped = true;
    r.skip_reason = "unsupported (outputs file): " + o.unsupported;
    r.profile = profile;
  } else {
    r = compare_golden_outputs(g, o, profile);
  }
  r.profile_from_file = o.profile.has_value();
  return r;
}

}  // namespace ringkv::golden
