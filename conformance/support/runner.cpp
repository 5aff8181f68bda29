#include "support/runner.hpp"

#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>

#include "ringkv/quant.hpp"
#include "ringkv/ring.hpp"
#include "support/oracle.hpp"
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

// Compares one snapshot with the spec ring built from the oracle's history. `exact_k` false: K values
// are not compared (an engine declaring RoPE angles coarser than f64 cannot store spec §8's bits;
// the bound's RoPE term covers its rotation), positions and V still are.
std::string check_snapshot(const Config& cfg, int layer, int seq, const CacheSnapshot& snap, const Oracle& oracle,
                           bool exact_k) {
  const LayerConfig& L = cfg.layers[static_cast<size_t>(layer)];
  const RingGeometry geo{L.sinks, L.window, ring_capacity(L, cfg.max_tokens)};
  const std::string where = "layer " + std::to_string(layer) + ", sequence " + std::to_string(seq) + ": ";
  if (snap.capacity != geo.capacity) {
    return where + "ring capacity " + std::to_string(snap.capacity) + ", spec says min(S + W, max_tokens) = " +
           std::to_string(geo.capacity);
  }
  const std::vector<OracleToken>& hist = oracle.history(layer, seq);
  std::vector<int64_t> expect(static_cast<size_t>(geo.capacity), -1);
  for (size_t j = 0; j < hist.size(); ++j) expect[static_cast<size_t>(geo.slot_of(static_cast<int64_t>(j)))] = static_cast<int64_t>(j);
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
    for (int pass = exact_k ? 0 : 1; pass < 2; ++pass) {
      const StoredRow& row = pass == 0 ? tok.k : tok.v;
      const std::vector<float>& got = pass == 0 ? snap.k : snap.v;
      const std::vector<int8_t>& codes = pass == 0 ? snap.k_codes : snap.v_codes;
      const KvFormat& fmt_ = pass == 0 ? cfg.k_format : cfg.v_format;
      for (int h = 0; h < H; ++h) {
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
          if (!ok) {
            return where + "slot " + std::to_string(slot) + " (token " + std::to_string(j) + ") " +
                   (pass == 0 ? "K" : "V") + "[head " + std::to_string(h) + "][dim " + std::to_string(d) +
                   "] stores " + fmt(g) + ", spec says " + fmt(w) + " (" + to_string(fmt_) + ")";
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
  // Step buffers, reused from step to step (they only grow).
  struct Buffers { std::vector<float> q, k, v, out; };
  std::vector<Buffers> buf(static_cast<size_t>(B));
  std::vector<SequenceReset> resets;
  std::vector<SequenceStep> appends;

  for (size_t st = 0; st < c.steps.size(); ++st) {
    const StepPlan& plan = c.steps[st];
    resets.clear();
    for (const ResetPlan& r : plan.resets) {
      resets.push_back({r.sequence, r.start_position});
      stream[static_cast<size_t>(r.sequence)] = r.stream;
      seen[static_cast<size_t>(r.sequence)] = 0;
      oracle.reset(r.sequence, r.start_position);
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
      engine->step(StepBatch{resets, appends});
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
      }
      seen[static_cast<size_t>(s)] += n;
    }
    if (opt.stop_at_failure && !result.failure.empty()) return result;
    if (opt.check_ring && opt.oracle && result.failure.empty()) {
      for (int l = 0; l < L && result.failure.empty(); ++l) {
        for (int s = 0; s < B && result.failure.empty(); ++s) {
          const std::optional<CacheSnapshot> snap = engine->snapshot(l, s);
          if (!snap) {
            result.failure = "engine has no snapshot()";
            break;
          }
          const bool exact_k = cfg.layers[static_cast<size_t>(l)].rope.style == RopeStyle::none ||
                               result.info.precision.rope_angle == Precision::f64;
          const std::string why = check_snapshot(cfg, l, s, *snap, oracle, exact_k);
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
