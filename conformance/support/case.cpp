#include "support/case.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

#include "ringkv/engine.hpp"
#include "ringkv/rope.hpp"
#include "support/rng.hpp"
#include "support/show.hpp"

namespace ringkv::conformance {
namespace {

uint64_t salt_of(const std::vector<uint64_t>& salts, size_t i) { return i < salts.size() ? salts[i] : 0; }

// Inverse-rotates a planted vector by the token's index, so that after the
// engine rotates it by p0 + index the stored vector is R(p0) * planted: every
// planted dot product q·k is then independent of p0 and of the two indices.
void unrotate_by_index(const RopeConfig& rope, int D, int64_t index, float* row) {
  if (rope.style == RopeStyle::none) return;
  std::vector<double> cs(static_cast<size_t>(D)), sn(static_cast<size_t>(D));
  rope_angles(rope, D, -index, cs.data(), sn.data());
  rope_rotate(rope, D, cs.data(), sn.data(), row, row);
}

}  // namespace

const char* to_string(DataMode m) { return m == DataMode::random ? "random" : "needle"; }

void freeze_needles(Case& c) {
  if (!c.needle_windows.empty()) return;
  for (const LayerConfig& l : c.config.layers) {
    c.needle_windows.push_back(l.window);
    c.needle_sinks.push_back(l.sinks);
  }
}

int64_t needle_window(const Case& c, int layer) {
  const auto l = static_cast<size_t>(layer);
  return l < c.needle_windows.size() ? c.needle_windows[l] : c.config.layers[l].window;
}

int64_t needle_sinks(const Case& c, int layer) {
  const auto l = static_cast<size_t>(layer);
  return l < c.needle_sinks.size() ? c.needle_sinks[l] : c.config.layers[l].sinks;
}

std::vector<int64_t> needle_targets(const Case& c, int layer) {
  const int64_t W = needle_window(c, layer), S = needle_sinks(c, layer);
  std::vector<int64_t> t;
  // A query t tells W from W + 1 only if its just-evicted key t - W is not a sink (t - W >= S):
  // the first window boundaries after the sinks come first, then the plain multiples of W.
  for (int64_t x : {S + W, S + W + 1, S + W - 1 + (S == 0 ? 0 : 1), S + 2 * W - 1, S + 2 * W, S + 3 * W, W - 1, W,
                    W + 1}) {
    if (x >= 0 && x < c.config.max_tokens && std::find(t.begin(), t.end(), x) == t.end()) t.push_back(x);
  }
  const size_t max_targets = static_cast<size_t>(c.config.head_dim / 3);
  if (t.size() > max_targets) t.resize(max_targets);
  return t;
}

int data_stream(const Case& c, int stream, int64_t index) {
  for (size_t hops = 0; hops <= c.shared_prefixes.size(); ++hops) {
    const auto it = std::find_if(c.shared_prefixes.begin(), c.shared_prefixes.end(),
                                 [&](const SharedPrefix& p) { return p.stream == stream && index < p.tokens; });
    if (it == c.shared_prefixes.end()) return stream;
    stream = it->from;
  }
  throw std::logic_error("shared_prefixes: a cycle through stream " + std::to_string(stream));
}

void check_shared_prefixes(const Case& c) {
  for (size_t i = 0; i < c.shared_prefixes.size(); ++i) {
    const SharedPrefix& p = c.shared_prefixes[i];
    const std::string at = "shared_prefixes[" + std::to_string(i) + "]";
    const auto in_range = [](int64_t s) { return s >= 0 && s <= (int64_t{1} << 30); };
    if (!in_range(p.stream) || !in_range(p.from)) throw std::logic_error(at + ": streams must lie in [0, 2^30]");
    if (p.stream == p.from) throw std::logic_error(at + ".from = " + std::to_string(p.from) + ": names its own stream");
    if (p.tokens < 1 || p.tokens > (int64_t{1} << 40)) throw std::logic_error(at + ".tokens: must lie in [1, 2^40]");
    for (size_t j = 0; j < i; ++j) {
      if (c.shared_prefixes[j].stream == p.stream) {
        throw std::logic_error(at + ".stream = " + std::to_string(p.stream) + ": already has a shared prefix");
      }
    }
  }
  for (const SharedPrefix& p : c.shared_prefixes) (void)data_stream(c, p.stream, 0);  // throws on a cycle
}

void input_row(const Case& c, Tensor t, int layer, int stream, int64_t index, int head, float* out) {
  const int D = c.config.head_dim;
  if (!c.shared_prefixes.empty()) stream = data_stream(c, stream, index);
  if (t != Tensor::q) {
    if (c.zero_rows_every > 0 && index % c.zero_rows_every == c.zero_rows_every - 1) {
      std::fill(out, out + D, 0.0f);
      return;
    }
    head /= c.kv_head_repeat;
  }
  const uint64_t seed = c.seed ^ salt_of(c.layer_salt, static_cast<size_t>(layer)) ^
                        (salt_of(c.stream_salt, static_cast<size_t>(stream)) * 0x100000001b3ull);
  const auto base = [&](int d) {
    return symmetric_float(hash_coords(seed, static_cast<uint64_t>(t), static_cast<uint64_t>(layer),
                                       static_cast<uint64_t>(stream), static_cast<uint64_t>(index),
                                       static_cast<uint64_t>(head), static_cast<uint64_t>(d)));
  };
  if (c.data == DataMode::random) {
    const float amp = t == Tensor::v ? 1.0f : c.qk_amplitude;
    for (int d = 0; d < D; ++d) out[d] = amp * base(d);
    return;
  }
  // Needle mode.
  const LayerConfig& L = c.config.layers[static_cast<size_t>(layer)];
  if (t == Tensor::v) {  // values encode their token index: neighbours differ by O(1)
    for (int d = 0; d < D; ++d) {
      out[d] = static_cast<float>(std::sin(1.3 * static_cast<double>(index + 1) * (d + 1) + 0.7 * head));
    }
    return;
  }
  const double tau = softmax_scale(c.config);
  const auto amp = static_cast<float>(std::sqrt(12.0 / tau));  // planted logit tau * amp^2 = 12
  const std::vector<int64_t> targets = needle_targets(c, layer);
  const int64_t W = needle_window(c, layer), S = needle_sinks(c, layer);
  if (t == Tensor::q) {
    bool planted = false;
    for (size_t a = 0; a < targets.size(); ++a) {
      if (index != targets[a]) continue;
      planted = true;
      std::fill(out, out + D, 0.0f);
      const auto d0 = static_cast<int>(3 * a);
      out[d0] = amp;      // the just-evicted key t - W
      out[d0 + 1] = amp;  // the first visible key t - W + 1
      if (S > 0) out[d0 + 2] = amp;  // the first sink
    }
    if (!planted) {
      for (int d = 0; d < D; ++d) out[d] = 0.5f * base(d);
      return;
    }
  } else {  // k
    for (int d = 0; d < D; ++d) out[d] = 0.3f * base(d);
    for (size_t a = 0; a < targets.size(); ++a) {
      const auto d0 = static_cast<int>(3 * a);
      if (index == targets[a] - W) out[d0] = amp;
      if (index == targets[a] - W + 1) out[d0 + 1] = amp;
      if (S > 0 && index == 0) out[d0 + 2] = amp;  // the first sink: the first one a ring evicts
    }
  }
  unrotate_by_index(L.rope, D, index, out);
}

void fill_chunk(const Case& c, Tensor t, int stream, int64_t first, int64_t n, float* out) {
  const int H = t == Tensor::q ? c.config.num_q_heads : c.config.num_kv_heads;
  const int D = c.config.head_dim;
  float* p = out;
  for (int l = 0; l < static_cast<int>(c.config.layers.size()); ++l) {
    for (int64_t i = 0; i < n; ++i) {
      for (int h = 0; h < H; ++h, p += D) input_row(c, t, l, stream, first + i, h, p);
    }
  }
}

Case shaped_case(std::vector<LayerConfig> layers, int Hq, int Hkv, int D, DataMode data, uint64_t seed) {
  Case c;
  c.config.layers = std::move(layers);
  c.config.num_q_heads = Hq;
  c.config.num_kv_heads = Hkv;
  c.config.head_dim = D;
  c.data = data;
  c.seed = seed;
  return c;
}

std::vector<AppendedChunk> appended_chunks(const Case& c) {
  std::vector<AppendedChunk> chunks;
  ScheduleTracker tracker(c);
  std::vector<int64_t> p0(static_cast<size_t>(c.config.batch));
  for (int s = 0; s < c.config.batch; ++s) p0[static_cast<size_t>(s)] = start_position(c.config, s);
  for (size_t st = 0; st < c.steps.size(); ++st) {
    const StepPlan& step = c.steps[st];
    if (!tracker.honoured(step)) continue;
    tracker.apply(step);  // after it, a sequence holds the tokens before its chunk and the chunk
    for (const ResetPlan& r : step.resets) p0[static_cast<size_t>(r.sequence)] = r.start_position;
    for (int s = 0; s < c.config.batch; ++s) {
      const int64_t n = step.tokens[static_cast<size_t>(s)];
      if (n > 0) chunks.push_back({static_cast<int>(st), s, tracker.held(s) - n, n, p0[static_cast<size_t>(s)]});
    }
  }
  return chunks;
}

void check_schedule(const Case& c) {
  check_shared_prefixes(c);
  ScheduleTracker tracker(c);
  for (size_t s = 0; s < c.steps.size(); ++s) {
    try {
      if (tracker.honoured(c.steps[s])) tracker.apply(c.steps[s]);
    } catch (const std::logic_error& e) {
      throw std::logic_error("case: step " + std::to_string(s) + ": " + e.what());
    }
  }
}

ScheduleTracker::ScheduleTracker(const Case& c)
    : config_(&c.config),
      held_(static_cast<size_t>(c.config.batch), 0),
      stream_(static_cast<size_t>(c.config.batch)),
      high_water_(c.config.layers.size() * static_cast<size_t>(c.config.batch), 0) {
  for (int s = 0; s < c.config.batch; ++s) stream_[static_cast<size_t>(s)] = c.initial_stream(s);
}

bool ScheduleTracker::has_rollbacks(const Case& c) {
  for (const StepPlan& st : c.steps) {
    if (!st.rollbacks.empty()) return true;
  }
  return false;
}

bool ScheduleTracker::honoured(const StepPlan& step) const {
  const auto B = static_cast<size_t>(config_->batch);
  for (const RollbackPlan& r : step.rollbacks) {
    if (r.sequence < 0 || static_cast<size_t>(r.sequence) >= B) return true;  // apply() reports it
    const int64_t held = held_[static_cast<size_t>(r.sequence)];
    if (r.n_tokens < 1 || r.n_tokens > held) return true;  // apply() reports it
    const int64_t m = held - r.n_tokens;
    for (size_t l = 0; l < config_->layers.size(); ++l) {
      const int64_t H = high_water_[l * B + static_cast<size_t>(r.sequence)];
      if (!layer_honours_rollback(config_->layers[l], config_->max_tokens, m, H)) return false;
    }
  }
  return true;
}

void ScheduleTracker::apply(const StepPlan& step) {
  const int B = config_->batch;
  const auto in_batch = [&](int s, const char* what) {
    if (s < 0 || s >= B) {
      throw std::logic_error(std::string(what) + " sequence " + std::to_string(s) + ", outside [0, batch = " +
                             std::to_string(B) + ")");
    }
    return static_cast<size_t>(s);
  };
  if (step.tokens.size() != static_cast<size_t>(B)) throw std::logic_error("tokens size != batch");
  for (const RollbackPlan& r : step.rollbacks) {
    const size_t s = in_batch(r.sequence, "rolls back");
    if (r.n_tokens < 1 || r.n_tokens > held_[s]) {
      throw std::logic_error("rolls back " + std::to_string(r.n_tokens) + " of the " + std::to_string(held_[s]) +
                             " tokens sequence " + std::to_string(r.sequence) + " holds");
    }
    held_[s] -= r.n_tokens;
    stream_[s] = r.stream;
    for (size_t l = 0; l < config_->layers.size(); ++l) {
      int64_t& H = high_water_[l * static_cast<size_t>(B) + s];
      H = high_water_after_rollback(config_->layers[l], held_[s], H);
    }
  }
  for (const ResetPlan& r : step.resets) {
    const size_t s = in_batch(r.sequence, "resets");
    held_[s] = 0;
    stream_[s] = r.stream;
    for (size_t l = 0; l < config_->layers.size(); ++l) high_water_[l * static_cast<size_t>(B) + s] = 0;
  }
  for (int q = 0; q < B; ++q) {
    const auto s = static_cast<size_t>(q);
    if (step.tokens[s] < 0) throw std::logic_error("appends a negative token count");
    held_[s] += step.tokens[s];
    if (held_[s] > config_->max_tokens) throw std::logic_error("schedule exceeds max_tokens");
    for (size_t l = 0; l < config_->layers.size(); ++l) {
      int64_t& H = high_water_[l * static_cast<size_t>(B) + s];
      H = std::max(H, held_[s]);
    }
  }
}

std::string Case::id() const {
  const Config& c = config;
  std::ostringstream os;
  os << "L=" << c.layers.size() << "[";
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const LayerConfig& L = c.layers[l];
    if (l) os << ",";
    os << "W" << L.window << "S" << L.sinks;
    if (L.rollback_reserve != 0) os << "Q" << L.rollback_reserve;  // spec 1.1; absent for spec 1 layers
    os << ":" << to_string(L.rope.style);
    if (L.rope.style != RopeStyle::none) {
      os << ":th" << show_number(L.rope.theta) << ":R" << rotary_dim(L.rope, c.head_dim);
      if (L.rope.scaling != RopeScaling::none) os << ":" << to_string(L.rope.scaling) << show_number(L.rope.factor);
    }
  }
  os << "]/Hq=" << c.num_q_heads << "/Hkv=" << c.num_kv_heads << "/D=" << c.head_dim << "/B=" << c.batch
     << "/T=" << c.max_tokens << "/K=" << to_string(c.k_format) << "/V=" << to_string(c.v_format)
     << "/scale=" << (c.softmax_scale ? show_number(*c.softmax_scale) : "auto")
     << "/cap=" << (c.softcap ? show_number(*c.softcap) : "none") << "/sinklogits=" << (c.sink_logits.empty() ? "no" : "yes")
     << "/p0=";
  for (int s = 0; s < c.batch; ++s) os << (s ? "," : "") << start_position(c, s);
  os << "/steps=";
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i) os << ";";
    for (const RollbackPlan& r : steps[i].rollbacks) os << "B" << r.sequence << "-" << r.n_tokens << "s" << r.stream << ":";
    for (const ResetPlan& r : steps[i].resets) os << "R" << r.sequence << "@" << r.start_position << "s" << r.stream << ":";
    for (size_t s = 0; s < steps[i].tokens.size(); ++s) os << (s ? "." : "") << steps[i].tokens[s];
  }
  os << "/data=" << to_string(data);
  if (data == DataMode::random) os << show_number(qk_amplitude);
  if (data == DataMode::needle && !needle_windows.empty()) {
    os << "/needles=";
    for (size_t l = 0; l < needle_windows.size(); ++l) os << (l ? "," : "") << "W" << needle_windows[l] << "S" << needle_sinks[l];
  }
  if (kv_head_repeat != 1) os << "/kvrepeat=" << kv_head_repeat;
  if (zero_rows_every != 0) os << "/zerorows=" << zero_rows_every;
  for (size_t l = 0; l < layer_salt.size(); ++l) if (layer_salt[l]) os << "/lsalt" << l << "=" << layer_salt[l];
  for (size_t s = 0; s < stream_salt.size(); ++s) if (stream_salt[s]) os << "/ssalt" << s << "=" << stream_salt[s];
  os << "/seed=" << seed;
  return os.str();
}

