// ringkv: the configuration of a sliding-window attention cache, and its
// validation. See docs/spec.md for the meaning of every field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ringkv {

/// Every true position must stay below this (spec §1).
inline constexpr int64_t kMaxPosition = int64_t{1} << 31;

enum class RopeStyle { none, neox, gptj };
enum class RopeScaling { none, linear, ntk };

/// Rotary position embedding of one layer (spec §8).
struct RopeConfig {
  RopeStyle style = RopeStyle::neox;
  double theta = 10000.0;     ///< base; > 0 and finite
  int rotary_dim = 0;         ///< R: dims rotated; 0 means head_dim; even, <= head_dim
  RopeScaling scaling = RopeScaling::none;
  double factor = 1.0;        ///< linear: position / factor; ntk: theta * factor^(R/(R-2))
};

/// One attention layer: its window, its sink tokens and its RoPE (spec §2, §7).
struct LayerConfig {
  int64_t window = 1;  ///< W >= 1: query i sees keys j with i-W < j <= i (W keys incl. itself)
  int64_t sinks = 0;   ///< S >= 0: the first S tokens stay visible to every later query
  RopeConfig rope;
  /// Q in [0, 2^30] (spec 1.1 §3): ring slots beyond S + W, so that rollbacks (§5.1) can be honoured.
  int64_t rollback_reserve = 0;
};

/// Storage format of K or V (spec §10).
enum class DType { f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8 };
/// INT8 grouping and scale scheme (spec §10).
enum class Int8Scheme {
  per_head,       ///< G = head_dim; scale = fl32(amax/127) (f32); codes from fl32(x / scale)
  q8_0,           ///< G = 32; d = fl32(amax/127); codes from fl32(x * fl32(1/d)); scale stored as f16(d)
  static_tensor,  ///< one scale from the config for the whole tensor; codes from fl32(x * fl32(1/s)), clipped
};
/// Rounding of x/scale to an INT8 code.
enum class Rounding { nearest_even, half_away };

struct KvFormat {
  DType dtype = DType::f32;
  Int8Scheme int8_scheme = Int8Scheme::per_head;  ///< only for dtype int8
  Rounding rounding = Rounding::nearest_even;     ///< only for dtype int8
  float scale = 1.0f;  ///< per-tensor scale for fp8 and for int8 static_tensor; > 0 and finite

  /// A float format (f32, f16, bf16, or fp8 with its per-tensor scale).
  static KvFormat of(DType dtype, float scale = 1.0f) { return KvFormat{dtype, Int8Scheme::per_head, Rounding::nearest_even, scale}; }
  /// An INT8 format.
  static KvFormat int8(Int8Scheme scheme, Rounding rounding, float scale = 1.0f) {
    return KvFormat{DType::int8, scheme, rounding, scale};
  }

  bool operator==(const KvFormat&) const = default;
};

/// A whole model's attention cache configuration.
struct Config {
  std::vector<LayerConfig> layers;  ///< L >= 1 layers
  int num_q_heads = 1;              ///< Hq >= 1
  int num_kv_heads = 1;             ///< Hkv >= 1, Hq % Hkv == 0
  int head_dim = 4;                 ///< D in [1, 1024]
  int batch = 1;                    ///< B >= 1 sequences
  int64_t max_tokens = 1;           ///< tokens per sequence between resets, >= 1
  std::optional<double> softmax_scale;  ///< default 1/sqrt(D); finite and > 0
  std::optional<double> softcap;        ///< logit softcap c > 0: s <- c * tanh(s / c)
  /// Learned sink logits (gpt-oss style), [L][Hq], or empty for none. Finite.
  std::vector<std::vector<float>> sink_logits;
  KvFormat k_format;
  KvFormat v_format;
  /// p0 per sequence at creation, size B, or empty for all zero.
  std::vector<int64_t> start_positions;
};

/// Throws ConfigError naming the first bad field, its value and its allowed range.
void validate(const Config& config);

/// Checks a start position for a sequence of the config ("field" names it in the message).
void validate_start_position(const Config& config, int64_t p0, const std::string& field);

/// The scale applied to q·k: softmax_scale or 1/sqrt(head_dim).
double softmax_scale(const Config& config);
/// Rotary dim R actually used (rotary_dim, or head_dim when 0; 0 for style none).
int rotary_dim(const RopeConfig& rope, int head_dim);
/// Slots a spec-conformant ring needs for a layer: min(S + W + rollback_reserve, max_tokens).
int64_t ring_capacity(const LayerConfig& layer, int64_t max_tokens);
/// Start position of sequence s (0 when start_positions is empty).
int64_t start_position(const Config& config, int sequence);

const char* to_string(RopeStyle);
const char* to_string(RopeScaling);
const char* to_string(DType);
const char* to_string(Int8Scheme);
const char* to_string(Rounding);
/// Short name of a KV format, e.g. "f16", "int8-q8_0-rne", "fp8_e4m3@0.5".
std::string to_string(const KvFormat&);
/// A readable multi-line description of a whole config.
std::string describe(const Config& config);

}  // namespace ringkv
