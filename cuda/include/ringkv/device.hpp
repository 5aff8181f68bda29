// ringkv: CUDA device probe. GPU tests call cuda_device_status() and skip with
// its message when no usable device exists (no driver, no GPU, or an error).
#pragma once

#include <string>

namespace ringkv::cuda {

struct DeviceStatus {
  int device_count = 0;  ///< usable CUDA devices; 0 when none
  /// Why there is none, or device 0: "no CUDA device: no NVIDIA driver found (libcuda.so.1: cannot open shared
  /// object file: ...) and no NVIDIA device (no /dev/nvidia0) (cudaErrorInsufficientDriver)" on a machine without
  /// a driver; where a driver exists, the CUDA runtime's words ("no CUDA device: no CUDA-capable device is
  /// detected (cudaErrorNoDevice)").
  std::string message;
};

/// Never throws and never aborts: any CUDA error reads as "no device" with the reason.
DeviceStatus cuda_device_status();

/// "" when the NVIDIA driver (libcuda.so.1) can be loaded; else what is missing, in words ("no NVIDIA driver
/// found (libcuda.so.1: cannot open shared object file: No such file or directory) and no NVIDIA device (no
/// /dev/nvidia0)").
std::string nvidia_driver_absent();

/// cuBLAS version linked into the engine, as major*1000 + minor*100 + patch.
int cublas_version();

}  // namespace ringkv::cuda
