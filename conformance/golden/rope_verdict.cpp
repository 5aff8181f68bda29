// ringkv golden: RoPE checked apart from attention (docs/golden-format.md §7).
#include "golden/rope_verdict.hpp"
#include "golden/detail.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>

#include "ringkv/quant.hpp"
#include "ringkv/rope.hpp"
#include "support/tolerance.hpp"

namespace ringkv::golden {

using namespace detail;

const char* to_string(RopeVerdict::Kind kind) {
  switch (kind) {
    case RopeVerdict::Kind::conformant: return "conformant";
    case RopeVerdict::Kind::within_declared: return "within_declared";
    case RopeVerdict::Kind::failed: return "failed";
    case RopeVerdict::Kind::rotated_by_ringkv: return "rotated_by_ringkv";
    case RopeVerdict::Kind::not_checked: return "not_checked";
  }
  return "?";
}

namespace {

constexpr double kU64 = 0x1p-53;

// One vector's rotation against spec §8: pairs (and pass-through elements) checked against the bound.
struct RotationScan {
  const GoldenCase& g;
  double u_declared;
  RopeVerdict& v;
  bool any_beyond_conformant = false;

  void scan(const char* tensor, int layer, int64_t row, int head, const float* raw, const float* got) {
    const Config& cfg = g.c.config;
    const RopeConfig& rope = cfg.layers[static_cast<size_t>(layer)].rope;
    const int D = cfg.head_dim;
    const int64_t position = g.rows[static_cast<size_t>(row)].position;
    std::vector<double> exact(static_cast<size_t>(D));
    conformance::oracle_rope(rope, D, position, raw, exact.data());
    conformance::for_each_rope_pair(
        rope, D, position,
        [&](int a, int b, int k, double angle) {
          const double err = std::hypot(double(got[a]) - exact[static_cast<size_t>(a)], double(got[b]) - exact[static_cast<size_t>(b)]);
          one(tensor, layer, row, head, a, k, angle, std::hypot(double(raw[a]), double(raw[b])), err);
        },
        [&](int d) {  // pass-through: unchanged, angle 0
          one(tensor, layer, row, head, d, 0, 0.0, std::fabs(double(raw[d])), std::fabs(double(got[d]) - double(raw[d])));
        });
  }

