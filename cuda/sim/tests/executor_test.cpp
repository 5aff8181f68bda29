// cuda-sim: the executor's checks on small kernels (executor_kernels.cpp): each failure names
// the kernel, block, thread and line; correct warp-synchronous code passes with its results.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ringkv/error.hpp"
#include "sim_runtime.hpp"
#include "simt.hpp"

namespace ringkv::cuda::simtest {
cudaError_t global_overrun(float* out, int n);
cudaError_t butterfly_sum(float* out);
cudaError_t shuffle_after_exit(float* out);
cudaError_t exit_before_barrier(float* out);
cudaError_t syncwarp_orders_a_warp(float* out);
cudaError_t syncwarp_does_not_order_warps(float* out);
cudaError_t half_written(float* out);
cudaError_t dynamic_shared(float* out, size_t smem, bool opt_in);

namespace {

/// A buffer of `n` floats in the simulator's device arena.
struct DeviceFloats {
  explicit DeviceFloats(size_t n) : p(static_cast<float*>(sim::arena_allocate(n * sizeof(float)))) {}
  ~DeviceFloats() { sim::arena_release(p); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* p;
};

std::string failure_of(const std::function<cudaError_t()>& launch) {
  try {
    EXPECT_EQ(launch(), cudaSuccess);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_all(const std::string& failure, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(failure.empty()) << "not caught";
  for (const char* p : parts) EXPECT_NE(failure.find(p), std::string::npos) << "missing '" << p << "' in:\n" << failure;
}

TEST(Executor, AGlobalOverrunNamesTheBufferAndTheLine) {
  DeviceFloats out(64);
  expect_all(failure_of([&] { return global_overrun(out.p, 64); }),
             {"global_overrun_kernel", "block ", "thread 0", "out-of-bounds global access", "past its end",
              "executor_kernels.cpp:"});
}

TEST(Executor, AHostPointerInAKernelIsCaught) {
  std::vector<float> host(64);
  expect_all(failure_of([&] { return butterfly_sum(host.data()); }),
             {"butterfly_sum_kernel", "block 0", "thread ", "store to host memory", "a host pointer in a kernel?",
              "executor_kernels.cpp:"});
}

TEST(Executor, ShufflesExchangeAmongTheLanesOfAWarp) {
  DeviceFloats out(64);
  ASSERT_EQ(failure_of([&] { return butterfly_sum(out.p); }), "");
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out.p[t], 496.0f + 300.0f) << "thread " << t;  // Σ 0..31, lane 3's 100·3
}

TEST(Executor, AShuffleWaitingForAnExitedLaneIsCaught) {
  DeviceFloats out(32);
  expect_all(failure_of([&] { return shuffle_after_exit(out.p); }),
             {"shuffle_after_exit_kernel", "block 0", "lane 5", "exited", "executor_kernels.cpp:"});
}

TEST(Executor, AThreadThatExitsBeforeABarrierIsDivergence) {
  DeviceFloats out(64);
  expect_all(failure_of([&] { return exit_before_barrier(out.p); }),
             {"exit_before_barrier_kernel", "barrier divergence", "thread 0", "exited", "executor_kernels.cpp:"});
}

TEST(Executor, SyncwarpOrdersSharedMemoryWithinAWarpOnly) {
  DeviceFloats out(64);
  ASSERT_EQ(failure_of([&] { return syncwarp_orders_a_warp(out.p); }), "");
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out.p[t], static_cast<float>(t ^ 1));
  expect_all(failure_of([&] { return syncwarp_does_not_order_warps(out.p); }),
             {"syncwarp_does_not_order_warps_kernel", "shared-memory race", "static __shared__", "no barrier between",
              "executor_kernels.cpp:"});
}

TEST(Executor, AReadOfSharedMemoryNeverWrittenIsCaught) {
  DeviceFloats out(64);
  expect_all(failure_of([&] { return half_written(out.p); }),
             {"half_written_kernel", "never written in this block", "static __shared__", "executor_kernels.cpp:"});
}

TEST(Executor, DynamicSharedMemoryAbove48KiBNeedsTheAttributeAndStaysUnderTheDeviceLimit) {
  DeviceFloats out(64);
  ASSERT_EQ(failure_of([&] { return dynamic_shared(out.p, 256, false); }), "");
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out.p[t], static_cast<float>((t + 1) % 64));
  expect_all(failure_of([&] { return dynamic_shared(out.p, 64 * 1024, false); }),
             {"dynamic_shared_kernel", "above 48 KiB without cudaFuncSetAttribute"});
  EXPECT_EQ(failure_of([&] { return dynamic_shared(out.p, 64 * 1024, true); }), "");
  expect_all(failure_of([&] { return dynamic_shared(out.p, 240 * 1024, true); }),
             {"dynamic_shared_kernel", "exceeds the device's 232448"});
  // fewer bytes than the kernel uses: 64 threads write 256 bytes
  expect_all(failure_of([&] { return dynamic_shared(out.p, 128, false); }),
             {"dynamic_shared_kernel", "out-of-bounds dynamic shared memory store", "of the launch's 128 bytes"});
}

}  // namespace
}  // namespace ringkv::cuda::simtest
