// ringkv cuda: what a build without nvcc provides. cuda-plan and cuda-plan-cublas are
// complete; the CUDA engines report that they were not compiled.
#include "ringkv/cuda_engine.hpp"
#include "ringkv/error.hpp"

namespace ringkv::cuda {
namespace {

EngineFactory not_compiled(const char* name) {
  return EngineFactory{name, core_capabilities(), [name](const Config&) -> std::unique_ptr<Engine> {
                         throw Error(std::string("--engine ") + name + ": " + cuda_unavailable_reason());
                       }};
}

}  // namespace

bool cuda_compiled() { return false; }
std::string cuda_unavailable_reason() {
  return "not compiled: this ringkv was built without CUDA (no nvcc found, or RINGKV_CUDA=OFF)";
}
EngineFactory cuda_engine_factory() { return not_compiled("cuda"); }
EngineFactory cublas_engine_factory() { return not_compiled("cuda-cublas"); }

}  // namespace ringkv::cuda
