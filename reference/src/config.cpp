#include "ringkv/config.hpp"

#include <cmath>
#include <limits>
#include <sstream>

#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"

namespace ringkv {
namespace {

[[noreturn]] void reject(const std::string& field, const std::string& value, const std::string& rule) {
  throw ConfigError("config." + field + " = " + value + ": " + rule);
}

std::string str(double x) {
  std::ostringstream os;
  os.precision(17);
  os << x;
  return os.str();
}
std::string str(int64_t x) { return std::to_string(x); }

void check_range(const std::string& field, int64_t value, int64_t lo, int64_t hi_inclusive,
                 const std::string& range_text) {
  if (value < lo || value > hi_inclusive) reject(field, str(value), "must be in " + range_text);
}

void check_positive_finite(const std::string& field, double value) {
  if (!std::isfinite(value) || !(value > 0)) reject(field, str(value), "must be finite and > 0");
}

// Multiplies sizes, rejecting a product above 2^48 bytes (no buffer that big is meant).
int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  constexpr int64_t kLimit = int64_t{1} << 48;
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > kLimit) {
    throw ConfigError("config: " + what + " needs more than 2^48 bytes (" + str(a) + " x " + str(b) +
                      "); reduce max_tokens, window, heads, head_dim or batch");
  }
  return r;
}

void validate_format(const std::string& field, const KvFormat& f, int head_dim) {
  if (f.dtype == DType::fp8_e4m3 || f.dtype == DType::fp8_e5m2 ||
      (f.dtype == DType::int8 && f.int8_scheme == Int8Scheme::static_tensor)) {
    if (!std::isfinite(f.scale) || !(f.scale >= 0x1p-126f) || !(f.scale <= 0x1p+126f)) {
      reject(field + ".scale", str(f.scale), "must be finite and in [2^-126, 2^126]");
    }
  }
  if (f.dtype == DType::int8 && f.int8_scheme == Int8Scheme::q8_0 && head_dim % 32 != 0) {
    reject(field + ".int8_scheme", "q8_0",
           "needs head_dim divisible by the group size 32, but head_dim = " + str(int64_t{head_dim}));
  }
}

}  // namespace

void validate_start_position(const Config& c, int64_t p0, const std::string& field) {
  const int64_t hi = kMaxPosition - c.max_tokens;  // the last token, p0 + max_tokens - 1, stays < 2^31
  if (p0 < 0 || p0 > hi) {
    throw ConfigError(field + " = " + str(p0) + ": must be in [0, " + str(hi) +
                      "] so that every position p0 + i, i < max_tokens = " + str(c.max_tokens) +
                      ", stays below 2^31");
  }
}

