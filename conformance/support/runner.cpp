#include "support/runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/ring.hpp"
#include "support/oracle.hpp"
#include "support/rotation_bound.hpp"
#include "support/stored_rule.hpp"
#include "support/tolerance.hpp"

namespace ringkv::conformance {
namespace {

bool same_bits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

/// The spec ring's slot -> token index table of one (layer, sequence), kept by token-by-token writes,
/// rollbacks (slots of removed tokens become empty, spec 1.1 §5.1.6) and resets.
struct SpecRing {
  RingGeometry geo;
  std::vector<int64_t> index;  // [C] token index held, or -1
  SpecRing(const LayerConfig& L, int64_t max_tokens)
      : geo{L.sinks, L.window, ring_capacity(L, max_tokens)}, index(static_cast<size_t>(geo.capacity), -1) {}
  void write(int64_t j) { index[static_cast<size_t>(geo.slot_of(j))] = j; }
  void roll_back(int64_t m) {
    for (int64_t& j : index) j = j >= m ? -1 : j;
  }
  void reset() { std::fill(index.begin(), index.end(), -1); }
};

// Compares one snapshot with the spec ring (`ring`, its tokens' values from the oracle's history):
// positions exactly, stored K and V by `rule_k`/`rule_v` (support/stored_rule.hpp: exact, spec §11.1,
// unless the engine's declaration relaxes them). `rope_slack_u` > 0: K's rotation may stray by
// stored_k_slack with angles of that unit roundoff.
std::string check_snapshot(const Config& cfg, int layer, int seq, const CacheSnapshot& snap, const Oracle& oracle,
                           const SpecRing& ring, const StoredRule& rule_k, const StoredRule& rule_v, double rope_slack_u) {
  const LayerConfig& L = cfg.layers[static_cast<size_t>(layer)];
  const RingGeometry& geo = ring.geo;
  const std::string where = "layer " + std::to_string(layer) + ", sequence " + std::to_string(seq) + ": ";
  if (snap.capacity != geo.capacity) {
    return where + "ring capacity " + std::to_string(snap.capacity) +
           ", spec says min(S + W + rollback_reserve, max_tokens) = " + std::to_string(geo.capacity);
  }
  const std::vector<OracleToken>& hist = oracle.history(layer, seq);
  const std::vector<int64_t>& expect = ring.index;
  const int D = cfg.head_dim, H = cfg.num_kv_heads;
  const size_t cap = static_cast<size_t>(geo.capacity), row_elems = static_cast<size_t>(H) * static_cast<size_t>(D);
  if (snap.positions.size() != cap || snap.k.size() != cap * row_elems || snap.v.size() != cap * row_elems) {
    return where + "snapshot has " + std::to_string(snap.positions.size()) + " positions, " + std::to_string(snap.k.size()) +
           " K and " + std::to_string(snap.v.size()) + " V values; expected " + std::to_string(cap) + ", " +
           std::to_string(cap * row_elems) + " and " + std::to_string(cap * row_elems);
  }
  std::vector<double> slack(static_cast<size_t>(D));
  std::vector<uint8_t> tie(static_cast<size_t>(D));
  StoredRule rules[2] = {rule_k, rule_v};  // K's slack is refilled per row below
  if (rope_slack_u > 0) rules[0].slack = slack.data();
  for (size_t slot = 0; slot < expect.size(); ++slot) {
    const int64_t j = expect[slot];
    const int64_t want = j < 0 ? RingKvCache::kEmpty : hist[static_cast<size_t>(j)].position;
    if (snap.positions[slot] != want) {
      return where + "slot " + std::to_string(slot) + " holds position " + std::to_string(snap.positions[slot]) +
             ", spec says " + (j < 0 ? std::string("empty") : std::to_string(want) + " (token " + std::to_string(j) + ")");
    }
    if (j < 0) continue;
    const OracleToken& tok = hist[static_cast<size_t>(j)];
    for (int pass = 0; pass < 2; ++pass) {
      const bool is_k = pass == 0;
      const StoredRow& row = is_k ? tok.k : tok.v;
      const StoredRule& rule = rules[pass];
      const int spr = scales_per_row(rule.format, D);
      const std::vector<int8_t>& codes = is_k ? snap.k_codes : snap.v_codes;
      const std::vector<float>& scales = is_k ? snap.k_scales : snap.v_scales;
      for (int h = 0; h < H; ++h) {
        if (is_k && rope_slack_u > 0) {
          // Pair norms from the f32 rotation before storage (a rotation keeps them; 2^-20: its rounding).
          stored_k_slack(L.rope, D, tok.position, rope_slack_u, tok.k_rot.data() + static_cast<size_t>(h * D), slack.data(),
                         1 + 0x1p-20);
        }
        const size_t e0 = static_cast<size_t>(h * D), s0 = static_cast<size_t>(h * spr);
        const size_t g0 = slot * static_cast<size_t>(H * D) + e0, gs0 = slot * static_cast<size_t>(H * spr) + s0;
        StoredRowView w{row.value.data() + e0, nullptr, nullptr, nullptr};
        if (!row.codes.empty()) w.codes = row.codes.data() + e0;
        if (!row.scales.empty()) w.scales = row.scales.data() + s0;
        if (!row.tie.empty()) {
          for (int d = 0; d < D; ++d) tie[static_cast<size_t>(d)] = row.tie[e0 + static_cast<size_t>(d)] != 0.0f;
          w.tie = tie.data();
        }
        // Codes and scales where the engine gives them whole (else its decoded values alone are judged).
        StoredRowView g{(is_k ? snap.k : snap.v).data() + g0, nullptr, nullptr, nullptr};
        if (codes.size() == cap * row_elems) g.codes = codes.data() + g0;
        if (spr > 0 && scales.size() == cap * static_cast<size_t>(H * spr)) g.scales = scales.data() + gs0;
        const std::optional<StoredMismatch> m = compare_stored_row(rule, D, h, is_k, w, g, nullptr);
        if (m) return where + "slot " + std::to_string(slot) + " (token " + std::to_string(j) + ") " + m->text;
      }
    }
  }
  return "";
}

}  // namespace

RunResult run_case(const EngineFactory& factory, const Case& c, const RunOptions& opt) {
  RunResult result;
  const Config& cfg = c.config;
  const int B = cfg.batch, Hq = cfg.num_q_heads, Hkv = cfg.num_kv_heads, D = cfg.head_dim;
  const auto L = static_cast<int>(cfg.layers.size());
  std::unique_ptr<Engine> engine;
  try {
    engine = factory.create(cfg);
  } catch (const std::exception& e) {
    result.failure = std::string("engine creation threw: ") + e.what();
    return result;
  }
  result.info = engine->info();
  if (opt.cache_bytes) result.cache_bytes_initial = engine->cache_bytes();
  Oracle oracle(cfg);
  if (opt.sample_queries) oracle.set_query_filter(opt.sample_queries);
  if (!opt.keep_records) {
    if (opt.check_ring) throw std::logic_error("run_case: check_ring needs keep_records (the oracle's every row)");
    oracle.release_unreachable(true);
  }
  std::vector<BoundContext> ctx;
  for (int l = 0; l < L; ++l) ctx.push_back(make_bound_context(cfg, l, result.info.precision));
  std::vector<int> stream(static_cast<size_t>(B));
  std::vector<int64_t> seen(static_cast<size_t>(B), 0);
  for (int s = 0; s < B; ++s) stream[static_cast<size_t>(s)] = c.initial_stream(s);
  ScheduleTracker tracker(c);  // which steps the spec refuses (rollbacks, spec 1.1 §5.1.2)
  std::vector<SpecRing> spec_rings;  // [L][B]
  for (int l = 0; l < L; ++l) {
    for (int s = 0; s < B; ++s) spec_rings.emplace_back(cfg.layers[static_cast<size_t>(l)], cfg.max_tokens);
  }
  const auto spec_ring = [&](int l, int s) -> SpecRing& {
    return spec_rings[static_cast<size_t>(l) * static_cast<size_t>(B) + static_cast<size_t>(s)];
  };
  // Step buffers, reused from step to step (they only grow).
  struct Buffers { std::vector<float> q, k, v, out; };
  std::vector<Buffers> buf(static_cast<size_t>(B));
  std::vector<SequenceReset> resets;
  std::vector<SequenceStep> appends;
  std::vector<SequenceRollback> rollbacks;

  for (size_t st = 0; st < c.steps.size(); ++st) {
    const StepPlan& plan = c.steps[st];
    // A step whose rollback the spec refuses must be rejected whole, and changes nothing.
    const bool honoured = tracker.honoured(plan);
    rollbacks.clear();
    for (const RollbackPlan& r : plan.rollbacks) {
      rollbacks.push_back({r.sequence, r.n_tokens});
      if (!honoured) continue;
      const int64_t m = seen[static_cast<size_t>(r.sequence)] - r.n_tokens;
      stream[static_cast<size_t>(r.sequence)] = r.stream;
      seen[static_cast<size_t>(r.sequence)] = m;
      oracle.rollback(r.sequence, r.n_tokens);
      for (int l = 0; l < L; ++l) spec_ring(l, r.sequence).roll_back(m);
    }
    resets.clear();
    for (const ResetPlan& r : plan.resets) {
      resets.push_back({r.sequence, r.start_position});
      if (!honoured) continue;
      stream[static_cast<size_t>(r.sequence)] = r.stream;
      seen[static_cast<size_t>(r.sequence)] = 0;
      oracle.reset(r.sequence, r.start_position);
      for (int l = 0; l < L; ++l) spec_ring(l, r.sequence).reset();
    }
    appends.clear();
    for (int i = 0; i < B; ++i) {
      const int s = opt.reverse_appends ? B - 1 - i : i;
      const int64_t n = plan.tokens[static_cast<size_t>(s)];
      if (n == 0) continue;
      Buffers& b = buf[static_cast<size_t>(s)];
      const size_t qn = static_cast<size_t>(L) * static_cast<size_t>(n) * static_cast<size_t>(Hq * D);
      const size_t kvn = static_cast<size_t>(L) * static_cast<size_t>(n) * static_cast<size_t>(Hkv * D);
      b.q.resize(qn);
      b.k.resize(kvn);
      b.v.resize(kvn);
      b.out.assign(qn, std::nanf(""));
      const int strm = stream[static_cast<size_t>(s)];
      fill_chunk(c, Tensor::q, strm, seen[static_cast<size_t>(s)], n, b.q.data());
      fill_chunk(c, Tensor::k, strm, seen[static_cast<size_t>(s)], n, b.k.data());
      fill_chunk(c, Tensor::v, strm, seen[static_cast<size_t>(s)], n, b.v.data());
      appends.push_back({s, n, b.q.data(), b.k.data(), b.v.data(), b.out.data()});
    }
    try {
      if (opt.poison && st == 0 && !engine->poison_empty_slots()) {
        result.failure = "engine does not support poison_empty_slots()";
        return result;
      }
      if (!honoured) {
        try {
          engine->step(StepBatch{resets, appends, rollbacks});
        } catch (const StepError& e) {
          if (std::string(e.what()).find("refused") != std::string::npos) continue;  // as the spec says
          result.failure = "step " + std::to_string(st) + ": the spec refuses its rollback (§5.1.2), but the engine "
                           "rejected the step for another reason: " + e.what();
          return result;
        }
        result.failure = "step " + std::to_string(st) + ": the engine honoured a rollback that the spec refuses "
                         "(§5.1.2: a key a later query sees has been overwritten)";
        return result;
      }
      engine->step(StepBatch{resets, appends, rollbacks});
      if (opt.poison && !engine->poison_empty_slots()) {
        result.failure = "engine does not support poison_empty_slots()";
        return result;
      }
    } catch (const std::exception& e) {
      result.failure = "step " + std::to_string(st) + ": engine threw: " + e.what();
      return result;
    }
    if (opt.after_step) opt.after_step(static_cast<int>(st), *engine);

    for (int s = 0; s < B; ++s) {
      const int64_t n = plan.tokens[static_cast<size_t>(s)];
      if (n == 0) continue;
      const Buffers& b = buf[static_cast<size_t>(s)];
      const std::vector<OracleOutput> want =
          opt.oracle ? oracle.append(s, n, b.q.data(), b.k.data(), b.v.data()) : std::vector<OracleOutput>{};
      for (int64_t t = 0; t < n; ++t) {
        const int64_t index = seen[static_cast<size_t>(s)] + t;
        const int64_t position = oracle.start_position(s) + index;
        // The token's record, [L][Hq][D] each, built only when the run keeps records (a scale case's
        // thousands of tokens need none).
        TokenRecord rec;
        const size_t per_tok = static_cast<size_t>(L) * static_cast<size_t>(Hq * D);
        if (opt.keep_records) {
          rec.step = static_cast<int>(st);
          rec.sequence = s;
          rec.position = position;
          rec.got.resize(per_tok);
          rec.expected.resize(per_tok);
          rec.bound.resize(per_tok);
        }
        for (int l = 0; l < L; ++l) {
          for (int h = 0; h < Hq; ++h) {
            // This (layer, token, head): in the step's [L][n][Hq] order and in the record's [L][Hq].
            const size_t src_row = (static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(t)) *
                                       static_cast<size_t>(Hq) + static_cast<size_t>(h);
            const size_t dst0 = (static_cast<size_t>(l) * static_cast<size_t>(Hq) + static_cast<size_t>(h)) *
                                static_cast<size_t>(D);
            const float* got = b.out.data() + src_row * static_cast<size_t>(D);
            if (opt.keep_records) std::copy(got, got + D, rec.got.begin() + static_cast<std::ptrdiff_t>(dst0));
            if (!opt.oracle || want[src_row].o.empty()) continue;  // no oracle, or a query it did not sample
            const OracleOutput& o = want[src_row];
            for (int d = 0; d < D; ++d) {
              const size_t dst = dst0 + static_cast<size_t>(d);
              const float g = got[d];
              const double e = o.o[static_cast<size_t>(d)];
              const double bound = output_bound(ctx[static_cast<size_t>(l)], o.score, o.dims[static_cast<size_t>(d)]);
              if (opt.keep_records) {
                rec.expected[dst] = e;
                rec.bound[dst] = bound;
              }
              if (!opt.compare_oracle) continue;  // records only
              ++result.outputs_checked;
              const double err = std::fabs(double(g) - e);
              const double ratio = bound > 0 ? err / bound : (err == 0 ? 0.0 : INFINITY);
              result.worst_ratio = std::isnan(err) ? INFINITY : std::max(result.worst_ratio, ratio);
              if (!(err <= bound) && result.failure.empty()) {
                std::ostringstream os;
                os.precision(9);
                os << "step " << st << ", sequence " << s << ", token " << index << " (position " << position
                   << "), layer " << l << ", q head " << h << ", dim " << d << ": expected " << e << ", got " << g
                   << ", |diff| " << err << " > bound " << bound;
                result.failure = os.str();
              }
            }
          }
        }
        if (opt.keep_records) result.tokens[TokenKey{stream[static_cast<size_t>(s)], index}] = std::move(rec);
        for (int l = 0; l < L; ++l) spec_ring(l, s).write(index);
      }
      seen[static_cast<size_t>(s)] += n;
    }
    tracker.apply(plan);
    if (opt.stop_at_failure && !result.failure.empty()) return result;
    if (opt.check_ring && opt.oracle && result.failure.empty()) {
      for (int l = 0; l < L && result.failure.empty(); ++l) {
        for (int s = 0; s < B && result.failure.empty(); ++s) {
          const std::optional<CacheSnapshot> snap = engine->snapshot(l, s);
          if (!snap) {
            result.failure = "engine has no snapshot()";
            break;
          }
          // What the engine's declaration lets differ from spec §11.1's exact storage: its K rotation
          // (angles coarser than f64) and a fixed storage coarser than the config's dtype.
          const PrecisionProfile& p = result.info.precision;
          StoredRule rk = stored_rule(cfg.k_format, p.k_storage), rv = stored_rule(cfg.v_format, p.v_storage);
          double rope_u = 0;
          if (cfg.layers[static_cast<size_t>(l)].rope.style != RopeStyle::none && p.rope_angle != Precision::f64) {
            rope_u = unit_roundoff(p.rope_angle);
            rk.why = "the declared rope_angle" + (rk.relaxed ? " and " + rk.why : std::string());
            rk.relaxed = true;
          }
          const std::string why = check_snapshot(cfg, l, s, *snap, oracle, spec_ring(l, s), rk, rv, rope_u);
          if (!why.empty()) result.failure = "after step " + std::to_string(st) + ", " + why;
        }
      }
      if (opt.stop_at_failure && !result.failure.empty()) return result;
    }
  }
  if (opt.cache_bytes) result.cache_bytes_final = engine->cache_bytes();
  return result;
}

std::string compare_runs(const RunResult& a, const RunResult& b, const Config& config, const CompareOptions& opt) {
  const int Hq = config.num_q_heads, D = config.head_dim;
  const bool bitwise = opt.bitwise;
  const auto& select = opt.select;
  const auto& select_layer = opt.select_layer;
  for (const auto& [key, ra] : a.tokens) {
    if (select && !select(key)) continue;
    const auto it = b.tokens.find(key);
    if (it == b.tokens.end()) continue;
    const TokenRecord& rb = it->second;
    if (ra.got.size() != rb.got.size()) return "output sizes differ";
    for (size_t i = 0; i < ra.got.size(); ++i) {
      const int layer = static_cast<int>(i / static_cast<size_t>(Hq * D));
      if (select_layer && !select_layer(layer)) continue;
      const float x = ra.got[i], y = rb.got[i];
      const bool ok = bitwise ? same_bits(x, y)
                              : std::fabs(double(x) - double(y)) <=
                                    ra.bound[i] + rb.bound[i] +
                                        (opt.oracle_gap ? std::fabs(ra.expected[i] - rb.expected[i]) : 0.0);
      if (!ok) {
        std::ostringstream os;
        os.precision(9);
        os << "stream " << key.stream << ", token " << key.index << ", layer " << layer << ", q head "
           << (i / static_cast<size_t>(D)) % static_cast<size_t>(Hq) << ", dim " << i % static_cast<size_t>(D)
           << ": run A gives " << x << " (step " << ra.step << ", position " << ra.position << "), run B gives " << y
           << " (step " << rb.step << ", position " << rb.position << ")" << (bitwise ? " (bit-identical required)" : "");
        return os.str();
      }
    }
  }
  return "";
}

}  // namespace ringkv::conformance
