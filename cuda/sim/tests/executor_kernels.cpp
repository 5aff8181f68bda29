// cuda-sim: small kernels for the executor's own tests (executor_test.cpp), compiled like the
// engine's kernels (simt.hpp, -fsanitize=thread hooks): the checks that no planted bug in the
// engine's kernels reaches (global overruns, shuffles and barriers after an exit, cross-warp
// order, the 48 KiB rule), and correct warp-synchronous code that must pass.
#include "../../src/launch.cuh"

namespace ringkv::cuda::simtest {
namespace {

constexpr unsigned kFull = 0xffffffffu;

__global__ void global_overrun_kernel(float* out, int n) {
  for (int i = static_cast<int>(threadIdx.x); i <= n; i += static_cast<int>(blockDim.x)) out[i] = 1.0f;  // one past
}

__global__ void butterfly_sum_kernel(float* out) {
  float v = static_cast<float>(threadIdx.x & 31);
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
  out[threadIdx.x] = v + __shfl_sync(kFull, 100.0f * static_cast<float>(threadIdx.x & 31), 3);
}

__global__ void shuffle_after_exit_kernel(float* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(kFull, 1.0f, 1);
}

__global__ void exit_before_barrier_kernel(float* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 0.0f;
}

__global__ void syncwarp_orders_a_warp_kernel(float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncwarp();
  out[threadIdx.x] = s[threadIdx.x ^ 1u];  // the same warp: __syncwarp orders it
}

__global__ void syncwarp_does_not_order_warps_kernel(float* out) {
  __shared__ float s2[64];
  s2[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncwarp();
  out[threadIdx.x] = s2[(threadIdx.x + 32u) % 64u];  // another warp: needs __syncthreads
}

__global__ void half_written_kernel(float* out) {
  __shared__ float s3[64];
  if (threadIdx.x < 32) s3[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = s3[threadIdx.x];  // threads 32..63 read words nobody wrote
}

__global__ void dynamic_shared_kernel(float* out) {
  RINGKV_EXTERN_SHARED(float, s);
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1u) % blockDim.x];
}

}  // namespace

cudaError_t global_overrun(float* out, int n) { return RINGKV_LAUNCH(global_overrun_kernel, 2, 32, 0, nullptr, out, n); }
cudaError_t butterfly_sum(float* out) { return RINGKV_LAUNCH(butterfly_sum_kernel, 1, 64, 0, nullptr, out); }
cudaError_t shuffle_after_exit(float* out) { return RINGKV_LAUNCH(shuffle_after_exit_kernel, 1, 32, 0, nullptr, out); }
cudaError_t exit_before_barrier(float* out) { return RINGKV_LAUNCH(exit_before_barrier_kernel, 1, 64, 0, nullptr, out); }
cudaError_t syncwarp_orders_a_warp(float* out) {
  return RINGKV_LAUNCH(syncwarp_orders_a_warp_kernel, 1, 64, 0, nullptr, out);
}
cudaError_t syncwarp_does_not_order_warps(float* out) {
  return RINGKV_LAUNCH(syncwarp_does_not_order_warps_kernel, 1, 64, 0, nullptr, out);
}
cudaError_t half_written(float* out) { return RINGKV_LAUNCH(half_written_kernel, 1, 64, 0, nullptr, out); }
cudaError_t dynamic_shared(float* out, size_t smem, bool opt_in) {
  if (opt_in) {
    const cudaError_t e = cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  return RINGKV_LAUNCH(dynamic_shared_kernel, 1, 64, smem, nullptr, out);
}

}  // namespace ringkv::cuda::simtest
