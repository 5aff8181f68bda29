// The outputs file (file-exchange mode, docs/golden-format.md §7): the profile each file declares,
// cases declared unsupported, the engine's stored cache checked as §6 checks a snapshot, and RoPE
// checked apart from attention (rotated q and k: the rotation's own verdict, and attention judged
// from the engine's own rotated values with the bound's RoPE term off).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "golden/golden.hpp"
#include "golden/rope_verdict.hpp"
#include "mutants/mutants.hpp"
#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/reference_engine.hpp"
#include "ringkv/rope.hpp"
#include "support/capabilities.hpp"
#include "support/oracle.hpp"

namespace ringkv::golden {
namespace {

namespace fs = std::filesystem;

GoldenCase committed_case(const std::string& name) { return read_golden(std::string(RINGKV_GOLDEN_DIR) + "/cases/" + name + ".safetensors"); }

// Each test writes under its own folder: ctest runs the tests of this binary in parallel processes,
// and two tests writing the same file name (model_pos_2p24) read each other's half-written file.
std::string tmp_path(const std::string& name) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string folder = test ? std::string(test->test_suite_name()) + "." + test->name() : "outside_a_test";
  const fs::path dir = fs::path(RINGKV_GOLDEN_TMP) / folder;
  fs::create_directories(dir);
  return (dir / (name + ".safetensors")).string();
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// What a typical f16 engine declares (q, P and output in f16).
PrecisionProfile f16_output_profile() {
  PrecisionProfile p;
  p.q_dot = Precision::f16;
  p.p_before_pv = Precision::f16;
  p.output = Precision::f16;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Defect: the profile in an outputs file's metadata was ignored (the caller's was used).

TEST(OutputsProfile, EachFileIsJudgedUnderItsOwnProfile) {
  const GoldenCase g = committed_case("decode_w8");
  std::vector<float> out = g.expected;
  for (float& x : out) x = round_to_f16(x);  // an engine whose output is f16: honest only if it says so
  const std::string path = tmp_path("profile_f16");
  write_golden_outputs(path, g, out, "f16-out", f16_output_profile());
  const GoldenOutcome r = check_golden_outputs(g, path, PrecisionProfile{});  // the default: f32 everywhere
  EXPECT_TRUE(r.passed) << r.failure;
  EXPECT_TRUE(r.profile_from_file);
  ASSERT_TRUE(r.profile.has_value());
  EXPECT_EQ(*r.profile, f16_output_profile());
  // The same outputs with no profile in the file: the default applies, and f16 outputs fail it.
  write_golden_outputs(path, g, out, "f16-out");
  const GoldenOutcome d = check_golden_outputs(g, path, PrecisionProfile{});
  EXPECT_FALSE(d.passed);
  EXPECT_FALSE(d.profile_from_file);
  ASSERT_TRUE(d.profile.has_value());
  EXPECT_EQ(*d.profile, PrecisionProfile{});
  // ... and pass under a default that fits them.
  EXPECT_TRUE(check_golden_outputs(g, path, f16_output_profile()).passed);
  // A file's strict profile wins over a loose default.
  write_golden_outputs(path, g, out, "f16-out", PrecisionProfile{});
  const GoldenOutcome s = check_golden_outputs(g, path, f16_output_profile());
  EXPECT_FALSE(s.passed);
  EXPECT_TRUE(s.profile_from_file);
}

// ---------------------------------------------------------------------------------------------
// A case declared unsupported: skipped (not failed), no "out" needed; an empty reason is an error.

TEST(OutputsUnsupported, CountsAsSkippedWithItsReason) {
  const GoldenCase g = committed_case("int8_q8_0");
  GoldenOutputs o;
  o.engine = "no-int8";
  o.unsupported = "int8 q8_0 K/V not implemented";
  const std::string path = tmp_path("unsupported");
  write_golden_outputs(path, g, o);
  const GoldenOutputs back = read_golden_outputs(path, g);
  EXPECT_EQ(back.unsupported, o.unsupported);
  EXPECT_TRUE(back.out.empty());
  const GoldenOutcome r = check_golden_outputs(g, path, PrecisionProfile{});
  EXPECT_TRUE(r.skipped);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_TRUE(has(r.skip_reason, "int8 q8_0 K/V not implemented")) << r.skip_reason;
  // Without the key, a file without "out" is an error that names the tensor.
  o.unsupported.clear();
  write_golden_outputs(path, g, o);
  const GoldenOutcome m = check_golden_outputs(g, path, PrecisionProfile{});
  EXPECT_FALSE(m.passed);
  EXPECT_FALSE(m.skipped);
  EXPECT_TRUE(has(m.failure, "'out'")) << m.failure;
}

TEST(OutputsUnsupported, EmptyReasonIsRejected) {
  const GoldenCase g = committed_case("decode_w8");
  StFile f;
  f.metadata["format"] = kOutputsFormat;
  f.metadata["unsupported"] = "";
  const std::string path = tmp_path("unsupported_empty");
  write_safetensors(path, f);
  const GoldenOutcome r = check_golden_outputs(g, path, PrecisionProfile{});
  EXPECT_FALSE(r.passed);
  EXPECT_FALSE(r.skipped);
  EXPECT_TRUE(has(r.failure, "'unsupported' is empty")) << r.failure;
}

// ---------------------------------------------------------------------------------------------
// The engine's stored cache per row: the §6 checks (codes, ties, scales, signed zero, rotated K).

GoldenOutputs with_stored(const GoldenCase& g) {
  GoldenOutputs o;
  o.out = g.expected;
  o.k_stored = g.k_stored;
  o.v_stored = g.v_stored;
  o.k_stored->tie.clear();
  o.v_stored->tie.clear();
  return o;
}

GoldenOutcome write_and_check(const GoldenCase& g, const GoldenOutputs& o, const std::string& name) {
  const std::string path = tmp_path(name);
  write_golden_outputs(path, g, o);
  return check_golden_outputs(g, path, PrecisionProfile{});
}

TEST(OutputsStored, TheSpecsCachePassesAndEveryElementIsChecked) {
  for (const char* name : {"int8_per_head", "int8_q8_0", "kv_f16", "k_int8_v_bf16", "rope_none"}) {
    const GoldenCase g = committed_case(name);
    const GoldenOutcome r = write_and_check(g, with_stored(g), std::string("stored_") + name);
    EXPECT_TRUE(r.passed) << name << ": " << r.failure;
    int64_t want = static_cast<int64_t>(g.k_stored.value.size() + g.v_stored.value.size());
    for (const GoldenStored* s : {&g.k_stored, &g.v_stored}) want += static_cast<int64_t>(s->codes.size() + s->scales.size());
    EXPECT_EQ(r.stored_checked, want) << name;
  }
}

TEST(OutputsStored, Int8CodesTiesScalesAndSignedZero) {
  const GoldenCase g = committed_case("int8_per_head");
  const GoldenStored& v = g.v_stored;
  // A code one off outside the tie window fails, naming the row, head and dim.
  size_t plain = 0;
  while (plain < v.tie.size() && (v.tie[plain] != 0 || v.codes[plain] == 127)) ++plain;
  ASSERT_LT(plain, v.tie.size());
  GoldenOutputs o = with_stored(g);
  o.v_stored->codes[plain] = static_cast<int8_t>(o.v_stored->codes[plain] + 1);
  GoldenOutcome r = write_and_check(g, o, "stored_code");
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.first.has_value()) << r.failure;
  EXPECT_EQ(r.first->what, "V code");
  const size_t D = static_cast<size_t>(g.c.config.head_dim), H = static_cast<size_t>(g.c.config.num_kv_heads);
  EXPECT_EQ(r.first->dim, static_cast<int>(plain % D));
  EXPECT_EQ(r.first->head, static_cast<int>(plain / D % H));
  EXPECT_EQ(r.first->position, g.rows[plain / D / H % g.rows.size()].position);
  EXPECT_TRUE(has(r.failure, "stored cache")) << r.failure;
  // A scale one ulp off fails (exact: V has no RoPE).
  o = with_stored(g);
  o.v_stored->scales[0] = std::nextafter(o.v_stored->scales[0], 1.0f);
  r = write_and_check(g, o, "stored_scale");
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.first.has_value());
  EXPECT_EQ(r.first->what, "V scale");
  // Code 0 decodes to a zero of either sign (spec §10.4).
  size_t zero = 0;
  while (zero < v.codes.size() && v.codes[zero] != 0) ++zero;
  ASSERT_LT(zero, v.codes.size());
  o = with_stored(g);
  o.v_stored->value[zero] = -o.v_stored->value[zero];
  r = write_and_check(g, o, "stored_zero");
  EXPECT_TRUE(r.passed) << r.failure;
}

