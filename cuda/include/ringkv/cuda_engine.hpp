// ringkv: the CUDA engine (cuda/) and its host twin, cuda-plan.
//
//   "cuda"             EngineCore on the CUDA backend, fused split-K decode (needs a device)
//   "cuda-cublas"      EngineCore on the CUDA backend, cuBLAS GEMMs for every step
//   "cuda-plan"        EngineCore on the plan backend: the same launches executed on the host
//   "cuda-plan-cublas" the cuBLAS path's plan on the host
//
// All four implement ringkv::Engine exactly as the reference does, so every
// property and golden case runs on them unchanged.
#pragma once

#include <memory>
#include <string>

#include "ringkv/cuda/engine_core.hpp"
#include "ringkv/engine.hpp"

struct CUstream_st;

namespace ringkv::cuda {

/// cuda-plan (fused) or cuda-plan-cublas, on the host.
std::unique_ptr<Engine> make_plan_engine(const Config& config, DecodePath path = DecodePath::fused);
EngineFactory plan_engine_factory();
EngineFactory plan_cublas_engine_factory();

/// Whether this ringkv was built with the CUDA engine (nvcc and cuBLAS found).
bool cuda_compiled();
/// Empty when a usable CUDA device exists, else why not ("not compiled", "no CUDA device: ...").
std::string cuda_unavailable_reason();

/// The CUDA engines: "cuda" (fused decode) and "cuda-cublas". Creating one without a device
/// throws ringkv::Error with cuda_unavailable_reason().
EngineFactory cuda_engine_factory();
EngineFactory cublas_engine_factory();

/// The device-side entry point: q/k/v (f32, f16 or bf16) and out (f32) in device memory,
/// work enqueued on `stream` with no host round trip per step (the sequences' positions
/// live on the host, so resets and appends are validated there without reading the tensors).
class CudaEngine final : public EngineCore {
 public:
  CudaEngine(const Config& config, DecodePath path, CUstream_st* stream = nullptr);
  void step_device(const ResidentBatch& batch) { step_resident(batch); }
  CUstream_st* stream() const { return stream_; }

 private:
  CUstream_st* stream_;
};

}  // namespace ringkv::cuda
