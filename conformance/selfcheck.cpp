// ringkv_selfcheck: the main job until the ringkv CLI exists. Runs the
// reference engine against the float64 oracle on a fixed set of boundary
// cases plus generated ones, and prints what it checked. Exit 0 iff all pass.
#include <cstdio>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "ringkv/reference_engine.hpp"
#include "support/generators.hpp"
#include "support/rng.hpp"
#include "support/runner.hpp"

using namespace ringkv;
using namespace ringkv::conformance;

namespace {

// One sequence, given chunks, one layer.
Case boundary_case(int64_t W, int64_t S, std::vector<int64_t> chunks, int Hq, int Hkv, int D,
                   KvFormat k = {}, KvFormat v = {}, int64_t p0 = 0, DataMode data = DataMode::needle) {
  Case c;
  c.config.layers = {LayerConfig{W, S, RopeConfig{}}};
  c.config.num_q_heads = Hq;
  c.config.num_kv_heads = Hkv;
  c.config.head_dim = D;
  c.config.k_format = k;
  c.config.v_format = v;
  int64_t total = 0;
  for (int64_t n : chunks) total += n;
  c.config.max_tokens = total;
  c.config.start_positions = {p0};
  for (int64_t n : chunks) c.steps.push_back(StepPlan{{}, {n}});
  c.data = data;
  c.seed = 20261203;
  return c;
}

}  // namespace

int main() {
  KvFormat f16{DType::f16}, bf16{DType::bf16};
  KvFormat int8{DType::int8, Int8Scheme::per_head, Rounding::nearest_even, 1.0f};
  KvFormat q80{DType::int8, Int8Scheme::q8_0, Rounding::half_away, 1.0f};
  KvFormat e4m3{DType::fp8_e4m3, Int8Scheme::per_head, Rounding::nearest_even, 1.0f};
  struct Named { const char* what; Case c; };
  std::vector<Named> cases = {
      {"decode t < W .. 4W, W = 8", boundary_case(8, 0, std::vector<int64_t>(33, 1), 4, 2, 64)},
      {"W = 1 (own key only)", boundary_case(1, 0, {1, 1, 3}, 2, 1, 16)},
      {"sinks S = 4, W = 4", boundary_case(4, 4, {3, 1, 5, 9, 1}, 8, 2, 64)},
      {"chunk > 2W crossing the wrap", boundary_case(8, 1, {5, 21, 1, 8}, 4, 4, 32)},
      {"chunks W-1, W, W+1", boundary_case(16, 0, {15, 16, 17, 1}, 8, 1, 128)},
      {"GQA 8:1, head_dim 128", boundary_case(32, 0, {40, 1, 1, 30}, 8, 1, 128)},
      {"f16 K/V", boundary_case(8, 1, {9, 1, 8}, 4, 2, 64, f16, f16)},
      {"bf16 K, f32 V", boundary_case(8, 0, {17, 1}, 4, 2, 64, bf16, {})},
      {"int8 per_head", boundary_case(8, 1, {12, 1, 7}, 4, 2, 64, int8, int8)},
      {"int8 q8_0 (roundf)", boundary_case(8, 0, {10, 10}, 4, 2, 64, q80, q80)},
      {"fp8 e4m3 K, f16 V", boundary_case(8, 0, {10, 10}, 4, 2, 64, e4m3, f16)},
      {"position 2^24", boundary_case(8, 0, {20, 1}, 4, 2, 64, {}, {}, int64_t{1} << 24)},
      {"random data, W = 64", boundary_case(64, 0, {100, 1, 1, 63, 65}, 4, 2, 64, {}, {}, 5, DataMode::random)},
  };
  // Plus generated cases across every feature (fixed seeds).
  for (int i = 0; i < 24; ++i) {
    Case c = gen_case(ReferenceEngine::capabilities())(rc::Random(hash_coords(7, static_cast<uint64_t>(i))), 50 + i).value();
    cases.push_back({"generated", c});
  }
  const EngineFactory reference = reference_engine_factory();
  std::printf("ringkv selfcheck: reference engine vs float64 oracle (spec 1)\n");
  std::printf("%-32s %9s %10s  %s\n", "case", "outputs", "worst/tol", "id");
  int failed = 0;
  int64_t total = 0;
  for (const Named& n : cases) {
    RunOptions o;
    o.check_ring = true;
    const RunResult r = run_case(reference, n.c, o);
    total += r.outputs_checked;
    std::printf("%-32s %9lld %10.3g  %s\n", n.what, static_cast<long long>(r.outputs_checked), r.worst_ratio,
                n.c.id().c_str());
    if (!r.ok()) {
      ++failed;
      std::printf("  FAILED: %s\n%s", r.failure.c_str(), n.c.describe().c_str());
    }
  }
  std::printf("%zu cases, %lld outputs compared within the docs/tolerances.md bound, ring contents checked after "
              "every step: %s\n",
              cases.size(), static_cast<long long>(total), failed ? "FAILED" : "all passed");
  return failed ? 1 : 0;
}