TEST(OutputsStored, Int8TieWindowAllowsEitherNeighbour) {
  // Find an element in the tie window in some committed INT8 case.
  for (const char* name : {"int8_per_head", "int8_q8_0", "int8_static", "d64_int8_batch_reset", "k_int8_v_bf16"}) {
    const GoldenCase g = committed_case(name);
    for (int pass = 0; pass < 2; ++pass) {
      const GoldenStored& s = pass == 0 ? g.k_stored : g.v_stored;
      for (size_t i = 0; i < s.tie.size(); ++i) {
        if (s.tie[i] == 0) continue;
        const KvFormat& f = pass == 0 ? g.c.config.k_format : g.c.config.v_format;
        const int D = g.c.config.head_dim;
        const int spr = scales_per_row(f, D);
        const float scale = spr == 0 ? f.scale : s.scales[i / static_cast<size_t>(D) * static_cast<size_t>(spr) +
                                                          (i % static_cast<size_t>(D)) / static_cast<size_t>(int8_group_size(f.int8_scheme, D))];
        GoldenOutputs o = with_stored(g);
        GoldenStored& e = pass == 0 ? *o.k_stored : *o.v_stored;
        const int step = s.codes[i] < 127 ? 1 : -1;
        e.codes[i] = static_cast<int8_t>(e.codes[i] + step);
        e.value[i] = int8_dequantise(e.codes[i], scale);
        const GoldenOutcome r = write_and_check(g, o, "stored_tie");
        EXPECT_TRUE(r.passed) << name << ": " << r.failure;
        return;
      }
    }
  }
  FAIL() << "no committed INT8 case has an element in the tie window";
}

