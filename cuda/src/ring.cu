// ringkv cuda: the kernels that write and read the ring: append (RoPE at true
// positions, then the K/V encodes of spec §8 and §10), commit (stage rows to
// their ring slots), gather (the ring and stage rows decoded to f32 for the
// cuBLAS path) and poison (the test hook). Each block does what one simulated
// block of the plan backend (plan_backend.cpp) does, with the same
// __host__ __device__ functions; only the work is spread over the threads.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels.cuh"
#include "launch.cuh"
#include "ringkv/cuda/ring.hpp"

namespace ringkv::cuda {
namespace {

constexpr int kThreads = 128;
/// INT8 scale groups per row: D / group with D ≤ 1024 and group 32 (q8_0) or D.
constexpr int kMaxInt8Groups = 32;
constexpr unsigned kFullMask = 0xffffffffu;

/// Row index of (sequence, slot, kv head) in a layer's ring.
__device__ __forceinline__ int64_t ring_row(int seq, int64_t slot, int h, int Hkv, int64_t C) {
  return (int64_t{seq} * C + slot) * Hkv + h;
}

/// Element i of a row in a float format, as encode_float_element writes it: the same bytes
/// (little-endian), stored with one access of the element's width.
__device__ __forceinline__ void store_float_element(const FormatDesc& f, float x, uint8_t* row, int i) {
  switch (f.dtype) {
    case kF32: reinterpret_cast<uint32_t*>(row)[i] = bits_of(x); return;
    case kF16: reinterpret_cast<uint16_t*>(row)[i] = f16_bits(x); return;
    case kBF16: reinterpret_cast<uint16_t*>(row)[i] = bf16_bits(x); return;
    default: encode_float_element(f, x, row, i); return;  // fp8: one byte
  }
}

/// RoPE of a row in shared memory, one pair per thread (rope_rotate_row's calls, spread over
/// the block). The caller synchronises before (row loaded) and after (row rotated).
__device__ void rope_rotate_shared(const RopeDesc& rope, int64_t position, float* x) {
  if (rope.style == kRopeNone) return;
  const double scaled = rope_scaled_position(rope, position);
  for (int k = threadIdx.x; k < rope.rotary_dim / 2; k += blockDim.x) {
    const double angle = rope_angle(scaled, rope.inv_freq[k]);
    int ia, ib;
    rope_pair(rope.style, rope.rotary_dim, k, &ia, &ib);
    double sn, cs;
    rope_sincos(angle, &sn, &cs);
    float a, b;
    rope_rotate_pair(x[ia], x[ib], cs, sn, &a, &b);
    x[ia] = a;
    x[ib] = b;
  }
}

/// The INT8 scales of every group of a row in shared memory: one warp per group reduces its
/// amax (a max of |x|, exact in any order), lane 0 applies int8_scales and keeps the stored
/// scale when the format stores one. The caller synchronises before the codes read `out`.
__device__ void int8_row_scales(const FormatDesc& f, int D, const float* x, Int8Scales* out, float* stored) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int groups = D / f.group;
  for (int gi = warp; gi < groups; gi += warps) {
    float amax = 0.0f;
    for (int e = lane; e < f.group; e += 32) amax = max_f32(amax, fabs_f32(x[gi * f.group + e]));
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) amax = max_f32(amax, __shfl_xor_sync(kFullMask, amax, off));
    if (lane == 0) {
      const Int8Scales s = int8_scales(f, amax);
      out[gi] = s;
      if (f.scales_per_row > 0) stored[gi] = s.stored;
    }
  }
}

/// Encodes element d of a row (scales of an INT8 row from int8_row_scales).
__device__ __forceinline__ void encode_element(const FormatDesc& f, const Int8Scales* scales, const float* x,
                                               uint8_t* row, int d) {
  if (f.dtype == kInt8) {
    row[d] = static_cast<uint8_t>(int8_encode(f, scales[d / f.group], x[d]));
  } else {
    store_float_element(f, x[d], row, d);
  }
}

