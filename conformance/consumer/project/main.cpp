// A consumer of the installed ringkv package: creates a reference engine from
// a small config, steps a few tokens, prints the outputs, and checks that with
// W = 1 and S = 0 every query head returns exactly the token's own v.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <span>

#include <ringkv/config.hpp>
#include <ringkv/engine.hpp>
#include <ringkv/error.hpp>
#include <ringkv/cuda_engine.hpp>
#include <ringkv/reference_engine.hpp>

namespace {

constexpr int kQHeads = 2, kKvHeads = 1, kHeadDim = 4, kTokens = 3;

ringkv::Config small_config(int64_t window) {
  ringkv::Config c;
  ringkv::LayerConfig layer;
  layer.window = window;
  layer.sinks = 0;
  layer.rope.style = ringkv::RopeStyle::neox;
  c.layers = {layer};
  c.num_q_heads = kQHeads;
  c.num_kv_heads = kKvHeads;
  c.head_dim = kHeadDim;
  c.batch = 1;
  c.max_tokens = 16;
  return c;
}

float value(int token, int head, int d, float base) {
  return base + 0.25f * static_cast<float>(token) - 0.125f * static_cast<float>(head) + 0.0625f * static_cast<float>(d);
}

/// Steps kTokens single tokens; returns the number of mismatches against v when check_own_v.
int run(int64_t window, bool check_own_v, bool plan = false) {
  const std::unique_ptr<ringkv::Engine> engine = plan ? ringkv::cuda::make_plan_engine(small_config(window))
                                                      : ringkv::make_reference_engine(small_config(window));
  std::printf("engine %s, W = %lld, cache %zu bytes\n", engine->info().name.c_str(), static_cast<long long>(window),
              engine->cache_bytes());
  int bad = 0;
  for (int t = 0; t < kTokens; ++t) {
    float q[kQHeads * kHeadDim], k[kKvHeads * kHeadDim], v[kKvHeads * kHeadDim], out[kQHeads * kHeadDim];
    for (float& o : out) o = -1.0f;
    for (int h = 0; h < kQHeads; ++h)
      for (int d = 0; d < kHeadDim; ++d) q[h * kHeadDim + d] = value(t, h, d, 0.5f);
    for (int d = 0; d < kHeadDim; ++d) {
      k[d] = value(t, 0, d, -0.5f);
      v[d] = value(t, 0, d, 1.0f);
    }
    const ringkv::SequenceStep step{0, 1, q, k, v, out};
    engine->step(ringkv::StepBatch{{}, std::span<const ringkv::SequenceStep>(&step, 1)});
    for (int h = 0; h < kQHeads; ++h) {
      std::printf("  token %d head %d:", t, h);
      for (int d = 0; d < kHeadDim; ++d) {
        const float o = out[h * kHeadDim + d];
        std::printf(" %.6f", static_cast<double>(o));
        if (check_own_v && o != v[d]) ++bad;
      }
      std::printf("\n");
    }
  }
  return bad;
}

}  // namespace

int main() {
  try {
    const int bad = run(/*window=*/1, /*check_own_v=*/true);
    if (bad != 0) {
      std::fprintf(stderr, "ringkv consumer: FAILED: %d outputs differ from the token's own v with W = 1, S = 0\n",
                   bad);
      return 1;
    }
    run(/*window=*/4, /*check_own_v=*/false);
    // The CUDA engine's host half (the kernels' launch plan on the CPU) from the same package.
    const int bad_plan = run(/*window=*/1, /*check_own_v=*/true, /*plan=*/true);
    if (bad_plan != 0) {
      std::fprintf(stderr, "ringkv consumer: FAILED: cuda-plan: %d outputs differ from the token's own v\n", bad_plan);
      return 1;
    }
    std::printf("CUDA engine compiled in: %s\n", ringkv::cuda::cuda_compiled() ? "yes" : "no");
    // Errors are part of the installed API too.
    try {
      ringkv::Config bad_config = small_config(1);
      bad_config.num_kv_heads = 3;  // Hq % Hkv != 0
      ringkv::ReferenceEngine rejected(bad_config);
      std::fprintf(stderr, "ringkv consumer: FAILED: an invalid config was accepted\n");
      return 1;
    } catch (const ringkv::ConfigError& e) {
      std::printf("invalid config rejected: %s\n", e.what());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringkv consumer: FAILED: %s\n", e.what());
    return 1;
  }
  std::printf("ringkv consumer: OK\n");
  return 0;
}
