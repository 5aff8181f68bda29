#include "support/generators.hpp"

#include <algorithm>
#include <cmath>

#include "support/capabilities.hpp"
#include "support/rng.hpp"

namespace ringkv::conformance {
namespace {

// Categorical choices ignore RapidCheck's size ramp (which would favour the
// first options in early cases) but still shrink towards the first option.
int choice(int n) { return *rc::gen::resize(100, rc::gen::inRange(0, n)); }
template <typename T>
T pick_of(const std::vector<T>& options) {
  return options[static_cast<size_t>(choice(static_cast<int>(options.size())))];
}
template <typename T>
T pick(std::initializer_list<T> options) {
  return pick_of(std::vector<T>(options));
}

// True with probability 1/n: exactly when choice(n) would give 0, from the same draw (so the
// generated cases are the same), but shrinking towards false, the plain case. Options like a
// sequence sitting out a step or a second epoch must shrink away, not in: shrinking choice(n)
// towards 0 would add them, and a sit-out shrunk in adds a step whose new choices shrink in
// too, a shrink that never ends (issue 16).
bool rare(int n) {
  return *rc::Gen<bool>([n](const rc::Random& random, int) {
    const bool yes = rc::gen::inRange(0, n)(random, 100).value() == 0;
    return yes ? rc::shrinkable::just(true, rc::seq::just(rc::shrinkable::just(false))) : rc::shrinkable::just(false);
  });
}

template <typename T>
bool has(const std::vector<T>& v, T x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// A chunk length biased to the window's boundaries.
int64_t gen_chunk(int64_t W, int64_t remaining) {
  const int kind = choice(8);
  int64_t n = 1;
  switch (kind) {
    case 0: case 1: n = 1; break;
    case 2: n = W - 1; break;
    case 3: n = W; break;
    case 4: n = W + 1; break;
    case 5: n = 2 * W + 1 + *rc::gen::inRange<int64_t>(0, 4); break;
    default: n = *rc::gen::inRange<int64_t>(1, std::max<int64_t>(2, 2 * W)); break;
  }
  return std::clamp<int64_t>(n, 1, remaining);
}

// The dtype to fall back on: f32 where the engine runs it (as a dtype, or as a fixed declared storage
// that rounds what it is given), else its first declared one.
DType plain_dtype(const Capabilities& caps, bool is_k) {
  const auto& allowed = is_k ? caps.k_dtypes : caps.v_dtypes;
  const auto& fixed = is_k ? caps.k_storage : caps.v_storage;
  if (has(allowed, DType::f32) || fixed_storage_runs_f32(fixed) || allowed.empty()) return DType::f32;
  for (DType d : allowed) {
    if (d != DType::int8) return d;
  }
  return DType::f32;
}

KvFormat gen_format(const Capabilities& caps, int D, bool quantised, bool is_k) {
  KvFormat f;
  f.dtype = plain_dtype(caps, is_k);
  const auto& allowed = is_k ? caps.k_dtypes : caps.v_dtypes;
  if (!quantised) return f;
  const int which = choice(12);
  DType d = DType::f32;
  if (which >= 5 && which <= 6) d = DType::f16;
  if (which == 7) d = DType::bf16;
  if (which == 8) d = DType::fp8_e4m3;
  if (which == 9) d = DType::fp8_e5m2;
  if (which >= 10) d = DType::int8;
  if (!has(allowed, d)) d = plain_dtype(caps, is_k);
  f.dtype = d;
  if (d == DType::fp8_e4m3 || d == DType::fp8_e5m2) f.scale = pick({1.0f, 0.25f, 2.0f});
  if (d == DType::int8) {
    std::vector<Int8Scheme> schemes;
    for (Int8Scheme s : caps.int8_schemes) {
      if (s != Int8Scheme::q8_0 || D % 32 == 0) schemes.push_back(s);
    }
    if (schemes.empty() || caps.int8_roundings.empty()) {
      f.dtype = plain_dtype(caps, is_k);
      return f;
    }
    f.int8_scheme = pick_of(schemes);
    f.rounding = pick_of(caps.int8_roundings);
    if (f.int8_scheme == Int8Scheme::static_tensor) f.scale = pick({0.02f, 0.005f, 0.05f});
  }
  return f;
}

RopeConfig gen_rope(const Capabilities& caps, int D) {
  RopeConfig r;
  r.style = pick_of(caps.rope_styles);
  if (r.style == RopeStyle::none || D < 2 || (D % 2 != 0 && !caps.partial_rotary)) {  // odd D: rotary_dim D - 1
    r.style = RopeStyle::none;
    return r;
  }
  r.theta = pick({10000.0, 1000000.0, 500.0});
  const int kind = choice(4);
  if (kind == 3 && D >= 4 && caps.partial_rotary) {
    r.rotary_dim = std::max(2, (D / 2) & ~1);  // partial rotary
  } else {
    r.rotary_dim = (D % 2 == 0) ? 0 : D - 1;
  }
  const int R = r.rotary_dim == 0 ? D : r.rotary_dim;
  const int sc = choice(6);
  if (sc == 4 && has(caps.rope_scalings, RopeScaling::linear)) {
    r.scaling = RopeScaling::linear;
    r.factor = pick({2.0, 4.0, 8.0});
  } else if (sc == 5 && R > 2 && has(caps.rope_scalings, RopeScaling::ntk)) {
    r.scaling = RopeScaling::ntk;
    r.factor = pick({2.0, 4.0});
  }
  return r;
}

// K and V formats of a config within the capabilities (one format for both where they may not differ).
void gen_formats(const Capabilities& caps, const CaseOptions& opt, Config& cfg) {
  cfg.k_format = gen_format(caps, cfg.head_dim, opt.quantised, true);
  cfg.v_format = gen_format(caps, cfg.head_dim, opt.quantised, false);
  if (!caps.kv_formats_differ && !(cfg.k_format == cfg.v_format)) {
    if (has(caps.v_dtypes, cfg.k_format.dtype)) {
      cfg.v_format = cfg.k_format;
    } else if (has(caps.k_dtypes, cfg.v_format.dtype)) {
      cfg.k_format = cfg.v_format;
    } else {
      cfg.k_format = cfg.v_format = KvFormat{};
    }
  }
}

}  // namespace

rc::Gen<Case> gen_case(const Capabilities& caps, const CaseOptions& opt) {
  if (opt.rollbacks) return gen_rollback_case(caps, opt);
  return rc::gen::exec([caps, opt]() {
    Case c;
    Config& cfg = c.config;
    // ---- shape ----
    // W in [min_window, max_window]; above opt.max_window only when the engine takes no smaller W.
    const int64_t wmin = std::max<int64_t>(1, caps.min_window);
    const int64_t wmax = std::max(wmin, std::min(opt.max_window, caps.max_window));
    int64_t W;
    if (choice(3) == 0) {
      W = *rc::gen::inRange<int64_t>(wmin, wmax + 1);
    } else {
      W = std::clamp(pick<int64_t>({1, 2, 3, 4, 5, 8, 16, 7, 31, 32, 33, 64}), wmin, wmax);
    }
    const int64_t S = (opt.sinks && caps.sinks) ? pick<int64_t>({0, 0, 1, 4}) : 0;
    std::vector<int> dims = caps.head_dims;
    if (dims.empty()) dims = {4, 8, 16, 32, 64, 64, 128, 128, 6, 12, 256};
    cfg.head_dim = pick_of(dims);
    const int D = cfg.head_dim;
    const int ratio = pick({1, 2, 4, 8});
    cfg.num_kv_heads = D >= 128 ? 1 : pick({1, 2});
    cfg.num_q_heads = cfg.num_kv_heads * (D >= 128 ? std::min(ratio, 4) : ratio);
    cfg.batch = *rc::gen::inRange(1, std::max(1, std::min(opt.max_batch, caps.max_batch)) + 1);
    const int max_layers = std::min(opt.max_layers, caps.max_layers);
    const int L = (max_layers > 1 && rare(5)) ? *rc::gen::inRange(2, max_layers + 1) : 1;
    // ---- schedule sizes: up to 4W + S tokens per stream ----
    // (and positions 0 .. max_tokens - 1 within max_position)
    const int64_t cap_tokens = std::min<int64_t>({4 * W + S, caps.max_tokens, caps.max_position + 1});
    // Stream length: biased to the boundaries (the ring just full, one past it, two windows, the cap).
    int64_t longest = 1;
    switch (choice(5)) {
      case 0: longest = *rc::gen::inRange<int64_t>(1, cap_tokens + 1); break;
      case 1: longest = S + W + pick<int64_t>({-1, 0, 1, 2}); break;
      case 2: longest = S + 2 * W + pick<int64_t>({0, 1}); break;
      case 3: longest = S + 3 * W + *rc::gen::inRange<int64_t>(0, W + 1); break;
      default: longest = cap_tokens; break;
    }
    longest = std::clamp<int64_t>(longest, 1, cap_tokens);
    // Keep the oracle fast: shrink the batch, then the stream, to the work budget.
    const auto work = [&](int64_t tokens) {
      return tokens * std::min(tokens, W + S) * cfg.num_q_heads * D * L * cfg.batch;
    };
    while (work(longest) > opt.work_budget && cfg.batch > 1) --cfg.batch;
    while (work(longest) > opt.work_budget && longest > 1) longest = longest * 3 / 4;
    cfg.max_tokens = std::min({caps.max_tokens, caps.max_position + 1, longest + pick<int64_t>({0, 0, 1, 100})});

    // ---- layers ----
    for (int l = 0; l < L; ++l) {
      LayerConfig layer;
      layer.window = W;
      layer.sinks = S;
      if (l > 0) {
        const int kind = choice(3);
        if (kind == 0) layer.window = cfg.max_tokens + pick<int64_t>({0, 5});  // a global layer
        if (kind == 1 && caps.max_sliding_windows > 1) layer.window = *rc::gen::inRange<int64_t>(wmin, wmax + 1);
        layer.sinks = pick<int64_t>({0, S});
      }
      layer.rope = (l > 0 && !caps.per_layer_rope) ? cfg.layers[0].rope : gen_rope(caps, D);
      cfg.layers.push_back(layer);
    }
    // At most max_sliding_windows distinct sliding W: a layer that would add one more takes layer 0's.
    std::vector<int64_t> sliding;
    for (LayerConfig& layer : cfg.layers) {
      if (!is_sliding(layer, cfg)) continue;
      if (!has(sliding, layer.window) && static_cast<int64_t>(sliding.size()) >= caps.max_sliding_windows) layer.window = W;
      if (is_sliding(layer, cfg) && !has(sliding, layer.window)) sliding.push_back(layer.window);
    }
    // ---- formats, scale, softcap, sink logits ----
    gen_formats(caps, opt, cfg);
    if (rare(7)) cfg.softmax_scale = pick({0.05, 0.3, 1.0});
    if (opt.softcap && caps.softcap && rare(7)) cfg.softcap = pick({5.0, 20.0, 50.0});
    c.seed = *rc::gen::resize(100, rc::gen::inRange<uint64_t>(0, uint64_t{1} << 40));
    if (opt.sink_logits && caps.sink_logits && rare(7)) {
      CounterRng rng(c.seed ^ 0x51ull);
      cfg.sink_logits.assign(static_cast<size_t>(L), std::vector<float>(static_cast<size_t>(cfg.num_q_heads)));
      for (auto& layer : cfg.sink_logits) {
        for (float& x : layer) x = static_cast<float>(std::floor((rng.uniform() * 5.0 - 2.0) * 64.0) / 64.0);
      }
    }
    // ---- positions ----
    const int64_t p_hi = std::max<int64_t>(0, std::min(kMaxPosition, caps.max_position + 1) - cfg.max_tokens);
    const auto gen_p0 = [&]() -> int64_t {
      if (!caps.settable_p0) return 0;
      switch (choice(6)) {
        case 0: case 1: return 0;
        case 2: return std::min(p_hi, *rc::gen::inRange<int64_t>(0, 100));
        case 3: return std::min(p_hi, (int64_t{1} << 20) - *rc::gen::inRange<int64_t>(0, 8));
        case 4: return std::min(p_hi, (int64_t{1} << 24) + *rc::gen::inRange<int64_t>(0, 8));
        default: return std::max<int64_t>(0, p_hi - *rc::gen::inRange<int64_t>(0, 4));
      }
    };
    cfg.start_positions.resize(static_cast<size_t>(cfg.batch));
    for (int64_t& p : cfg.start_positions) p = gen_p0();

    // ---- schedule: per sequence a list of epochs (streams), each a list of chunks ----
    struct Epoch { int64_t p0; int stream; std::vector<int64_t> chunks; };
    std::vector<std::vector<Epoch>> plans(static_cast<size_t>(cfg.batch));
    int next_stream = cfg.batch;
    for (int s = 0; s < cfg.batch; ++s) {
      const int epochs = (opt.resets && rare(4)) ? 2 : 1;
      for (int e = 0; e < epochs; ++e) {
        Epoch ep;
        const int64_t total = (s == 0 && e == 0) ? longest : *rc::gen::inRange<int64_t>(1, longest + 1);
        if (e == 0) {
          ep.p0 = cfg.start_positions[static_cast<size_t>(s)];
          ep.stream = s;
        } else {
          const int64_t prev = plans[static_cast<size_t>(s)][0].p0;
          const int kind = choice(3);
          // Same p0, or past every old position (stale slots would then look visible), or a new one.
          ep.p0 = kind == 0 || !caps.settable_p0 ? prev
                  : kind == 1 ? std::min(p_hi, prev + cfg.max_tokens + *rc::gen::inRange<int64_t>(0, 50))
                              : gen_p0();
          ep.stream = next_stream++;
        }
        for (int64_t left = total; left > 0;) {
          const int64_t n = gen_chunk(W, left);
          ep.chunks.push_back(n);
          left -= n;
        }
        plans[static_cast<size_t>(s)].push_back(ep);
      }
    }
    // Interleave: every step, each sequence appends its next chunk or sits out.
    std::vector<size_t> epoch(static_cast<size_t>(cfg.batch), 0), chunk(static_cast<size_t>(cfg.batch), 0);
    for (;;) {
      bool any_left = false;
      for (int s = 0; s < cfg.batch; ++s) any_left = any_left || epoch[static_cast<size_t>(s)] < plans[static_cast<size_t>(s)].size();
      if (!any_left) break;
      StepPlan st;
      st.tokens.assign(static_cast<size_t>(cfg.batch), 0);
      for (int s = 0; s < cfg.batch; ++s) {
        const auto su = static_cast<size_t>(s);
        if (epoch[su] >= plans[su].size()) continue;
        if (opt.sit_out && cfg.batch > 1 && rare(4)) continue;
        const Epoch& ep = plans[su][epoch[su]];
        if (chunk[su] == 0 && epoch[su] > 0) st.resets.push_back({s, ep.p0, ep.stream});
        st.tokens[su] = ep.chunks[chunk[su]];
        if (++chunk[su] == ep.chunks.size()) {
          chunk[su] = 0;
          ++epoch[su];
        }
      }
      c.steps.push_back(st);
    }
    // ---- data ----
    if (!opt.random_data_only && choice(5) < 2) {
      c.data = DataMode::needle;
    } else {
      c.qk_amplitude = pick({2.0f, 0.5f, 8.0f});
    }
    return c;
  });
}

rc::Gen<Case> gen_rollback_case(const Capabilities& caps, const CaseOptions& opt) {
  return rc::gen::exec([caps, opt]() {
    // Sizes drawn whole from the first case on (not ramped up with RapidCheck's size): a rollback
    // bug needs a wrapped ring and a few steps to show; shrinking still goes to the smallest.
    const auto uniform = [](int64_t lo, int64_t hi) { return *rc::gen::resize(100, rc::gen::inRange<int64_t>(lo, hi)); };
    Case c;
    Config& cfg = c.config;
    // ---- shape: small windows, so that schedules wrap the ring several times ----
    const int64_t wmin = std::max<int64_t>(1, caps.min_window);
    const int64_t wmax = std::max(wmin, std::min<int64_t>({opt.max_window, caps.max_window, 9}));
    const int64_t W = choice(3) == 0 ? uniform(wmin, wmax + 1)
                                     : std::clamp(pick<int64_t>({4, 1, 2, 3, 5, 8}), wmin, wmax);
    const int64_t S = (opt.sinks && caps.sinks) ? pick<int64_t>({0, 1, 0, 2}) : 0;
    // Q: the reserve of the sliding layers; 0 where the engine has no rollback (then no rollbacks).
    const int64_t q_max = caps.rollback ? std::min<int64_t>(caps.max_rollback_reserve, 5) : 0;
    const int64_t Q = std::min(q_max, pick<int64_t>({2, 0, 1, 3, 4, 5}));
    std::vector<int> dims = caps.head_dims;
    if (dims.empty()) dims = {8, 4, 16};
    cfg.head_dim = pick_of(dims);
    const int D = cfg.head_dim;
    cfg.num_kv_heads = D >= 128 ? 1 : pick({1, 2});
    cfg.num_q_heads = cfg.num_kv_heads * pick({1, 2});
    cfg.batch = static_cast<int>(uniform(1, std::max(1, std::min({opt.max_batch, caps.max_batch, 3})) + 1));
    const int max_layers = std::min({opt.max_layers, caps.max_layers, 3});
    const int L = max_layers > 1 ? std::min(max_layers, pick({2, 1, 3})) : 1;
    cfg.max_tokens = std::min({caps.max_tokens, caps.max_position + 1, S + W + Q + uniform(4, 3 * W + 13)});
    // ---- layers: layer 0 slides with the reserve Q; later ones are global (they roll back too), or
    // slide with their own reserve, or repeat layer 0 ----
    for (int l = 0; l < L; ++l) {
      LayerConfig layer;
      layer.window = W;
      layer.sinks = S;
      layer.rollback_reserve = Q;
      const int kind = l == 0 ? 2 : choice(3);
      if (kind == 0) {
        layer.window = cfg.max_tokens;
        layer.sinks = 0;
        layer.rollback_reserve = 0;
      } else if (kind == 1) {
        if (caps.max_sliding_windows > 1) layer.window = std::max(wmin, std::min(wmax, W / 2 + 1));
        layer.rollback_reserve = uniform(0, q_max + 1);
      }
      layer.rope = (l > 0 && !caps.per_layer_rope) ? cfg.layers[0].rope : gen_rope(caps, D);
      cfg.layers.push_back(layer);
    }
    gen_formats(caps, opt, cfg);
    c.seed = *rc::gen::resize(100, rc::gen::inRange<uint64_t>(0, uint64_t{1} << 40));
    const int64_t p_hi = std::max<int64_t>(0, std::min(kMaxPosition, caps.max_position + 1) - cfg.max_tokens);
    const auto gen_p0 = [&]() -> int64_t {
      return caps.settable_p0 ? std::min(p_hi, pick<int64_t>({0, 7, 0, 1000})) : 0;
    };
    cfg.start_positions.resize(static_cast<size_t>(cfg.batch));
    for (int64_t& p : cfg.start_positions) p = gen_p0();

    // ---- schedule: verify-then-accept steps, with rollbacks beyond the reserve, repeated rollbacks
    // against the high-water mark, chunks longer than W, resets and sit-outs ----
    ScheduleTracker tracker(c);
    int next_stream = cfg.batch;
    std::vector<int64_t> pending(static_cast<size_t>(cfg.batch), 0);  // drafts of the last verify chunk
    std::vector<bool> rolled(static_cast<size_t>(cfg.batch), false);  // rolled back in the last step
    const auto steps = static_cast<int>(uniform(4, 28));
    for (int st = 0; st < steps; ++st) {
      StepPlan plan;
      plan.tokens.assign(static_cast<size_t>(cfg.batch), 0);
      for (int s = 0; s < cfg.batch; ++s) {
        const auto su = static_cast<size_t>(s);
        const int64_t held = tracker.held(s);
        const int what = choice(12);
        if (opt.resets && what == 0 && held > 0) {  // a reset, then the start of a new stream
          plan.resets.push_back({s, gen_p0(), next_stream++});
          pending[su] = 0;
          rolled[su] = false;
          plan.tokens[su] = std::min<int64_t>(cfg.max_tokens, uniform(1, 4));
          continue;
        }
        int64_t back = 0;
        const bool can_roll_back = caps.rollback && held > 0;
        // Up to W + Q + 2 tokens; half the time up to Q + 2, around the reserve's edge.
        const auto beyond = [&] { return uniform(1, std::min<int64_t>(held, (choice(2) == 0 ? Q : W + Q) + 2) + 1); };
        // The smallest rollback layer 0 refuses now (0 if none): one past the reserve's edge.
        const auto first_refused = [&] {
          for (int64_t n = 1; n <= held; ++n) {
            if (!layer_honours_rollback(cfg.layers[0], cfg.max_tokens, held - n, tracker.high_water(0, s))) return n;
          }
          return int64_t{0};
        };
        if (can_roll_back && rolled[su] && what <= 6) {
          // Again right after a rollback: the rule counts from H, not from the length; half the time
          // exactly one past the edge, where the two differ once H > length.
          const int64_t edge = choice(2) == 0 ? first_refused() : 0;
          back = edge > 0 ? edge : beyond();
        } else if (can_roll_back && pending[su] > 0) {
          back = uniform(0, pending[su] + 1);  // reject the last `back` drafts
        } else if (can_roll_back && what <= 2) {
          back = beyond();  // beyond the drafts, up to W + Q + 2: honoured or refused
        }
        if (back > 0) plan.rollbacks.push_back({s, back, next_stream++});
        rolled[su] = back > 0;
        const int64_t room = cfg.max_tokens - (held - back);
        int64_t n = uniform(0, std::max<int64_t>(1, Q) + 1) + 1;  // a verify chunk of k + 1
        if (what == 11) n = W + 1 + uniform(0, W + 1);           // a chunk longer than W
        if (what == 10 && opt.sit_out && cfg.batch > 1) n = 0;                      // sits out
        plan.tokens[su] = std::min(room, n);
        pending[su] = std::max<int64_t>(0, plan.tokens[su] - 1);
      }
      if (!tracker.honoured(plan)) {
        // A refused step goes alone with one refused rollback, so that the refusal is that rollback's
        // alone; it changes nothing, and the schedule goes on from the state before it.
        StepPlan refused;
        refused.tokens.assign(static_cast<size_t>(cfg.batch), 0);
        for (const RollbackPlan& rb : plan.rollbacks) {
          refused.rollbacks = {rb};
          if (!tracker.honoured(refused)) break;
        }
        c.steps.push_back(refused);
        std::fill(pending.begin(), pending.end(), 0);
        continue;
      }
      tracker.apply(plan);
      c.steps.push_back(plan);
    }
    c.qk_amplitude = pick({2.0f, 0.5f, 8.0f});
    return c;
  });
}

namespace {
// Rebuilds a case's schedule with each stream's chunks re-cut by `recut`.
template <typename Recut>
Case rechunk(const Case& c, Recut recut) {
  Case out = c;
  out.steps.clear();
  const int B = c.config.batch;
  std::vector<int> stream(static_cast<size_t>(B));
  for (int s = 0; s < B; ++s) stream[static_cast<size_t>(s)] = c.initial_stream(s);
  // Collect per (sequence) the ordered epochs with their total token counts.
  for (const StepPlan& st : c.steps) {
    for (const ResetPlan& r : st.resets) {
      StepPlan reset_step;
      reset_step.tokens.assign(static_cast<size_t>(B), 0);
      reset_step.resets.push_back(r);
      out.steps.push_back(reset_step);
    }
    for (int s = 0; s < B; ++s) {
      const int64_t n = st.tokens[static_cast<size_t>(s)];
      if (n == 0) continue;
      recut(out, s, n);
    }
  }
  return out;
}
}  // namespace

Case token_by_token(const Case& c) {
  return rechunk(c, [](Case& out, int s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      StepPlan st;
      st.tokens.assign(static_cast<size_t>(out.config.batch), 0);
      st.tokens[static_cast<size_t>(s)] = 1;
      out.steps.push_back(st);
    }
  });
}

Case one_chunk_per_stream(const Case& c) {
  // Merge consecutive chunks of the same stream into one step (resets split streams).
  Case out = c;
  out.steps.clear();
  const int B = c.config.batch;
  std::vector<int64_t> pending(static_cast<size_t>(B), 0);
  const auto flush = [&](int s) {
    if (pending[static_cast<size_t>(s)] == 0) return;
    StepPlan st;
    st.tokens.assign(static_cast<size_t>(B), 0);
    st.tokens[static_cast<size_t>(s)] = pending[static_cast<size_t>(s)];
    out.steps.push_back(st);
    pending[static_cast<size_t>(s)] = 0;
  };
  for (const StepPlan& st : c.steps) {
    for (const ResetPlan& r : st.resets) {
      flush(r.sequence);
      StepPlan reset_step;
      reset_step.tokens.assign(static_cast<size_t>(B), 0);
      reset_step.resets.push_back(r);
      out.steps.push_back(reset_step);
    }
    for (int s = 0; s < B; ++s) pending[static_cast<size_t>(s)] += st.tokens[static_cast<size_t>(s)];
  }
  for (int s = 0; s < B; ++s) flush(s);
  return out;
}

}  // namespace ringkv::conformance