/// Copies `bytes` bytes with the widest access both pointers and the size allow.
__device__ void copy_bytes(uint8_t* dst, const uint8_t* src, size_t bytes) {
  const auto align = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | bytes;
  if (align % 16 == 0) {
    for (size_t w = threadIdx.x; w < bytes / 16; w += blockDim.x) {
      reinterpret_cast<uint4*>(dst)[w] = reinterpret_cast<const uint4*>(src)[w];
    }
  } else if (align % 4 == 0) {
    for (size_t w = threadIdx.x; w < bytes / 4; w += blockDim.x) {
      reinterpret_cast<uint32_t*>(dst)[w] = reinterpret_cast<const uint32_t*>(src)[w];
    }
  } else {
    for (size_t w = threadIdx.x; w < bytes; w += blockDim.x) dst[w] = src[w];
  }
}

// ---------------------------------------------------------------- append

/// Grid: items × max_n × (Hq + Hkv) blocks, block (i, t, r) flattened with r fastest. A block
/// r < Hq rotates query head r of token t of item i into q_rot; a block r = Hq + h rotates kv
/// head h's K and encodes K and V into the ring slot of the token (decode) or its stage row
/// (prefill). Rows are loaded into shared memory as f32, rotated there, then encoded.
__global__ void __launch_bounds__(kThreads) append_kernel(const AppendParams p) {
  RINGKV_EXTERN_SHARED(float, append_smem);  // x [D] (the q row or K), y [D] (V)
  __shared__ Int8Scales k_int8[kMaxInt8Groups], v_int8[kMaxInt8Groups];
  const LayerShape& s = p.shape;
  const int Hq = s.num_q_heads, Hkv = s.num_kv_heads, D = s.head_dim, G = Hq / Hkv;
  const int rows = Hq + Hkv;
  const int r = static_cast<int>(blockIdx.x % static_cast<unsigned>(rows));
  const int64_t it_t = blockIdx.x / static_cast<unsigned>(rows);
  const int64_t t = it_t % p.max_n;
  const int i = static_cast<int>(it_t / p.max_n);
  const SeqItem it = p.items[i];
  if (t >= it.n) return;
  const int64_t index = it.first + t, position = it.p0 + index, tok = it.token_offset + t;
  float* x = append_smem;
  float* y = append_smem + D;

  if (r < Hq) {
    const int64_t base = ((int64_t{s.layer} * it.layer_tokens + tok) * Hq + r) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) x[d] = load_input(it.q, p.input_type, base + d);
    __syncthreads();
    rope_rotate_shared(p.rope, position, x);
    __syncthreads();
    float* dst = p.q_rot + i * p.q_item_stride + t * p.q_token_stride + (r / G) * p.q_group_stride +
                 int64_t{r % G} * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) dst[d] = x[d];
    return;
  }

  const int h = r - Hq;
  const int64_t base = ((int64_t{s.layer} * it.layer_tokens + tok) * Hkv + h) * D;
  const int64_t k_row = int64_t{D} * p.kf.bytes, v_row = int64_t{D} * p.vf.bytes;
  uint8_t *kd, *vd;
  float *ks, *vs;
  if (p.staged) {
    const int64_t srow = t * Hkv + h;
    kd = p.stage.k + srow * k_row;
    vd = p.stage.v + srow * v_row;
    ks = p.stage.k_scales ? p.stage.k_scales + srow * p.kf.scales_per_row : nullptr;
    vs = p.stage.v_scales ? p.stage.v_scales + srow * p.vf.scales_per_row : nullptr;
    if (h == 0 && threadIdx.x == 0) p.stage.positions[t] = position;
  } else {
    const int64_t slot = slot_of(index, p.ring.sinks, p.ring.capacity);
    const int64_t row = ring_row(it.sequence, slot, h, Hkv, p.ring.capacity);
    kd = p.ring.k + row * k_row;
    vd = p.ring.v + row * v_row;
    ks = p.ring.k_scales ? p.ring.k_scales + row * p.kf.scales_per_row : nullptr;
    vs = p.ring.v_scales ? p.ring.v_scales + row * p.vf.scales_per_row : nullptr;
    if (h == 0 && threadIdx.x == 0) p.ring.positions[int64_t{it.sequence} * p.ring.capacity + slot] = position;
  }
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    x[d] = load_input(it.k, p.input_type, base + d);
    y[d] = load_input(it.v, p.input_type, base + d);
  }
  __syncthreads();
  rope_rotate_shared(p.rope, position, x);
  __syncthreads();
  if (p.kf.dtype == kInt8 || p.vf.dtype == kInt8) {
    if (p.kf.dtype == kInt8) int8_row_scales(p.kf, D, x, k_int8, ks);
    if (p.vf.dtype == kInt8) int8_row_scales(p.vf, D, y, v_int8, vs);
    __syncthreads();
  }
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    encode_element(p.kf, k_int8, x, kd, d);
    encode_element(p.vf, v_int8, y, vd, d);
  }
}