TEST(OutputsStored, RotatedKWithinOneStepVExact) {
  const GoldenCase g = committed_case("kv_f16");  // neox RoPE, f16 K and V
  GoldenOutputs o = with_stored(g);
  size_t i = g.k_stored.value.size() / 2;
  while (std::fabs(g.k_stored.value[i]) < 0.01f) ++i;
  const float k = o.k_stored->value[i];
  o.k_stored->value[i] = std::nextafter(k, 2 * k);  // one f32 ulp: well inside one f16 step
  EXPECT_TRUE(write_and_check(g, o, "stored_k_ulp").passed);
  o.k_stored->value[i] = k + 3 * std::fabs(k) * 0x1p-10f;  // three f16 steps
  GoldenOutcome r = write_and_check(g, o, "stored_k_far");
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.first.has_value());
  EXPECT_EQ(r.first->what, "stored K");
  o = with_stored(g);
  o.v_stored->value[i] = std::nextafter(o.v_stored->value[i], 1e9f);  // V is exact, bit for bit
  r = write_and_check(g, o, "stored_v_ulp");
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.first.has_value());
  EXPECT_EQ(r.first->what, "stored V");
}

TEST(OutputsStored, MalformedTensorsAreRejectedByName) {
  const GoldenCase g = committed_case("int8_per_head");
  GoldenOutputs o = with_stored(g);
  o.k_stored->codes.clear();
  EXPECT_TRUE(has(write_and_check(g, o, "bad_codes").failure, "'k_codes' missing"));
  o = with_stored(g);
  o.v_stored->scales.clear();
  EXPECT_TRUE(has(write_and_check(g, o, "bad_scales").failure, "'v_scales' missing"));
  const GoldenCase f = committed_case("kv_f16");
  o = with_stored(f);
  o.k_stored->codes.assign(f.k_stored.value.size(), 0);
  EXPECT_TRUE(has(write_and_check(f, o, "bad_f16_codes").failure, "not int8"));
  o = with_stored(f);
  o.q_rot = f.q;  // q_rot without k_rot
  EXPECT_TRUE(has(write_and_check(f, o, "bad_rot").failure, "'q_rot' without 'k_rot'"));
}

