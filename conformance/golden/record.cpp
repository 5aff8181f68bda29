// ringkv golden: recording a case: the row layout and the oracle run that fills every tensor.
#include "golden/golden.hpp"
#include "golden/detail.hpp"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "support/oracle.hpp"

namespace ringkv::golden {

using conformance::Case;
using conformance::DimStats;
using conformance::ResetPlan;
using conformance::RollbackPlan;
using conformance::ScoreStats;
using conformance::StepPlan;
using nlohmann::json;

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Layout: rows and chunks follow from the schedule alone.

std::vector<uint8_t> detail::rollback_schedule(const Case& c) {
  const int B = c.config.batch;
  std::vector<uint8_t> refused(c.steps.size(), 0);
  if (!conformance::ScheduleTracker::has_rollbacks(c)) return refused;
  // Every stream a sequence runs from: the initial ones, the resets', the rollbacks'. A rollback's
  // stream must be new, so that re-appended indices carry fresh data (a stale slot cannot pass).
  std::vector<int> used;
  for (int s = 0; s < B; ++s) used.push_back(c.initial_stream(s));
  for (const StepPlan& st : c.steps) {
    for (const ResetPlan& r : st.resets) used.push_back(r.stream);
  }
  conformance::ScheduleTracker tracker(c);
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const StepPlan& st = c.steps[i];
    const std::string at = "case.steps[" + std::to_string(i) + "]";
    std::vector<int> rolled;
    for (size_t j = 0; j < st.rollbacks.size(); ++j) {
      const RollbackPlan& r = st.rollbacks[j];
      const std::string f = at + ".rollbacks[" + std::to_string(j) + "]";
      if (r.sequence < 0 || r.sequence >= B) {
        throw Error(f + ".sequence = " + std::to_string(r.sequence) + ": outside [0, batch = " + std::to_string(B) + ")");
      }
      if (contains(rolled, r.sequence)) {
        throw Error(f + ".sequence = " + std::to_string(r.sequence) + ": rolled back twice in one step (at most once, spec 1.1 §5.1.1)");
      }
      rolled.push_back(r.sequence);
      for (const ResetPlan& x : st.resets) {
        if (x.sequence == r.sequence) {
          throw Error(f + ".sequence = " + std::to_string(r.sequence) + ": also reset in this step (spec 1.1 §5.1.1 forbids both)");
        }
      }
      const int64_t held = tracker.held(r.sequence);
      if (r.n_tokens < 1 || r.n_tokens > held) {
        throw Error(f + ".n_tokens = " + std::to_string(r.n_tokens) + ": sequence " + std::to_string(r.sequence) + " holds " +
                    std::to_string(held) + " tokens, so it must lie in [1, " + std::to_string(held) + "]");
      }
      if (r.stream < 0 || r.stream > (1 << 30)) {
        throw Error(f + ".stream = " + std::to_string(r.stream) + ": outside [0, 2^30]");
      }
      if (contains(used, r.stream)) {
        throw Error(f + ".stream = " + std::to_string(r.stream) +
                    ": already used in this case; every rollback needs a stream of its own (fresh data for the "
                    "re-appended tokens)");
      }
      used.push_back(r.stream);
    }
    if (!tracker.honoured(st)) {
      refused[i] = 1;
      bool appends = false;
      for (int64_t n : st.tokens) appends = appends || n != 0;
      if (appends || !st.resets.empty()) {
        throw Error(at + ": the spec refuses this step's rollback (spec 1.1 §5.1.2); golden format 2 records a refused "
                    "step with its rollbacks only (no resets, every tokens count 0)");
      }
      continue;
    }
    try {
      tracker.apply(st);
    } catch (const std::logic_error& e) {
      throw Error(at + ": " + e.what());
    }
  }
  return refused;
}

