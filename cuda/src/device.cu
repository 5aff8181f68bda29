#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "ringkv/device.hpp"

namespace ringkv::cuda {

DeviceStatus cuda_device_status() {
  DeviceStatus status;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    status.message = std::string("no CUDA device: ") + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")";
    (void)cudaGetLastError();  // clear the sticky error
    return status;
  }
  if (count == 0) {
    status.message = "no CUDA device: cudaGetDeviceCount returned 0";
    return status;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    status.message = std::string("CUDA device 0: ") + prop.name + ", sm_" + std::to_string(prop.major) +
                     std::to_string(prop.minor);
  }
  status.device_count = count;
  return status;
}

int cublas_version() { return CUBLAS_VERSION; }

}  // namespace ringkv::cuda
