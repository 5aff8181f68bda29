// ringkv cuda: the one launch wrapper and the dynamic shared memory declaration,
// used by the kernels of ring.cu, decode.cu and prefill.cu. With nvcc a launch is
// kernel<<<grid, block, smem, stream>>>(args) followed by cudaGetLastError(); in the
// host simulator (cuda/sim/, RINGKV_CUDA_SIM) the same kernel body runs on the CPU,
// a fiber per thread, under the simulator's checks. No kernel body exists twice.
#pragma once

// Planted thread-level bugs, for cuda-sim's tests only (cuda/sim/tests: each must be caught):
// RINGKV_BUG(n) is the constant false unless the build defines RINGKV_PLANTED_BUG, which the GPU
// build and cuda-sim's engine never do.
#if defined(RINGKV_PLANTED_BUG)
#define RINGKV_BUG(n) (RINGKV_PLANTED_BUG == (n))
#else
#define RINGKV_BUG(n) false
#endif

#if defined(RINGKV_CUDA_SIM)
#include "simt.hpp"  // cuda/sim/simt.hpp: ringkv::cuda::sim::launch_kernel, RINGKV_EXTERN_SHARED
#define RINGKV_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::ringkv::cuda::sim::launch_kernel(#kernel, __FILE__, __LINE__, kernel, grid, block, smem, stream, __VA_ARGS__)
#else
#include <cuda_runtime.h>

#include <utility>

namespace ringkv::cuda::gpu {
/// Enqueues kernel<<<grid, block, smem, stream>>>(args...) and returns the launch error.
template <class... P, class... A>
inline cudaError_t launch_kernel(void (*kernel)(P...), unsigned grid, unsigned block, size_t smem,
                                 cudaStream_t stream, A&&... args) {
  kernel<<<grid, block, smem, stream>>>(std::forward<A>(args)...);
  return cudaGetLastError();
}
}  // namespace ringkv::cuda::gpu

/// Launches `kernel` (a __global__ function; parenthesise a template-id with commas).
#define RINGKV_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::ringkv::cuda::gpu::launch_kernel(kernel, grid, block, smem, stream, __VA_ARGS__)
/// The block's dynamic shared memory (the launch's smem bytes), as an array of T.
#define RINGKV_EXTERN_SHARED(T, name) extern __shared__ __align__(16) T name[]
#endif
