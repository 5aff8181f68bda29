// ringkv cuda: the CUDA backend (device memory, the kernels of ring.cu, decode.cu
// and prefill.cu, cuBLAS GEMMs, all on one stream) and the CUDA engines built on
// it. Every CUDA and cuBLAS call is checked; a failure throws ringkv::Error
// naming the call and the runtime's message.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "kernels.cuh"
#include "ringkv/cuda_engine.hpp"
#include "ringkv/device.hpp"
#include "ringkv/error.hpp"

namespace ringkv::cuda {
namespace {

std::string cuda_message(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

void check(cudaError_t e, const std::string& call) {
  if (e != cudaSuccess) throw Error("cuda: " + call + " failed: " + cuda_message(e));
}

void check_blas(cublasStatus_t s, const std::string& call) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw Error("cuda: " + call + " failed: " + cublasGetStatusString(s) + " (" + cublasGetStatusName(s) + ")");
  }
}

/// A GEMM dimension or leading dimension as cuBLAS's int.
int blas_int(int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    throw Error(std::string("cuda: cublasGemmStridedBatchedEx: ") + what + " = " + std::to_string(v) +
                " does not fit cuBLAS's int");
  }
  return static_cast<int>(v);
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(cudaStream_t stream) : stream_(stream) {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device),
          "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)");
    check_blas(cublasCreate(&blas_), "cublasCreate");
    try {
      check_blas(cublasSetStream(blas_, stream_), "cublasSetStream");
      // f32 products and sums only: no TF32 or reduced-precision tensor-core paths.
      check_blas(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode(CUBLAS_PEDANTIC_MATH)");
    } catch (...) {
      cublasDestroy(blas_);
      throw;
    }
  }
  ~CudaBackend() override { cublasDestroy(blas_); }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  int sm_count() const override { return sm_count_; }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // an out-of-memory error is not sticky; clear it
      throw Error("cuda: cudaMalloc(" + std::to_string(bytes) + " bytes) failed: " + cuda_message(e));
    }
    const cudaError_t z = cudaMemsetAsync(p, 0, bytes, stream_);
    if (z != cudaSuccess) {
      cudaFree(p);
      throw Error("cuda: cudaMemsetAsync(" + std::to_string(bytes) + " bytes, 0) failed: " + cuda_message(z));
    }
    return p;
  }

  void release(void* p) noexcept override { (void)cudaFree(p); }

  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync(host to device, " + std::to_string(bytes) + " bytes)");
    // From pageable memory the runtime stages the copy before it returns, so `src` may be
    // reused at once; from page-locked (or managed) memory the copy is truly asynchronous:
    // wait for it so that the caller may reuse `src` either way.
    if (!pageable(src)) check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (after an upload)");
  }

  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync(device to host, " + std::to_string(bytes) + " bytes)");
    }
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (after a download)");
  }

  void fill(void* dst, int value, size_t bytes) override {
    if (bytes == 0) return;
    check(cudaMemsetAsync(dst, value, bytes, stream_),
          "cudaMemsetAsync(" + std::to_string(bytes) + " bytes, " + std::to_string(value) + ")");
  }

  void synchronize() override {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void append(const AppendParams& p) override { check(launch_append(p, stream_), "append kernel launch"); }
  void commit(const CommitParams& p) override { check(launch_commit(p, stream_), "commit kernel launch"); }
  void decode(const DecodeParams& p) override { check(launch_decode(p, stream_), "decode kernel launch"); }
  void merge(const MergeParams& p) override { check(launch_merge(p, stream_), "merge kernel launch"); }
  void gather(const GatherParams& p) override { check(launch_gather(p, stream_), "gather kernel launch"); }
  void masked_softmax(const MaskedSoftmaxParams& p) override {
    check(launch_masked_softmax(p, stream_), "masked softmax kernel launch");
  }
  void scatter(const ScatterParams& p) override { check(launch_scatter(p, stream_), "scatter kernel launch"); }
  void poison(const PoisonParams& p) override { check(launch_poison(p, stream_), "poison kernel launch"); }

  void gemm(const GemmParams& p) override {
    // Column-major C_b = op(A_b)·op(B_b) in f32 with f32 accumulation (no TF32), as GemmParams says.
    if (p.batch <= 0 || p.m <= 0 || p.n <= 0) return;
    const float alpha = 1.0f, beta = 0.0f;
    check_blas(cublasGemmStridedBatchedEx(blas_, p.transa ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          p.transb ? CUBLAS_OP_T : CUBLAS_OP_N, p.m, p.n, p.k, &alpha, p.a,
                                          CUDA_R_32F, blas_int(p.lda, "lda"), p.stride_a, p.b, CUDA_R_32F,
                                          blas_int(p.ldb, "ldb"), p.stride_b, &beta, p.c, CUDA_R_32F,
                                          blas_int(p.ldc, "ldc"), p.stride_c, p.batch, CUBLAS_COMPUTE_32F_PEDANTIC,
                                          CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx(m = " + std::to_string(p.m) + ", n = " + std::to_string(p.n) +
                   ", k = " + std::to_string(p.k) + ", batch = " + std::to_string(p.batch) + ")");
  }

 private:
  /// Whether `p` is ordinary (pageable) host memory, unknown to the CUDA runtime.
  static bool pageable(const void* p) {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
      (void)cudaGetLastError();  // older runtimes report unregistered memory as an error
      return true;
    }
    return attr.type == cudaMemoryTypeUnregistered;
  }

  cudaStream_t stream_;
  int sm_count_ = 0;
  cublasHandle_t blas_ = nullptr;
};

CoreOptions cuda_options(DecodePath path) {
  CoreOptions o;
  o.path = path;
  o.name = path == DecodePath::fused ? "cuda" : "cuda-cublas";
  return o;
}

EngineFactory cuda_factory(DecodePath path) {
  return EngineFactory{cuda_options(path).name, core_capabilities(),
                       [path](const Config& c) -> std::unique_ptr<Engine> {
                         const std::string why = cuda_unavailable_reason();
                         if (!why.empty()) throw Error(why);
                         return std::make_unique<CudaEngine>(c, path);
                       }};
}

}  // namespace

CudaEngine::CudaEngine(const Config& config, DecodePath path, CUstream_st* stream)
    : EngineCore(config, std::make_unique<CudaBackend>(stream), cuda_options(path)), stream_(stream) {}

bool cuda_compiled() { return true; }

std::string cuda_unavailable_reason() {
  const DeviceStatus status = cuda_device_status();
  return status.device_count > 0 ? std::string() : status.message;
}

EngineFactory cuda_engine_factory() { return cuda_factory(DecodePath::fused); }
EngineFactory cublas_engine_factory() { return cuda_factory(DecodePath::cublas); }

}  // namespace ringkv::cuda
