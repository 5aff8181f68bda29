// ringkv: GPU tests. They skip cleanly, with the reason, when ringkv was built
// without CUDA or when no usable CUDA device is present (no driver, no GPU).
#include <gtest/gtest.h>

#include <cctype>
#include <cstddef>
#include <iostream>
#include <string>

#ifdef RINGKV_HAVE_CUDA
#include "ringkv/device.hpp"
#endif

namespace {

#ifdef RINGKV_HAVE_CUDA

/// Compute capability "major.minor" parsed from the probe's "..., sm_XY" message; empty if absent.
std::string compute_capability(const std::string& message) {
  const size_t at = message.rfind("sm_");
  if (at == std::string::npos) return {};
  std::string digits;
  for (size_t i = at + 3; i < message.size() && std::isdigit(static_cast<unsigned char>(message[i])); ++i) {
    digits += message[i];
  }
  if (digits.size() < 2) return {};
  // The probe writes major then minor; minor is one digit (sm_90, sm_100, sm_120).
  return digits.substr(0, digits.size() - 1) + "." + digits.substr(digits.size() - 1);
}

TEST(CudaDevice, ReportsComputeCapabilityAndCublas) {
  const ringkv::cuda::DeviceStatus status = ringkv::cuda::cuda_device_status();
  if (status.device_count == 0) GTEST_SKIP() << status.message;
  EXPECT_GT(status.device_count, 0);
  const std::string cc = compute_capability(status.message);
  ASSERT_FALSE(cc.empty()) << "device 0 reported no compute capability: \"" << status.message << "\"";
  const int major = std::stoi(cc.substr(0, cc.find('.')));
  EXPECT_GE(major, 1) << status.message;
  EXPECT_GT(ringkv::cuda::cublas_version(), 0);
  std::cout << status.message << " (compute capability " << cc << "), cuBLAS "
            << ringkv::cuda::cublas_version() << "\n";
}

TEST(CudaDevice, ProbeNeverThrowsAndAlwaysExplains) {
  ringkv::cuda::DeviceStatus status;
  EXPECT_NO_THROW(status = ringkv::cuda::cuda_device_status());
  EXPECT_GE(status.device_count, 0);
  EXPECT_FALSE(status.message.empty());
}

#else

TEST(CudaDevice, ReportsComputeCapabilityAndCublas) {
  GTEST_SKIP() << "ringkv was built without CUDA (RINGKV_CUDA=OFF)";
}

#endif

}  // namespace
