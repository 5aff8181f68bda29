// ringkv cuda: the fused split-K flash-decoding kernels and the log-sum-exp merge
// of their splits. They compute what PlanBackend::decode and PlanBackend::merge
// compute (plan_backend.cpp), with the same __host__ __device__ functions in
// the same order: tiles in slot order, per tile the scores (score_of), the tile
// max, online_rescale, the weights online_weight, then P·V; the merge with
// merge_start, merge_max over the splits, merge_rebase_sink and merge_weight.
// Two kernels serve a decode launch: the warp kernel (a split per warp) where
// decode_warp_heads() says it applies, the block kernel (a split per block)
// elsewhere. What differs from the plan is only the mapping onto threads and
// the order of sums inside a tile: a key's dot product is summed in partial
// sums across lanes (the warp kernel with fused multiply-adds), a tile's
// weights are summed across lanes, and the warp kernel adds P·V per lane's keys
// and then across its key groups.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include <cuda_fp16.h>

#include "kernels.cuh"
#include "launch.cuh"
#include "ringkv/cuda/ring.hpp"

namespace ringkv::cuda {
namespace {

constexpr int kMaxHeads = 16;                            // decode_heads_per_block's cap
constexpr int kMaxTile = 32;                             // decode_tile's cap (one lane per key)
constexpr int kMaxAcc = 4096 / kDecodeThreads;           // heads · D ≤ 4096: accumulators per thread
constexpr int kMaxGroup = 16;                           // lanes per key (128 / the smallest tile, 8)
constexpr int kWarps = kDecodeThreads / 32;
constexpr int kInFlight = 4;                             // 16-byte loads in flight per thread and row
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMergeThreads = 128;

// ---------------------------------------------------------------- element decodes

/// Bytes per stored element of a dtype code.
template <int DT>
constexpr int kBytes = DT == kF32 ? 4 : (DT == kF16 || DT == kBF16) ? 2 : 1;

/// decode_element's value of one element from its code (the element's little-endian bytes) and
/// the scale decode_element would use (fp8: f.scale; INT8: the group's stored or static scale).
template <int DT>
__device__ __forceinline__ float decode_code(uint32_t code, float s) {
  if constexpr (DT == kF32) {
    return float_of(code);
  } else if constexpr (DT == kF16) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(code)));  // exact, as f16_value
  } else if constexpr (DT == kBF16) {
    return bf16_value(static_cast<uint16_t>(code));
  } else if constexpr (DT == kFp8E4M3) {
    return mul_rn(e4m3_value(static_cast<uint8_t>(code)), s);
  } else if constexpr (DT == kFp8E5M2) {
    return mul_rn(e5m2_value(static_cast<uint8_t>(code)), s);
  } else {
    return int8_value(static_cast<int8_t>(static_cast<uint8_t>(code)), s);
  }
}

/// The scale decode_element uses for element i of a row.
template <int DT>
__device__ __forceinline__ float element_scale(const FormatDesc& f, const float* scales, int i) {
  if constexpr (DT == kInt8) {
    return f.int8_scheme == kStaticTensor ? f.scale : scales[i / f.group];
  } else if constexpr (DT == kFp8E4M3 || DT == kFp8E5M2) {
    return f.scale;
  } else {
    return 1.0f;
  }
}

/// The code of element i, read with one access of the element's width (rows of a format start
/// at multiples of its element size).
template <int DT>
__device__ __forceinline__ uint32_t load_code(const uint8_t* row, int i) {
  if constexpr (kBytes<DT> == 4) {
    return __ldg(reinterpret_cast<const unsigned int*>(row) + i);
  } else if constexpr (kBytes<DT> == 2) {
    return __ldg(reinterpret_cast<const unsigned short*>(row) + i);
  } else {
    return __ldg(row + i);
  }
}

/// Decodes elements 4·e4 .. 4·e4 + 3 of the 16 / bytes elements of one 16-byte chunk; `s` is the
/// chunk's scale (a chunk never straddles an INT8 group: groups are 32 elements or the whole row).
template <int DT>
__device__ __forceinline__ void decode_quad(const uint4& raw, int e4, float s, float (&out)[4]) {
  constexpr int B = kBytes<DT>, per_word = 4 / B;
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const int e = 4 * e4 + x;
    uint32_t code = w[e / per_word];
    if constexpr (B < 4) code = (code >> (8 * B * (e % per_word))) & ((1u << (8 * B)) - 1u);
    out[x] = decode_code<DT>(code, s);
  }
}

// ---------------------------------------------------------------- one key of a tile

