// Scale cases in golden format (golden/scale_golden.hpp, docs/scale.md "Scale cases in files"): the
// file holds the inputs the runner feeds and no expected outputs, the readers and checkers treat it so,
// and an outputs file of it is judged on the sampled rows, refusals included.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "golden/golden.hpp"
#include "golden/replay.hpp"
#include "golden/scale_golden.hpp"
#include "ringkv/error.hpp"
#include "ringkv/reference_engine.hpp"

namespace {

using namespace ringkv;
using namespace ringkv::golden;
using conformance::ScaleCase;

ScaleCase ci_case(const std::string& shape) {
  for (ScaleCase& sc : conformance::scale_cases(conformance::ScaleTier::ci)) {
    if (sc.name == "scale/ci/" + shape) return sc;
  }
  throw std::runtime_error("no ci case " + shape);
}

std::string tmp_file(const std::string& name) {
  std::filesystem::create_directories(RINGKV_GOLDEN_TMP);
  return std::string(RINGKV_GOLDEN_TMP) + "/" + name;
}

TEST(ScaleGolden, TheFileHoldsTheRunnersInputsAndNoExpectedOutputs) {
  const ScaleCase sc = ci_case("gqa32x8_d256_b8_fp8_softcap");
  const GoldenCase g = make_scale_golden(sc);
  EXPECT_EQ(g.name, "scale_ci_gqa32x8_d256_b8_fp8_softcap");
  const StFile f = golden_to_safetensors(g);
  EXPECT_EQ(f.meta("scale_case"), sc.name);
  EXPECT_EQ(f.meta("sample_every"), "32");
  for (const char* absent : {"expected", "expected_f64", "score.n_keys", "dim.spread", "k_stored", "v_stored"}) {
    EXPECT_FALSE(f.has(absent)) << absent;
  }
  const GoldenCase back = golden_from_safetensors(parse_safetensors(serialize_safetensors(f), "scale.safetensors"));
  EXPECT_EQ(back.scale_case, sc.name);
  EXPECT_EQ(back.sample_every, sc.sample_every);
  EXPECT_EQ(back.q, g.q);
  EXPECT_EQ(back.v, g.v);
  EXPECT_TRUE(back.expected.empty());
  // The last chunk's keys are what the runner generates for it (support/case.hpp's fill_chunk).
  const GoldenChunk& ch = g.chunks.back();
  const GoldenRow& first = g.rows[static_cast<size_t>(ch.row_begin)];
  std::vector<float> k(static_cast<size_t>(ch.n_tokens * sc.c.config.num_kv_heads * sc.c.config.head_dim));
  conformance::fill_chunk(sc.c, conformance::Tensor::k, first.stream, first.index, ch.n_tokens, k.data());
  EXPECT_TRUE(std::equal(k.begin(), k.end(), g.k.begin() + static_cast<std::ptrdiff_t>(g.kv_offset(0, ch.row_begin, 0))));
}

TEST(ScaleGolden, ReadersRejectWhatAScaleCaseCannotHold) {
  const GoldenCase g = make_scale_golden(ci_case("gqa32x8_d256_b8_fp8_softcap"));
  StFile extra = golden_to_safetensors(g);
  extra.tensors["expected"] = make_tensor<float>({1}, {0.0f});
  extra.source = "extra.safetensors";
  try {
    (void)golden_from_safetensors(extra);
    FAIL() << "a scale case with an 'expected' tensor was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extra.safetensors: unexpected tensor 'expected' (not part of golden format 1, a "
                                         "scale case holds the schedule and the inputs only)"),
              std::string::npos)
        << e.what();
  }
  StFile every = golden_to_safetensors(g);
  every.metadata["sample_every"] = "0";
  every.source = "every.safetensors";
  EXPECT_THROW(
      {
        try {
          (void)golden_from_safetensors(every);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("__metadata__ sample_every = \"0\": must be an integer >= 1"), std::string::npos);
          throw;
        }
      },
      Error);
  // The checkers of a golden case need expected outputs: a scale case is refused, as unusable input.
  EXPECT_THROW((void)check_golden(reference_engine_factory(), g), GoldenInputError);
  EXPECT_THROW((void)compare_golden_outputs(g, std::vector<float>(g.q.size()), PrecisionProfile{}), GoldenInputError);
}

TEST(ScaleGolden, OutputsAreJudgedOnTheSampledRowsRefusalsIncluded) {
  // The batched case: rollbacks of drafts in step 3 that the spec honours.
  const ScaleCase sc = ci_case("gqa64x8_d128_b32_q8_0_sinks_drafts");
  const GoldenCase g = make_scale_golden(sc);
  ASSERT_TRUE(g.refused_steps().empty());
  const auto reference = make_reference_engine(sc.c.config);
  GoldenOutputs o;
  o.out = replay_outputs(*reference, g, &o.refused_steps);
  o.profile = reference->info().precision;
  const std::string path = tmp_file("scale_drafts.safetensors");
  write_golden_outputs(path, g, o);
  const ScaleOutputsOutcome pass = check_scale_outputs(sc, path, PrecisionProfile{});
  EXPECT_TRUE(pass.scale.passed) << pass.scale.failure;
  EXPECT_TRUE(pass.profile_from_file);
  EXPECT_GT(pass.scale.queries_sampled, 0);
  EXPECT_LT(pass.scale.queries_sampled, pass.scale.queries_total);
  // The same outputs with step 3 listed as refused: the spec honours it, so the engine's refusal fails.
  o.refused_steps = {3};
  write_golden_outputs(path, g, o);
  const ScaleOutputsOutcome refused = check_scale_outputs(sc, path, PrecisionProfile{});
  EXPECT_FALSE(refused.scale.passed);
  EXPECT_NE(refused.scale.failure.find("step 3: engine threw: step 3 refused (the outputs file's __metadata__ refused_steps lists it)"),
            std::string::npos)
      << refused.scale.failure;
  // Declared unsupported: skipped, with the reason.
  GoldenOutputs unsupported;
  unsupported.unsupported = "no q8_0 cache";
  write_golden_outputs(path, g, unsupported);
  const ScaleOutputsOutcome skipped = check_scale_outputs(sc, path, PrecisionProfile{});
  EXPECT_TRUE(skipped.skipped);
  EXPECT_EQ(skipped.skip_reason, "unsupported (outputs file): no q8_0 cache");
}

}  // namespace
