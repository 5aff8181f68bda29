#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include "ringkv/device.hpp"

namespace ringkv::cuda {

std::string nvidia_driver_absent() {
  // The driver is libcuda.so.1 (the runtime loads it by that name); a toolkit's stub libcuda.so is not it.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (driver == nullptr) driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver != nullptr) {
    dlclose(driver);
    return {};
  }
  const char* why = dlerror();
  std::error_code ec;
  const bool device_node = std::filesystem::exists("/dev/nvidiactl", ec) || std::filesystem::exists("/dev/nvidia0", ec);
  return std::string("no NVIDIA driver found (") + (why ? why : "libcuda.so.1 cannot be loaded") + ")" +
         (device_node ? ", although /dev/nvidiactl or /dev/nvidia0 exists" : " and no NVIDIA device (no /dev/nvidia0)");
}

DeviceStatus cuda_device_status() {
  DeviceStatus status;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // Without a driver the runtime says "CUDA driver version is insufficient", which is not what is
    // wrong there: say that there is none. Where a driver exists, its words are kept.
    const std::string absent = nvidia_driver_absent();
    status.message = "no CUDA device: " + (absent.empty() ? std::string(cudaGetErrorString(err)) : absent) + " (" +
                     cudaGetErrorName(err) + ")";
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
