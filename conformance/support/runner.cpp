#include "support/runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/ring.hpp"
#include "support/oracle.hpp"
#include "support/rotation_bound.hpp"
#include "support/tolerance.hpp"

namespace ringkv::conformance {
namespace {

std::string fmt(double x) {
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}

bool same_bits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

// How one stored element may differ from the spec's where the engine declares numerics that change its
// bits: angles coarser than f64 (only K of a RoPE layer) or a fixed storage coarser than the config's
// dtype (profile k_storage/v_storage; capabilities.hpp). The engine stores storage(x') with x' within
// `slack` (rotation_bound.hpp) of spec §8's x, the spec stores storage(x), so
//   |got - want| <= slack + err(got) + err(want),
// err a rounding error of the format each was stored in: rel·|value| + its smallest step for floats,
// half the row's (group's) scale for INT8 (clamping cannot add: it moves nothing further apart).
struct Relaxed {
  bool on = false;                  // else: exact (spec §11.1)
  double u_angle = 0;               // > 0: the K rotation may stray by rotation_slack
  std::optional<Precision> stored;  // the engine's declared storage, where it differs from the config's
};

double rounding_error(Precision p, double value) {
  switch (p) {
    case Precision::f32: return 0x1p-24 * std::fabs(value) + 0x1p-149;
    case Precision::f16: return 0x1p-11 * std::fabs(value) + 0x1p-25;
    case Precision::bf16: return 0x1p-8 * std::fabs(value) + 0x1p-134;
    case Precision::fp8_e4m3: return 0x1p-4 * std::fabs(value) + 0x1p-10;
    case Precision::fp8_e5m2: return 0x1p-3 * std::fabs(value) + 0x1p-17;
    default: return 0;  // f64, tf32 are not storage formats; INT8 uses its scale
  }
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
// positions exactly, V and K exactly (spec §11.1), or, where `relax_k`/`relax_v` say the engine
// declared so, within Relaxed's bound.
std::string check_snapshot(const Config& cfg, int layer, int seq, const CacheSnapshot& snap, const Oracle& oracle,
                           const SpecRing& ring, const Relaxed& relax_k, const Relaxed& relax_v) {
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
      const StoredRow& row = pass == 0 ? tok.k : tok.v;
      const std::vector<float>& got = pass == 0 ? snap.k : snap.v;
      const std::vector<int8_t>& codes = pass == 0 ? snap.k_codes : snap.v_codes;
      const std::vector<float>& got_scales = pass == 0 ? snap.k_scales : snap.v_scales;
      const KvFormat& fmt_ = pass == 0 ? cfg.k_format : cfg.v_format;
      const Relaxed& relax = pass == 0 ? relax_k : relax_v;
      const int spr = scales_per_row(fmt_, D);
      for (int h = 0; h < H; ++h) {
        std::vector<double> slack(static_cast<size_t>(D), 0.0);
        if (relax.on && relax.u_angle > 0) {
          // Pair norms from the f32 rotation before storage (a rotation keeps them; 2^-20: its rounding).
          rotation_slack(L.rope, D, tok.position, relax.u_angle, tok.k_rot.data() + static_cast<size_t>(h * D), slack.data(),
                         1 + 0x1p-20);
        }
        for (int d = 0; d < D; ++d) {
          const size_t e = static_cast<size_t>(h * D + d);
          const size_t gi = slot * static_cast<size_t>(H * D) + e;
          const float g = got[gi], w = row.value[e];
          const bool tie = row.tie[e] != 0.0f;
          bool ok = same_bits(g, w) || (tie && std::fabs(double(g) - double(w)) <= 1.0001 * double(row.tie[e]));
          if (ok && fmt_.dtype == DType::int8 && !codes.empty()) {
            const int dc = int(codes[gi]) - int(row.codes[e]);
            ok = dc == 0 || (tie && (dc == 1 || dc == -1));
          }
          double allowed = 0;
          if (!ok && relax.on) {
            if (fmt_.dtype == DType::int8) {
              const auto step = [&](const float* scales) {
                return fmt_.int8_scheme == Int8Scheme::static_tensor
                           ? double(fmt_.scale)
                           : double(scales[static_cast<size_t>(h * spr + d / int8_group_size(fmt_.int8_scheme, D))]);
              };
              const float* gs = got_scales.empty() ? nullptr : got_scales.data() + slot * static_cast<size_t>(H * spr);
              const double sw = step(row.scales.data()), sg = gs ? step(gs) : sw;
              allowed = slack[static_cast<size_t>(d)] + 0.5 * (sw + sg) * (1 + 0x1p-20);
            } else {
              const Precision stored = relax.stored.value_or(precision_of(fmt_.dtype));
              allowed = slack[static_cast<size_t>(d)] + rounding_error(stored, g) + rounding_error(precision_of(fmt_.dtype), w);
            }
            ok = std::fabs(double(g) - double(w)) <= allowed;
          }
          if (!ok) {
            return where + "slot " + std::to_string(slot) + " (token " + std::to_string(j) + ") " +
                   (pass == 0 ? "K" : "V") + "[head " + std::to_string(h) + "][dim " + std::to_string(d) +
                   "] stores " + fmt(g) + ", spec says " + fmt(w) + " (" + to_string(fmt_) + ")" +
                   (relax.on ? ", allowed " + fmt(allowed) + " for the declared " +
                                   (relax.u_angle > 0 ? std::string("rope_angle") : std::string("storage"))
                             : std::string());
          }
        }
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
        TokenRecord rec;
        rec.step = static_cast<int>(st);
        rec.sequence = s;
        rec.position = oracle.start_position(s) + index;
        const size_t per_tok = static_cast<size_t>(L) * static_cast<size_t>(Hq * D);
        rec.got.resize(per_tok);
        rec.expected.resize(per_tok);
        rec.bound.resize(per_tok);
        for (int l = 0; l < L; ++l) {
          for (int h = 0; h < Hq; ++h) {
            // This (layer, token, head): in the step's [L][n][Hq] order and in the record's [L][Hq].
            const size_t src_row = (static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(t)) *
                                       static_cast<size_t>(Hq) + static_cast<size_t>(h);
            const size_t dst0 = (static_cast<size_t>(l) * static_cast<size_t>(Hq) + static_cast<size_t>(h)) *
                                static_cast<size_t>(D);
            const float* got = b.out.data() + src_row * static_cast<size_t>(D);
            std::copy(got, got + D, rec.got.begin() + static_cast<std::ptrdiff_t>(dst0));
            if (!opt.oracle || want[src_row].o.empty()) continue;  // no oracle, or a query it did not sample
            const OracleOutput& o = want[src_row];
            for (int d = 0; d < D; ++d) {
              const size_t dst = dst0 + static_cast<size_t>(d);
              const float g = got[d];
              const double e = o.o[static_cast<size_t>(d)];
              const double bound = output_bound(ctx[static_cast<size_t>(l)], o.score, o.dims[static_cast<size_t>(d)]);
              rec.expected[dst] = e;
              rec.bound[dst] = bound;
              if (!opt.compare_oracle) continue;  // records only
              ++result.outputs_checked;
              const double err = std::fabs(double(g) - e);
              const double ratio = bound > 0 ? err / bound : (err == 0 ? 0.0 : INFINITY);
              result.worst_ratio = std::isnan(err) ? INFINITY : std::max(result.worst_ratio, ratio);
              if (!(err <= bound) && result.failure.empty()) {
                std::ostringstream os;
                os.precision(9);
                os << "step " << st << ", sequence " << s << ", token " << index << " (position " << rec.position
                   << "), layer " << l << ", q head " << h << ", dim " << d << ": expected " << e << ", got " << g
                   << ", |diff| " << err << " > bound " << bound;
                result.failure = os.str();
              }
            }
          }
        }
        result.tokens[TokenKey{stream[static_cast<size_t>(s)], index}] = std::move(rec);
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
          Relaxed rk, rv;
          if (cfg.layers[static_cast<size_t>(l)].rope.style != RopeStyle::none && p.rope_angle != Precision::f64) {
            rk.on = true;
            rk.u_angle = unit_roundoff(p.rope_angle);
          }
          if (p.k_storage && *p.k_storage != precision_of(cfg.k_format.dtype) && cfg.k_format.dtype != DType::int8) {
            rk.on = true;
            rk.stored = p.k_storage;
          }
          if (p.v_storage && *p.v_storage != precision_of(cfg.v_format.dtype) && cfg.v_format.dtype != DType::int8) {
            rv.on = true;
            rv.stored = p.v_storage;
          }
          const std::string why = check_snapshot(cfg, l, s, *snap, oracle, spec_ring(l, s), rk, rv);
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
