// ringkv cuda: the plan backend, the CUDA engine's launches executed on the host
// (see plan_backend.cpp). Built with or without nvcc.
#pragma once

#include <vector>

#include "ringkv/cuda/backend.hpp"

namespace ringkv::cuda {

class PlanBackend final : public Backend {
 public:
  /// `sm_count`: the multiprocessors the split planning assumes (an H200 has 132).
  explicit PlanBackend(int sm_count = 132);
  ~PlanBackend() override;

  std::string name() const override { return "cuda-plan"; }
  int sm_count() const override { return sm_count_; }
  void* allocate(size_t bytes) override;
  void release(void* p) noexcept override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  void fill(void* dst, int value, size_t bytes) override;
  void synchronize() override;

  void append(const AppendParams& p) override;
  void commit(const CommitParams& p) override;
  void decode(const DecodeParams& p) override;
  void merge(const MergeParams& p) override;
  void gather(const GatherParams& p) override;
  void gemm(const GemmParams& p) override;
  void masked_softmax(const MaskedSoftmaxParams& p) override;
  void scatter(const ScatterParams& p) override;
  void poison(const PoisonParams& p) override;

 private:
  int sm_count_;
  // a simulated block's registers and shared memory, reused across launches
  std::vector<float> row_, q_, scores_, tile_, acc_;
};

}  // namespace ringkv::cuda
