// Tests of ReferenceEngine's step validation (spec §5, §12.2) and of a few exact
// behaviours: W = 1 outputs, a lone token's output, the snapshot's ring layout,
// info() and cache_bytes().
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ringkv/config.hpp"
#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/reference_engine.hpp"
#include "ringkv/rope.hpp"

namespace {

using ringkv::Config;
using ringkv::DType;
using ringkv::ReferenceEngine;
using ringkv::RopeStyle;
using ringkv::SequenceReset;
using ringkv::SequenceStep;
using ringkv::StepBatch;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

/// Two layers (W=3 S=1 neox; W=2 S=0 gptj with R=4), GQA 4/2, D = 8, batch 2, max_tokens 6.
Config small_config() {
  Config c;
  c.layers.resize(2);
  c.layers[0].window = 3;
  c.layers[0].sinks = 1;
  c.layers[0].rope.style = RopeStyle::neox;
  c.layers[1].window = 2;
  c.layers[1].sinks = 0;
  c.layers[1].rope.style = RopeStyle::gptj;
  c.layers[1].rope.rotary_dim = 4;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.batch = 2;
  c.max_tokens = 6;
  return c;
}

/// The inputs and output buffer of one append.
struct Chunk {
  int sequence = 0;
  int64_t n = 0;
  std::vector<float> q, k, v, out;