/// Walks the elements of a stored row that lane j of a group of GS lanes owns, decoded as
/// decode_element does: with `vec`, 16-byte chunks j, j + GS, ... (kInFlight loads issued
/// together), handing four elements at a time to quad(d, x[4]); else elements j, j + GS, ...,
/// one at a time to one(d, x). K (key_dots) and V (value_row) are read through it.
template <int DT, class Quad, class One>
__device__ __forceinline__ void for_each_owned(const FormatDesc& f, const uint8_t* row, const float* scales, int D,
                                               bool vec, int j, int GS, Quad quad, One one) {
  constexpr int E = 16 / kBytes<DT>;
  if (vec) {
    const int chunks = D / E;
    const auto* src = reinterpret_cast<const uint4*>(row + (RINGKV_BUG(5) ? 4 : 0));  // planted bug 5: misaligned
    for (int c0 = j; c0 < chunks; c0 += GS * kInFlight) {
      uint4 raw[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int c = c0 + u * GS;
        raw[u] = c < chunks ? __ldg(src + c) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int c = c0 + u * GS;
        if (c < chunks) {
          const float scale = element_scale<DT>(f, scales, c * E);
#pragma unroll
          for (int e4 = 0; e4 < E / 4; ++e4) {
            float x[4];
            decode_quad<DT>(raw[u], e4, scale, x);
            quad(c * E + 4 * e4, x);
          }
        }
      }
    }
    return;
  }
#pragma unroll 4
  for (int d = j; d < D; d += GS) one(d, decode_code<DT>(load_code<DT>(row, d), element_scale<DT>(f, scales, d)));
}

/// Partial dot products q_m · k (m < nh) over the elements of K row `row` lane j owns.
template <int DT>
__device__ __forceinline__ void key_dots(const FormatDesc& f, const uint8_t* row, const float* scales, int D,
                                         bool vec, int j, int GS, const float* q, int nh,
                                         float (&dots)[kMaxHeads]) {
  for_each_owned<DT>(
      f, row, scales, D, vec, j, GS,
      [&](int d, const float (&k)[4]) {  // four elements at a time, for every head
        const auto* q4 = reinterpret_cast<const float4*>(q + d);
#pragma unroll
        for (int m = 0; m < kMaxHeads; ++m) {
          if (m < nh) {
            const float4 qv = q4[m * (D / 4)];
            dots[m] = add_rn(dots[m], mul_rn(qv.x, k[0]));
            dots[m] = add_rn(dots[m], mul_rn(qv.y, k[1]));
            dots[m] = add_rn(dots[m], mul_rn(qv.z, k[2]));
            dots[m] = add_rn(dots[m], mul_rn(qv.w, k[3]));
          }
        }
      },
      [&](int d, float k) {
#pragma unroll
        for (int m = 0; m < kMaxHeads; ++m) {
          if (m < nh) dots[m] = add_rn(dots[m], mul_rn(q[m * D + d], k));
        }
      });
}

/// Decodes the elements of V row `row` lane j owns into the key's column of the shared V tile,
/// stored transposed (element d at dst[d·stride]).
template <int DT>
__device__ __forceinline__ void value_row(const FormatDesc& f, const uint8_t* row, const float* scales, int D,
                                          bool vec, int j, int GS, float* dst, int stride) {
  for_each_owned<DT>(
      f, row, scales, D, vec, j, GS,
      [&](int d, const float (&v)[4]) {
#pragma unroll
        for (int x = 0; x < 4; ++x) dst[(d + x) * stride] = v[x];
      },
      [&](int d, float v) { dst[d * stride] = v; });
}

/// value_row for the V format known at run time.
__device__ __forceinline__ void value_row_any(const FormatDesc& f, const uint8_t* row, const float* scales, int D,
                                              bool vec, int j, int GS, float* dst, int stride) {
  switch (f.dtype) {
    case kF32: value_row<kF32>(f, row, scales, D, vec, j, GS, dst, stride); return;
    case kF16: value_row<kF16>(f, row, scales, D, vec, j, GS, dst, stride); return;
    case kBF16: value_row<kBF16>(f, row, scales, D, vec, j, GS, dst, stride); return;
    case kFp8E4M3: value_row<kFp8E4M3>(f, row, scales, D, vec, j, GS, dst, stride); return;
    case kFp8E5M2: value_row<kFp8E5M2>(f, row, scales, D, vec, j, GS, dst, stride); return;
    default: value_row<kInt8>(f, row, scales, D, vec, j, GS, dst, stride); return;
  }
}