void detail::layout_rows(const Case& c, const std::vector<uint8_t>& refused, std::vector<GoldenRow>* rows,
                         std::vector<GoldenChunk>* chunks) {
  const int B = c.config.batch;
  std::vector<int> stream(static_cast<size_t>(B));
  std::vector<int64_t> seen(static_cast<size_t>(B), 0), p0(static_cast<size_t>(B));
  for (int s = 0; s < B; ++s) {
    stream[static_cast<size_t>(s)] = c.initial_stream(s);
    p0[static_cast<size_t>(s)] = start_position(c.config, s);
  }
  for (size_t st = 0; st < c.steps.size(); ++st) {
    if (st < refused.size() && refused[st]) continue;  // a refused step changes nothing (spec 1.1 §5.1.4)
    const StepPlan& plan = c.steps[st];
    for (const RollbackPlan& r : plan.rollbacks) {  // rollbacks first: re-appended indices, a new stream
      stream[static_cast<size_t>(r.sequence)] = r.stream;
      seen[static_cast<size_t>(r.sequence)] -= r.n_tokens;
    }
    for (const ResetPlan& r : plan.resets) {
      stream[static_cast<size_t>(r.sequence)] = r.stream;
      seen[static_cast<size_t>(r.sequence)] = 0;
      p0[static_cast<size_t>(r.sequence)] = r.start_position;
    }
    for (int s = 0; s < B; ++s) {
      const int64_t n = plan.tokens[static_cast<size_t>(s)];
      if (n == 0) continue;
      chunks->push_back(GoldenChunk{static_cast<int>(st), s, static_cast<int64_t>(rows->size()), n});
      for (int64_t t = 0; t < n; ++t) {
        const int64_t index = seen[static_cast<size_t>(s)] + t;
        rows->push_back(GoldenRow{static_cast<int>(st), s, index, p0[static_cast<size_t>(s)] + index, stream[static_cast<size_t>(s)]});
      }
      seen[static_cast<size_t>(s)] += n;
    }
  }
}

int GoldenCase::format_version() const { return format_version_of(c); }

std::vector<int> GoldenCase::refused_steps() const {
  std::vector<int> out;
  for (size_t i = 0; i < refused.size(); ++i) {
    if (refused[i]) out.push_back(static_cast<int>(i));
  }
  return out;
}

size_t GoldenCase::q_offset(int layer, int64_t row, int head) const {
  const Config& cfg = c.config;
  return ((static_cast<size_t>(layer) * rows.size() + static_cast<size_t>(row)) * static_cast<size_t>(cfg.num_q_heads) +
          static_cast<size_t>(head)) * static_cast<size_t>(cfg.head_dim);
}

size_t GoldenCase::kv_offset(int layer, int64_t row, int head) const {
  const Config& cfg = c.config;
  return ((static_cast<size_t>(layer) * rows.size() + static_cast<size_t>(row)) * static_cast<size_t>(cfg.num_kv_heads) +
          static_cast<size_t>(head)) * static_cast<size_t>(cfg.head_dim);
}

ScoreStats GoldenCase::score(int layer, int64_t row, int head) const {
  const size_t i = q_offset(layer, row, head) / static_cast<size_t>(c.config.head_dim);
  ScoreStats s;
  s.n_keys = static_cast<int64_t>(n_keys[i]);
  s.max_abs_dot = max_abs_dot[i];
  s.max_abs_score = max_abs_score[i];
  s.max_tie_dot = max_tie_dot[i];
  s.max_qk_norm = max_qk_norm[i];
  s.max_angle = max_angle[i];
  return s;
}

DimStats GoldenCase::dim(int layer, int64_t row, int head, int d) const {
  const size_t i = q_offset(layer, row, head) + static_cast<size_t>(d);
  return DimStats{spread[i], abs_mass[i], tie_mass[i], abs_out[i], max_abs_v[i]};
}

// ---------------------------------------------------------------------------------------------
// Generation.

