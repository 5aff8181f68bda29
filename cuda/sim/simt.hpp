// ringkv cuda-sim: the CUDA constructs the kernels of cuda/src use, for the host
// compiler. ring.cu, decode.cu and prefill.cu are compiled as host C++ against this
// header (through the shim <cuda_runtime.h>, <cuda_runtime_api.h> and <cuda_fp16.h>
// of cuda/sim/shim) and run by the SIMT executor of simt.cpp: every thread of a
// block is a fiber, __syncthreads/__syncwarp are barriers, shuffles are exchanges
// among the lanes of a warp. Every memory access of the kernel translation units
// reaches the executor's checks (see cuda/sim/README in docs/cuda-sim.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#ifndef RINGKV_CUDA_SIM
#define RINGKV_CUDA_SIM 1
#endif

// The __host__ __device__ functions of cuda/include are inlined into the kernels'
// translation units (so their memory accesses are checked there too).
#ifndef RINGKV_HD
#define RINGKV_HD [[gnu::always_inline]] inline
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ [[gnu::always_inline]] inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __restrict__ __restrict
// Static shared memory: one instance, in a section of its own, that every block reuses in
// turn (blocks run one after another); the executor knows its extent and tags its words.
#define __shared__ static __attribute__((section("ringkv_sim_shared")))

#if defined(RINGKV_PLANTED_BUG)
extern int ringkv_sim_planted_bug;  // the planted bug switched on (cuda/sim/tests), 0 for none
#endif

// ---------------------------------------------------------------- runtime API subset
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
typedef enum cudaError cudaError_t;
struct CUstream_st;
typedef CUstream_st* cudaStream_t;
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace ringkv::cuda::sim {

/// What a running fiber sees as threadIdx, blockIdx, blockDim and gridDim.
struct ThreadView {
  uint3 thread{0, 0, 0};
  uint3 block{0, 0, 0};
  dim3 block_dim;
  dim3 grid_dim;
};
extern thread_local const ThreadView* tl_view;

// Entry points of the executor (simt.cpp). Each takes the call site from its own return
// address, which lies in the kernel that called it.
[[gnu::noinline]] void syncthreads();
[[gnu::noinline]] void syncwarp(unsigned mask);
[[gnu::noinline]] uint64_t shuffle(unsigned mask, uint64_t bits, int lane_or_xor, bool is_xor, int width);
[[gnu::noinline]] void check_vector(const void* p, size_t bytes, bool write);
[[gnu::noinline]] void check_ldg(const void* p, size_t bytes, size_t align);
void set_max_dynamic_smem(const void* kernel, int bytes);
cudaError_t last_error();

struct LaunchSpec {
  const char* kernel;
  const char* file;
  int line;
  const void* fn;
  unsigned grid, block;
  size_t smem;
  // the launch's own host memory the kernel's entry reads: its arguments and their closure
  const void* args;
  size_t args_bytes;
  const void* closure;
  size_t closure_bytes;
};
/// Runs the launch: every block (in an order drawn from the seed), each block's threads as
/// fibers running body(closure). Throws ringkv::Error on the first check that fails.
cudaError_t run_launch(const LaunchSpec& spec, void (*body)(void*), void* closure);

template <class... P, class... A>
cudaError_t launch_kernel(const char* name, const char* file, int line, void (*kernel)(P...), unsigned grid,
                          unsigned block, size_t smem, cudaStream_t, A&&... args) {
  std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  struct Closure {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...>* params;
  } c{kernel, &params};
  const LaunchSpec spec{name,  file, line,       reinterpret_cast<const void*>(kernel), grid, block, smem,
                        &params, sizeof params, &c, sizeof c};
  return run_launch(
      spec, [](void* v) { auto* cl = static_cast<Closure*>(v); std::apply(cl->kernel, *cl->params); }, &c);
}

/// The block's dynamic shared memory (exactly the launch's bytes, then a guard zone).
void* dynamic_shared();

}  // namespace ringkv::cuda::sim