void validate(const Config& c) {
  check_range("num_q_heads", c.num_q_heads, 1, 4096, "[1, 4096]");
  check_range("num_kv_heads", c.num_kv_heads, 1, 4096, "[1, 4096]");
  if (c.num_q_heads % c.num_kv_heads != 0) {
    reject("num_q_heads", str(int64_t{c.num_q_heads}),
           "must be a multiple of num_kv_heads = " + str(int64_t{c.num_kv_heads}));
  }
  check_range("head_dim", c.head_dim, 1, 1024, "[1, 1024]");
  check_range("batch", c.batch, 1, int64_t{1} << 20, "[1, 2^20]");
  check_range("max_tokens", c.max_tokens, 1, kMaxPosition - 1, "[1, 2^31 - 1]");
  if (c.layers.empty() || c.layers.size() > 1024) {
    reject("layers.size()", str(static_cast<int64_t>(c.layers.size())), "must be in [1, 1024]");
  }
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const std::string f = "layers[" + std::to_string(l) + "]";
    const LayerConfig& layer = c.layers[l];
    check_range(f + ".window", layer.window, 1, kMaxPosition - 1, "[1, 2^31 - 1]");
    check_range(f + ".sinks", layer.sinks, 0, kMaxPosition - 1, "[0, 2^31 - 1]");
    check_range(f + ".rollback_reserve", layer.rollback_reserve, 0, int64_t{1} << 30, "[0, 2^30]");
    const RopeConfig& r = layer.rope;
    if (r.style == RopeStyle::none) continue;
    check_positive_finite(f + ".rope.theta", r.theta);
    if (r.rotary_dim != 0 && (r.rotary_dim < 2 || r.rotary_dim > c.head_dim || r.rotary_dim % 2 != 0)) {
      reject(f + ".rope.rotary_dim", str(int64_t{r.rotary_dim}),
             "must be 0 (= head_dim) or even and in [2, head_dim = " + str(int64_t{c.head_dim}) + "]");
    }
    const int R = rotary_dim(r, c.head_dim);
    if (R % 2 != 0) {
      reject(f + ".rope.rotary_dim", "0 (= head_dim = " + str(int64_t{c.head_dim}) + ")",
             "the rotary dim must be even; set rotary_dim explicitly");
    }
    if (r.scaling != RopeScaling::none) check_positive_finite(f + ".rope.factor", r.factor);
    if (r.scaling == RopeScaling::ntk && R <= 2) {
      reject(f + ".rope.rotary_dim", str(int64_t{R}), "ntk scaling needs rotary_dim > 2");
    }
  }
  // Both are applied in f32 by engines: keep them far inside f32's range.
  const auto check_f32_factor = [](const std::string& field, double x) {
    if (!std::isfinite(x) || !(x >= 0x1p-64) || !(x <= 0x1p+64)) reject(field, str(x), "must be in [2^-64, 2^64]");
  };
  if (c.softmax_scale) check_f32_factor("softmax_scale", *c.softmax_scale);
  if (c.softcap) check_f32_factor("softcap", *c.softcap);
  if (!c.sink_logits.empty()) {
    if (c.sink_logits.size() != c.layers.size()) {
      reject("sink_logits.size()", str(static_cast<int64_t>(c.sink_logits.size())),
             "must be 0 or layers.size() = " + str(static_cast<int64_t>(c.layers.size())));
    }
    for (size_t l = 0; l < c.sink_logits.size(); ++l) {
      const std::string f = "sink_logits[" + std::to_string(l) + "]";
      if (c.sink_logits[l].size() != static_cast<size_t>(c.num_q_heads)) {
        reject(f + ".size()", str(static_cast<int64_t>(c.sink_logits[l].size())),
               "must be num_q_heads = " + str(int64_t{c.num_q_heads}));
      }
      for (size_t h = 0; h < c.sink_logits[l].size(); ++h) {
        if (!std::isfinite(c.sink_logits[l][h])) {
          reject(f + "[" + std::to_string(h) + "]", str(c.sink_logits[l][h]), "must be finite");
        }
      }
    }
  }
  validate_format("k_format", c.k_format, c.head_dim);
  validate_format("v_format", c.v_format, c.head_dim);
  if (!c.start_positions.empty() && c.start_positions.size() != static_cast<size_t>(c.batch)) {
    reject("start_positions.size()", str(static_cast<int64_t>(c.start_positions.size())),
           "must be 0 or batch = " + str(int64_t{c.batch}));
  }
  for (size_t s = 0; s < c.start_positions.size(); ++s) {
    validate_start_position(c, c.start_positions[s], "config.start_positions[" + std::to_string(s) + "]");
  }
  // Buffer sizes: every ring of every layer and sequence must be addressable.
  int64_t total = 0;
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const int64_t cap = ring_capacity(c.layers[l], c.max_tokens);
    const int64_t rows = checked_mul(cap, c.num_kv_heads, "a ring");
    const int64_t row_bytes = int64_t{c.head_dim} * (bytes_per_element(c.k_format.dtype) +
                                                     bytes_per_element(c.v_format.dtype)) +
                              8 * (scales_per_row(c.k_format, c.head_dim) + scales_per_row(c.v_format, c.head_dim));
    const int64_t per_seq = checked_mul(rows, row_bytes, "a ring");
    const int64_t layer_bytes = checked_mul(per_seq, c.batch, "the cache");
    if (__builtin_add_overflow(total, layer_bytes, &total) || total > (int64_t{1} << 48)) {
      throw ConfigError("config: the cache needs more than 2^48 bytes; reduce max_tokens, window, heads or batch");
    }
  }
}