/// Row stride (floats) of the shared scores and transposed V tile for tiles of T keys: a multiple
/// of 4 (rows read as float4) with an odd number of float4s, so that the float4 reads of
/// consecutive rows by eight lanes fall in distinct banks.
__host__ __device__ __forceinline__ int tile_stride(int T) {
  const int t4 = (T + 3) / 4;
  return 4 * (t4 % 2 == 1 ? t4 : t4 + 1);
}

/// Whether rows of `row_bytes` bytes from `base` take 16-byte loads.
__device__ __forceinline__ bool vector_rows(const void* base, int64_t row_bytes) {
  return row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0;
}

// ---------------------------------------------------------------- the fused decode kernel

/// Grid: num_items × Hkv × head_chunks × splits blocks of kDecodeThreads, block (i, g, c, s)
/// flattened with s fastest. The block serves query heads h0 = g·G + c·heads_per_block .. + nh of
/// item i over split s of its keys (decode_slots: the visible slots in slot order, key k in slot
/// decode_slot(v, k), ring.hpp), tile by tile in slot order: phase A, each key of the
/// tile is read by a group of 128 / tile lanes (rounded down to a power of two), which sums the
/// dot products of every head with its K row and decodes its V row into the shared V tile;
/// phase B, one warp per head: tile max, online_rescale, weights, l; phase C, every thread
/// rescales its accumulators (head, dim) and adds the tile's weighted V rows in slot order.
/// Writes the split's partial accumulators and (m, l). Templated on the K storage dtype.
/// At least 3 blocks per SM: a register budget of 168 keeps the accumulators in registers
/// without spills (ptxas's own choice for a bare __launch_bounds__(128) caps some at 128).
template <int KDT>
__global__ void __launch_bounds__(kDecodeThreads, 3) decode_kernel(const DecodeParams p) {
  RINGKV_EXTERN_SHARED(float, decode_smem);
  const LayerShape& s = p.shape;
  const int Hq = s.num_q_heads, Hkv = s.num_kv_heads, D = s.head_dim, G = Hq / Hkv;
  const int T = p.tile, HB = p.heads_per_block, TP = tile_stride(T);
  float* sc = decode_smem;      // [HB][TP] scores, then weights
  float* vt = sc + HB * TP;     // [D][TP] the decoded V tile, transposed (key k of dim d at d·TP + k)
  float* qs = vt + D * TP;      // [HB][D] the block's rotated queries
  float* st_m = qs + HB * D;    // [HB] online softmax state m
  float* st_l = st_m + HB;      // [HB] online softmax state l
  float* alpha_s = st_l + HB;   // [HB] the tile's rescale factor

  // block (i, g, c, split)
  unsigned b = blockIdx.x;
  const int split = static_cast<int>(b % static_cast<unsigned>(p.plan.splits));
  b /= static_cast<unsigned>(p.plan.splits);
  const int c = static_cast<int>(b % static_cast<unsigned>(p.head_chunks));
  b /= static_cast<unsigned>(p.head_chunks);
  const int g = static_cast<int>(b % static_cast<unsigned>(Hkv));
  const int i = static_cast<int>(b / static_cast<unsigned>(Hkv));
  const int h0 = g * G + c * HB;
  const int nh = HB < G - c * HB ? HB : G - c * HB;
  const int seq = p.items[i].sequence;
  const int64_t C = p.ring.capacity;
  const DecodeSlots vis = decode_slots(p.items[i].first, p.ring.sinks, p.ring.window, C);
  int64_t kb, ke;
  split_range(p.plan, split, decode_keys(vis), &kb, &ke);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int idx = tid; idx < nh * D; idx += kDecodeThreads) qs[idx] = p.q_rot[(int64_t{i} * Hq + h0) * D + idx];
  if (tid < nh) {
    const OnlineSoftmax st = online_start();
    st_m[tid] = st.m;
    st_l[tid] = st.l;
  }
  float acc[kMaxAcc];
