#include "support/oracle.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "ringkv/quant.hpp"

namespace ringkv::conformance {

void oracle_rope(const RopeConfig& rope, int D, int64_t position, const float* x, double* out) {
  for (int d = 0; d < D; ++d) out[d] = x[d];
  if (rope.style == RopeStyle::none) return;
  const int R = rope.rotary_dim == 0 ? D : rope.rotary_dim;
  double base = rope.theta;
  if (rope.scaling == RopeScaling::ntk) base = rope.theta * std::pow(rope.factor, double(R) / double(R - 2));
  double pos = double(position);
  if (rope.scaling == RopeScaling::linear) pos = pos / rope.factor;
  for (int k = 0; k < R / 2; ++k) {
    const double angle = pos * std::pow(base, -(2.0 * k) / double(R));
    const double c = std::cos(angle), s = std::sin(angle);
    const int a = rope.style == RopeStyle::neox ? k : 2 * k;
    const int b = rope.style == RopeStyle::neox ? k + R / 2 : 2 * k + 1;
    const double xa = x[a], xb = x[b];
    out[a] = xa * c - xb * s;
    out[b] = xa * s + xb * c;
  }
}

void oracle_store(const KvFormat& f, int D, const float* x, float* value, float* tie, int8_t* codes, float* scales) {
  std::fill(tie, tie + D, 0.0f);
  switch (f.dtype) {
    case DType::f32:
      std::copy(x, x + D, value);
      return;
    case DType::f16:
      for (int d = 0; d < D; ++d) value[d] = round_to_f16(x[d]);
      return;
    case DType::bf16:
      for (int d = 0; d < D; ++d) value[d] = round_to_bf16(x[d]);
      return;
    case DType::fp8_e4m3:
      for (int d = 0; d < D; ++d) value[d] = f32_from_fp8_e4m3(fp8_e4m3_from_f32(x[d] / f.scale)) * f.scale;
      return;
    case DType::fp8_e5m2:
      for (int d = 0; d < D; ++d) value[d] = f32_from_fp8_e5m2(fp8_e5m2_from_f32(x[d] / f.scale)) * f.scale;
      return;
    case DType::int8: {
      const int G = int8_group_size(f.int8_scheme, D);
      for (int g = 0; g * G < D; ++g) {
        const Int8Group grp = int8_quantise_group(f, x + g * G, G, codes + g * G);
        if (f.int8_scheme != Int8Scheme::static_tensor) scales[g] = grp.stored_scale;
        for (int d = g * G; d < (g + 1) * G; ++d) {
          value[d] = int8_dequantise(codes[d], grp.stored_scale);
          if (int8_in_tie_window(x[d], grp.divisor_scale)) tie[d] = grp.stored_scale;
        }
      }
      return;
    }
  }
}

Oracle::Oracle(Config config) : config_(std::move(config)) {
  validate(config_);
  p0_.resize(static_cast<size_t>(config_.batch));
  for (int s = 0; s < config_.batch; ++s) p0_[static_cast<size_t>(s)] = ringkv::start_position(config_, s);
  history_.resize(config_.layers.size() * static_cast<size_t>(config_.batch));
  high_water_.assign(history_.size(), 0);
  released_to_.assign(history_.size(), 0);
}

void Oracle::release_old_rows(int layer, int sequence) {
  const LayerConfig& L = config_.layers[static_cast<size_t>(layer)];
  const size_t at = static_cast<size_t>(layer) * static_cast<size_t>(config_.batch) + static_cast<size_t>(sequence);
  std::vector<OracleToken>& hist = history_[at];
  high_water_[at] = std::max(high_water_[at], static_cast<int64_t>(hist.size()));
  const int64_t end = high_water_[at] - L.window - L.rollback_reserve;
  for (int64_t j = std::max(released_to_[at], L.sinks); j < end; ++j) {
    OracleToken& tok = hist[static_cast<size_t>(j)];
    tok.k = StoredRow{};
    tok.v = StoredRow{};
    tok.k_rot = {};
  }
  released_to_[at] = std::max(released_to_[at], end);
}

void Oracle::rollback(int sequence, int64_t n) {
  for (size_t l = 0; l < config_.layers.size(); ++l) {
    std::vector<OracleToken>& hist = history_mut(static_cast<int>(l), sequence);
    hist.resize(hist.size() - static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(hist.size()))));
    const size_t at = l * static_cast<size_t>(config_.batch) + static_cast<size_t>(sequence);
    released_to_[at] = std::min(released_to_[at], static_cast<int64_t>(hist.size()));
  }
}