  void one(const char* tensor, int layer, int64_t row, int head, int dim, int pair, double angle, double r, double err) {
    const double e = std::isnan(err) ? INFINITY : err / std::max(r, 0x1p-126);  // angle-equivalent error
    const int64_t position = g.rows[static_cast<size_t>(row)].position;
    if (e > v.worst_angle_error || v.worst_row < 0) {
      v.worst_angle_error = e;
      v.worst_tensor = tensor;
      std::tie(v.worst_layer, v.worst_row, v.worst_position, v.worst_head, v.worst_dim) =
          std::tuple(layer, row, position, head, dim);
    }
    if (!(err <= rotation_error_bound(kU64, pair, angle, r))) any_beyond_conformant = true;
    const double allowed = rotation_error_bound(u_declared, pair, angle, r);
    if (err <= allowed || !v.failure.empty()) return;
    const GoldenRow& gr = g.rows[static_cast<size_t>(row)];
    std::ostringstream os;
    os.precision(6);
    os << tensor << " at step " << gr.step << ", sequence " << gr.sequence << ", token " << gr.index << " (position "
       << position << "), layer " << layer << ", head " << head << ", dim " << dim << ": angle-equivalent error " << e
       << " (|diff| " << err << ") > the declared rope_angle's bound " << allowed;
    v.failure = os.str();
  }
};

}  // namespace

RopeVerdict check_rotation(const GoldenCase& g, const std::vector<float>& q_rot, const std::vector<float>& k_rot,
                           Precision declared_angle) {
  RopeVerdict v;
  RotationScan scan{g, unit_roundoff(declared_angle), v};
  const Config& cfg = g.c.config;
  for (int64_t row = 0; row < g.num_rows(); ++row) {  // schedule order: the first failure is the earliest
    for (int l = 0; l < g.layers(); ++l) {
      for (int h = 0; h < cfg.num_q_heads; ++h) {
        scan.scan("q_rot", l, row, h, g.q.data() + g.q_offset(l, row, h), q_rot.data() + g.q_offset(l, row, h));
      }
      for (int h = 0; h < cfg.num_kv_heads; ++h) {
        scan.scan("k_rot", l, row, h, g.k.data() + g.kv_offset(l, row, h), k_rot.data() + g.kv_offset(l, row, h));
      }
    }
  }
  v.kind = !v.failure.empty()              ? RopeVerdict::Kind::failed
           : scan.any_beyond_conformant    ? RopeVerdict::Kind::within_declared
                                           : RopeVerdict::Kind::conformant;
  describe_rope_verdict(&v, declared_angle);
  return v;
}

RotatedOracle::RotatedOracle(const GoldenCase& g, const std::vector<float>& q_rot, const std::vector<float>& k_rot)
    : g_(g), q_rot_(q_rot) {
  const Config& cfg = g.c.config;
  const Dims d = dims_of(g.c, g.num_rows());
  const size_t n = count({d.L, d.R, d.Hkv, d.D});
  k_.value.resize(n);
  v_.value.resize(n);
  k_tie_.resize(n);
  v_tie_.resize(n);
  k_.codes.resize(n);
  v_.codes.resize(n);
  k_.scales.resize(count({d.L, d.R, d.Hkv, std::max<int64_t>(d.k_spr, 1)}));
  v_.scales.resize(count({d.L, d.R, d.Hkv, std::max<int64_t>(d.v_spr, 1)}));
  for (int l = 0; l < g.layers(); ++l) {
    for (int64_t row = 0; row < g.num_rows(); ++row) {
      for (int h = 0; h < cfg.num_kv_heads; ++h) {
        const size_t o = g.kv_offset(l, row, h);
        const size_t sk = o / static_cast<size_t>(d.D) * static_cast<size_t>(std::max<int64_t>(d.k_spr, 1));
        const size_t sv = o / static_cast<size_t>(d.D) * static_cast<size_t>(std::max<int64_t>(d.v_spr, 1));
        conformance::oracle_store(cfg.k_format, cfg.head_dim, k_rot.data() + o, k_.value.data() + o, k_tie_.data() + o,
                                  k_.codes.data() + o, k_.scales.data() + sk);
        conformance::oracle_store(cfg.v_format, cfg.head_dim, g.v.data() + o, v_.value.data() + o, v_tie_.data() + o,
                                  v_.codes.data() + o, v_.scales.data() + sv);
      }
    }
  }
  // The GoldenStored layout: codes and the tie mask only for INT8, scales only where stored.
  if (cfg.k_format.dtype == DType::int8) {
    for (float t : k_tie_) k_.tie.push_back(t != 0.0f ? 1 : 0);
  } else {
    k_.codes.clear();
  }
  if (d.k_spr == 0) k_.scales.clear();
}

const std::vector<int64_t>& RotatedOracle::history(int64_t row) const {
  if (hist_row_ == row) return hist_;
  // Walking back from the row through its sequence's rows, the first row met of each index below its
  // own is the latest one (a rollback re-appends an index later), and all of them lie after the
  // sequence's last reset: indices 0 .. index - 1 are all appended since then.
  const GoldenRow& me = g_.rows[static_cast<size_t>(row)];
  hist_.assign(static_cast<size_t>(me.index) + 1, -1);
  hist_.back() = row;
  int64_t missing = me.index;
  for (int64_t r = row - 1; r >= 0 && missing > 0; --r) {
    const GoldenRow& x = g_.rows[static_cast<size_t>(r)];
    if (x.sequence != me.sequence || x.index >= me.index || hist_[static_cast<size_t>(x.index)] >= 0) continue;
    hist_[static_cast<size_t>(x.index)] = r;
    --missing;
  }
  hist_row_ = row;
  return hist_;
}

conformance::OracleOutput RotatedOracle::attend(int layer, int64_t row, int head) const {
  const Config& cfg = g_.c.config;
  const LayerConfig& L = cfg.layers[static_cast<size_t>(layer)];
  const int kv_head = head / (cfg.num_q_heads / cfg.num_kv_heads);
  const std::vector<int64_t>& hist = history(row);
  const auto i = static_cast<int64_t>(hist.size()) - 1;
  std::vector<conformance::KeyView> keys;
  for (int64_t j = 0; j <= i; ++j) {
    if (j < L.sinks || j > i - L.window) {  // spec §2
      const int64_t r = hist[static_cast<size_t>(j)];
      const size_t o = g_.kv_offset(layer, r, kv_head);
      keys.push_back(conformance::KeyView{k_.value.data() + o, k_tie_.data() + o, v_.value.data() + o, v_tie_.data() + o,
                                          g_.rows[static_cast<size_t>(r)].position});
    }
  }
  std::vector<double> q(static_cast<size_t>(cfg.head_dim));
  const float* qr = q_rot_.data() + g_.q_offset(layer, row, head);
  for (int d = 0; d < cfg.head_dim; ++d) q[static_cast<size_t>(d)] = qr[d];
  return conformance::attend_keys(cfg, layer, head, q.data(), g_.rows[static_cast<size_t>(row)].position, keys);
}

RopeVerdict rope_dominance(const GoldenCase& g, const PrecisionProfile& profile) {
  RopeVerdict v;
  const Config& cfg = g.c.config;
  for (int l = 0; l < g.layers(); ++l) {
    const conformance::BoundContext ctx = conformance::make_bound_context(cfg, l, profile);
    if (!ctx.rope) continue;
    conformance::BoundContext off = ctx;
    off.rope = false;
    for (int64_t row = 0; row < g.num_rows(); ++row) {
      for (int h = 0; h < cfg.num_q_heads; ++h) {
        const conformance::ScoreStats s = g.score(l, row, h);
        const double rest = conformance::score_error_bound(off, s);
        if (conformance::score_error_bound(ctx, s) - rest <= rest) continue;
        ++v.rope_dominated;
        const int64_t p = g.rows[static_cast<size_t>(row)].position;
        if (v.rope_dominated_from < 0 || p < v.rope_dominated_from) v.rope_dominated_from = p;
      }
    }
  }
  describe_rope_verdict(&v, profile.rope_angle);
  return v;
}

RopeVerdict rotated_by_ringkv_verdict() {
  RopeVerdict v;
  v.kind = RopeVerdict::Kind::rotated_by_ringkv;
  describe_rope_verdict(&v, Precision::f64);
  return v;
}

void describe_rope_verdict(RopeVerdict* v, Precision declared_angle) {
  std::ostringstream os;
  os.precision(3);
  const auto worst = [&] {
    os << "worst angle-equivalent error " << v->worst_angle_error << " at layer " << v->worst_layer << ", row "
       << v->worst_row << ", position " << v->worst_position << " (" << v->worst_tensor << " head " << v->worst_head
       << ", dim " << v->worst_dim << ")";
  };
  const auto tight = [&] {
    os << "; attention from the engine's own q_rot/k_rot, RoPE term off: " << v->tight_checked - v->tight_failed << " of "
       << v->tight_checked << " outputs within the bound";
    if (v->tight_checked > 0) os << " (worst " << v->tight_worst_ratio << " of it)";
  };
  switch (v->kind) {
    case RopeVerdict::Kind::conformant:
      os << "RoPE conformant (f64 rotation of spec §8): ";
      worst();
      tight();
      break;
    case RopeVerdict::Kind::within_declared:
      os << "RoPE within the declared rope_angle " << to_string(declared_angle) << " only (not spec §8's f64 rotation): ";
      worst();
      tight();
      break;
    case RopeVerdict::Kind::failed:
      os << "RoPE FAILED: " << v->failure << "; ";
      worst();
      tight();
      break;
    case RopeVerdict::Kind::rotated_by_ringkv:
      os << "RoPE rotated by ringkv (wants_rotated_qk: spec §8 in f64): attention judged tightly, RoPE term off";
      break;
    case RopeVerdict::Kind::not_checked:
      if (v->rope_dominated == 0) {
        os << "RoPE not checked apart (no q_rot/k_rot); its term never dominated the bound";
      } else {
        os << "RoPE not checked apart (no q_rot/k_rot): the bound's RoPE term (rope_angle " << to_string(declared_angle)
           << ") exceeded all its other terms at " << v->rope_dominated << " (layer, row, head) from position "
           << v->rope_dominated_from
           << ": window, sink, ring and reset structure could not be checked tightly there (write q_rot and k_rot, "
              "golden-format §7)";
      }
      break;
  }
  v->line = os.str();
}

}  // namespace ringkv::golden
