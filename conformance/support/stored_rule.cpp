#include "support/stored_rule.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ringkv/quant.hpp"
#include "support/show.hpp"

namespace ringkv::conformance {
namespace {

bool same_bits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

bool is_float_storage(Precision p) {
  return p == Precision::f32 || p == Precision::f16 || p == Precision::bf16 || p == Precision::fp8_e4m3 ||
         p == Precision::fp8_e5m2;
}

// The code step of element e: the static scale, or the row's (group's) stored scale.
double int8_step(const KvFormat& f, int D, const float* scales, int e) {
  if (f.int8_scheme == Int8Scheme::static_tensor) return f.scale;
  return scales[e / int8_group_size(f.int8_scheme, D)];
}

// How far a recomputed INT8 scale may lie from the spec's, before slack: per_head scales are f32
// (amax/127, two f32 roundings); q8_0's are rounded to f16 (2^-11 relative each, 2^-9 covers both).
double scale_rounding(const KvFormat& f, double want_scale) {
  return (f.int8_scheme == Int8Scheme::q8_0 ? 0x1p-9 : 0x1p-20) * std::fabs(want_scale);
}

}  // namespace

StoredRule stored_rule(const KvFormat& format, const std::optional<Precision>& declared) {
  StoredRule r;
  r.format = format;
  if (declared && format.dtype != DType::int8 && is_float_storage(*declared) && *declared != precision_of(format.dtype)) {
    r.storage = declared;
    r.relaxed = true;
    r.why = std::string("the declared storage ") + to_string(*declared);
  }
  return r;
}

double storage_rounding(Precision p, double scale, double stored, double toward) {
  // Rounding to nearest maps the interval halfway to each neighbour onto a stored value, so x lies
  // within half the spacing on its side: u·2^e above |v| = m·2^e (m in [1, 2)), half that below a
  // power of two, never less than half the smallest (subnormal) step.
  double u = 0, half_min = 0;
  switch (p) {
    case Precision::f32: u = 0x1p-24; half_min = 0x1p-150; break;
    case Precision::f16: u = 0x1p-11; half_min = 0x1p-25; break;
    case Precision::bf16: u = 0x1p-8; half_min = 0x1p-134; break;
    case Precision::fp8_e4m3: u = 0x1p-4; half_min = 0x1p-10; break;
    case Precision::fp8_e5m2: u = 0x1p-3; half_min = 0x1p-17; break;
    default: return 0;  // f64 is exact here; tf32 and INT8 are not float storages (INT8 uses its scale)
  }
  const double v = std::fabs(stored) / scale;  // fp8 stores scale·fp8(x/scale)
  if (v == 0) return half_min * scale;
  int ex = 0;
  const double m = std::frexp(v, &ex);  // v = m·2^ex, m in [0.5, 1)
  double half = std::ldexp(u, ex - 1);  // half the spacing above v
  const bool smaller = stored > 0 ? toward < stored : toward > stored;
  if (m == 0.5 && smaller) half /= 2;  // below a power of two the spacing halves
  return std::max(half, half_min) * scale;
}

std::optional<StoredMismatch> compare_stored_row(const StoredRule& rule, int D, int head, bool is_k,
                                                 const StoredRowView& want, const StoredRowView& got, int64_t* checked) {
  const KvFormat& f = rule.format;
  const bool int8 = f.dtype == DType::int8;
  const int spr = scales_per_row(f, D);
  const char* KV = is_k ? "K" : "V";
  const auto slack_of = [&](int e) { return rule.relaxed && rule.slack ? rule.slack[e] : 0.0; };
  double max_slack = 0;
  for (int e = 0; e < D; ++e) max_slack = std::max(max_slack, slack_of(e));
  // Message parts, built only for a mismatch (this runs for every row of every snapshot).
  const auto hd = [&] { return "[head " + std::to_string(head) + "]"; };
  const auto format_text = [&] {
    return to_string(f) + (rule.storage ? std::string(", declared storage ") + to_string(*rule.storage) : "");
  };
  const auto mismatch = [&](std::string what, int dim, double expected, double g, double bound, std::string text) {
    StoredMismatch m;
    m.what = std::move(what);
    m.dim = dim;
    m.expected = expected;
    m.got = g;
    m.bound = bound;
    m.text = std::move(text);
    return std::optional<StoredMismatch>(std::move(m));
  };
  const auto allowed_for = [&](double allowed) {
    return rule.relaxed ? ", allowed " + show_number(allowed) + " for " + rule.why : std::string();
  };

  // Scales first: every code of the row is read through them.
  if (int8 && spr > 0 && want.scales && got.scales) {
    for (int e = 0; e < spr; ++e) {
      const float gs = got.scales[e], ws = want.scales[e];
      if (checked) ++*checked;
      // A rotation within the slack moves amax, hence the scale amax/127, by up to max_slack/127.
      const double allowed = rule.relaxed ? (scale_rounding(f, ws) + max_slack / 127.0) * (1 + 0x1p-20) : 0.0;
      const bool ok = same_bits(gs, ws) || (rule.relaxed && std::fabs(double(gs) - double(ws)) <= allowed);
      if (!ok) {
        return mismatch(std::string(KV) + " scale", e, ws, gs, allowed,
                        std::string(KV) + " scale" + hd() + "[group " + std::to_string(e) + "] is " + show_number(gs) + ", spec says " +
                            show_number(ws) + " (" + format_text() + ")" + allowed_for(allowed));
      }
    }
  }
  for (int e = 0; e < D; ++e) {
    const float gv = got.value[e], wv = want.value[e];
    const bool tie = int8 && want.tie && want.tie[e] != 0;
    const double step_w = int8 ? int8_step(f, D, want.scales, e) : 0.0;
    const double diff = std::fabs(double(gv) - double(wv));
    if (int8 && got.codes && want.codes) {  // codes first: they are what INT8 stores
      const int gc = got.codes[e], wc = want.codes[e];
      int off = 1;
      if (rule.relaxed && step_w > 0) {
        // The engine's code round(x'/sg) against the spec's round(x/sw), |x' - x| <= slack and
        // |x| <= 127.5·sw (the group's amax/127, its scale rounded at most 2^-11 up):
        // |x'/sg - x/sw| <= (slack + 127.5·|sg - sw|) / sg, one more for the two roundings.
        const bool fixed = f.int8_scheme == Int8Scheme::static_tensor;
        const double dsg = fixed ? 0.0
                           : got.scales ? std::fabs(int8_step(f, D, got.scales, e) - step_w)
                                        : (scale_rounding(f, step_w) + max_slack / 127.0) * (1 + 0x1p-20);
        const double sg = fixed ? step_w : got.scales ? int8_step(f, D, got.scales, e) : std::max(step_w - dsg, 0.0);
        const double codes = sg > 0 ? (slack_of(e) + 127.5 * dsg) / sg * (1 + 0x1p-20) : 255.0;
        off = 1 + static_cast<int>(std::ceil(std::min(codes, 255.0)));
      }
      if (checked) ++*checked;
      if (!(gc == wc || ((tie || rule.relaxed) && std::abs(gc - wc) <= off))) {
        return mismatch(std::string(KV) + " code", e, wc, gc, off,
                        std::string(KV) + " code" + hd() + "[dim " + std::to_string(e) + "] is " + std::to_string(gc) +
                            ", spec says " + std::to_string(wc) + " (" + format_text() + ")" +
                            (rule.relaxed ? ", +-" + std::to_string(off) + " allowed for " + rule.why
                                          : tie ? std::string(", in the tie window: +-1 allowed") : std::string()));
      }
    }
    double allowed = 0;
    bool ok;
    if (rule.relaxed) {
      if (int8) {
        // The engine's step: its own scale where given, else the spec's within what the scale check allows.
        const double step_g = f.int8_scheme == Int8Scheme::static_tensor ? f.scale
                              : got.scales ? int8_step(f, D, got.scales, e)
                                           : step_w + scale_rounding(f, step_w) + max_slack / 127.0;
        allowed = (slack_of(e) + 0.5 * (step_w + step_g)) * (1 + 0x1p-20);
      } else {
        const Precision spec_p = precision_of(f.dtype);
        // Each side's rounding on the side of the other (the bound holds wherever x and x' lie).
        allowed = (slack_of(e) + storage_rounding(rule.storage.value_or(spec_p), f.scale, gv, wv) +
                   storage_rounding(spec_p, f.scale, wv, gv)) *
                  (1 + 0x1p-20);
      }
      ok = same_bits(gv, wv) || diff <= allowed;
    } else {
      allowed = tie ? 1.0001 * step_w : 0.0;
      // INT8 zero codes decode to a zero whose sign carries nothing (spec §10.4).
      ok = same_bits(gv, wv) || (int8 && gv == 0.0f && wv == 0.0f) || (tie && diff <= allowed);
    }
    if (checked) ++*checked;
    if (!ok) {
      return mismatch(std::string("stored ") + KV, e, wv, gv, allowed,
                      std::string(KV) + hd() + "[dim " + std::to_string(e) + "] stores " + show_number(gv) + ", spec says " + show_number(wv) +
                          " (" + format_text() + ")" + allowed_for(allowed));
    }
  }
  return std::nullopt;
}

}  // namespace ringkv::conformance