// ---------------------------------------------------------------------------------------------
// RoPE checked apart from attention.

// A model engine, written here independently of the oracle's attention: full history per sequence,
// RoPE in f64 (spec §8) or with f32 angles (as most engines compute them), K/V stored as the spec
// says, softmax attention in double over the last W + extra keys and the sinks.
struct ModelRun {
  std::vector<float> out, q_rot, k_rot;
};

void rotate(const RopeConfig& rope, int D, int64_t position, bool f32_angles, const float* x, float* y) {
  if (!f32_angles || rope.style == RopeStyle::none) {
    std::vector<double> r(static_cast<size_t>(D));
    conformance::oracle_rope(rope, D, position, x, r.data());
    for (int d = 0; d < D; ++d) y[d] = static_cast<float>(r[static_cast<size_t>(d)]);
    return;
  }
  const int R = rope.rotary_dim == 0 ? D : rope.rotary_dim;
  const auto theta = static_cast<float>(rope_effective_theta(rope, R));
  const auto p = static_cast<float>(rope_scaled_position(rope, position));
  std::copy(x, x + D, y);
  for (int k = 0; k < R / 2; ++k) {
    const float angle = p * std::pow(theta, -static_cast<float>(2 * k) / static_cast<float>(R));
    const float c = std::cos(angle), s = std::sin(angle);
    const int a = rope.style == RopeStyle::neox ? k : 2 * k, b = rope.style == RopeStyle::neox ? k + R / 2 : 2 * k + 1;
    y[a] = x[a] * c - x[b] * s;
    y[b] = x[a] * s + x[b] * c;
  }
}

ModelRun run_model(const GoldenCase& g, bool f32_angles, int64_t window_extra) {
  const Config& cfg = g.c.config;
  const int D = cfg.head_dim, Hq = cfg.num_q_heads, Hkv = cfg.num_kv_heads;
  ModelRun m;
  m.out.resize(g.expected.size());
  m.q_rot.resize(g.q.size());
  m.k_rot.resize(g.k.size());
  std::vector<float> ks(g.k.size()), vs(g.v.size()), tie(static_cast<size_t>(D)), scales(static_cast<size_t>(D));
  std::vector<int8_t> codes(static_cast<size_t>(D));
  for (int l = 0; l < g.layers(); ++l) {
    const LayerConfig& L = cfg.layers[static_cast<size_t>(l)];
    std::vector<std::vector<int64_t>> hist(static_cast<size_t>(cfg.batch));
    for (int64_t row = 0; row < g.num_rows(); ++row) {
      const GoldenRow& gr = g.rows[static_cast<size_t>(row)];
      std::vector<int64_t>& h = hist[static_cast<size_t>(gr.sequence)];
      h.resize(static_cast<size_t>(gr.index));
      h.push_back(row);
      for (int kh = 0; kh < Hkv; ++kh) {
        const size_t o = g.kv_offset(l, row, kh);
        rotate(L.rope, D, gr.position, f32_angles, g.k.data() + o, m.k_rot.data() + o);
        conformance::oracle_store(cfg.k_format, D, m.k_rot.data() + o, ks.data() + o, tie.data(), codes.data(), scales.data());
        conformance::oracle_store(cfg.v_format, D, g.v.data() + o, vs.data() + o, tie.data(), codes.data(), scales.data());
      }
      const int64_t i = gr.index;
      for (int qh = 0; qh < Hq; ++qh) {
        const size_t qo = g.q_offset(l, row, qh);
        rotate(L.rope, D, gr.position, f32_angles, g.q.data() + qo, m.q_rot.data() + qo);
        const int kh = qh / (Hq / Hkv);
        std::vector<double> w;
        std::vector<int64_t> keys;
        double top = cfg.sink_logits.empty() ? -INFINITY : cfg.sink_logits[static_cast<size_t>(l)][static_cast<size_t>(qh)];
        for (int64_t j = 0; j <= i; ++j) {
          if (!(j < L.sinks || j > i - (L.window + window_extra))) continue;
          const int64_t kr = h[static_cast<size_t>(j)];
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(m.q_rot[qo + static_cast<size_t>(d)]) * double(ks[g.kv_offset(l, kr, kh) + static_cast<size_t>(d)]);
          double s = softmax_scale(cfg) * dot;
          if (cfg.softcap) s = *cfg.softcap * std::tanh(s / *cfg.softcap);
          w.push_back(s);
          keys.push_back(kr);
          top = std::max(top, s);
        }
        double sum = cfg.sink_logits.empty() ? 0.0 : std::exp(cfg.sink_logits[static_cast<size_t>(l)][static_cast<size_t>(qh)] - top);
        for (double& x : w) sum += (x = std::exp(x - top));
        for (int d = 0; d < D; ++d) {
          double acc = 0;
          for (size_t a = 0; a < keys.size(); ++a) acc += w[a] / sum * double(vs[g.kv_offset(l, keys[a], kh) + static_cast<size_t>(d)]);
          m.out[qo + static_cast<size_t>(d)] = static_cast<float>(acc);
        }
      }
    }
  }
  return m;
}