#pragma unroll
  for (int r = 0; r < kMaxAcc; ++r) acc[r] = 0.0f;
  const int outputs = nh * D, R = (outputs + kDecodeThreads - 1) / kDecodeThreads;

  // phase A's groups: GS lanes (a power of two ≤ 16, so a group never straddles a warp) per key
  int GS = 1;
  while (GS < kMaxGroup && GS * 2 * T <= kDecodeThreads) GS *= 2;
  const int kk = tid / GS, j = tid % GS;
  const int64_t k_row = int64_t{D} * kBytes<KDT>, v_row = int64_t{D} * p.vf.bytes;
  const bool kvec = vector_rows(p.ring.k, k_row), vvec = vector_rows(p.ring.v, v_row);
  const int kspr = p.kf.scales_per_row, vspr = p.vf.scales_per_row;
  __syncthreads();

  for (int64_t t0 = kb; t0 < ke; t0 += T) {
    const int nt = ke - t0 < T ? static_cast<int>(ke - t0) : T;

    // phase A: scores of the tile's keys, V tile
    float dots[kMaxHeads];
#pragma unroll
    for (int m = 0; m < kMaxHeads; ++m) dots[m] = 0.0f;
    if (kk < nt) {
      const int64_t row = (int64_t{seq} * C + decode_slot(vis, t0 + kk)) * Hkv + g;
      key_dots<KDT>(p.kf, p.ring.k + row * k_row, kspr > 0 ? p.ring.k_scales + row * kspr : nullptr, D, kvec, j, GS,
                    qs, nh, dots);
      value_row_any(p.vf, p.ring.v + row * v_row, vspr > 0 ? p.ring.v_scales + row * vspr : nullptr, D, vvec, j, GS,
                    vt + kk, TP);
    }
#pragma unroll
    for (int m = 0; m < kMaxHeads; ++m) {
      if (m < nh) {
#pragma unroll
        for (int off = kMaxGroup / 2; off > 0; off >>= 1) {
          if (off < GS) dots[m] = add_rn(dots[m], __shfl_xor_sync(kFullMask, dots[m], off));
        }
        if (kk < nt && m % GS == j) sc[m * TP + kk] = score_of(dots[m], s.scale, s.capped, s.cap);
      }
    }
    if (!RINGKV_BUG(1)) __syncthreads();  // planted bug 1: no barrier

    // phase B: per head (one warp, one lane per key): tile max, rescale, weights, l
    for (int m = warp; m < nh; m += kWarps) {
      const float score = lane < nt ? sc[m * TP + lane] : neg_inf_f32();
      float tile_max = score;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) tile_max = max_f32(tile_max, __shfl_xor_sync(kFullMask, tile_max, off));
      OnlineSoftmax st{st_m[m], st_l[m]};
      const float alpha = online_rescale(st, tile_max);
      const float w = lane < nt ? online_weight(st, score) : 0.0f;
      if (lane < nt) sc[m * TP + lane] = w;
      float lsum = w;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) lsum = add_rn(lsum, __shfl_xor_sync(kFullMask, lsum, off));
      __syncwarp();
      if (lane == 0) {
        st_m[m] = st.m;
        st_l[m] = add_rn(st.l, lsum);
        alpha_s[m] = alpha;
      }
    }
    __syncthreads();

    // phase C: acc = acc·alpha + Σ_k w_k·v_k in slot order, per (head, dim) this thread owns;
    // w and v are read four keys at a time (both rows are contiguous in k)
#pragma unroll
    for (int r = 0; r < kMaxAcc; ++r) {
      const int idx = tid + r * kDecodeThreads;
      if (r < R && idx < outputs) {
        const int m = idx / D, d = idx - m * D;
        const float* w = sc + m * TP;
        const float* v = vt + d * TP;
        float a = mul_rn(acc[r], alpha_s[m]);
        int k = 0;
        for (; k + 4 <= nt; k += 4) {
          const float4 w4 = *reinterpret_cast<const float4*>(w + k);
          const float4 v4 = *reinterpret_cast<const float4*>(v + k);
          a = add_rn(a, mul_rn(w4.x, v4.x));
          a = add_rn(a, mul_rn(w4.y, v4.y));
          a = add_rn(a, mul_rn(w4.z, v4.z));
          a = add_rn(a, mul_rn(w4.w, v4.w));
        }
        for (; k < nt; ++k) a = add_rn(a, mul_rn(w[k], v[k]));
        acc[r] = a;
      }
    }
    __syncthreads();
  }

  // the split's partial results (an empty split: m = −inf, l = 0, acc = 0)
#pragma unroll
  for (int r = 0; r < kMaxAcc; ++r) {
    const int idx = tid + r * kDecodeThreads;
    if (r < R && idx < outputs) {
      const int m = idx / D, d = idx - m * D;
      p.partial_acc[((int64_t{i} * Hq + h0 + m) * kMaxSplits + split) * D + d] = acc[r];
    }
  }
  if (tid < nh) {
    const int64_t slot = (int64_t{i} * Hq + h0 + tid) * kMaxSplits + split;
    p.partial_ml[2 * slot] = st_m[tid];
    p.partial_ml[2 * slot + 1] = st_l[tid];
  }
}

