// cuda-sim: planted thread-level bugs in the real kernels (RINGKV_BUG(n) in cuda/src/*.cu,
// switched in by this binary's build only), each caught by the simulator with a message
// naming the kernel, block, thread and source line; and the same cases passing with no bug
// switched on, so that each failure is the bug's. cuda-plan cannot see any of them: it runs
// the plan, not the threads.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ringkv/cuda/engine_core.hpp"
#include "sim_backend.hpp"
#include "support/case.hpp"
#include "support/runner.hpp"

int ringkv_sim_planted_bug = 0;

namespace ringkv::conformance {
namespace {

/// A prefill of 8 tokens then `decodes` decode steps, one sequence, window 24.
Case decode_case(DType dt, int hq, int hkv, int d, int decodes) {
  Case c;
  c.config.layers = {LayerConfig{}};
  c.config.layers[0].window = 24;
  c.config.num_q_heads = hq;
  c.config.num_kv_heads = hkv;
  c.config.head_dim = d;
  c.config.batch = 1;
  c.config.max_tokens = 8 + decodes;
  c.config.k_format = c.config.v_format = KvFormat::of(dt);
  c.steps.push_back(StepPlan{{}, {8}});
  for (int i = 0; i < decodes; ++i) c.steps.push_back(StepPlan{{}, {1}});
  c.seed = 7;
  return c;
}

// The block kernel (a split per block): f32 K and V. The warp kernel: f16, D 64, 2 heads per kv head.
Case block_kernel_case() { return decode_case(DType::f32, 4, 2, 64, 40); }
Case warp_kernel_case() { return decode_case(DType::f16, 4, 2, 64, 40); }

std::string run_with(int bug, const Case& c) {
  ringkv_sim_planted_bug = bug;
  RunOptions o;
  o.stop_at_failure = true;
  const RunResult r = run_case(cuda::sim_engine_factory(132), c, o);
  ringkv_sim_planted_bug = 0;
  if (bug != 0) std::printf("planted bug %d: %s\n", bug, r.failure.c_str());
  return r.failure;
}

void expect_all(const std::string& failure, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(failure.empty()) << "the planted bug was not caught";
  for (const char* p : parts) EXPECT_NE(failure.find(p), std::string::npos) << "missing '" << p << "' in:\n" << failure;
}

TEST(PlantedBugs, WithoutABugBothKernelsPass) {
  EXPECT_EQ(run_with(0, block_kernel_case()), "");
  EXPECT_EQ(run_with(0, warp_kernel_case()), "");
}

TEST(PlantedBugs, AMissingSyncthreadsIsARace) {
  expect_all(run_with(1, block_kernel_case()),
             {"decode_kernel", "block ", "thread ", "shared-memory race", "with no barrier between", "decode.cu:"});
}

TEST(PlantedBugs, AWrongXorOffsetGivesWrongOutputs) {
  // a shuffle with a wrong offset is legal: the outputs are wrong, and the oracle says so
  const std::string f = run_with(2, warp_kernel_case());
  ASSERT_FALSE(f.empty()) << "the planted bug was not caught";
  EXPECT_EQ(f.find("cuda-sim:"), std::string::npos) << f;  // no executor check: the values
}

TEST(PlantedBugs, ALaneToKeyMappingOffByOneGivesWrongOutputs) {
  const std::string f = run_with(3, warp_kernel_case());
  ASSERT_FALSE(f.empty()) << "the planted bug was not caught";
}

TEST(PlantedBugs, DynamicSharedMemoryOneTileTooSmallIsAnOverrun) {
  expect_all(run_with(4, block_kernel_case()),
             {"decode_kernel", "block ", "thread ", "out-of-bounds dynamic shared memory", "decode.cu:"});
}

TEST(PlantedBugs, AMisalignedUint4LoadIsCaught) {
  expect_all(run_with(5, block_kernel_case()), {"decode_kernel", "block ", "thread ", "misaligned", "decode.cu:"});
}

TEST(PlantedBugs, ABarrierInABranchTakenByPartOfTheBlockIsDivergence) {
  expect_all(run_with(6, block_kernel_case()),
             {"merge_kernel", "block ", "thread ", "barrier divergence", "decode.cu:"});
}

}  // namespace
}  // namespace ringkv::conformance