PrecisionProfile with_angles(Precision angle) {
  PrecisionProfile p;
  p.rope_angle = angle;
  return p;
}

GoldenOutcome check_model(const GoldenCase& g, const ModelRun& m, bool rotated, const PrecisionProfile& profile) {
  GoldenOutputs o;
  o.out = m.out;
  if (rotated) {
    o.q_rot = m.q_rot;
    o.k_rot = m.k_rot;
  }
  o.profile = profile;
  return write_and_check(g, o, "model_" + g.name);
}

TEST(OutputsRope, F64RotationIsConformantAndAttentionIsJudgedTightly) {
  for (const char* name : {"decode_w8", "pos_2p24", "partial_rotary", "rope_linear", "rope_ntk", "multi_layer_mixed",
                           "int8_q8_0", "sink_logits", "softcap", "reset_reuse"}) {
    const GoldenCase g = committed_case(name);
    const GoldenOutcome r = check_model(g, run_model(g, false, 0), true, PrecisionProfile{});
    EXPECT_TRUE(r.passed) << name << ": " << r.failure;
    ASSERT_TRUE(r.rope.has_value()) << name;
    EXPECT_EQ(r.rope->kind, RopeVerdict::Kind::conformant) << name << ": " << r.rope->line;
    EXPECT_EQ(r.rope->tight_checked, static_cast<int64_t>(g.expected.size())) << name;
    EXPECT_EQ(r.rope->tight_failed, 0) << name;
    EXPECT_LE(r.rope->worst_angle_error, 0x1p-22) << name;  // the final f32 rounding only
    EXPECT_TRUE(has(r.rope->line, "RoPE conformant")) << r.rope->line;
  }
}

TEST(OutputsRope, F32AnglesAreWithinTheDeclaredPrecisionOnly) {
  const GoldenCase g = committed_case("pos_2p24");
  const ModelRun m = run_model(g, true, 0);
  const GoldenOutcome r = check_model(g, m, true, with_angles(Precision::f32));
  EXPECT_TRUE(r.passed) << r.failure;
  ASSERT_TRUE(r.rope.has_value());
  EXPECT_EQ(r.rope->kind, RopeVerdict::Kind::within_declared) << r.rope->line;
  EXPECT_GT(r.rope->worst_angle_error, 1e-3);  // f32 angles at 2^24: far from the f64 rotation
  EXPECT_GE(r.rope->worst_position, int64_t{1} << 24);
  EXPECT_TRUE(has(r.rope->line, "within the declared rope_angle f32 only")) << r.rope->line;
  EXPECT_TRUE(has(r.rope->line, "position " + std::to_string(r.rope->worst_position))) << r.rope->line;
  // Declaring f64 angles with f32 ones is a RoPE failure, reported as such.
  const GoldenOutcome lie = check_model(g, m, true, PrecisionProfile{});
  EXPECT_FALSE(lie.passed);
  ASSERT_TRUE(lie.rope.has_value());
  EXPECT_EQ(lie.rope->kind, RopeVerdict::Kind::failed);
  EXPECT_TRUE(has(lie.failure, "RoPE: q_rot at step 0")) << lie.failure;
}

