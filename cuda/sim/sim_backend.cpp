// ringkv cuda-sim: the backend. See sim_backend.hpp.
#include "sim_backend.hpp"

#include <cstring>
#include <string>

#include "ringkv/cuda/backend.hpp"
#include "ringkv/cuda/plan_backend.hpp"
#include "ringkv/error.hpp"
#include "sim_runtime.hpp"
// The kernels' launchers as kernels_*.cpp compile them: ringkv::cuda::sim_launch_append, ...
#include "sim_rename.hpp"
#include "../src/kernels.cuh"

namespace ringkv::cuda {

namespace {

size_t sz(int64_t v) { return static_cast<size_t>(v); }

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const char* name = e == cudaErrorInvalidValue             ? "cudaErrorInvalidValue"
                     : e == cudaErrorInvalidConfiguration ? "cudaErrorInvalidConfiguration"
                                                          : "cudaError";
  throw Error(std::string("cuda-sim: ") + what + " failed: " + name + " (" + std::to_string(static_cast<int>(e)) + ")");
}

class SimBackend final : public Backend {
 public:
  explicit SimBackend(int sm_count) : sm_count_(sm_count), host_(sm_count) {}
  std::string name() const override { return "cuda-sim"; }
  int sm_count() const override { return sm_count_; }
  void* allocate(size_t bytes) override { return sim::arena_allocate(bytes); }
  void release(void* p) noexcept override { sim::arena_release(p); }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void fill(void* dst, int value, size_t bytes) override {
    if (bytes > 0) std::memset(dst, value, bytes);
  }
  void synchronize() override {}

  void append(const AppendParams& p) override { check(sim_launch_append(p, nullptr), "append kernel launch"); }
  void commit(const CommitParams& p) override { check(sim_launch_commit(p, nullptr), "commit kernel launch"); }
  void decode(const DecodeParams& p) override { check(sim_launch_decode(p, nullptr), "decode kernel launch"); }
  void merge(const MergeParams& p) override { check(sim_launch_merge(p, nullptr), "merge kernel launch"); }
  void gather(const GatherParams& p) override { check(sim_launch_gather(p, nullptr), "gather kernel launch"); }
  void masked_softmax(const MaskedSoftmaxParams& p) override {
    check(sim_launch_masked_softmax(p, nullptr), "masked softmax kernel launch");
  }
  void scatter(const ScatterParams& p) override { check(sim_launch_scatter(p, nullptr), "scatter kernel launch"); }
  void poison(const PoisonParams& p) override { check(sim_launch_poison(p, nullptr), "poison kernel launch"); }

  void gemm(const GemmParams& p) override {
    // cublasGemmStridedBatchedEx's column-major C_b = op(A_b)·op(B_b), f32 (CUBLAS_COMPUTE_32F_PEDANTIC).
    // Each operand's extent (transposes, leading dimensions, strides, batch) must lie in a buffer
    // the engine allocated, and a leading dimension cover its rows, as cuBLAS requires.
    if (p.batch <= 0 || p.m <= 0 || p.n <= 0) return;
    const auto extent = [&](const void* base, int64_t rows, int64_t cols, int64_t ld, int64_t stride, const char* what) {
      if (ld < rows) {
        throw Error(std::string("cuda-sim: cublasGemmStridedBatchedEx: ") + what + ": leading dimension " +
                    std::to_string(ld) + " < " + std::to_string(rows) + " rows");
      }
      const int64_t last = (p.batch - 1) * stride + (cols - 1) * ld + rows;  // elements up to the last one
      if (!sim::arena_contains(base, sz(last) * sizeof(float))) {
        throw Error(std::string("cuda-sim: cublasGemmStridedBatchedEx: ") + what + " (" + std::to_string(rows) + " x " +
                    std::to_string(cols) + ", ld " + std::to_string(ld) + ", stride " + std::to_string(stride) +
                    ", batch " + std::to_string(p.batch) + ") reaches past its buffer");
      }
    };
    const int64_t ar = p.transa ? p.k : p.m, ac = p.transa ? p.m : p.k;
    const int64_t br = p.transb ? p.n : p.k, bc = p.transb ? p.k : p.n;
    if (p.k > 0) {
      extent(p.a, ar, ac, p.lda, p.stride_a, "A");
      extent(p.b, br, bc, p.ldb, p.stride_b, "B");
    }
    extent(p.c, p.m, p.n, p.ldc, p.stride_c, "C");
    host_.gemm(p);  // the plan backend's host GEMM: products summed in k order
  }

 private:
  int sm_count_;
  PlanBackend host_;
};

}  // namespace

std::unique_ptr<Engine> make_sim_engine(const Config& config, DecodePath path, int sm_count) {
  CoreOptions o;
  o.path = path;
  o.name = path == DecodePath::fused ? "cuda-sim" : "cuda-sim-cublas";
  return std::make_unique<EngineCore>(config, std::make_unique<SimBackend>(sm_count), o);
}

EngineFactory sim_engine_factory(int sm_count) {
  return EngineFactory{"cuda-sim", core_capabilities(),
                       [sm_count](const Config& c) { return make_sim_engine(c, DecodePath::fused, sm_count); }};
}

EngineFactory sim_cublas_engine_factory(int sm_count) {
  return EngineFactory{"cuda-sim-cublas", core_capabilities(),
                       [sm_count](const Config& c) { return make_sim_engine(c, DecodePath::cublas, sm_count); }};
}

}  // namespace ringkv::cuda