#define RINGKV_EXTERN_SHARED(T, name) T* const name = static_cast<T*>(::ringkv::cuda::sim::dynamic_shared())

#define threadIdx (::ringkv::cuda::sim::tl_view->thread)
#define blockIdx (::ringkv::cuda::sim::tl_view->block)
#define blockDim (::ringkv::cuda::sim::tl_view->block_dim)
#define gridDim (::ringkv::cuda::sim::tl_view->grid_dim)

[[gnu::always_inline]] inline void __syncthreads() { ::ringkv::cuda::sim::syncthreads(); }
[[gnu::always_inline]] inline void __syncwarp(unsigned mask = 0xffffffffu) { ::ringkv::cuda::sim::syncwarp(mask); }

template <class T>
[[gnu::always_inline]] inline T ringkv_sim_shfl(unsigned mask, T v, int arg, bool is_xor, int width) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move 4- or 8-byte values");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = ::ringkv::cuda::sim::shuffle(mask, bits, arg, is_xor, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
template <class T>
[[gnu::always_inline]] inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ringkv_sim_shfl(mask, v, lane_mask, true, width);
}
template <class T>
[[gnu::always_inline]] inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  return ringkv_sim_shfl(mask, v, src_lane, false, width);
}

template <class F>
cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    ::ringkv::cuda::sim::set_max_dynamic_smem(reinterpret_cast<const void*>(kernel), value);
  }
  return cudaSuccess;
}
inline cudaError_t cudaGetLastError() { return ::ringkv::cuda::sim::last_error(); }

// ---------------------------------------------------------------- vector types
// Copies check the alignment of the memory they read or write (a misaligned uint4 load).
#define RINGKV_SIM_VECTOR(NAME, T, ALIGN, ...)                                                  \
  struct alignas(ALIGN) NAME {                                                                  \
    T __VA_ARGS__;                                                                              \
    NAME() = default;                                                                           \
    [[gnu::always_inline]] NAME(const NAME& o) {                                                \
      ::ringkv::cuda::sim::check_vector(&o, sizeof(NAME), false);                               \
      std::memcpy(static_cast<void*>(this), &o, sizeof(NAME));                                  \
    }                                                                                           \
    [[gnu::always_inline]] NAME& operator=(const NAME& o) {                                     \
      ::ringkv::cuda::sim::check_vector(this, sizeof(NAME), true);                              \
      ::ringkv::cuda::sim::check_vector(&o, sizeof(NAME), false);                               \
      std::memcpy(static_cast<void*>(this), &o, sizeof(NAME));                                  \
      return *this;                                                                             \
    }                                                                                           \
  };
RINGKV_SIM_VECTOR(uint4, unsigned, 16, x, y, z, w)
RINGKV_SIM_VECTOR(uint2, unsigned, 8, x, y)
RINGKV_SIM_VECTOR(float4, float, 16, x, y, z, w)
#undef RINGKV_SIM_VECTOR

[[gnu::always_inline]] inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  uint4 r;
  r.x = x, r.y = y, r.z = z, r.w = w;
  return r;
}
[[gnu::always_inline]] inline uint2 make_uint2(unsigned x, unsigned y) {
  uint2 r;
  r.x = x, r.y = y;
  return r;
}
[[gnu::always_inline]] inline float4 make_float4(float x, float y, float z, float w) {
  float4 r;
  r.x = x, r.y = y, r.z = z, r.w = w;
  return r;
}

/// __ldg: a load (through the read-only path on a GPU), here with its alignment checked.
template <class T>
[[gnu::always_inline]] inline T __ldg(const T* p) {
  ::ringkv::cuda::sim::check_ldg(p, sizeof(T), alignof(T));
  return *p;
}

// ---------------------------------------------------------------- fp16
struct __half {
  unsigned short x;
};
[[gnu::always_inline]] inline __half __ushort_as_half(unsigned short v) { return __half{v}; }