TEST(OutputsRope, AWindowBugHiddenByTheRopeTermIsCaughtFromTheEnginesOwnRotation) {
  const GoldenCase g = committed_case("pos_2p24");  // positions from 2^24, needle data for W + 1
  const ModelRun bug = run_model(g, true, 1);      // f32 angles, honestly declared, and a W + 1 window
  // Without q_rot/k_rot the bound's RoPE term swallows the bug, and the verdict says so.
  const GoldenOutcome hidden = check_model(g, bug, false, with_angles(Precision::f32));
  EXPECT_TRUE(hidden.passed) << "the RoPE term no longer hides a W + 1 window at 2^24: " << hidden.failure;
  ASSERT_TRUE(hidden.rope.has_value());
  EXPECT_EQ(hidden.rope->kind, RopeVerdict::Kind::not_checked);
  EXPECT_GT(hidden.rope->rope_dominated, 0);
  EXPECT_GE(hidden.rope->rope_dominated_from, int64_t{1} << 24);
  EXPECT_TRUE(has(hidden.rope->line, "could not be checked tightly")) << hidden.rope->line;
  // With them, attention is judged from the engine's own rotated values: the bug shows.
  const GoldenOutcome caught = check_model(g, bug, true, with_angles(Precision::f32));
  EXPECT_FALSE(caught.passed);
  ASSERT_TRUE(caught.first.has_value()) << caught.failure;
  EXPECT_EQ(caught.first->what, "output (own q_rot/k_rot)");
  EXPECT_GE(caught.first->token, g.c.config.layers[0].window);  // where W + 1 first differs
  ASSERT_TRUE(caught.rope.has_value());
  EXPECT_EQ(caught.rope->kind, RopeVerdict::Kind::within_declared);
  EXPECT_GT(caught.rope->tight_failed, 0);
  // The same engine without the bug passes both ways.
  EXPECT_TRUE(check_model(g, run_model(g, true, 0), true, with_angles(Precision::f32)).passed);
}

TEST(OutputsRope, ARotationErrorIsLocated) {
  const GoldenCase g = committed_case("decode_w8");
  ModelRun m = run_model(g, false, 0);
  const int64_t row = 11;
  const size_t at = g.kv_offset(0, row, 1) + 3;
  m.k_rot[at] += 1e-4f * std::max(1.0f, std::fabs(m.k_rot[at]));
  const GoldenOutcome r = check_model(g, m, true, PrecisionProfile{});
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.rope.has_value());
  EXPECT_EQ(r.rope->kind, RopeVerdict::Kind::failed);
  EXPECT_EQ(r.rope->worst_tensor, "k_rot");
  EXPECT_EQ(r.rope->worst_row, row);
  EXPECT_EQ(r.rope->worst_position, g.rows[static_cast<size_t>(row)].position);
  EXPECT_EQ(r.rope->worst_head, 1);
  EXPECT_TRUE(has(r.failure, "k_rot at step")) << r.failure;
}

TEST(OutputsRope, StoredRotatedKOfDeclaredF32AnglesIsWithinTheirSlack) {
  // f32 K, so the stored K is the engine's f32-angle k_rot itself; judged without k_rot (within one
  // step of the format plus what the declared rope_angle allows the rotation, golden-format §6).
  const GoldenCase g = committed_case("pos_2p24");
  const ModelRun m = run_model(g, true, 0);
  GoldenOutputs o;
  o.out = m.out;
  o.k_stored = GoldenStored{m.k_rot, {}, {}, {}};
  o.v_stored = GoldenStored{g.v_stored.value, {}, {}, {}};
  o.profile = with_angles(Precision::f32);
  const GoldenOutcome r = write_and_check(g, o, "stored_f32_angles");
  EXPECT_TRUE(r.passed) << r.failure;
  EXPECT_EQ(r.stored_checked, static_cast<int64_t>(g.k.size() + g.v.size()));
  // Without the declaration there is no slack: stored K is off by far more than one step.
  o.profile = PrecisionProfile{};
  o.out = g.expected;  // so that only the cache can fail
  const GoldenOutcome d = write_and_check(g, o, "stored_f32_angles_undeclared");
  EXPECT_FALSE(d.passed);
  ASSERT_TRUE(d.first.has_value()) << d.failure;
  EXPECT_EQ(d.first->what, "stored K");
}