GoldenCase make_golden(const GoldenSpec& spec) {
  GoldenCase g;
  g.name = spec.name;
  g.classes = spec.classes;
  g.c = spec.c;
  const Case& c = g.c;
  const Config& cfg = c.config;
  validate(cfg);
  try {
    conformance::check_schedule(c);
  } catch (const std::logic_error& e) {
    throw Error("golden case " + spec.name + ": " + e.what());
  }
  try {
    g.refused = rollback_schedule(c);
  } catch (const Error& e) {
    throw Error("golden case " + spec.name + ": " + e.what());
  }
  layout_rows(c, g.refused, &g.rows, &g.chunks);
  g.repeat_of = repeat_rows(c, g.rows);  // spec 1.2: every row whose inputs repeat an earlier row's
  if (std::all_of(g.repeat_of.begin(), g.repeat_of.end(), [](int32_t r) { return r < 0; })) g.repeat_of.clear();
  const Dims d = dims_of(c, g.num_rows());
  const size_t nq = count({d.L, d.R, d.Hq, d.D}), nkv = count({d.L, d.R, d.Hkv, d.D}), ns = count({d.L, d.R, d.Hq});
  g.q.resize(nq);
  g.k.resize(nkv);
  g.v.resize(nkv);
  g.expected.resize(nq);
  g.expected_f64.resize(nq);
  for (std::vector<double>* t : {&g.n_keys, &g.max_abs_dot, &g.max_abs_score, &g.max_tie_dot, &g.max_qk_norm, &g.max_angle}) {
    t->resize(ns);
  }
  for (std::vector<double>* t : {&g.spread, &g.abs_mass, &g.tie_mass, &g.abs_out, &g.max_abs_v}) t->resize(nq);
  const bool k_int8 = cfg.k_format.dtype == DType::int8, v_int8 = cfg.v_format.dtype == DType::int8;
  g.k_stored.value.resize(nkv);
  g.v_stored.value.resize(nkv);
  if (k_int8) {
    g.k_stored.codes.resize(nkv);
    g.k_stored.tie.resize(nkv);
    g.k_stored.scales.resize(count({d.L, d.R, d.Hkv, d.k_spr}));
  }
  if (v_int8) {
    g.v_stored.codes.resize(nkv);
    g.v_stored.tie.resize(nkv);
    g.v_stored.scales.resize(count({d.L, d.R, d.Hkv, d.v_spr}));
  }

  conformance::Oracle oracle(cfg);
  size_t next_chunk = 0;
  std::vector<float> q, k, v;
  for (size_t st = 0; st < c.steps.size(); ++st) {
    if (g.refused[st]) continue;  // changes nothing; it has no chunks
    for (const RollbackPlan& r : c.steps[st].rollbacks) oracle.rollback(r.sequence, r.n_tokens);
    for (const ResetPlan& r : c.steps[st].resets) oracle.reset(r.sequence, r.start_position);
    for (; next_chunk < g.chunks.size() && g.chunks[next_chunk].step == static_cast<int>(st); ++next_chunk) {
      const GoldenChunk& ch = g.chunks[next_chunk];
      const GoldenRow& first = g.rows[static_cast<size_t>(ch.row_begin)];
      const int64_t n = ch.n_tokens;
      q.resize(count({d.L, n, d.Hq, d.D}));
      k.resize(count({d.L, n, d.Hkv, d.D}));
      v.resize(k.size());
      conformance::fill_chunk(c, conformance::Tensor::q, first.stream, first.index, n, q.data());
      conformance::fill_chunk(c, conformance::Tensor::k, first.stream, first.index, n, k.data());
      conformance::fill_chunk(c, conformance::Tensor::v, first.stream, first.index, n, v.data());
      const std::vector<conformance::OracleOutput> out = oracle.append(ch.sequence, n, q.data(), k.data(), v.data());
      for (int l = 0; l < d.L; ++l) {
        const std::vector<conformance::OracleToken>& hist = oracle.history(l, ch.sequence);
        for (int64_t t = 0; t < n; ++t) {
          const int64_t row = ch.row_begin + t;
          const size_t src_q = count({l, n, d.Hq, d.D}) + count({t, d.Hq, d.D});
          const size_t src_kv = count({l, n, d.Hkv, d.D}) + count({t, d.Hkv, d.D});
          std::copy_n(q.begin() + static_cast<std::ptrdiff_t>(src_q), d.Hq * d.D,
                      g.q.begin() + static_cast<std::ptrdiff_t>(g.q_offset(l, row, 0)));
          std::copy_n(k.begin() + static_cast<std::ptrdiff_t>(src_kv), d.Hkv * d.D,
                      g.k.begin() + static_cast<std::ptrdiff_t>(g.kv_offset(l, row, 0)));
          std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(src_kv), d.Hkv * d.D,
                      g.v.begin() + static_cast<std::ptrdiff_t>(g.kv_offset(l, row, 0)));
          for (int h = 0; h < d.Hq; ++h) {
            const conformance::OracleOutput& o =
                out[(static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(t)) * static_cast<size_t>(d.Hq) +
                    static_cast<size_t>(h)];
            const size_t base = g.q_offset(l, row, h);
            const size_t si = base / static_cast<size_t>(d.D);
            g.n_keys[si] = static_cast<double>(o.score.n_keys);
            g.max_abs_dot[si] = o.score.max_abs_dot;
            g.max_abs_score[si] = o.score.max_abs_score;
            g.max_tie_dot[si] = o.score.max_tie_dot;
            g.max_qk_norm[si] = o.score.max_qk_norm;
            g.max_angle[si] = o.score.max_angle;
            for (int e = 0; e < d.D; ++e) {
              const size_t i = base + static_cast<size_t>(e);
              g.expected_f64[i] = o.o[static_cast<size_t>(e)];
              g.expected[i] = static_cast<float>(o.o[static_cast<size_t>(e)]);
              const DimStats& ds = o.dims[static_cast<size_t>(e)];
              g.spread[i] = ds.spread;
              g.abs_mass[i] = ds.abs_mass;
              g.tie_mass[i] = ds.tie_mass;
              g.abs_out[i] = ds.abs_out;
              g.max_abs_v[i] = ds.max_abs_v;
            }
          }
          // What the spec stores for this token: the newest entries of the oracle's history.
          const conformance::OracleToken& tok = hist[hist.size() - static_cast<size_t>(n - t)];
          if (tok.position != g.rows[static_cast<size_t>(row)].position) throw std::logic_error("make_golden: row/position mismatch");
          for (int pass = 0; pass < 2; ++pass) {
            const conformance::StoredRow& sr = pass == 0 ? tok.k : tok.v;
            GoldenStored& gs = pass == 0 ? g.k_stored : g.v_stored;
            const int64_t spr = pass == 0 ? d.k_spr : d.v_spr;
            const size_t off = g.kv_offset(l, row, 0);
            std::copy(sr.value.begin(), sr.value.end(), gs.value.begin() + static_cast<std::ptrdiff_t>(off));
            if (gs.codes.empty()) continue;
            std::copy(sr.codes.begin(), sr.codes.end(), gs.codes.begin() + static_cast<std::ptrdiff_t>(off));
            for (size_t e = 0; e < sr.tie.size(); ++e) gs.tie[off + e] = sr.tie[e] != 0.0f ? 1 : 0;
            const size_t soff = count({l, d.R, d.Hkv, spr}) + count({row, d.Hkv, spr});
            std::copy(sr.scales.begin(), sr.scales.end(), gs.scales.begin() + static_cast<std::ptrdiff_t>(soff));
          }
        }
      }
    }
  }
  // The generator's own check: every row it declares a repeat holds its source's bits (else it is a bug here).
  if (!g.repeat_of.empty()) (void)read_repeats(g, repeats_to_json(g.repeat_of), "golden case " + spec.name);
  return g;
}

}  // namespace ringkv::golden