// ---------------------------------------------------------------- the warp decode kernel

/// Loads the 8 elements of a row that lane chunk `cl` owns (16-byte or 8-byte aligned).
template <int DT>
__device__ __forceinline__ uint4 load_lane_row(const uint8_t* row, int cl) {
  if constexpr (kBytes<DT> == 2) {
    return __ldg(reinterpret_cast<const uint4*>(row) + cl);
  } else {
    const uint2 r = __ldg(reinterpret_cast<const uint2*>(row) + cl);
    return make_uint4(r.x, r.y, 0u, 0u);
  }
}

/// Decodes the 8 elements load_lane_row read, with the scale of their group.
template <int DT>
__device__ __forceinline__ void decode_lane_row(const uint4& raw, float scale, float (&out)[8]) {
  float x[4];
  decode_quad<DT>(raw, 0, scale, x);
#pragma unroll
  for (int e = 0; e < 4; ++e) out[e] = x[e];
  decode_quad<DT>(raw, 1, scale, x);
#pragma unroll
  for (int e = 0; e < 4; ++e) out[4 + e] = x[e];
}

/// Grid: ceil(units / kDecodeWarpsPerBlock) blocks of kDecodeWarpsPerBlock warps; warp u serves
/// unit u = (i, g, c, split), flattened with split fastest, as the block kernel's block u does:
/// the NH query heads h0 .. h0 + NH of item i over split `split` of its keys (decode_slots), in tiles of
/// T = 32 / NH keys in slot order, with online_rescale per tile and the split's partial results.
/// A key row spans LPK = D / 8 lanes (each owns 8 elements); a warp-wide load covers KPL = 32 / LPK
/// keys. Per tile each lane reads LOADS = T / KPL K rows and V rows (all loads issued before the
/// first use), sums partial dot products with fused multiply-adds, and a reduce-scatter across
/// the LPK lanes of a key leaves lane (grp, cl) with the dot of key (cl / NH)·KPL + grp, head
/// cl % NH: each lane scores one (key, head) and computes one weight. Lanes of one head (lane % NH)
/// reduce the tile max and the sum of weights by shuffles; each lane fetches the weights of its own
/// keys and adds them, times its V elements, to its accumulators (NH heads × 8 elements). The KPL
/// groups' accumulators are added at the end. No block barrier: warps are independent.
template <int DT, int D, int NH>
__global__ void __launch_bounds__(kDecodeWarpsPerBlock * 32, kDecodeWarpsPerSm / kDecodeWarpsPerBlock)
    decode_warp_kernel(const DecodeParams p) {
  constexpr int E = 8, LPK = D / E, KPL = 32 / LPK, T = 32 / NH, LOADS = T / KPL, RB = D * kBytes<DT>;
  static_assert(LOADS * NH == LPK && LOADS >= 1, "a tile gives every lane one (key, head)");
  const LayerShape& s = p.shape;
  const int Hq = s.num_q_heads, Hkv = s.num_kv_heads, G = Hq / Hkv;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  int64_t u = int64_t{blockIdx.x} * kDecodeWarpsPerBlock + (threadIdx.x >> 5);
  if (u >= int64_t{p.num_items} * Hkv * p.head_chunks * p.plan.splits) return;  // the whole warp
  const int split = static_cast<int>(u % p.plan.splits);
  u /= p.plan.splits;
  const int c = static_cast<int>(u % p.head_chunks);
  u /= p.head_chunks;
  const int g = static_cast<int>(u % Hkv);
  const int i = static_cast<int>(u / Hkv);
  const int h0 = g * G + c * NH;
  const int seq = p.items[i].sequence;
  const int64_t C = p.ring.capacity;
  const DecodeSlots vis = decode_slots(p.items[i].first, p.ring.sinks, p.ring.window, C);
  int64_t kb, ke;
  split_range(p.plan, split, decode_keys(vis), &kb, &ke);
  const int grp = lane / LPK, cl = lane % LPK;

  float q[NH][E], acc[NH][E];
#pragma unroll
  for (int m = 0; m < NH; ++m) {
    const float4* qp = reinterpret_cast<const float4*>(p.q_rot + (int64_t{i} * Hq + h0 + m) * D + cl * E);
    const float4 a = qp[0], b = qp[1];
    q[m][0] = a.x, q[m][1] = a.y, q[m][2] = a.z, q[m][3] = a.w;
    q[m][4] = b.x, q[m][5] = b.y, q[m][6] = b.z, q[m][7] = b.w;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[m][e] = 0.0f;
  }
  OnlineSoftmax st = online_start();  // of head cl % NH (every lane of that head holds the same)
  const int kspr = p.kf.scales_per_row, vspr = p.vf.scales_per_row;
  const int kk_mine = (cl / NH) * KPL + grp + (RINGKV_BUG(3) ? 1 : 0);  // the key this lane scores (planted bug 3: off by one lane)

  // The K and V rows (and scales) of the tile at t0 this lane reads (key k in slot decode_slot(vis, k));
  // keys past ke read as zero.
  uint4 kraw[LOADS], vraw[LOADS];
  float ks[LOADS], vs[LOADS];
  const auto load_tile = [&](int64_t t0, uint4 (&kr)[LOADS], uint4 (&vr)[LOADS], float (&ksc)[LOADS],
                             float (&vsc)[LOADS]) {
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
      const int64_t key = t0 + l * KPL + grp;
      kr[l] = vr[l] = make_uint4(0u, 0u, 0u, 0u);
      ksc[l] = vsc[l] = 0.0f;
      if (key < ke) {
        const int64_t row = (int64_t{seq} * C + decode_slot(vis, key)) * Hkv + g;
        kr[l] = load_lane_row<DT>(p.ring.k + row * RB, cl);
        vr[l] = load_lane_row<DT>(p.ring.v + row * RB, cl);
        ksc[l] = element_scale<DT>(p.kf, kspr > 0 ? p.ring.k_scales + row * kspr : nullptr, cl * E);
        vsc[l] = element_scale<DT>(p.vf, vspr > 0 ? p.ring.v_scales + row * vspr : nullptr, cl * E);
      }
    }
  };
  for (int64_t t0 = kb; t0 < ke; t0 += T) {
    const int nt = ke - t0 < T ? static_cast<int>(ke - t0) : T;
    load_tile(t0, kraw, vraw, ks, vs);  // every load of the tile in flight before the first use
    // partial dot products: value l·NH + m is key l·KPL + grp against head m, over this lane's 8 elements
    float part[LPK];
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
      float k[E];
      decode_lane_row<DT>(kraw[l], ks[l], k);
#pragma unroll
      for (int m = 0; m < NH; ++m) {
        float d = mul_rn(q[m][0], k[0]);
#pragma unroll
        for (int e = 1; e < E; ++e) d = fma_rn(q[m][e], k[e], d);
        part[l * NH + m] = d;
      }
    }
    // reduce-scatter over the LPK lanes of a key row: lane cl ends with the sum of value cl