TEST(OutputsRope, RotationBoundCoversTheF64AndF32Rotations) {
  // The bound is the one documented in golden-format §7; a pair off by more than it fails.
  EXPECT_DOUBLE_EQ(rotation_error_bound(0x1p-24, 0, 0.0, 1.0), 8 * 0x1p-24 + 0x1p-23 + 0x1p-148);
  EXPECT_DOUBLE_EQ(rotation_error_bound(0x1p-24, 3, 100.0, 2.0), (0x1p-24 * (10.0 * 100.0 + 8.0) + 0x1p-23) * 2.0 + 0x1p-148);
}

// ---------------------------------------------------------------------------------------------
// Through an engine: ringkv rotated (wants_rotated_qk) or the engine's own declared angles.

class DeclaresF32Angles : public Engine {
 public:
  explicit DeclaresF32Angles(std::unique_ptr<Engine> inner) : inner_(std::move(inner)) {}
  EngineInfo info() const override {
    EngineInfo i = inner_->info();
    i.precision.rope_angle = Precision::f32;
    return i;
  }
  const Config& config() const override { return inner_->config(); }
  void step(const StepBatch& b) override { inner_->step(b); }
  void reset(int s, int64_t p) override { inner_->reset(s, p); }
  std::optional<CacheSnapshot> snapshot(int l, int s) const override { return inner_->snapshot(l, s); }
  size_t cache_bytes() const override { return inner_->cache_bytes(); }

 private:
  std::unique_ptr<Engine> inner_;
};

TEST(EngineRope, RotatedByRingkvIsJudgedTightlyAndSaysSo) {
  const GoldenCase g = committed_case("pos_2p24");
  GoldenCheckOptions opt;
  opt.qk_rotated_by_ringkv = true;
  const GoldenOutcome r = check_golden(reference_engine_factory(), g, opt);
  EXPECT_TRUE(r.passed) << r.failure;
  ASSERT_TRUE(r.rope.has_value());
  EXPECT_EQ(r.rope->kind, RopeVerdict::Kind::rotated_by_ringkv);
  EXPECT_TRUE(has(r.rope->line, "rotated by ringkv")) << r.rope->line;
  // An engine declaring f32 angles is judged with the RoPE term, and the verdict says where it dominated.
  EngineFactory f32 = reference_engine_factory();
  f32.create = [](const Config& c) { return std::make_unique<DeclaresF32Angles>(make_reference_engine(c)); };
  const GoldenOutcome d = check_golden(f32, g);
  EXPECT_TRUE(d.passed) << d.failure;
  ASSERT_TRUE(d.rope.has_value());
  EXPECT_EQ(d.rope->kind, RopeVerdict::Kind::not_checked);
  EXPECT_GT(d.rope->rope_dominated, 0);
  // The reference (f64 angles) at small positions: nothing to say.
  EXPECT_FALSE(check_golden(reference_engine_factory(), committed_case("decode_w8")).rope.has_value());
}

// ---------------------------------------------------------------------------------------------
// The storage rule (issue 14): an engine whose profile declares a fixed K/V storage coarser than the
// case's dtype (bf16 on an f32 case) has its stored cache judged within one step of the DECLARED
// storage, in the snapshot check and in an outputs file's stored cache; declaring as-configured
// storage while storing bf16 still fails.

// The first committed case with f32 K and V that a core bf16 engine (head dims 64, 128) runs.
GoldenCase f32_case_for(const EngineFactory& f) {
  for (const ManifestEntry& e : read_manifest(RINGKV_GOLDEN_DIR)) {
    GoldenCase g = read_golden(std::string(RINGKV_GOLDEN_DIR) + "/" + e.file);
    if (g.c.config.k_format.dtype == DType::f32 && g.c.config.v_format.dtype == DType::f32 &&
        conformance::capability_gap(f.capabilities, g.c).empty()) {
      return g;
    }
  }
  throw Error("no committed f32 case inside " + f.name + "'s capabilities");
}

