// ringkv cuda: the plan backend. It executes every launch of params.hpp on the
// host, one simulated block after another, in the order and with the
// arithmetic the kernels use: the same __host__ __device__ functions, the same
// split planning, the same tile order over the visible slots, per-split online
// softmax in f32 and the same log-sum-exp merge. Decode visits the keys of
// decode_slots() (ring.hpp) in slot order, as the kernels do. What it does not reproduce is
// only the mapping onto threads (the order of the per-key dot product, of the
// in-tile sum of weights and of the in-tile P·V sum, which the kernels reduce
// across lanes, the warp kernel with fused multiply-adds), shared memory and
// intrinsics. The decode params say which kernel a launch models (warp_heads);
// the plan executes both from their tile, heads per block and split plan. The cuda-plan engine is EngineCore on this backend.
#include "ringkv/cuda/plan_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "ringkv/cuda/ring.hpp"
#include "ringkv/cuda_engine.hpp"
#include "ringkv/error.hpp"

namespace ringkv::cuda {
namespace {

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// Row pointers of one (slot or stage row, kv head).
uint8_t* ring_row(uint8_t* base, const RingLayerView& r, int seq, int64_t slot, int h, int Hkv, size_t row_bytes) {
  return base + ((sz(seq) * sz(r.capacity) + sz(slot)) * sz(Hkv) + sz(h)) * row_bytes;
}
float* ring_scales(float* base, const RingLayerView& r, int seq, int64_t slot, int h, int Hkv, int spr) {
  return base ? base + ((sz(seq) * sz(r.capacity) + sz(slot)) * sz(Hkv) + sz(h)) * sz(spr) : nullptr;
}

}  // namespace

PlanBackend::PlanBackend(int sm_count) : sm_count_(sm_count) {}

PlanBackend::~PlanBackend() = default;

void* PlanBackend::allocate(size_t bytes) {
  void* p = std::calloc(1, bytes);
  if (!p) throw Error("cuda-plan: allocating " + std::to_string(bytes) + " bytes failed");
  return p;
}
void PlanBackend::release(void* p) noexcept { std::free(p); }
void PlanBackend::upload(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void PlanBackend::download(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void PlanBackend::fill(void* dst, int value, size_t bytes) { std::memset(dst, value, bytes); }
void PlanBackend::synchronize() {}

// ---------------------------------------------------------------- append

void PlanBackend::append(const AppendParams& p) {
  const LayerShape& s = p.shape;
  const int Hq = s.num_q_heads, Hkv = s.num_kv_heads, D = s.head_dim, G = Hq / Hkv;
  const size_t k_row = sz(D) * sz(p.kf.bytes), v_row = sz(D) * sz(p.vf.bytes);
  std::vector<float>& x = row_;
  x.resize(sz(D));
  for (int i = 0; i < p.num_items; ++i) {
    const SeqItem& it = p.items[i];
    for (int64_t t = 0; t < p.max_n; ++t) {
      if (t >= it.n) continue;
      const int64_t index = it.first + t, position = it.p0 + index, tok = it.token_offset + t;
      for (int r = 0; r < Hq + Hkv; ++r) {  // block (i, t, r)
        if (r < Hq) {
          const int64_t base = ((int64_t{s.layer} * it.layer_tokens + tok) * Hq + r) * D;
          for (int d = 0; d < D; ++d) x[sz(d)] = load_input(it.q, p.input_type, base + d);
          rope_rotate_row(p.rope, position, x.data());
          float* dst = p.q_rot + i * p.q_item_stride + t * p.q_token_stride + (r / G) * p.q_group_stride +
                       int64_t{r % G} * D;
          std::copy(x.begin(), x.end(), dst);
          continue;
        }
        const int h = r - Hq;
        const int64_t base = ((int64_t{s.layer} * it.layer_tokens + tok) * Hkv + h) * D;
        uint8_t *kd, *vd;
        float *ks, *vs;
        if (p.staged) {
          kd = p.stage.k + (sz(t) * sz(Hkv) + sz(h)) * k_row;
          vd = p.stage.v + (sz(t) * sz(Hkv) + sz(h)) * v_row;
          ks = p.stage.k_scales ? p.stage.k_scales + (sz(t) * sz(Hkv) + sz(h)) * sz(p.kf.scales_per_row) : nullptr;
          vs = p.stage.v_scales ? p.stage.v_scales + (sz(t) * sz(Hkv) + sz(h)) * sz(p.vf.scales_per_row) : nullptr;
          if (h == 0) p.stage.positions[t] = position;
        } else {
          const int64_t slot = slot_of(index, p.ring.sinks, p.ring.capacity);
          kd = ring_row(p.ring.k, p.ring, it.sequence, slot, h, Hkv, k_row);
          vd = ring_row(p.ring.v, p.ring, it.sequence, slot, h, Hkv, v_row);
          ks = ring_scales(p.ring.k_scales, p.ring, it.sequence, slot, h, Hkv, p.kf.scales_per_row);
          vs = ring_scales(p.ring.v_scales, p.ring, it.sequence, slot, h, Hkv, p.vf.scales_per_row);
          if (h == 0) p.ring.positions[sz(it.sequence) * sz(p.ring.capacity) + sz(slot)] = position;
        }
        for (int d = 0; d < D; ++d) x[sz(d)] = load_input(it.k, p.input_type, base + d);
        rope_rotate_row(p.rope, position, x.data());
        encode_row(p.kf, D, x.data(), kd, ks);
        for (int d = 0; d < D; ++d) x[sz(d)] = load_input(it.v, p.input_type, base + d);
        encode_row(p.vf, D, x.data(), vd, vs);
      }
    }
  }
}

void PlanBackend::commit(const CommitParams& p) {
  const SeqItem& it = *p.item;
  const int Hkv = p.num_kv_heads, D = p.head_dim;
  const size_t k_row = sz(D) * sz(p.kf.bytes), v_row = sz(D) * sz(p.vf.bytes);
  // Blocks run in reverse token order: on a device they run in any order, so a commit that
  // relied on later tokens landing after earlier ones (two tokens of a chunk longer than the
  // ring in one slot) must show here as the wrong token in the slot.
  for (int64_t t = p.n - 1; t >= 0; --t) {
    const int64_t j = it.first + t;
    if (!lands_last(j, it.first, p.n, p.ring.sinks, p.ring.capacity)) continue;
    const int64_t slot = slot_of(j, p.ring.sinks, p.ring.capacity);
    for (int h = 0; h < Hkv; ++h) {  // block (t, h)
      const size_t srow = sz(t) * sz(Hkv) + sz(h);
      std::memcpy(ring_row(p.ring.k, p.ring, it.sequence, slot, h, Hkv, k_row), p.stage.k + srow * k_row, k_row);
      std::memcpy(ring_row(p.ring.v, p.ring, it.sequence, slot, h, Hkv, v_row), p.stage.v + srow * v_row, v_row);
      if (p.kf.scales_per_row > 0) {
        std::memcpy(ring_scales(p.ring.k_scales, p.ring, it.sequence, slot, h, Hkv, p.kf.scales_per_row),
                    p.stage.k_scales + srow * sz(p.kf.scales_per_row), sz(p.kf.scales_per_row) * 4);
      }
      if (p.vf.scales_per_row > 0) {
        std::memcpy(ring_scales(p.ring.v_scales, p.ring, it.sequence, slot, h, Hkv, p.vf.scales_per_row),
                    p.stage.v_scales + srow * sz(p.vf.scales_per_row), sz(p.vf.scales_per_row) * 4);
      }
      if (h == 0) p.ring.positions[sz(it.sequence) * sz(p.ring.capacity) + sz(slot)] = p.stage.positions[t];
    }
  }
}

// ---------------------------------------------------------------- fused decode

void PlanBackend::decode(const DecodeParams& p) {
  const LayerShape& s = p.shape;
  const int Hq = s.num_q_heads, Hkv = s.num_kv_heads, D = s.head_dim, G = Hq / Hkv;
  const int T = p.tile, HB = p.heads_per_block;
  const size_t k_row = sz(D) * sz(p.kf.bytes), v_row = sz(D) * sz(p.vf.bytes);
  // The block's shared memory: q [HB][D], scores [HB][T], the decoded V tile [T][D].
  std::vector<float>& q = q_;
  std::vector<float>& sc = scores_;
  std::vector<float>& vt = tile_;
  std::vector<float>& acc = acc_;
  std::vector<float>& krow = row_;
  q.resize(sz(HB) * sz(D));
  sc.resize(sz(HB) * sz(T));
  vt.resize(sz(T) * sz(D));
  acc.resize(sz(HB) * sz(D));
  krow.resize(sz(D));
  std::vector<OnlineSoftmax> st(sz(HB));
  for (int i = 0; i < p.num_items; ++i) {
    const SeqItem& it = p.items[i];
    const DecodeSlots vis = decode_slots(it.first, p.ring.sinks, p.ring.window, p.ring.capacity);
    const int64_t visible = decode_keys(vis);
    for (int g = 0; g < Hkv; ++g) {
      for (int c = 0; c < p.head_chunks; ++c) {
        const int h0 = g * G + c * HB;
        const int nh = std::min(HB, G - c * HB);
        for (int split = 0; split < p.plan.splits; ++split) {  // block (i, g, c, split)
          int64_t b, e;
          split_range(p.plan, split, visible, &b, &e);
          for (int m = 0; m < nh; ++m) {
            std::copy_n(p.q_rot + (sz(i) * sz(Hq) + sz(h0 + m)) * sz(D), D, q.begin() + m * D);
            st[sz(m)] = online_start();
          }
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t t0 = b; t0 < e; t0 += T) {
            const int nt = static_cast<int>(std::min<int64_t>(T, e - t0));
            // scores of the tile: each K row decoded once, used by every head of the block
            for (int kk = 0; kk < nt; ++kk) {
              const int64_t slot = decode_slot(vis, t0 + kk);
              const uint8_t* kr = ring_row(p.ring.k, p.ring, it.sequence, slot, g, Hkv, k_row);
              const float* ksc = ring_scales(p.ring.k_scales, p.ring, it.sequence, slot, g, Hkv, p.kf.scales_per_row);
              for (int d = 0; d < D; ++d) krow[sz(d)] = decode_element(p.kf, kr, ksc, d);
              const uint8_t* vr = ring_row(p.ring.v, p.ring, it.sequence, slot, g, Hkv, v_row);
              const float* vsc = ring_scales(p.ring.v_scales, p.ring, it.sequence, slot, g, Hkv, p.vf.scales_per_row);
              for (int d = 0; d < D; ++d) vt[sz(kk) * sz(D) + sz(d)] = decode_element(p.vf, vr, vsc, d);
              for (int m = 0; m < nh; ++m) {
                float dot = 0.0f;
                for (int d = 0; d < D; ++d) dot += q[sz(m) * sz(D) + sz(d)] * krow[sz(d)];
                sc[sz(m) * sz(T) + sz(kk)] = score_of(dot, s.scale, s.capped, s.cap);
              }
            }
            // online softmax update per head, then P·V over the tile in slot order
            for (int m = 0; m < nh; ++m) {
              float tile_max = neg_inf_f32();
              for (int kk = 0; kk < nt; ++kk) tile_max = max_f32(tile_max, sc[sz(m) * sz(T) + sz(kk)]);
              const float alpha = online_rescale(st[sz(m)], tile_max);
              float* am = acc.data() + sz(m) * sz(D);
              for (int d = 0; d < D; ++d) am[d] *= alpha;
              float lsum = 0.0f;
              for (int kk = 0; kk < nt; ++kk) {
                const float w = online_weight(st[sz(m)], sc[sz(m) * sz(T) + sz(kk)]);
                sc[sz(m) * sz(T) + sz(kk)] = w;
                lsum += w;
              }
              st[sz(m)].l += lsum;
              for (int kk = 0; kk < nt; ++kk) {
                const float w = sc[sz(m) * sz(T) + sz(kk)];
                for (int d = 0; d < D; ++d) am[d] += w * vt[sz(kk) * sz(D) + sz(d)];
              }
            }
          }
          for (int m = 0; m < nh; ++m) {
            const size_t slot = (sz(i) * sz(Hq) + sz(h0 + m)) * sz(kMaxSplits) + sz(split);
            std::copy_n(acc.begin() + m * D, D, p.partial_acc + slot * sz(D));
            p.partial_ml[2 * slot] = st[sz(m)].m;
            p.partial_ml[2 * slot + 1] = st[sz(m)].l;
          }
        }
      }
    }
  }
}

void PlanBackend::merge(const MergeParams& p) {
  const LayerShape& s = p.shape;
  const int Hq = s.num_q_heads, D = s.head_dim;
  std::vector<float>& o = row_;
  o.resize(sz(D));
  for (int i = 0; i < p.num_items; ++i) {
    const SeqItem& it = p.items[i];
    for (int h = 0; h < Hq; ++h) {  // block (i, h)
      const bool has_sink = s.sink_logits != nullptr;
      const float sink = has_sink ? s.sink_logits[h] : 0.0f;
      const size_t base = (sz(i) * sz(Hq) + sz(h)) * sz(kMaxSplits);
      LseMerge mg = merge_start(has_sink, sink);
      for (int sp = 0; sp < p.splits; ++sp) {
        merge_max(mg, OnlineSoftmax{p.partial_ml[2 * (base + sz(sp))], p.partial_ml[2 * (base + sz(sp)) + 1]});
      }
      merge_rebase_sink(mg, has_sink, sink);
      std::fill(o.begin(), o.end(), 0.0f);
      for (int sp = 0; sp < p.splits; ++sp) {
        const float w = merge_weight(mg, OnlineSoftmax{p.partial_ml[2 * (base + sz(sp))], p.partial_ml[2 * (base + sz(sp)) + 1]});
        if (w == 0.0f) continue;
        const float* a = p.partial_acc + (base + sz(sp)) * sz(D);
        for (int d = 0; d < D; ++d) o[sz(d)] += w * a[d];
      }
      float* out = it.out + ((int64_t{s.layer} * it.layer_tokens + it.token_offset) * Hq + h) * D;
      for (int d = 0; d < D; ++d) out[d] = o[sz(d)] / mg.den;
    }
  }
}

// ---------------------------------------------------------------- cuBLAS path

void PlanBackend::gather(const GatherParams& p) {
  const int Hkv = p.num_kv_heads, D = p.head_dim;
  const int64_t C = p.ring.capacity, keys = C + p.n;
  const size_t k_row = sz(D) * sz(p.kf.bytes), v_row = sz(D) * sz(p.vf.bytes);
  for (int64_t c = 0; c < keys; ++c) {
    for (int h = 0; h < Hkv; ++h) {  // block (c, h)
      const uint8_t *kr, *vr;
      const float *ks, *vs;
      int64_t pos;
      if (c < C) {
        pos = p.ring.positions[sz(p.sequence) * sz(C) + sz(c)];
        kr = ring_row(p.ring.k, p.ring, p.sequence, c, h, Hkv, k_row);
        vr = ring_row(p.ring.v, p.ring, p.sequence, c, h, Hkv, v_row);
        ks = ring_scales(p.ring.k_scales, p.ring, p.sequence, c, h, Hkv, p.kf.scales_per_row);
        vs = ring_scales(p.ring.v_scales, p.ring, p.sequence, c, h, Hkv, p.vf.scales_per_row);
      } else {
        const size_t srow = sz(c - C) * sz(Hkv) + sz(h);
        pos = p.stage.positions[c - C];
        kr = p.stage.k + srow * k_row;
        vr = p.stage.v + srow * v_row;
        ks = p.stage.k_scales ? p.stage.k_scales + srow * sz(p.kf.scales_per_row) : nullptr;
        vs = p.stage.v_scales ? p.stage.v_scales + srow * sz(p.vf.scales_per_row) : nullptr;
      }
      float* ko = p.k_out + (sz(h) * sz(keys) + sz(c)) * sz(D);
      float* vo = p.v_out + (sz(h) * sz(keys) + sz(c)) * sz(D);
      for (int d = 0; d < D; ++d) {
        ko[d] = pos == kEmptySlot ? 0.0f : decode_element(p.kf, kr, ks, d);
        vo[d] = pos == kEmptySlot ? 0.0f : decode_element(p.vf, vr, vs, d);
      }
      if (h == 0) p.key_positions[c] = pos;
    }
  }
}

void PlanBackend::gemm(const GemmParams& p) {
  // Column-major C = op(A)·op(B), f32 products summed in k order (cuBLAS's order differs). op(A) is
  // first copied out k-major ([k][m]) and op(B) k-major too ([k][n]); a tile of 8 rows by 4 columns
  // of C is summed side by side: every element still sums its products one k after the other, in k
  // order, so the results are those of the plain triple loop, bit for bit, at a fraction of its time.
  constexpr int kRows = 8, kCols = 4;
  const int m_pad = (p.m + kRows - 1) / kRows * kRows, n_pad = (p.n + kCols - 1) / kCols * kCols;
  std::vector<float> a_k(sz(p.k) * sz(m_pad), 0.0f), b_k(sz(p.k) * sz(n_pad), 0.0f);
  for (int b = 0; b < p.batch; ++b) {
    const float* A = p.a + b * p.stride_a;
    const float* B = p.b + b * p.stride_b;
    float* Cm = p.c + b * p.stride_c;
    for (int k = 0; k < p.k; ++k) {
      for (int i = 0; i < p.m; ++i) {
        a_k[sz(k) * sz(m_pad) + sz(i)] = p.transa ? A[sz(k) + sz(i) * sz(p.lda)] : A[sz(i) + sz(k) * sz(p.lda)];
      }
      for (int j = 0; j < p.n; ++j) {
        b_k[sz(k) * sz(n_pad) + sz(j)] = p.transb ? B[sz(j) + sz(k) * sz(p.ldb)] : B[sz(k) + sz(j) * sz(p.ldb)];
      }
    }
    for (int j0 = 0; j0 < p.n; j0 += kCols) {
      for (int i0 = 0; i0 < p.m; i0 += kRows) {
        float acc[kCols][kRows] = {};
        for (int k = 0; k < p.k; ++k) {
          const float* a = a_k.data() + sz(k) * sz(m_pad) + sz(i0);
          const float* bk = b_k.data() + sz(k) * sz(n_pad) + sz(j0);
          for (int v = 0; v < kCols; ++v) {
            for (int u = 0; u < kRows; ++u) acc[v][u] += a[u] * bk[v];
          }
        }
        for (int v = 0; v < kCols && j0 + v < p.n; ++v) {
          for (int u = 0; u < kRows && i0 + u < p.m; ++u) Cm[sz(i0 + u) + sz(j0 + v) * sz(p.ldc)] = acc[v][u];
        }
      }
    }
  }
}

void PlanBackend::masked_softmax(const MaskedSoftmaxParams& p) {
  const LayerShape& s = p.shape;
  const int Hkv = s.num_kv_heads, G = s.num_q_heads / Hkv;
  const int64_t rows = p.n * G;
  for (int g = 0; g < Hkv; ++g) {
    for (int64_t r = 0; r < rows; ++r) {  // block (g, r)
      const int64_t t = r / G, i = p.first + t;
      const int h = g * G + static_cast<int>(r % G);
      float* row = p.scores + (sz(g) * sz(rows) + sz(r)) * sz(p.keys);
      const bool has_sink = s.sink_logits != nullptr;
      const float sink = has_sink ? s.sink_logits[h] : neg_inf_f32();
      float mx = sink;
      for (int64_t c = 0; c < p.keys; ++c) {
        const bool vis = slot_visible(i, p.key_positions[c], p.p0, p.sinks, p.window);
        row[c] = vis ? score_of(row[c], s.scale, s.capped, s.cap) : neg_inf_f32();
        mx = max_f32(mx, row[c]);
      }
      float sum = has_sink ? exp_f32(sink - mx) : 0.0f;
      for (int64_t c = 0; c < p.keys; ++c) {
        if (row[c] == neg_inf_f32()) {
          row[c] = 0.0f;
          continue;
        }
        row[c] = exp_f32(row[c] - mx);
        sum += row[c];
      }
      for (int64_t c = 0; c < p.keys; ++c) row[c] /= sum;
    }
  }
}

void PlanBackend::scatter(const ScatterParams& p) {
  const SeqItem& it = *p.item;
  const LayerShape& s = p.shape;
  const int Hq = s.num_q_heads, Hkv = s.num_kv_heads, G = Hq / Hkv, D = s.head_dim;
  for (int64_t t = 0; t < p.n; ++t) {
    for (int h = 0; h < Hq; ++h) {  // block (t, h)
      const int g = h / G, m = h % G;
      const float* src = p.o + ((sz(g) * sz(p.n) + sz(t)) * sz(G) + sz(m)) * sz(D);
      float* dst = it.out + ((int64_t{s.layer} * it.layer_tokens + it.token_offset + t) * Hq + h) * D;
      std::copy_n(src, D, dst);
    }
  }
}

void PlanBackend::poison(const PoisonParams& p) {
  const int Hkv = p.num_kv_heads, D = p.head_dim;
  const size_t k_row = sz(D) * sz(p.kf.bytes), v_row = sz(D) * sz(p.vf.bytes);
  const float nan = float_of(0x7fc00000u);
  for (int b = 0; b < p.batch; ++b) {
    for (int64_t c = 0; c < p.ring.capacity; ++c) {
      if (p.ring.positions[sz(b) * sz(p.ring.capacity) + sz(c)] != kEmptySlot) continue;
      for (int h = 0; h < Hkv; ++h) {  // block (b·C + c, h)
        uint8_t* kr = ring_row(p.ring.k, p.ring, b, c, h, Hkv, k_row);
        uint8_t* vr = ring_row(p.ring.v, p.ring, b, c, h, Hkv, v_row);
        for (int d = 0; d < D; ++d) {
          poison_element(p.kf, kr, d);
          poison_element(p.vf, vr, d);
        }
        if (float* ks = ring_scales(p.ring.k_scales, p.ring, b, c, h, Hkv, p.kf.scales_per_row)) {
          std::fill_n(ks, p.kf.scales_per_row, nan);
        }
        if (float* vs = ring_scales(p.ring.v_scales, p.ring, b, c, h, Hkv, p.vf.scales_per_row)) {
          std::fill_n(vs, p.vf.scales_per_row, nan);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- engines

std::unique_ptr<Engine> make_plan_engine(const Config& config, DecodePath path) {
  CoreOptions o;
  o.path = path;
  o.name = path == DecodePath::fused ? "cuda-plan" : "cuda-plan-cublas";
  return std::make_unique<EngineCore>(config, std::make_unique<PlanBackend>(), o);
}

EngineFactory plan_engine_factory() {
  return EngineFactory{"cuda-plan", core_capabilities(),
                       [](const Config& c) { return make_plan_engine(c, DecodePath::fused); }};
}

EngineFactory plan_cublas_engine_factory() {
  return EngineFactory{"cuda-plan-cublas", core_capabilities(),
                       [](const Config& c) { return make_plan_engine(c, DecodePath::cublas); }};
}

}  // namespace ringkv::cuda
