// ringkv cuda: what the engine core needs from the machine it runs on. Two
// backends implement it: the CUDA backend (kernels and cuBLAS on a device,
// cuda/src/cuda_backend.cpp) and the plan backend (the same launches executed
// on the host one simulated block after another, cuda/src/plan_backend.cpp).
// The engine core (engine_core.hpp) builds every launch and is shared by both,
// so the cuda-plan engine runs exactly the plan the kernels run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ringkv/cuda/params.hpp"

namespace ringkv::cuda {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// Multiprocessors the split planning targets (the plan backend simulates an H200's 132).
  virtual int sm_count() const = 0;

  // ---- memory: allocated once, at engine construction ----
  /// Zero-filled memory of this backend; throws ringkv::Error naming the call on failure.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  /// Host to backend memory, ordered before every later launch. `src` may be reused at once.
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  /// Backend to host memory; waits for every earlier launch.
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  /// Sets `bytes` bytes to `value` (reset: 0xff makes every int64 position −1).
  virtual void fill(void* dst, int value, size_t bytes) = 0;
  /// Waits until every launch so far has finished and reports any asynchronous error.
  virtual void synchronize() = 0;

  // ---- launches ----
  virtual void append(const AppendParams& p) = 0;
  virtual void commit(const CommitParams& p) = 0;
  virtual void decode(const DecodeParams& p) = 0;
  virtual void merge(const MergeParams& p) = 0;
  virtual void gather(const GatherParams& p) = 0;
  virtual void gemm(const GemmParams& p) = 0;
  virtual void masked_softmax(const MaskedSoftmaxParams& p) = 0;
  virtual void scatter(const ScatterParams& p) = 0;
  virtual void poison(const PoisonParams& p) = 0;
};

}  // namespace ringkv::cuda