// ---------------------------------------------------------------- commit

/// Grid: n × Hkv blocks, block (t, h) flattened with h fastest: copies the stage rows (K, V,
/// their stored scales) of token t, kv head h, into the token's ring slot when the token is the
/// last of the chunk to land there (lands_last), and kv head 0 writes the slot's position.
__global__ void __launch_bounds__(kThreads) commit_kernel(const CommitParams p) {
  const int Hkv = p.num_kv_heads, D = p.head_dim;
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(Hkv));
  const int64_t t = blockIdx.x / static_cast<unsigned>(Hkv);
  const int seq = p.item->sequence;
  const int64_t first = p.item->first, j = first + t;
  if (!lands_last(j, first, p.n, p.ring.sinks, p.ring.capacity)) return;
  const int64_t slot = slot_of(j, p.ring.sinks, p.ring.capacity);
  const int64_t row = ring_row(seq, slot, h, Hkv, p.ring.capacity), srow = t * Hkv + h;
  const int64_t k_row = int64_t{D} * p.kf.bytes, v_row = int64_t{D} * p.vf.bytes;
  copy_bytes(p.ring.k + row * k_row, p.stage.k + srow * k_row, static_cast<size_t>(k_row));
  copy_bytes(p.ring.v + row * v_row, p.stage.v + srow * v_row, static_cast<size_t>(v_row));
  for (int e = threadIdx.x; e < p.kf.scales_per_row; e += blockDim.x) {
    p.ring.k_scales[row * p.kf.scales_per_row + e] = p.stage.k_scales[srow * p.kf.scales_per_row + e];
  }
  for (int e = threadIdx.x; e < p.vf.scales_per_row; e += blockDim.x) {
    p.ring.v_scales[row * p.vf.scales_per_row + e] = p.stage.v_scales[srow * p.vf.scales_per_row + e];
  }
  if (h == 0 && threadIdx.x == 0) p.ring.positions[int64_t{seq} * p.ring.capacity + slot] = p.stage.positions[t];
}

// ---------------------------------------------------------------- gather

/// Grid: (C + n) × Hkv blocks, block (c, h) flattened with h fastest: decodes key c (ring slot
/// c < C, else stage row c − C) of kv head h to f32 K and V rows with decode_element, zeros for
/// an empty slot; kv head 0 writes the key's position.
__global__ void __launch_bounds__(kThreads) gather_kernel(const GatherParams p) {
  const int Hkv = p.num_kv_heads, D = p.head_dim;
  const int64_t C = p.ring.capacity, keys = C + p.n;
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(Hkv));
  const int64_t c = blockIdx.x / static_cast<unsigned>(Hkv);
  const int64_t k_row = int64_t{D} * p.kf.bytes, v_row = int64_t{D} * p.vf.bytes;
  const uint8_t *kr, *vr;
  const float *ks, *vs;
  int64_t pos;
  if (c < C) {
    const int64_t row = ring_row(p.sequence, c, h, Hkv, C);
    pos = p.ring.positions[int64_t{p.sequence} * C + c];
    kr = p.ring.k + row * k_row;
    vr = p.ring.v + row * v_row;
    ks = p.ring.k_scales ? p.ring.k_scales + row * p.kf.scales_per_row : nullptr;
    vs = p.ring.v_scales ? p.ring.v_scales + row * p.vf.scales_per_row : nullptr;
  } else {
    const int64_t srow = (c - C) * Hkv + h;
    pos = p.stage.positions[c - C];
    kr = p.stage.k + srow * k_row;
    vr = p.stage.v + srow * v_row;
    ks = p.stage.k_scales ? p.stage.k_scales + srow * p.kf.scales_per_row : nullptr;
    vs = p.stage.v_scales ? p.stage.v_scales + srow * p.vf.scales_per_row : nullptr;
  }
  float* ko = p.k_out + (int64_t{h} * keys + c) * D;
  float* vo = p.v_out + (int64_t{h} * keys + c) * D;
  const bool empty = pos == kEmptySlot;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    ko[d] = empty ? 0.0f : decode_element(p.kf, kr, ks, d);
    vo[d] = empty ? 0.0f : decode_element(p.vf, vr, vs, d);
  }
  if (h == 0 && threadIdx.x == 0) p.key_positions[c] = pos;
}