std::string Case::describe() const {
  std::ostringstream os;
  os << "case " << id() << "\n" << ringkv::describe(config) << "  data: " << to_string(data) << ", seed " << seed << "\n";
  for (const SharedPrefix& p : shared_prefixes) {
    os << "  stream " << p.stream << "'s tokens [0, " << p.tokens << ") repeat stream " << p.from << "'s\n";
  }
  std::vector<int64_t> seen(static_cast<size_t>(config.batch), 0);
  ScheduleTracker tracker(*this);
  for (size_t i = 0; i < steps.size(); ++i) {
    os << "  step " << i << ":";
    if (!tracker.honoured(steps[i])) {
      os << " refused (spec 1.1 §5.1.2):";
      for (const RollbackPlan& r : steps[i].rollbacks) os << " roll back seq " << r.sequence << " by " << r.n_tokens << ";";
      os << " nothing changes\n";
      continue;
    }
    try {
      tracker.apply(steps[i]);
    } catch (const std::logic_error&) {  // described as it stands; check_schedule reports it
    }
    for (const RollbackPlan& r : steps[i].rollbacks) {
      os << " roll back seq " << r.sequence << " by " << r.n_tokens << " (next tokens from stream " << r.stream << ");";
      seen[static_cast<size_t>(r.sequence)] -= r.n_tokens;
    }
    for (const ResetPlan& r : steps[i].resets) {
      os << " reset seq " << r.sequence << " to p0=" << r.start_position << " (stream " << r.stream << ");";
      seen[static_cast<size_t>(r.sequence)] = 0;
    }
    for (size_t s = 0; s < steps[i].tokens.size(); ++s) {
      const int64_t n = steps[i].tokens[s];
      if (n == 0) {
        os << " seq " << s << " sits out;";
      } else {
        os << " seq " << s << " tokens [" << seen[s] << ", " << seen[s] + n << ");";
      }
      seen[s] += n;
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace ringkv::conformance