double softmax_scale(const Config& c) {
  return c.softmax_scale ? *c.softmax_scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
}

int rotary_dim(const RopeConfig& rope, int head_dim) {
  if (rope.style == RopeStyle::none) return 0;
  return rope.rotary_dim == 0 ? head_dim : rope.rotary_dim;
}

int64_t ring_capacity(const LayerConfig& layer, int64_t max_tokens) {
  const int64_t want = layer.sinks + layer.window + layer.rollback_reserve;  // < 2^32: no overflow
  return want < max_tokens ? want : max_tokens;
}

int64_t start_position(const Config& c, int sequence) {
  return c.start_positions.empty() ? 0 : c.start_positions[static_cast<size_t>(sequence)];
}

const char* to_string(RopeStyle s) {
  switch (s) {
    case RopeStyle::none: return "none";
    case RopeStyle::neox: return "neox";
    case RopeStyle::gptj: return "gptj";
  }
  return "?";
}
const char* to_string(RopeScaling s) {
  switch (s) {
    case RopeScaling::none: return "none";
    case RopeScaling::linear: return "linear";
    case RopeScaling::ntk: return "ntk";
  }
  return "?";
}
const char* to_string(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::fp8_e5m2: return "fp8_e5m2";
    case DType::int8: return "int8";
  }
  return "?";
}
const char* to_string(Int8Scheme s) {
  switch (s) {
    case Int8Scheme::per_head: return "per_head";
    case Int8Scheme::q8_0: return "q8_0";
    case Int8Scheme::static_tensor: return "static";
  }
  return "?";
}
const char* to_string(Rounding r) {
  switch (r) {
    case Rounding::nearest_even: return "rne";
    case Rounding::half_away: return "away";
  }
  return "?";
}

std::string to_string(const KvFormat& f) {
  std::string s = to_string(f.dtype);
  if (f.dtype == DType::int8) {
    s += std::string("-") + to_string(f.int8_scheme) + "-" + to_string(f.rounding);
    if (f.int8_scheme == Int8Scheme::static_tensor) s += "@" + str(static_cast<double>(f.scale));
  } else if (f.dtype == DType::fp8_e4m3 || f.dtype == DType::fp8_e5m2) {
    s += "@" + str(static_cast<double>(f.scale));
  }
  return s;
}

std::string describe(const Config& c) {
  std::ostringstream os;
  os << "layers=" << c.layers.size() << " Hq=" << c.num_q_heads << " Hkv=" << c.num_kv_heads
     << " D=" << c.head_dim << " batch=" << c.batch << " max_tokens=" << c.max_tokens
     << " scale=" << str(softmax_scale(c)) << " softcap=" << (c.softcap ? str(*c.softcap) : "none")
     << " K=" << to_string(c.k_format) << " V=" << to_string(c.v_format)
     << " sink_logits=" << (c.sink_logits.empty() ? "none" : "yes") << "\n";
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const LayerConfig& L = c.layers[l];
    os << "  layer " << l << ": W=" << L.window << " S=" << L.sinks;
    if (L.rollback_reserve != 0) os << " reserve=" << L.rollback_reserve;
    os << " rope=" << to_string(L.rope.style);
    if (L.rope.style != RopeStyle::none) {
      os << " theta=" << str(L.rope.theta) << " R=" << rotary_dim(L.rope, c.head_dim)
         << " scaling=" << to_string(L.rope.scaling);
      if (L.rope.scaling != RopeScaling::none) os << "x" << str(L.rope.factor);
    }
    os << "\n";
  }
  os << "  start_positions:";
  for (int s = 0; s < c.batch; ++s) os << " " << start_position(c, s);
  os << "\n";
  return os.str();
}

}  // namespace ringkv