// ---------------------------------------------------------------- poison

/// Grid: B·C × Hkv blocks, block (b·C + c, h) flattened with h fastest: when slot c of sequence
/// b is empty, writes the formats' NaN pattern (poison_element) into kv head h's K and V rows
/// and NaN into their stored scales.
__global__ void __launch_bounds__(kThreads) poison_kernel(const PoisonParams p) {
  const int Hkv = p.num_kv_heads, D = p.head_dim;
  const int64_t C = p.ring.capacity;
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(Hkv));
  const int64_t bc = blockIdx.x / static_cast<unsigned>(Hkv);
  if (p.ring.positions[bc] != kEmptySlot) return;
  const int b = static_cast<int>(bc / C);
  const int64_t row = ring_row(b, bc % C, h, Hkv, C);
  uint8_t* kr = p.ring.k + row * D * p.kf.bytes;
  uint8_t* vr = p.ring.v + row * D * p.vf.bytes;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    poison_element(p.kf, kr, d);
    poison_element(p.vf, vr, d);
  }
  const float nan = float_of(0x7fc00000u);
  if (p.ring.k_scales) {
    for (int e = threadIdx.x; e < p.kf.scales_per_row; e += blockDim.x) p.ring.k_scales[row * p.kf.scales_per_row + e] = nan;
  }
  if (p.ring.v_scales) {
    for (int e = threadIdx.x; e < p.vf.scales_per_row; e += blockDim.x) p.ring.v_scales[row * p.vf.scales_per_row + e] = nan;
  }
}

/// Whether an INT8 row's scale groups fit the append kernel's shared scales.
bool int8_groups_fit(const FormatDesc& f, int D) {
  return f.dtype != kInt8 || (f.group >= 1 && D % f.group == 0 && D / f.group <= kMaxInt8Groups);
}

/// Blocks of a flattened grid, or 0 when the count does not fit a 1-D grid.
unsigned grid_blocks(int64_t blocks) { return blocks > INT_MAX ? 0u : static_cast<unsigned>(blocks); }

}  // namespace

cudaError_t launch_append(const AppendParams& p, cudaStream_t stream) {
  const int64_t blocks = int64_t{p.num_items} * p.max_n * (p.shape.num_q_heads + p.shape.num_kv_heads);
  if (blocks <= 0) return cudaSuccess;
  if (grid_blocks(blocks) == 0) return cudaErrorInvalidConfiguration;
  if (!int8_groups_fit(p.kf, p.shape.head_dim) || !int8_groups_fit(p.vf, p.shape.head_dim)) return cudaErrorInvalidValue;
  const size_t smem = 2 * static_cast<size_t>(p.shape.head_dim) * sizeof(float);
  return RINGKV_LAUNCH(append_kernel, grid_blocks(blocks), kThreads, smem, stream, p);
}

cudaError_t launch_commit(const CommitParams& p, cudaStream_t stream) {
  const int64_t blocks = p.n * p.num_kv_heads;
  if (blocks <= 0) return cudaSuccess;
  if (grid_blocks(blocks) == 0) return cudaErrorInvalidConfiguration;
  return RINGKV_LAUNCH(commit_kernel, grid_blocks(blocks), kThreads, 0, stream, p);
}

cudaError_t launch_gather(const GatherParams& p, cudaStream_t stream) {
  const int64_t blocks = (p.ring.capacity + p.n) * p.num_kv_heads;
  if (blocks <= 0) return cudaSuccess;
  if (grid_blocks(blocks) == 0) return cudaErrorInvalidConfiguration;
  return RINGKV_LAUNCH(gather_kernel, grid_blocks(blocks), kThreads, 0, stream, p);
}

cudaError_t launch_poison(const PoisonParams& p, cudaStream_t stream) {
  const int64_t blocks = int64_t{p.batch} * p.ring.capacity * p.num_kv_heads;
  if (blocks <= 0) return cudaSuccess;
  if (grid_blocks(blocks) == 0) return cudaErrorInvalidConfiguration;
  return RINGKV_LAUNCH(poison_kernel, grid_blocks(blocks), kThreads, 0, stream, p);
}

}  // namespace ringkv::cuda