#pragma unroll
    for (int level = 1; level < LPK; level *= 2) {  // o = LPK/2, LPK/4, ..., 1 (a linear count, so it unrolls)
      const int o = LPK / (2 * level);
      const bool up = (cl & o) != 0;
#pragma unroll
      for (int x = 0; x < o; ++x) {
        const float send = up ? part[x] : part[x + o];
        const float keep = up ? part[x + o] : part[x];
        part[x] = add_rn(keep, __shfl_xor_sync(kFullMask, send, o));
      }
    }
    const float score = kk_mine < nt ? score_of(part[0], s.scale, s.capped, s.cap) : neg_inf_f32();
    float tile_max = score;
#pragma unroll
    for (int o = NH; o < 32; o *= 2) tile_max = max_f32(tile_max, __shfl_xor_sync(kFullMask, tile_max, o));
    const float alpha = online_rescale(st, tile_max);
    const float w = kk_mine < nt ? online_weight(st, score) : 0.0f;
    float lsum = w;
#pragma unroll
    for (int o = RINGKV_BUG(2) ? 2 * NH : NH; o < 32; o *= 2) {  // planted bug 2: a wrong xor offset
      lsum = add_rn(lsum, __shfl_xor_sync(kFullMask, lsum, o));
    }
    st.l = add_rn(st.l, lsum);
    // P·V over this lane's keys: the weight of key l·KPL + grp, head m sits on lane grp·LPK + l·NH + m
#pragma unroll
    for (int m = 0; m < NH; ++m) {
      const float a = __shfl_sync(kFullMask, alpha, m);
#pragma unroll
      for (int e = 0; e < E; ++e) acc[m][e] = mul_rn(acc[m][e], a);
    }
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
      float v[E];
      decode_lane_row<DT>(vraw[l], vs[l], v);