  SequenceStep step() { return SequenceStep{sequence, n, q.data(), k.data(), v.data(), out.data()}; }
  size_t q_index(const Config& c, int64_t layer, int64_t token, int head, int dim) const {
    return static_cast<size_t>(((layer * n + token) * c.num_q_heads + head) * c.head_dim + dim);
  }
  size_t kv_index(const Config& c, int64_t layer, int64_t token, int head, int dim) const {
    return static_cast<size_t>(((layer * n + token) * c.num_kv_heads + head) * c.head_dim + dim);
  }
};

Chunk make_chunk(const Config& c, int sequence, int64_t n, uint32_t seed, float q_scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto L = static_cast<int64_t>(c.layers.size());
  const auto nq = static_cast<size_t>(L * n * c.num_q_heads * c.head_dim);
  const auto nkv = static_cast<size_t>(L * n * c.num_kv_heads * c.head_dim);
  Chunk ch;
  ch.sequence = sequence;
  ch.n = n;
  ch.q.resize(nq);
  ch.k.resize(nkv);
  ch.v.resize(nkv);
  ch.out.assign(nq, -777.0f);
  for (float& x : ch.q) x = q_scale * normal(rng);
  for (float& x : ch.k) x = normal(rng);
  for (float& x : ch.v) x = normal(rng);
  return ch;
}

void run(ringkv::Engine& e, std::vector<SequenceReset> resets, std::vector<Chunk*> chunks) {
  std::vector<SequenceStep> steps;
  for (Chunk* ch : chunks) steps.push_back(ch->step());
  e.step(StepBatch{std::span<const SequenceReset>(resets), std::span<const SequenceStep>(steps)});
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

::testing::AssertionResult same_state(const ReferenceEngine& a, const ReferenceEngine& b) {
  const Config& c = a.config();
  for (int s = 0; s < c.batch; ++s) {
    if (a.tokens_seen(s) != b.tokens_seen(s)) {
      return ::testing::AssertionFailure() << "tokens_seen(" << s << "): " << a.tokens_seen(s) << " vs "
                                           << b.tokens_seen(s);
    }
    for (int l = 0; l < static_cast<int>(c.layers.size()); ++l) {
      const auto x = a.snapshot(l, s), y = b.snapshot(l, s);
      if (x->positions != y->positions) return ::testing::AssertionFailure() << "positions of layer " << l << " seq " << s;
      if (!same_bits(x->k, y->k) || !same_bits(x->v, y->v)) {
        return ::testing::AssertionFailure() << "stored K/V of layer " << l << " seq " << s;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

/// Runs a step that must be rejected with a StepError naming every part, then checks
/// that it changed nothing: a following valid step gives the same bits and state as on
/// an engine that never saw the bad step.
class StepValidation : public ::testing::Test {
 protected:
  StepValidation() : config_(small_config()), engine_(config_), fresh_(config_) {
    // The same warm-up on both: sequence 0 holds 2 tokens, sequence 1 holds 1.
    for (ReferenceEngine* e : {&engine_, &fresh_}) {
      Chunk a = make_chunk(config_, 0, 2, 1), b = make_chunk(config_, 1, 1, 2);
      run(*e, {}, {&a, &b});
    }
  }

  ::testing::AssertionResult rejected(const std::vector<SequenceReset>& resets, std::vector<Chunk*> chunks,
                                      std::initializer_list<std::string> parts) {
    std::string message;
    try {
      run(engine_, resets, std::move(chunks));
      return ::testing::AssertionFailure() << "step was accepted";
    } catch (const ringkv::StepError& e) {
      message = e.what();
    } catch (const std::exception& e) {
      return ::testing::AssertionFailure() << "threw something other than StepError: " << e.what();
    }
    for (const std::string& part : parts) {
      if (message.find(part) == std::string::npos) {
        return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << part << "\"";
      }
    }
    return ::testing::AssertionSuccess() << message;
  }

  ::testing::AssertionResult unchanged() {
    const auto state = same_state(engine_, fresh_);
    if (!state) return state;
    Chunk a1 = make_chunk(config_, 0, 1, 50), b1 = make_chunk(config_, 1, 2, 51);
    Chunk a2 = a1, b2 = b1;
    run(engine_, {}, {&a1, &b1});
    run(fresh_, {}, {&a2, &b2});
    if (!same_bits(a1.out, a2.out) || !same_bits(b1.out, b2.out)) {
      return ::testing::AssertionFailure() << "a following valid step gives different outputs";
    }
    return same_state(engine_, fresh_);
  }

  Config config_;
  ReferenceEngine engine_;
  ReferenceEngine fresh_;
};

}  // namespace

// ---------------------------------------------------------------- rejected steps

TEST_F(StepValidation, AppendSequenceOutOfRange) {
  Chunk bad = make_chunk(config_, 2, 1, 3);
  EXPECT_TRUE(rejected({}, {&bad}, {"step.appends[0].sequence = 2", "must be in [0, batch = 2)"}));
  bad.sequence = -1;
  EXPECT_TRUE(rejected({}, {&bad}, {"step.appends[0].sequence = -1", "must be in [0, batch = 2)"}));
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, ResetSequenceOutOfRange) {
  EXPECT_TRUE(rejected({SequenceReset{5, 0}}, {}, {"step.resets[0].sequence = 5", "must be in [0, batch = 2)"}));
  EXPECT_TRUE(rejected({SequenceReset{0, 0}, SequenceReset{-1, 0}}, {}, {"step.resets[1].sequence = -1"}));
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, ZeroTokens) {
  Chunk bad = make_chunk(config_, 1, 1, 3);
  bad.n = 0;
  EXPECT_TRUE(rejected({}, {&bad}, {"step.appends[0].n_tokens = 0", "must be in [1, 5]", "sequence 1"}));
  bad.n = -3;
  EXPECT_TRUE(rejected({}, {&bad}, {"step.appends[0].n_tokens = -3", "must be in [1, 5]"}));
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, TokensBeyondMaxTokens) {
  // Sequence 0 holds 2 of 6: at most 4 more.
  Chunk bad = make_chunk(config_, 0, 5, 3);
  EXPECT_TRUE(rejected({}, {&bad},
                       {"step.appends[0].n_tokens = 5", "must be in [1, 4]", "sequence 0", "holds 2", "max_tokens = 6"}));
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, NullPointers) {
  for (int which = 0; which < 4; ++which) {
    Chunk bad = make_chunk(config_, 0, 1, 3);
    SequenceStep s = bad.step();
    if (which == 0) s.q = nullptr;
    if (which == 1) s.k = nullptr;
    if (which == 2) s.v = nullptr;
    if (which == 3) s.out = nullptr;
    std::string message;
    try {
      engine_.step(StepBatch{{}, std::span<const SequenceStep>(&s, 1)});
      ADD_FAILURE() << "null pointer " << which << " accepted";
    } catch (const ringkv::StepError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("step.appends[0].q/k/v/out = null"), std::string::npos) << message;
    EXPECT_NE(message.find("non-null"), std::string::npos) << message;
  }
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, NaNInQ) {
  Chunk bad = make_chunk(config_, 0, 1, 3);
  bad.q[bad.q_index(config_, 1, 0, 3, 5)] = kNaN;
  EXPECT_TRUE(rejected({}, {&bad}, {"step.appends[0].q[layer 1][token 0][head 3][dim 5] = nan: must be finite"}));
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, InfInK) {
  Chunk bad = make_chunk(config_, 1, 2, 3);
  bad.k[bad.kv_index(config_, 0, 1, 1, 2)] = kInf;
  EXPECT_TRUE(rejected({}, {&bad}, {"step.appends[0].k[layer 0][token 1][head 1][dim 2] = inf: must be finite"}));
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, MinusInfInV) {
  Chunk bad = make_chunk(config_, 0, 1, 3);
  bad.v[bad.kv_index(config_, 1, 0, 0, 7)] = -kInf;
  EXPECT_TRUE(rejected({}, {&bad}, {"step.appends[0].v[layer 1][token 0][head 0][dim 7] = -inf: must be finite"}));
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, ABadSecondAppendLeavesTheValidFirstOneUnapplied) {
  Chunk good = make_chunk(config_, 0, 1, 3);
  Chunk bad = make_chunk(config_, 1, 1, 4);
  bad.v[bad.kv_index(config_, 0, 0, 1, 0)] = kNaN;
  EXPECT_TRUE(rejected({}, {&good, &bad}, {"step.appends[1].v[layer 0][token 0][head 1][dim 0] = nan: must be finite"}));
  EXPECT_EQ(engine_.tokens_seen(0), 2);
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, DuplicateSequenceInOneStep) {
  Chunk a = make_chunk(config_, 0, 1, 3), b = make_chunk(config_, 0, 1, 4);
  EXPECT_TRUE(rejected({}, {&a, &b}, {"step.appends[1].sequence = 0", "appears twice"}));
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, ResetWithBadStartPosition) {
  // max_tokens = 6: p0 must be in [0, 2^31 - 6] = [0, 2147483642].
  EXPECT_TRUE(rejected({SequenceReset{0, -1}}, {},
                       {"step.resets[0].start_position = -1", "must be in [0, 2147483642]", "max_tokens = 6"}));
  Chunk a = make_chunk(config_, 1, 1, 3);
  EXPECT_TRUE(rejected({SequenceReset{1, 0}, SequenceReset{0, 2147483643}}, {&a},
                       {"step.resets[1].start_position = 2147483643", "must be in [0, 2147483642]"}));
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, ResetMethodWithBadStartPosition) {
  try {
    engine_.reset(1, -7);
    ADD_FAILURE() << "accepted";
  } catch (const ringkv::StepError& e) {
    EXPECT_NE(std::string(e.what()).find("start_position = -7"), std::string::npos) << e.what();
  }
  EXPECT_THROW(engine_.reset(2, 0), ringkv::StepError);
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, DuplicateReset) {
  EXPECT_TRUE(rejected({SequenceReset{1, 0}, SequenceReset{1, 3}}, {}, {"step.resets[1].sequence = 1", "reset twice"}));
  EXPECT_TRUE(unchanged());
}

TEST_F(StepValidation, ValidStepsStillWork) {
  // A reset makes room: sequence 0 (holding 2) may take max_tokens = 6 tokens in the same step.
  Chunk a = make_chunk(config_, 0, 6, 3);
  EXPECT_NO_THROW(run(engine_, {SequenceReset{0, 10}}, {&a}));
  EXPECT_EQ(engine_.tokens_seen(0), 6);
  EXPECT_EQ(engine_.tokens_seen(1), 1);
  // Now it is full: one more token is rejected until the next reset.
  Chunk b = make_chunk(config_, 0, 1, 4);
  EXPECT_TRUE(rejected({}, {&b}, {"step.appends[0].n_tokens = 1", "must be in [1, 0]", "holds 6"}));
  // An empty step is valid and changes nothing.
  EXPECT_NO_THROW(run(engine_, {}, {}));
}

TEST_F(StepValidation, SnapshotOutOfRange) {
  EXPECT_THROW((void)engine_.snapshot(2, 0), ringkv::StepError);
  EXPECT_THROW((void)engine_.snapshot(-1, 0), ringkv::StepError);
  EXPECT_THROW((void)engine_.snapshot(0, 2), ringkv::StepError);
  EXPECT_THROW((void)engine_.snapshot(0, -1), ringkv::StepError);
  EXPECT_TRUE(engine_.snapshot(1, 1).has_value());
}

// ---------------------------------------------------------------- exact outputs

TEST(EngineOutputs, WindowOneNoSinksOutputsTheTokensOwnValue) {
  Config c = small_config();
  c.layers[0].window = 1;
  c.layers[0].sinks = 0;
  c.layers[1].window = 1;
  c.batch = 1;
  c.max_tokens = 64;
  c.softcap = 5.0;
  ReferenceEngine e(c);
  uint32_t seed = 10;
  for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{5}, int64_t{1}, int64_t{7}}) {
    Chunk ch = make_chunk(c, 0, n, seed++, 100.0f);  // large q: any q gives P = 1
    run(e, {}, {&ch});
    for (int64_t l = 0; l < 2; ++l) {
      for (int64_t t = 0; t < n; ++t) {
        for (int h = 0; h < c.num_q_heads; ++h) {
          for (int d = 0; d < c.head_dim; ++d) {
            const float got = ch.out[ch.q_index(c, l, t, h, d)];
            const float want = ch.v[ch.kv_index(c, l, t, h / 2, d)];  // kv head of q head h: h / G, G = 2
            ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
                << "layer " << l << " token " << t << " head " << h << " dim " << d;
          }
        }
      }
    }
  }
}

TEST(EngineOutputs, ASingleTokenOutputsItsOwnStoredValue) {
  for (const DType vd : {DType::f32, DType::f16, DType::bf16, DType::int8}) {
    Config c = small_config();
    c.layers[0].window = 4;
    c.layers[0].sinks = 2;
    c.v_format.dtype = vd;
    c.k_format.dtype = DType::f16;
    c.softmax_scale = 2.0;
    ReferenceEngine e(c);
    for (int round = 0; round < 2; ++round) {
      // The first token after creation, then after a reset: it sees only itself.
      if (round == 1) e.reset(1, 1000);
      Chunk ch = make_chunk(c, 1, 1, 20u + static_cast<uint32_t>(round), 30.0f);
      run(e, {}, {&ch});
      for (int64_t l = 0; l < 2; ++l) {
        for (int h = 0; h < c.num_q_heads; ++h) {
          std::vector<float> want(static_cast<size_t>(c.head_dim));
          ringkv::store_round_trip(c.v_format, c.head_dim, &ch.v[ch.kv_index(c, l, 0, h / 2, 0)], want.data());
          for (int d = 0; d < c.head_dim; ++d) {
            EXPECT_EQ(ch.out[ch.q_index(c, l, 0, h, d)], want[static_cast<size_t>(d)])
                << ringkv::to_string(vd) << " layer " << l << " head " << h << " dim " << d;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------- snapshot

TEST(EngineSnapshot, PositionsFollowTheSpecRingAndValuesAreTheStoredRotatedK) {
  // spec §3 worked example: S = 1, W = 3, C = 4, p0 = 100 (sequence 1) and 0 (sequence 0).
  Config c;
  c.layers.resize(1);
  c.layers[0].window = 3;
  c.layers[0].sinks = 1;
  c.layers[0].rope.style = RopeStyle::neox;
  c.num_q_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.batch = 2;
  c.max_tokens = 20;
  c.start_positions = {0, 100};
  c.k_format.dtype = DType::int8;  // per_head
  c.v_format.dtype = DType::f16;
  ReferenceEngine e(c);

  const std::vector<std::vector<int64_t>> table{
      {100, -1, -1, -1},   {100, 101, -1, -1},  {100, 101, 102, -1}, {100, 101, 102, 103},
      {100, 104, 102, 103}, {100, 104, 105, 103}, {100, 104, 105, 106}, {100, 107, 105, 106},
  };
  auto snap = e.snapshot(0, 1);
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->capacity, 4);
  EXPECT_EQ(snap->num_kv_heads, 2);
  EXPECT_EQ(snap->head_dim, 8);
  EXPECT_EQ(snap->positions, (std::vector<int64_t>{-1, -1, -1, -1}));

  // Sequence 1 in chunks of 1, 3 and 4 tokens; sequence 0 token by token, interleaved.
  std::vector<Chunk> history;  // sequence 1's chunks, for the expected values
  int64_t seq0_tokens = 0;
  uint32_t seed = 100;
  for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{4}}) {
    history.push_back(make_chunk(c, 1, n, seed++));
    run(e, {}, {&history.back()});
    for (int t = 0; t < 2; ++t) {
      Chunk s0 = make_chunk(c, 0, 1, seed++);
      run(e, {}, {&s0});
      std::vector<int64_t> want = table[static_cast<size_t>(seq0_tokens++)];
      for (int64_t& p : want) p = p < 0 ? -1 : p - 100;
      EXPECT_EQ(e.snapshot(0, 0)->positions, want) << "sequence 0 after token " << seq0_tokens - 1;
    }
    const int64_t seen = e.tokens_seen(1);
    EXPECT_EQ(e.snapshot(0, 1)->positions, table[static_cast<size_t>(seen - 1)]) << "after " << seen << " tokens";
  }

  // Decoded values: slot -> token index j = position - 100, found in the chunk history.
  snap = e.snapshot(0, 1);
  const int D = c.head_dim, H = c.num_kv_heads;
  ASSERT_EQ(snap->k.size(), size_t{4 * 2 * 8});
  ASSERT_EQ(snap->k_codes.size(), size_t{4 * 2 * 8});
  ASSERT_EQ(snap->k_scales.size(), size_t{4 * 2 * 1});
  EXPECT_TRUE(snap->v_codes.empty());
  EXPECT_TRUE(snap->v_scales.empty());
  for (size_t slot = 0; slot < 4; ++slot) {
    const int64_t p = snap->positions[slot];
    int64_t j = p - 100;
    const Chunk* ch = nullptr;
    for (const Chunk& h : history) {
      if (j < h.n) {
        ch = &h;
        break;
      }
      j -= h.n;
    }
    ASSERT_NE(ch, nullptr);
    std::vector<double> cs(8), sn(8);
    ringkv::rope_angles(c.layers[0].rope, D, p, cs.data(), sn.data());
    for (int h = 0; h < H; ++h) {
      std::vector<float> rotated(8), want_k(8), want_v(8);
      ringkv::rope_rotate(c.layers[0].rope, D, cs.data(), sn.data(), &ch->k[ch->kv_index(c, 0, j, h, 0)], rotated.data());
      ringkv::store_round_trip(c.k_format, D, rotated.data(), want_k.data());
      ringkv::store_round_trip(c.v_format, D, &ch->v[ch->kv_index(c, 0, j, h, 0)], want_v.data());
      std::vector<int8_t> codes(8);
      const ringkv::Int8Group g = ringkv::int8_quantise_group(c.k_format, rotated.data(), D, codes.data());
      const size_t row = (slot * static_cast<size_t>(H) + static_cast<size_t>(h)) * 8;
      for (size_t d = 0; d < 8; ++d) {
        EXPECT_EQ(snap->k[row + d], want_k[d]) << "slot " << slot << " head " << h << " dim " << d;
        EXPECT_EQ(snap->v[row + d], want_v[d]) << "slot " << slot << " head " << h << " dim " << d;
        EXPECT_EQ(int{snap->k_codes[row + d]}, int{codes[d]}) << "slot " << slot << " head " << h << " dim " << d;
      }
      EXPECT_EQ(snap->k_scales[slot * 2 + static_cast<size_t>(h)], g.stored_scale);
    }
  }

  // A reset empties the ring; the next token lands in slot 0 at the new p0.
  e.reset(1, 500);
  EXPECT_EQ(e.snapshot(0, 1)->positions, (std::vector<int64_t>{-1, -1, -1, -1}));
  EXPECT_EQ(e.tokens_seen(1), 0);
  Chunk after = make_chunk(c, 1, 1, 999);
  run(e, {}, {&after});
  EXPECT_EQ(e.snapshot(0, 1)->positions, (std::vector<int64_t>{500, -1, -1, -1}));
  // Sequence 0 was not touched by sequence 1's reset.
  EXPECT_EQ(e.snapshot(0, 0)->positions, (std::vector<int64_t>{0, 4, 5, 3}));
}

// ---------------------------------------------------------------- info and footprint

TEST(EngineInfo, NameDeterminismAndPrecision) {
  Config c = small_config();
  c.k_format.dtype = DType::int8;
  c.v_format.dtype = DType::f16;
  const ReferenceEngine e(c);
  const ringkv::EngineInfo info = e.info();
  EXPECT_EQ(info.name, "reference");
  EXPECT_TRUE(info.deterministic);
  EXPECT_EQ(info.precision.rope_angle, ringkv::Precision::f64);
  EXPECT_EQ(info.precision.q_dot, ringkv::Precision::f32);
  EXPECT_EQ(info.precision.qk_accumulator, ringkv::Precision::f32);
  EXPECT_EQ(info.precision.pv_accumulator, ringkv::Precision::f32);
  EXPECT_EQ(info.precision.output, ringkv::Precision::f32);
  EXPECT_EQ(info.precision.k_storage, ringkv::Precision::int8);
  EXPECT_EQ(info.precision.v_storage, ringkv::Precision::f16);
  EXPECT_EQ(ringkv::reference_engine_factory().name, "reference");
  EXPECT_EQ(ringkv::make_reference_engine(c)->info().name, "reference");
}

TEST(EngineFootprint, CacheBytesIsConstantAndMatchesTheFormula) {
  Config c = small_config();
  c.max_tokens = 200;
  c.k_format.dtype = DType::int8;
  c.k_format.int8_scheme = ringkv::Int8Scheme::per_head;
  c.v_format.dtype = DType::bf16;
  ReferenceEngine e(c);
  const size_t at_start = e.cache_bytes();
  // Formula: per ring C_l slots x Hkv x (D x (1 + 2) bytes + 1 scale x 4 bytes) + 8 bytes per slot.
  size_t want = 0;
  for (const ringkv::LayerConfig& layer : c.layers) {
    const auto C = static_cast<size_t>(ringkv::ring_capacity(layer, c.max_tokens));
    want += static_cast<size_t>(c.batch) * (C * 2 * (8 * 3 + 4) + C * 8);
  }
  EXPECT_EQ(at_start, want);
  size_t rings = 0;
  for (int l = 0; l < 2; ++l) {
    for (int s = 0; s < c.batch; ++s) rings += e.ring(l, s).footprint_bytes();
  }
  EXPECT_EQ(at_start, rings);
  for (int t = 0; t < 100; ++t) {
    Chunk ch = make_chunk(c, t % 2, 1, static_cast<uint32_t>(t));
    run(e, {}, {&ch});
  }
  EXPECT_EQ(e.cache_bytes(), at_start);
  e.reset(0, 7);
  EXPECT_EQ(e.cache_bytes(), at_start);
}