const EngineFactory& core_bf16_engine() {
  for (const conformance::MutantInfo& m : conformance::all_mutants()) {
    if (std::string(m.name) == "core_bf16_engine") return m.factory;
  }
  throw Error("no control core_bf16_engine");
}

// Stores bf16 like core_bf16_engine but declares the case's own (f32) storage: a lie.
class Bf16StoredDeclaredAsConfigured : public ReferenceEngine {
 public:
  explicit Bf16StoredDeclaredAsConfigured(const Config& c) : ReferenceEngine(bf16_of(c)), given_(c) {}
  const Config& config() const override { return given_; }

 protected:
  PrecisionProfile precision() const override {
    PrecisionProfile p = ReferenceEngine::precision();
    p.k_storage = precision_of(given_.k_format.dtype);
    p.v_storage = precision_of(given_.v_format.dtype);
    return p;
  }

 private:
  static Config bf16_of(Config c) {
    c.k_format.dtype = c.v_format.dtype = DType::bf16;
    return c;
  }
  Config given_;
};

TEST(StorageRule, DeclaredBf16StorageIsJudgedAgainstItInTheSnapshotCheck) {
  const EngineFactory& bf16 = core_bf16_engine();
  const GoldenCase g = f32_case_for(bf16);
  const GoldenOutcome r = check_golden(bf16, g);  // snapshots on (the default)
  EXPECT_TRUE(r.passed) << g.name << ": " << r.failure;
  EXPECT_FALSE(r.skipped) << r.skip_reason;
  EXPECT_GT(r.stored_checked, 0) << g.name;
  ASSERT_TRUE(r.profile.has_value());
  EXPECT_EQ(r.profile->k_storage, Precision::bf16);

  EngineFactory liar = bf16;
  liar.create = [](const Config& c) -> std::unique_ptr<Engine> { return std::make_unique<Bf16StoredDeclaredAsConfigured>(c); };
  const GoldenOutcome l = check_golden(liar, g);
  EXPECT_FALSE(l.passed) << g.name << ": an engine storing bf16 while declaring f32 storage passed";
  EXPECT_FALSE(l.skipped);
}

TEST(StorageRule, DeclaredBf16StorageIsJudgedAgainstItInAnOutputsFile) {
  const GoldenCase g = f32_case_for(core_bf16_engine());
  GoldenOutputs o = with_stored(g);  // the spec's outputs: only the stored cache can fail
  for (std::vector<float>* v : {&o.k_stored->value, &o.v_stored->value}) {
    for (float& x : *v) x = round_to_bf16(x);
  }
  PrecisionProfile declared;
  declared.k_storage = declared.v_storage = Precision::bf16;
  GoldenOutcome r = compare_golden_outputs(g, o, declared);
  EXPECT_TRUE(r.passed) << g.name << ": " << r.failure;
  EXPECT_GT(r.stored_checked, 0);

  r = compare_golden_outputs(g, o, PrecisionProfile{});  // as configured: f32, exact
  EXPECT_FALSE(r.passed) << g.name;
  ASSERT_TRUE(r.first.has_value()) << r.failure;
  EXPECT_TRUE(r.first->what == "stored K" || r.first->what == "stored V") << r.first->what;

  // Within one step of bf16, not anything: V three bf16 steps off fails under the bf16 declaration.
  size_t i = 0;
  while (i < o.v_stored->value.size() && std::fabs(o.v_stored->value[i]) < 0.01f) ++i;
  ASSERT_LT(i, o.v_stored->value.size());
  o.v_stored->value[i] += 3 * std::fabs(o.v_stored->value[i]) * 0x1p-7f;
  r = compare_golden_outputs(g, o, declared);
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.first.has_value()) << r.failure;
  EXPECT_EQ(r.first->what, "stored V");
}

}  // namespace
}  // namespace ringkv::golden