#pragma unroll
      for (int m = 0; m < NH; ++m) {
        const float wl = __shfl_sync(kFullMask, w, grp * LPK + l * NH + m);
#pragma unroll
        for (int e = 0; e < E; ++e) acc[m][e] = fma_rn(wl, v[e], acc[m][e]);
      }
    }
  }

  // the KPL key groups' accumulators of the same elements, then the split's partial results
#pragma unroll
  for (int o = LPK; o < 32; o *= 2) {
#pragma unroll
    for (int m = 0; m < NH; ++m) {
#pragma unroll
      for (int e = 0; e < E; ++e) acc[m][e] = add_rn(acc[m][e], __shfl_xor_sync(kFullMask, acc[m][e], o));
    }
  }
  if (grp == 0) {
#pragma unroll
    for (int m = 0; m < NH; ++m) {
      float4* dst = reinterpret_cast<float4*>(p.partial_acc + ((int64_t{i} * Hq + h0 + m) * kMaxSplits + split) * D + cl * E);
      dst[0] = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
      dst[1] = make_float4(acc[m][4], acc[m][5], acc[m][6], acc[m][7]);
    }
    if (cl < NH) {  // lane cl holds the state of head cl
      const int64_t slot = (int64_t{i} * Hq + h0 + cl) * kMaxSplits + split;
      p.partial_ml[2 * slot] = st.m;
      p.partial_ml[2 * slot + 1] = st.l;
    }
  }
}

// ---------------------------------------------------------------- merge

/// Grid: items × Hq blocks, block (i, h) flattened with h fastest. Thread 0 runs the merge of
/// softmax.hpp over the splits (merge_start, merge_max, merge_rebase_sink, merge_weight in split
/// order) into shared weights; then every thread sums its dims over the splits in split order and
/// writes out[d] = o[d] / den into the item's out tensor.
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const MergeParams p) {
  __shared__ float w_s[kMaxSplits];
  __shared__ float den_s;
  const LayerShape& s = p.shape;
  const int Hq = s.num_q_heads, D = s.head_dim;
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(Hq));
  const int i = static_cast<int>(blockIdx.x / static_cast<unsigned>(Hq));
  const int64_t base = (int64_t{i} * Hq + h) * kMaxSplits;
  if (threadIdx.x == 0) {
    const bool has_sink = s.sink_logits != nullptr;
    const float sink = has_sink ? s.sink_logits[h] : 0.0f;
    LseMerge mg = merge_start(has_sink, sink);
    for (int sp = 0; sp < p.splits; ++sp) {
      merge_max(mg, OnlineSoftmax{p.partial_ml[2 * (base + sp)], p.partial_ml[2 * (base + sp) + 1]});
    }
    merge_rebase_sink(mg, has_sink, sink);
    for (int sp = 0; sp < p.splits; ++sp) {
      w_s[sp] = merge_weight(mg, OnlineSoftmax{p.partial_ml[2 * (base + sp)], p.partial_ml[2 * (base + sp) + 1]});
    }
    den_s = mg.den;
  }
  if (RINGKV_BUG(6) && threadIdx.x >= 64) __syncthreads();  // planted bug 6: a barrier in a branch
  __syncthreads();
  const SeqItem& it = p.items[i];
  float* out = it.out + ((int64_t{s.layer} * it.layer_tokens + it.token_offset) * Hq + h) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
    for (int sp = 0; sp < p.splits; ++sp) {
      const float w = w_s[sp];
      if (w == 0.0f) continue;
      o = add_rn(o, mul_rn(w, p.partial_acc[(base + sp) * D + d]));
    }
    out[d] = div_rn(o, den_s);
  }
}

/// Bytes per stored element of a dtype code (0 for an unknown code).
int dtype_bytes(int dtype) {
  switch (dtype) {
    case kF32: return 4;
    case kF16: case kBF16: return 2;
    case kFp8E4M3: case kFp8E5M2: case kInt8: return 1;
    default: return 0;
  }
}

template <int KDT>
cudaError_t launch_decode_as(const DecodeParams& p, cudaStream_t stream, unsigned blocks, size_t smem) {
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(decode_kernel<KDT>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  return RINGKV_LAUNCH(decode_kernel<KDT>, blocks, kDecodeThreads, smem, stream, p);
}

}  // namespace

template <int DT, int D>
cudaError_t launch_decode_warp_as(const DecodeParams& p, cudaStream_t stream, unsigned blocks) {
  const unsigned threads = kDecodeWarpsPerBlock * 32;
  if (p.warp_heads == 4) return RINGKV_LAUNCH((decode_warp_kernel<DT, D, 4>), blocks, threads, 0, stream, p);
  return RINGKV_LAUNCH((decode_warp_kernel<DT, D, 2>), blocks, threads, 0, stream, p);
}