void Oracle::reset(int sequence, int64_t start_position) {
  p0_[static_cast<size_t>(sequence)] = start_position;
  for (size_t l = 0; l < config_.layers.size(); ++l) {
    history_mut(static_cast<int>(l), sequence).clear();
    const size_t at = l * static_cast<size_t>(config_.batch) + static_cast<size_t>(sequence);
    high_water_[at] = 0;
    released_to_[at] = 0;
  }
}

std::vector<OracleOutput> Oracle::append(int sequence, int64_t n, const float* q, const float* k, const float* v) {
  const int D = config_.head_dim, Hq = config_.num_q_heads, Hkv = config_.num_kv_heads;
  const auto L = static_cast<int>(config_.layers.size());
  const int k_spr = scales_per_row(config_.k_format, D), v_spr = scales_per_row(config_.v_format, D);
  std::vector<OracleOutput> out;
  out.reserve(static_cast<size_t>(L) * static_cast<size_t>(n) * static_cast<size_t>(Hq));
  std::vector<double> rot(static_cast<size_t>(D));
  std::vector<float> rot32(static_cast<size_t>(D));
  std::vector<double> q_rot(static_cast<size_t>(Hq) * static_cast<size_t>(D));
  for (int l = 0; l < L; ++l) {
    const RopeConfig& rope = config_.layers[static_cast<size_t>(l)].rope;
    const float* ql = q + static_cast<size_t>(l) * static_cast<size_t>(n) * static_cast<size_t>(Hq * D);
    const float* kl = k + static_cast<size_t>(l) * static_cast<size_t>(n) * static_cast<size_t>(Hkv * D);
    const float* vl = v + static_cast<size_t>(l) * static_cast<size_t>(n) * static_cast<size_t>(Hkv * D);
    std::vector<OracleToken>& hist = history_mut(l, sequence);
    for (int64_t t = 0; t < n; ++t) {
      const auto i = static_cast<int64_t>(hist.size());
      OracleToken tok;
      tok.position = p0_[static_cast<size_t>(sequence)] + i;
      const size_t kv = static_cast<size_t>(Hkv) * static_cast<size_t>(D);
      for (StoredRow* r : {&tok.k, &tok.v}) {
        r->value.resize(kv);
        r->tie.resize(kv);
        r->codes.resize(kv);
      }
      tok.k.scales.resize(static_cast<size_t>(Hkv * k_spr));
      tok.k_rot.resize(kv);
      tok.v.scales.resize(static_cast<size_t>(Hkv * v_spr));
      for (int h = 0; h < Hkv; ++h) {
        const size_t off = static_cast<size_t>(h) * static_cast<size_t>(D);
        // K: rotate in f64, round once to f32, then store as the spec says.
        oracle_rope(rope, D, tok.position, kl + static_cast<size_t>(t) * kv + off, rot.data());
        for (int d = 0; d < D; ++d) rot32[static_cast<size_t>(d)] = static_cast<float>(rot[static_cast<size_t>(d)]);
        std::copy(rot32.begin(), rot32.end(), tok.k_rot.begin() + static_cast<std::ptrdiff_t>(off));
        oracle_store(config_.k_format, D, rot32.data(), tok.k.value.data() + off, tok.k.tie.data() + off,
                     tok.k.codes.data() + off, tok.k.scales.data() + h * k_spr);
        oracle_store(config_.v_format, D, vl + static_cast<size_t>(t) * kv + off, tok.v.value.data() + off,
                     tok.v.tie.data() + off, tok.v.codes.data() + off, tok.v.scales.data() + h * v_spr);
      }
      hist.push_back(std::move(tok));
      // q: rotated in f64 and NOT rounded: the oracle's query is the exact one.
      for (int h = 0; h < Hq; ++h) {
        oracle_rope(rope, D, p0_[static_cast<size_t>(sequence)] + i,
                    ql + static_cast<size_t>(t) * static_cast<size_t>(Hq * D) + static_cast<size_t>(h * D),
                    q_rot.data() + static_cast<size_t>(h * D));
      }
      for (int h = 0; h < Hq; ++h) {
        if (filter_ && !filter_(l, sequence, i)) {
          out.emplace_back();  // not sampled
        } else {
          out.push_back(attend(l, sequence, i, q_rot.data() + static_cast<size_t>(h * D), h));
        }
      }
      if (release_) release_old_rows(l, sequence);
    }
  }
  return out;
}

