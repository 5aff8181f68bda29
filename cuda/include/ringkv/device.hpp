// ringkv: CUDA device probe. GPU tests call cuda_device_status() and skip with
// its message when no usable device exists (no driver, no GPU, or an error).
#pragma once

#include <string>

namespace ringkv::cuda {

struct DeviceStatus {
  int device_count = 0;  ///< usable CUDA devices; 0 when none
  std::string message;   ///< e.g. "no CUDA device: CUDA driver version is insufficient (cudaErrorInsufficientDriver)"
};

/// Never throws and never aborts: any CUDA error reads as "no device" with the reason.
DeviceStatus cuda_device_status();

/// cuBLAS version linked into the engine, as major*1000 + minor*100 + patch.
int cublas_version();

}  // namespace ringkv::cuda