template <int D>
cudaError_t launch_decode_warp_d(const DecodeParams& p, cudaStream_t stream, unsigned blocks) {
  switch (p.kf.dtype) {
    case kF16: return launch_decode_warp_as<kF16, D>(p, stream, blocks);
    case kBF16: return launch_decode_warp_as<kBF16, D>(p, stream, blocks);
    case kFp8E4M3: return launch_decode_warp_as<kFp8E4M3, D>(p, stream, blocks);
    case kFp8E5M2: return launch_decode_warp_as<kFp8E5M2, D>(p, stream, blocks);
    default: return launch_decode_warp_as<kInt8, D>(p, stream, blocks);
  }
}

/// The warp kernel's launch: the params must be what decode_warp_heads chose, and the rows and
/// the query and partial buffers aligned for its 16-byte (8-byte) accesses.
cudaError_t launch_decode_warp(const DecodeParams& p, cudaStream_t stream, int64_t units) {
  const int D = p.shape.head_dim;
  const int group = p.shape.num_q_heads / p.shape.num_kv_heads;
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (p.warp_heads != decode_warp_heads(group, D, p.kf, p.vf) || p.heads_per_block != p.warp_heads ||
      p.tile != 32 / p.warp_heads || p.plan.splits > kMaxSplits || p.kf.bytes != dtype_bytes(p.kf.dtype) ||
      !aligned(p.ring.k) || !aligned(p.ring.v) || !aligned(p.q_rot) || !aligned(p.partial_acc)) {
    return cudaErrorInvalidValue;
  }
  const int64_t blocks = (units + kDecodeWarpsPerBlock - 1) / kDecodeWarpsPerBlock;
  if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;
  const auto n = static_cast<unsigned>(blocks);
  return D == 64 ? launch_decode_warp_d<64>(p, stream, n) : launch_decode_warp_d<128>(p, stream, n);
}

cudaError_t launch_decode(const DecodeParams& p, cudaStream_t stream) {
  const int64_t blocks = int64_t{p.num_items} * p.shape.num_kv_heads * p.head_chunks * p.plan.splits;
  if (blocks <= 0) return cudaSuccess;
  if (p.warp_heads > 0) return launch_decode_warp(p, stream, blocks);
  const int D = p.shape.head_dim, T = p.tile, HB = p.heads_per_block;
  // The kernel's fixed-size arrays: one lane per key of a tile, ≤ 16 heads, ≤ 32 accumulators.
  if (T < 1 || T > kMaxTile || HB < 1 || HB > kMaxHeads || int64_t{HB} * D > int64_t{kMaxAcc} * kDecodeThreads ||
      p.plan.splits > kMaxSplits || p.kf.bytes != dtype_bytes(p.kf.dtype) || p.vf.bytes != dtype_bytes(p.vf.dtype)) {
    return cudaErrorInvalidValue;
  }
  if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;
  const auto z = [](int v) { return static_cast<size_t>(v); };
  const size_t TP = z(tile_stride(T));
  const size_t smem = sizeof(float) * (z(HB) * TP + z(D) * TP + z(HB) * z(D) + 3 * z(HB) -
                                       (RINGKV_BUG(4) ? z(HB) * TP : 0));  // planted bug 4: a tile too small
  const auto n = static_cast<unsigned>(blocks);
  switch (p.kf.dtype) {
    case kF32: return launch_decode_as<kF32>(p, stream, n, smem);
    case kF16: return launch_decode_as<kF16>(p, stream, n, smem);
    case kBF16: return launch_decode_as<kBF16>(p, stream, n, smem);
    case kFp8E4M3: return launch_decode_as<kFp8E4M3>(p, stream, n, smem);
    case kFp8E5M2: return launch_decode_as<kFp8E5M2>(p, stream, n, smem);
    default: return launch_decode_as<kInt8>(p, stream, n, smem);
  }
}

cudaError_t launch_merge(const MergeParams& p, cudaStream_t stream) {
  const int64_t blocks = int64_t{p.num_items} * p.shape.num_q_heads;
  if (blocks <= 0) return cudaSuccess;
  if (p.splits < 1 || p.splits > kMaxSplits) return cudaErrorInvalidValue;
  if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;
  return RINGKV_LAUNCH(merge_kernel, static_cast<unsigned>(blocks), kMergeThreads, 0, stream, p);
}

}  // namespace ringkv::cuda
