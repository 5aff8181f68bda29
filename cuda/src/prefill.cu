// ringkv cuda: the kernels of the cuBLAS path between and after its two GEMMs:
// the masked softmax (visibility by true positions, scale, softcap, sink logit)
// and the scatter of P·V into the outputs. Each block does what one simulated
// block of PlanBackend::masked_softmax / PlanBackend::scatter does
// (plan_backend.cpp), with the row's max and sum reduced across the block.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels.cuh"
#include "launch.cuh"
#include "ringkv/cuda/ring.hpp"

namespace ringkv::cuda {
namespace {

constexpr int kSoftmaxThreads = 256;
constexpr int kScatterThreads = 128;
constexpr unsigned kFullMask = 0xffffffffu;

/// The block-wide max (kMax) or f32 sum of every thread's v, in a fixed order (lanes by xor
/// butterfly, then the warps in order); every thread returns the same value.
template <bool kMax>
__device__ float block_reduce(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(kFullMask, v, off);
    v = kMax ? max_f32(v, o) : add_rn(v, o);
  }
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < warps; ++w) r = kMax ? max_f32(r, red[w]) : add_rn(r, red[w]);
  __syncthreads();  // red is free again
  return r;
}

/// Grid: Hkv × n·G blocks, block (g, r) flattened with r fastest: row r (token r / G, query head
/// g·G + r mod G) of kv group g's scores. Keys the query does not see (slot_visible of their true
/// positions) become −inf, the rest score_of their dots; the max includes the sink logit; each
/// visible key gets exp(s − max), masked keys 0; the row is divided by the sum (plus the sink's
/// exp(σ − max)).
__global__ void __launch_bounds__(kSoftmaxThreads) masked_softmax_kernel(const MaskedSoftmaxParams p) {
  __shared__ float red[kSoftmaxThreads / 32];
  const LayerShape& s = p.shape;
  const int G = s.num_q_heads / s.num_kv_heads;
  const int64_t rows = p.n * G, block = blockIdx.x;
  const int g = static_cast<int>(block / rows);
  const int64_t r = block % rows;
  const int64_t query = p.first + r / G;
  const int h = g * G + static_cast<int>(r % G);
  float* row = p.scores + block * p.keys;
  const bool has_sink = s.sink_logits != nullptr;
  const float sink = has_sink ? s.sink_logits[h] : neg_inf_f32();

  float mx = neg_inf_f32();
  for (int64_t c = threadIdx.x; c < p.keys; c += blockDim.x) {
    const bool vis = slot_visible(query, p.key_positions[c], p.p0, p.sinks, p.window);
    const float v = vis ? score_of(row[c], s.scale, s.capped, s.cap) : neg_inf_f32();
    row[c] = v;
    mx = max_f32(mx, v);
  }
  mx = max_f32(sink, block_reduce<true>(mx, red));

  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < p.keys; c += blockDim.x) {
    const float v = row[c];
    if (v == neg_inf_f32()) {
      row[c] = 0.0f;
      continue;
    }
    const float e = exp_f32(v - mx);
    row[c] = e;
    sum = add_rn(sum, e);
  }
  sum = block_reduce<false>(sum, red);
  if (has_sink) sum = add_rn(exp_f32(sink - mx), sum);
  for (int64_t c = threadIdx.x; c < p.keys; c += blockDim.x) row[c] = div_rn(row[c], sum);
}

/// Grid: n × Hq blocks, block (t, h) flattened with h fastest: copies the P·V row of token t,
/// query head h = g·G + m (o [Hkv][n·G][D]) into the item's out tensor.
__global__ void __launch_bounds__(kScatterThreads) scatter_kernel(const ScatterParams p) {
  const LayerShape& s = p.shape;
  const int Hq = s.num_q_heads, G = Hq / s.num_kv_heads, D = s.head_dim;
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(Hq));
  const int64_t t = blockIdx.x / static_cast<unsigned>(Hq);
  const int g = h / G, m = h % G;
  const SeqItem& it = *p.item;
  const float* src = p.o + ((int64_t{g} * p.n + t) * G + m) * D;
  float* dst = it.out + ((int64_t{s.layer} * it.layer_tokens + it.token_offset + t) * Hq + h) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) dst[d] = src[d];
}

}  // namespace

cudaError_t launch_masked_softmax(const MaskedSoftmaxParams& p, cudaStream_t stream) {
  const int64_t blocks = p.n * p.shape.num_q_heads;  // Hkv · n·G
  if (blocks <= 0 || p.keys <= 0) return cudaSuccess;
  if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;
  return RINGKV_LAUNCH(masked_softmax_kernel, static_cast<unsigned>(blocks), kSoftmaxThreads, 0, stream, p);
}

cudaError_t launch_scatter(const ScatterParams& p, cudaStream_t stream) {
  const int64_t blocks = p.n * p.shape.num_q_heads;
  if (blocks <= 0) return cudaSuccess;
  if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;
  return RINGKV_LAUNCH(scatter_kernel, static_cast<unsigned>(blocks), kScatterThreads, 0, stream, p);
}

}  // namespace ringkv::cuda