OracleOutput Oracle::attend(int layer, int sequence, int64_t i, const double* q, int head) const {
  const LayerConfig& L = config_.layers[static_cast<size_t>(layer)];
  const size_t off = static_cast<size_t>(head / (config_.num_q_heads / config_.num_kv_heads)) *
                     static_cast<size_t>(config_.head_dim);
  const std::vector<OracleToken>& hist = history(layer, sequence);
  // The explicit mask over the whole history (spec §2).
  std::vector<KeyView> keys;
  for (int64_t j = 0; j <= i; ++j) {
    if (j < L.sinks || j > i - L.window) {
      const OracleToken& tok = hist[static_cast<size_t>(j)];
      if (tok.k.value.empty()) {
        throw std::logic_error("oracle: token " + std::to_string(j) + " of layer " + std::to_string(layer) +
                               ", sequence " + std::to_string(sequence) + " was released but query " +
                               std::to_string(i) + " sees it (release_unreachable's rule is wrong)");
      }
      keys.push_back(KeyView{tok.k.value.data() + off, tok.k.tie.data() + off, tok.v.value.data() + off,
                             tok.v.tie.data() + off, tok.position});
    }
  }
  return attend_keys(config_, layer, head, q, hist[static_cast<size_t>(i)].position, keys);
}

OracleOutput attend_keys(const Config& config, int layer, int head, const double* q, int64_t query_position,
                         const std::vector<KeyView>& keys) {
  const RopeConfig& rope = config.layers[static_cast<size_t>(layer)].rope;
  const int D = config.head_dim;
  const double tau = softmax_scale(config);
  const bool has_sink = !config.sink_logits.empty();
  const auto scaled = [&](int64_t pos) {
    if (rope.style == RopeStyle::none) return 0.0;
    return rope.scaling == RopeScaling::linear ? double(pos) / rope.factor : double(pos);
  };
  const auto tie = [](const float* t, int d) { return t ? double(t[d]) : 0.0; };

  OracleOutput r;
  r.o.assign(static_cast<size_t>(D), 0.0);
  r.dims.resize(static_cast<size_t>(D));
  double q_norm = 0;
  for (int d = 0; d < D; ++d) q_norm += q[d] * q[d];
  q_norm = std::sqrt(q_norm);
  r.score.max_angle = std::fabs(scaled(query_position));

  std::vector<double> s(keys.size());
  double max_s = has_sink ? double(config.sink_logits[static_cast<size_t>(layer)][static_cast<size_t>(head)])
                          : -std::numeric_limits<double>::infinity();
  for (size_t a = 0; a < keys.size(); ++a) {
    const KeyView& key = keys[a];
    double dot = 0, abs_dot = 0, tie_dot = 0, k_norm = 0;
    for (int d = 0; d < D; ++d) {
      const double kd = key.k[d];
      dot += q[d] * kd;
      abs_dot += std::fabs(q[d]) * std::fabs(kd);
      tie_dot += std::fabs(q[d]) * tie(key.k_tie, d);
      k_norm += kd * kd;
    }
    double sc = tau * dot;
    if (config.softcap) sc = *config.softcap * std::tanh(sc / *config.softcap);
    s[a] = sc;
    max_s = std::max(max_s, sc);
    r.score.max_abs_dot = std::max(r.score.max_abs_dot, abs_dot);
    r.score.max_abs_score = std::max(r.score.max_abs_score, std::fabs(sc));
    r.score.max_tie_dot = std::max(r.score.max_tie_dot, tie_dot);
    r.score.max_qk_norm = std::max(r.score.max_qk_norm, q_norm * std::sqrt(k_norm));
    r.score.max_angle = std::max(r.score.max_angle, std::fabs(scaled(key.position)));
  }
  double denom = 0;
  double p_sink = 0;
  if (has_sink) {
    const double sl = config.sink_logits[static_cast<size_t>(layer)][static_cast<size_t>(head)];
    r.score.max_abs_score = std::max(r.score.max_abs_score, std::fabs(sl));
    p_sink = std::exp(sl - max_s);
    denom += p_sink;
  }
  for (double& x : s) {
    x = std::exp(x - max_s);
    denom += x;
  }
  for (double& x : s) x /= denom;
  p_sink /= denom;
  r.score.n_keys = static_cast<int64_t>(keys.size()) + (has_sink ? 1 : 0);
  for (size_t a = 0; a < keys.size(); ++a) {
    for (int d = 0; d < D; ++d) r.o[static_cast<size_t>(d)] += s[a] * double(keys[a].v[d]);
  }
  for (int d = 0; d < D; ++d) {
    DimStats& ds = r.dims[static_cast<size_t>(d)];
    const double o = r.o[static_cast<size_t>(d)];
    ds.spread = p_sink * std::fabs(o);
    for (size_t a = 0; a < keys.size(); ++a) {
      const double vd = keys[a].v[d];
      ds.spread += s[a] * std::fabs(vd - o);
      ds.abs_mass += s[a] * std::fabs(vd);
      ds.tie_mass += s[a] * tie(keys[a].v_tie, d);
      ds.max_abs_v = std::max(ds.max_abs_v, std::fabs(vd));
    }
    ds.abs_out = std::fabs(o);
  }
  return r;
}

}  // namespace ringkv::conformance
