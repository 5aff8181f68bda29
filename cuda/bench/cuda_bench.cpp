// ringkv_cuda_bench: the CUDA engine's decode step, validated, then timed.
//
//   ringkv_cuda_bench [--quick] [--json FILE] [--validate [--decode-only]] [options]
//
// 1. Validation (always first): a small case (B = 3, Hq = 32, Hkv = 8, D = 128, two layers with
//    sinks, RoPE, a reset) through the device entry point with bf16 inputs, on the fused and the
//    cuBLAS path, KV bf16, f16 and int8 per_head; every output must lie within output_bound()
//    (conformance/support/tolerance.hpp) of the float64 oracle under the engine's declared
//    profile. Any output outside: exit 1. --validate stops here (the compute-sanitizer runs use
//    it); --decode-only makes it decode steps on the fused path only (the racecheck run);
//    --plan runs it on cuda-plan (the same launches on the CPU, host memory), which needs no
//    device: the ctest cuda.bench_validation_on_plan checks the benchmark's own harness so.
// 2. Timing: for each KV format, window W and batch B (Hq = 32, Hkv = 8, D = 128, one layer,
//    bf16 inputs through step_device) the rings are filled by decode steps past the wrap, then
//    decode steps are timed with CUDA events: warm-up, then the median of --runs runs of
//    --steps steps each. Steps rotate over groups of B sequences of an engine holding several
//    groups (and over 8 input sets), so what a run reads exceeds the L2 cache. Per shape: time per
//    step, KV bytes a step reads (the B full rings: W slots of K and V and their scales), the
//    achieved GB/s, and a device-to-device cudaMemcpy of the same byte count timed the same way
//    in the same run (it moves 2x the bytes: read + write). Then the cuBLAS path at B = 32,
//    W = 4096, and the step time at t = 64·W against t = W (positions far past the window).
//
// Without a device it prints the reason and "skipped" and exits 0.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringkv/config.hpp"
#include "ringkv/cuda/quant.hpp"
#include "ringkv/cuda_engine.hpp"
#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "support/oracle.hpp"
#include "support/tolerance.hpp"

namespace {

using namespace ringkv;
using cuda::CudaEngine;
using cuda::DecodePath;
using cuda::ResidentBatch;
using cuda::ResidentStep;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// ---------------------------------------------------------------- CUDA helpers

void check(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " (line " + std::to_string(line) + "): " + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e));
  }
}
#define CK(call) check((call), #call, __LINE__)

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { CK(cudaMalloc(&p_, std::max<size_t>(bytes, 256))); }
  ~DeviceBuffer() {
    if (p_) (void)cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  uint8_t* get() const { return static_cast<uint8_t*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

class Event {
 public:
  Event() { CK(cudaEventCreate(&e_)); }
  ~Event() { (void)cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_{};
};

class Stream {
 public:
  Stream() { CK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { (void)cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_{};
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// splitmix64: inputs are random, never zeros (zeros hide unwritten outputs and time differently).
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float amp) {  // [-amp, amp)
    return amp * (static_cast<float>(next() >> 40) * 0x1p-23f - 1.0f);
  }
};

/// Random bf16 values in [-amp, amp): the bits, and the same values widened to f32.
void random_bf16(Rng& rng, float amp, size_t n, std::vector<uint16_t>& bits, std::vector<float>* wide) {
  bits.resize(n);
  if (wide) wide->resize(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = cuda::bf16_bits(rng.uniform(amp));
    if (wide) (*wide)[i] = cuda::bf16_value(bits[i]);
  }
}

// ---------------------------------------------------------------- options

struct Options {
  bool quick = false, validate_only = false, decode_only = false, plan = false;
  std::string json;
  std::vector<int> batches{1, 8, 32, 128};
  std::vector<int64_t> windows{1024, 4096, 32768};
  std::vector<std::string> kvs{"bf16", "f16", "int8"};
  int runs = 30, warmup = 5, steps = 10;
  int q_heads = 32, kv_heads = 8, head_dim = 128;
  int cublas_batch = 32;
  int64_t cublas_window = 4096;
  int far_batch = 8;
  int64_t far_window = 1024;
  bool far = true, cublas = true;
};

[[noreturn]] void usage(const char* argv0, const std::string& error) {
  std::fprintf(error.empty() ? stdout : stderr,
               "%s%s"
               "usage: %s [--quick] [--json FILE] [--validate [--decode-only] [--plan]]\n"
               "          [--batches 1,8,32,128] [--windows 1024,4096,32768] [--kv bf16,f16,int8]\n"
               "          [--runs N (>= 20)] [--warmup N] [--steps N per run] [--no-cublas] [--no-far]\n"
               "          [--far-window W] [--far-batch B]\n",
               error.c_str(), error.empty() ? "" : "\n", argv0);
  std::exit(error.empty() ? 0 : 2);
}

template <class T>
std::vector<T> parse_list(const std::string& s) {
  std::vector<T> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    const long long v = std::stoll(item, &used);
    if (used != item.size() || v < 1) throw std::invalid_argument(item);
    out.push_back(static_cast<T>(v));
  }
  if (out.empty()) throw std::invalid_argument(s);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  bool runs_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0], "option " + a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--quick") {
        o.quick = true;
      } else if (a == "--validate") {
        o.validate_only = true;
      } else if (a == "--decode-only") {
        o.decode_only = true;
      } else if (a == "--plan") {
        o.plan = true;
      } else if (a == "--json") {
        o.json = value();
      } else if (a == "--batches") {
        o.batches = parse_list<int>(value());
      } else if (a == "--windows") {
        o.windows = parse_list<int64_t>(value());
      } else if (a == "--kv") {
        o.kvs.clear();
        std::stringstream ss(value());
        std::string item;
        while (std::getline(ss, item, ',')) {
          if (item != "bf16" && item != "f16" && item != "int8") usage(argv[0], "--kv: \"" + item + "\" is not bf16, f16 or int8");
          o.kvs.push_back(item);
        }
      } else if (a == "--runs") {
        o.runs = parse_list<int>(value()).at(0);
        runs_set = true;
      } else if (a == "--warmup") {
        o.warmup = parse_list<int>(value()).at(0);
      } else if (a == "--steps") {
        o.steps = parse_list<int>(value()).at(0);
      } else if (a == "--far-window") {
        o.far_window = parse_list<int64_t>(value()).at(0);
      } else if (a == "--far-batch") {
        o.far_batch = parse_list<int>(value()).at(0);
      } else if (a == "--no-cublas") {
        o.cublas = false;
      } else if (a == "--no-far") {
        o.far = false;
      } else if (a == "--help" || a == "-h") {
        usage(argv[0], "");
      } else {
        usage(argv[0], "unknown option " + a);
      }
    } catch (const std::exception&) {
      usage(argv[0], "bad value for " + a);
    }
  }
  if (o.quick) {  // the CI script's shapes: a few seconds of fills, a few of timing
    o.batches = {1, 32};
    o.windows = {1024, 4096};
    o.kvs = {"bf16", "int8"};
    if (!runs_set) o.runs = 20;
    o.warmup = std::min(o.warmup, 3);
    o.far_batch = 1;
  }
  if (o.runs < 20) usage(argv[0], "--runs must be at least 20 (the median of at least 20 runs)");
  if (o.decode_only && !o.validate_only) usage(argv[0], "--decode-only goes with --validate");
  if (o.plan && !o.validate_only) usage(argv[0], "--plan goes with --validate");
  return o;
}

KvFormat kv_format(const std::string& name) {
  if (name == "bf16") return KvFormat::of(DType::bf16);
  if (name == "f16") return KvFormat::of(DType::f16);
  return KvFormat::int8(Int8Scheme::per_head, Rounding::nearest_even);
}

// ---------------------------------------------------------------- 1. validation

struct Validation {
  bool ok = true;
  int64_t outputs = 0;
  double worst = 0;  ///< max |engine - oracle| / bound
  std::string failure;
};

/// Where the validation runs: the CUDA engine in device memory, or (--plan) the cuda-plan engine,
/// the same launches executed on the host, in host memory: the benchmark's own checks on a CPU.
class Target {
 public:
  Target(bool plan, cudaStream_t stream) : plan_(plan), stream_(stream) {}
  bool plan() const { return plan_; }
  std::unique_ptr<cuda::EngineCore> engine(const Config& cfg, DecodePath path) const {
    if (!plan_) return std::make_unique<CudaEngine>(cfg, path, stream_);
    std::unique_ptr<Engine> e = cuda::make_plan_engine(cfg, path);
    auto* core = dynamic_cast<cuda::EngineCore*>(e.get());
    if (!core) throw std::runtime_error("make_plan_engine did not return an EngineCore");
    (void)e.release();
    return std::unique_ptr<cuda::EngineCore>(core);
  }
  void* alloc(size_t bytes) const {
    void* p = nullptr;
    if (plan_) {
      p = std::malloc(bytes);
      if (!p) throw std::bad_alloc();
    } else {
      CK(cudaMalloc(&p, bytes));
    }
    return p;
  }
  void release(void* p) const {
    if (plan_) {
      std::free(p);
    } else {
      (void)cudaFree(p);
    }
  }
  void upload(void* dst, const void* src, size_t bytes) const {
    if (plan_) {
      std::memcpy(dst, src, bytes);
    } else {  // on the engine's stream (a non-blocking stream does not wait for the legacy one)
      CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
      CK(cudaStreamSynchronize(stream_));
    }
  }
  void download(void* dst, const void* src, size_t bytes) const {
    if (plan_) {
      std::memcpy(dst, src, bytes);
    } else {
      CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
      CK(cudaStreamSynchronize(stream_));
    }
  }
  void fill(void* dst, int value, size_t bytes) const {
    if (plan_) {
      std::memset(dst, value, bytes);
    } else {
      CK(cudaMemsetAsync(dst, value, bytes, stream_));
    }
  }
  void synchronize() const {
    if (plan_) return;
    CK(cudaStreamSynchronize(stream_));
    CK(cudaGetLastError());
  }

 private:
  bool plan_;
  cudaStream_t stream_;
};

/// A buffer of the target's memory.
class TargetBuffer {
 public:
  TargetBuffer(const Target& t, size_t bytes) : t_(&t), p_(t.alloc(std::max<size_t>(bytes, 256))), bytes_(bytes) {}
  ~TargetBuffer() {
    if (p_) t_->release(p_);
  }
  TargetBuffer(const TargetBuffer&) = delete;
  TargetBuffer& operator=(const TargetBuffer&) = delete;
  TargetBuffer(TargetBuffer&& o) noexcept : t_(o.t_), p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  TargetBuffer& operator=(TargetBuffer&&) = delete;
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  const Target* t_;
  void* p_;
  size_t bytes_;
};

/// Runs a small multi-step case through the device entry point (bf16 inputs) and checks every
/// output within the bound of the float64 oracle fed the same (widened) values.
Validation validate(DecodePath path, const KvFormat& kv, bool decode_only, const Target& target) {
  Config cfg;
  cfg.num_q_heads = 32;
  cfg.num_kv_heads = 8;
  cfg.head_dim = 128;
  cfg.batch = 3;
  cfg.max_tokens = 256;
  cfg.k_format = kv;
  cfg.v_format = kv;
  LayerConfig a, b;
  a.window = 24;
  a.sinks = 2;
  a.rope.style = RopeStyle::neox;
  b.window = 9;
  b.rope.style = RopeStyle::gptj;
  b.rope.scaling = RopeScaling::linear;
  b.rope.factor = 2.0;
  cfg.layers = {a, b};
  cfg.start_positions = {0, 100, 5000};
  const int L = 2, Hq = cfg.num_q_heads, Hkv = cfg.num_kv_heads, D = cfg.head_dim;

  const std::unique_ptr<cuda::EngineCore> engine = target.engine(cfg, path);
  conformance::Oracle oracle(cfg);
  const PrecisionProfile profile = engine->info().precision;
  Rng rng{0x5eedull + static_cast<uint64_t>(kv.dtype) * 7 + (path == DecodePath::cublas ? 1 : 0)};
  Validation v;

  // The schedule: (tokens per sequence) per step; sequence 1 is reset at step 20.
  std::vector<std::vector<int64_t>> steps;
  if (!decode_only) steps.push_back({40, 5, 1});  // chunks that cross the wrap of both layers
  for (int i = 0; i < 36; ++i) steps.push_back({1, 1, i % 3 == 0 ? 0 : 1});
  if (!decode_only) steps.push_back({3, 30, 1});
  for (int i = 0; i < 4; ++i) steps.push_back({1, 1, 1});

  for (size_t st = 0; st < steps.size(); ++st) {
    std::vector<SequenceReset> resets;
    if (st == 20) {
      resets.push_back({1, 777});
      oracle.reset(1, 777);
    }
    struct Seq {
      int s;
      int64_t n;
      std::vector<float> q, k, v;
      std::vector<TargetBuffer> bufs;  // q, k, v, out
    };
    std::vector<Seq> seqs;
    for (int s = 0; s < cfg.batch; ++s) {
      const int64_t n = steps[st][sz(s)];
      if (n == 0) continue;
      Seq x;
      x.s = s;
      x.n = n;
      std::vector<uint16_t> bq, bk, bv;
      random_bf16(rng, 2.0f, sz(L * n * Hq * D), bq, &x.q);
      random_bf16(rng, 2.0f, sz(L * n * Hkv * D), bk, &x.k);
      random_bf16(rng, 1.0f, sz(L * n * Hkv * D), bv, &x.v);
      for (const std::vector<uint16_t>* h : {&bq, &bk, &bv}) {
        x.bufs.emplace_back(target, h->size() * 2);
        target.upload(x.bufs.back().get(), h->data(), h->size() * 2);
      }
      x.bufs.emplace_back(target, sz(L * n * Hq * D) * 4);
      target.fill(x.bufs.back().get(), 0xff, x.bufs.back().bytes());  // NaN: an unwritten output fails
      seqs.push_back(std::move(x));
    }
    std::vector<ResidentStep> appends;
    for (Seq& x : seqs) {
      appends.push_back({x.s, x.n, x.bufs[0].get(), x.bufs[1].get(), x.bufs[2].get(), static_cast<float*>(x.bufs[3].get())});
    }
    engine->step_resident(ResidentBatch{resets, appends, cuda::kInBF16});  // = CudaEngine::step_device
    target.synchronize();
    for (Seq& x : seqs) {
      std::vector<float> got(sz(L * x.n * Hq * D));
      target.download(got.data(), x.bufs[3].get(), got.size() * 4);
      const std::vector<conformance::OracleOutput> want = oracle.append(x.s, x.n, x.q.data(), x.k.data(), x.v.data());
      for (int l = 0; l < L; ++l) {
        const conformance::BoundContext ctx = conformance::make_bound_context(cfg, l, profile);
        for (int64_t t = 0; t < x.n; ++t) {
          for (int h = 0; h < Hq; ++h) {
            const conformance::OracleOutput& o = want[sz((l * x.n + t) * Hq + h)];
            for (int d = 0; d < D; ++d) {
              const double g = got[sz(((l * x.n + t) * Hq + h) * D + d)];
              const double bound = conformance::output_bound(ctx, o.score, o.dims[sz(d)]);
              const double err = std::fabs(g - o.o[sz(d)]);
              ++v.outputs;
              v.worst = std::max(v.worst, err / bound);
              if (!(err <= bound) && v.ok) {
                v.ok = false;
                std::ostringstream os;
                os << "step " << st << ", sequence " << x.s << ", token " << t << " of " << x.n << ", layer " << l
                   << ", q head " << h << ", dim " << d << ": got " << g << ", oracle " << o.o[sz(d)] << ", |error| "
                   << err << " > bound " << bound;
                v.failure = os.str();
              }
            }
          }
        }
      }
    }
  }
  return v;
}

/// The validation of every path and KV format; prints one line each. True if all passed.
bool validate_all(const Target& target, bool decode_only, std::vector<std::string>& lines) {
  bool valid = true;
  for (const DecodePath path : {DecodePath::fused, DecodePath::cublas}) {
    if (decode_only && path == DecodePath::cublas) continue;
    for (const std::string& kv : {std::string("bf16"), std::string("f16"), std::string("int8")}) {
      const Validation v = validate(path, kv_format(kv), decode_only, target);
      const char* name = path == DecodePath::fused ? (target.plan() ? "cuda-plan" : "cuda")
                                                   : (target.plan() ? "cuda-plan-cublas" : "cuda-cublas");
      char buf[640];
      std::snprintf(buf, sizeof buf, "%s %s: %" PRId64 " outputs, worst %.3g of the bound%s%s", name,
                    to_string(kv_format(kv)).c_str(), v.outputs, v.worst, v.ok ? "" : ": FAILED ", v.failure.c_str());
      std::printf("validate %s\n", buf);
      std::fflush(stdout);
      lines.push_back(buf);
      valid = valid && v.ok;
    }
  }
  return valid;
}

// ---------------------------------------------------------------- 2. timing

struct Row {
  std::string path, kv, note;
  int batch = 0;
  int64_t window = 0;
  int64_t t = 0;  ///< tokens each timed sequence held (index since reset) when timing began
  double us = 0, us_min = 0, us_max = 0;  ///< per step: median, min and max run
  double kv_bytes = 0, gbps = 0;
  double copy_us = 0, copy_gbps = 0;  ///< copy of kv_bytes (GB/s counts read + write)
  int splits = 0;
};

/// bf16 inputs for `sequences` sequences of one decode token each, in `sets` rotating sets.
struct InputSets {
  std::vector<DeviceBuffer> q, k, v;
  DeviceBuffer out;
  int sets = 0;
  size_t q_elems = 0, kv_elems = 0;  ///< per sequence
  InputSets(int sequences, int sets_, const Config& cfg, uint64_t seed) : sets(sets_) {
    q_elems = sz(cfg.num_q_heads) * sz(cfg.head_dim) * cfg.layers.size();
    kv_elems = sz(cfg.num_kv_heads) * sz(cfg.head_dim) * cfg.layers.size();
    Rng rng{seed};
    std::vector<uint16_t> bits;
    for (int i = 0; i < sets; ++i) {
      for (auto* vec : {&q, &k, &v}) {
        const size_t n = (vec == &q ? q_elems : kv_elems) * sz(sequences);
        random_bf16(rng, vec == &v ? 1.0f : 2.0f, n, bits, nullptr);
        vec->emplace_back(n * 2);
        CK(cudaMemcpy(vec->back().get(), bits.data(), n * 2, cudaMemcpyHostToDevice));
      }
    }
    out = DeviceBuffer(q_elems * sz(sequences) * 4);
    CK(cudaDeviceSynchronize());  // the engine's stream does not wait for these legacy-stream copies
  }
  /// The appends of sequences [first, first + count), input set `set`.
  void appends(int first, int count, int set, std::vector<ResidentStep>& out_steps) const {
    out_steps.clear();
    for (int s = first; s < first + count; ++s) {
      out_steps.push_back({s, 1, q[sz(set)].get() + sz(s) * q_elems * 2, k[sz(set)].get() + sz(s) * kv_elems * 2,
                           v[sz(set)].get() + sz(s) * kv_elems * 2,
                           reinterpret_cast<float*>(out.get()) + sz(s) * q_elems});
    }
  }
};

struct Device {
  std::string name;
  int sms = 0;
  size_t l2 = 0, total = 0;
};

/// Sequences an engine holds so that B-sequence groups rotate over more than 4x the L2 cache.
int engine_batch(int max_b, size_t ring_bytes_per_seq, const Device& dev, size_t budget) {
  const size_t want = 4 * dev.l2 / std::max<size_t>(ring_bytes_per_seq, 1) + 1;
  size_t e = std::max<size_t>(sz(max_b), want);
  e = (e + sz(max_b) - 1) / sz(max_b) * sz(max_b);  // whole groups
  const size_t cap = std::max<size_t>(sz(max_b), budget / std::max<size_t>(ring_bytes_per_seq, 1) / sz(max_b) * sz(max_b));
  return static_cast<int>(std::min<size_t>({e, cap, 1024}));
}

Config bench_config(const Options& o, const KvFormat& kv, int64_t window, int batch) {
  Config cfg;
  cfg.num_q_heads = o.q_heads;
  cfg.num_kv_heads = o.kv_heads;
  cfg.head_dim = o.head_dim;
  cfg.batch = batch;
  cfg.max_tokens = int64_t{1} << 24;  // room for t = 64·W and every timed step
  cfg.k_format = kv;
  cfg.v_format = kv;
  LayerConfig l;
  l.window = window;
  l.sinks = 0;
  l.rope.style = RopeStyle::neox;
  cfg.layers = {l};
  return cfg;
}

/// Bytes one full ring row of one sequence holds: W slots of K and V (and INT8 scales).
size_t ring_bytes_per_seq(const Config& cfg) {
  const int D = cfg.head_dim;
  const size_t per_slot = sz(cfg.num_kv_heads) * (sz(D) * sz(bytes_per_element(cfg.k_format.dtype) + bytes_per_element(cfg.v_format.dtype)) +
                                                   4 * sz(scales_per_row(cfg.k_format, D) + scales_per_row(cfg.v_format, D)));
  return per_slot * sz(ring_capacity(cfg.layers[0], cfg.max_tokens));
}

/// Device-to-device copies of `bytes`, rotating over a pool of at least 4x the L2 cache.
class CopyTimer {
 public:
  CopyTimer(size_t max_bytes, const Device& dev) {
    pool_ = std::max(max_bytes, 4 * dev.l2);
    src_ = DeviceBuffer(pool_);
    dst_ = DeviceBuffer(pool_);
    CK(cudaMemset(src_.get(), 0x3c, pool_));
    CK(cudaDeviceSynchronize());
  }
  /// Median microseconds of one copy, over `runs` runs of `steps` copies.
  double time_us(size_t bytes, cudaStream_t stream, const Options& o, double* min_us = nullptr) {
    const size_t slots = std::max<size_t>(pool_ / std::max<size_t>(bytes, 1), 1);
    Event a, b;
    std::vector<double> us;
    size_t k = 0;
    for (int r = 0; r < o.warmup + o.runs; ++r) {
      CK(cudaEventRecord(a.get(), stream));
      for (int s = 0; s < o.steps; ++s, ++k) {
        const size_t off = (k % slots) * bytes;
        CK(cudaMemcpyAsync(dst_.get() + off, src_.get() + off, bytes, cudaMemcpyDeviceToDevice, stream));
      }
      CK(cudaEventRecord(b.get(), stream));
      CK(cudaEventSynchronize(b.get()));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a.get(), b.get()));
      if (r >= o.warmup) us.push_back(1000.0 * ms / o.steps);
    }
    if (min_us) *min_us = *std::min_element(us.begin(), us.end());
    return median(us);
  }

 private:
  size_t pool_ = 0;
  DeviceBuffer src_, dst_;
};

/// Appends `steps` decode tokens to every sequence of the engine (all at once), to fill rings.
void advance_all(CudaEngine& e, const InputSets& in, int64_t steps, cudaStream_t stream, const char* what) {
  std::vector<ResidentStep> appends;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    in.appends(0, e.config().batch, static_cast<int>(i % in.sets), appends);
    e.step_device(ResidentBatch{{}, appends, cuda::kInBF16});
    if (i % 256 == 255) CK(cudaStreamSynchronize(stream));  // bound the host's run-ahead
  }
  CK(cudaStreamSynchronize(stream));
  CK(cudaGetLastError());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "  [fill] %s: %" PRId64 " decode steps of %d sequences in %.1f s\n", what, steps,
               e.config().batch, s);
}

/// Fills every sequence's ring with one prefill chunk of `tokens` tokens (the cuBLAS engine).
void prefill_all(CudaEngine& e, int64_t tokens, cudaStream_t stream, const char* what) {
  const Config& cfg = e.config();
  const size_t qn = sz(tokens) * sz(cfg.num_q_heads) * sz(cfg.head_dim), kvn = sz(tokens) * sz(cfg.num_kv_heads) * sz(cfg.head_dim);
  Rng rng{0xf111ull};
  std::vector<uint16_t> bits;
  DeviceBuffer q(qn * 2), k(kvn * 2), v(kvn * 2), out(qn * 4);
  for (auto* p : {&q, &k, &v}) {
    random_bf16(rng, p == &v ? 1.0f : 2.0f, p == &q ? qn : kvn, bits, nullptr);
    CK(cudaMemcpy(p->get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  }
  CK(cudaDeviceSynchronize());  // the engine's stream does not wait for these legacy-stream copies
  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < cfg.batch; ++s) {
    const ResidentStep step{s, tokens, q.get(), k.get(), v.get(), reinterpret_cast<float*>(out.get())};
    e.step_device(ResidentBatch{{}, std::span<const ResidentStep>(&step, 1), cuda::kInBF16});
  }
  CK(cudaStreamSynchronize(stream));
  CK(cudaGetLastError());
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "  [fill] %s: %d prefill chunks of %" PRId64 " tokens in %.1f s\n", what, cfg.batch, tokens, sec);
}

/// Times decode steps of B sequences, rotating over the engine's groups of B and the input sets.
Row time_decode(CudaEngine& e, const InputSets& in, int B, cudaStream_t stream, const Options& o, int64_t t_held) {
  const int groups = std::max(1, e.config().batch / B);
  Event a, b;
  std::vector<ResidentStep> appends;
  std::vector<double> us;
  int64_t k = 0;
  for (int r = 0; r < o.warmup + o.runs; ++r) {
    CK(cudaEventRecord(a.get(), stream));
    for (int s = 0; s < o.steps; ++s, ++k) {
      in.appends(static_cast<int>(k % groups) * B, B, static_cast<int>(k % in.sets), appends);
      e.step_device(ResidentBatch{{}, appends, cuda::kInBF16});
    }
    CK(cudaEventRecord(b.get(), stream));
    CK(cudaEventSynchronize(b.get()));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a.get(), b.get()));
    if (r >= o.warmup) us.push_back(1000.0 * ms / o.steps);
  }
  CK(cudaGetLastError());
  Row row;
  row.batch = B;
  row.window = e.config().layers[0].window;
  row.t = t_held;
  row.us = median(us);
  row.us_min = *std::min_element(us.begin(), us.end());
  row.us_max = *std::max_element(us.begin(), us.end());
  row.kv_bytes = static_cast<double>(ring_bytes_per_seq(e.config())) * B;
  row.gbps = row.kv_bytes / (row.us * 1e3);
  row.splits = e.last_splits();
  return row;
}

void print_header() {
  std::printf("%-7s %-5s %4s %6s %8s %10s %9s %9s %8s %9s %8s %6s %s\n", "path", "kv", "B", "W", "t", "us/step",
              "KV MiB", "GB/s", "copy us", "copy GB/s", "%copy", "splits", "note");
}

void print_row(const Row& r) {
  // %copy: the step's read bandwidth against the copy's read + write bandwidth.
  std::printf("%-7s %-5s %4d %6" PRId64 " %8" PRId64 " %10.2f %9.1f %9.1f %8.2f %9.1f %7.1f%% %6d %s\n", r.path.c_str(),
              r.kv.c_str(), r.batch, r.window, r.t, r.us, r.kv_bytes / 1048576.0, r.gbps, r.copy_us, r.copy_gbps,
              r.copy_gbps > 0 ? 100.0 * r.gbps / r.copy_gbps : 0.0, r.splits, r.note.c_str());
  std::fflush(stdout);
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (const char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
      continue;
    }
    o += c;
  }
  return o;
}

void write_json(const std::string& path, const Device& dev, const std::vector<std::string>& validations, bool valid,
                const std::vector<Row>& rows, const std::string& skipped) {
  if (path.empty()) return;
  std::ofstream f(path);
  f << "{\n  \"tool\": \"ringkv_cuda_bench\",\n";
  if (!skipped.empty()) {
    f << "  \"skipped\": true,\n  \"reason\": \"" << json_escape(skipped) << "\"\n}\n";
    return;
  }
  f << "  \"skipped\": false,\n  \"device\": {\"name\": \"" << json_escape(dev.name) << "\", \"sms\": " << dev.sms
    << ", \"l2_bytes\": " << dev.l2 << ", \"memory_bytes\": " << dev.total << "},\n";
  f << "  \"validation\": {\"passed\": " << (valid ? "true" : "false") << ", \"runs\": [";
  for (size_t i = 0; i < validations.size(); ++i) f << (i ? ", " : "") << "\"" << json_escape(validations[i]) << "\"";
  f << "]},\n  \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "    {\"path\": \"%s\", \"kv\": \"%s\", \"batch\": %d, \"window\": %" PRId64 ", \"t\": %" PRId64
                  ", \"us_per_step\": %.3f, \"us_min\": %.3f, \"us_max\": %.3f, \"kv_bytes\": %.0f, \"gbps\": %.2f, "
                  "\"copy_us\": %.3f, \"copy_gbps\": %.2f, \"splits\": %d, \"note\": \"%s\"}%s\n",
                  r.path.c_str(), r.kv.c_str(), r.batch, r.window, r.t, r.us, r.us_min, r.us_max, r.kv_bytes, r.gbps,
                  r.copy_us, r.copy_gbps, r.splits, json_escape(r.note).c_str(), i + 1 < rows.size() ? "," : "");
    f << buf;
  }
  f << "  ]\n}\n";
  if (!f) std::fprintf(stderr, "ringkv_cuda_bench: could not write %s\n", path.c_str());
}

int run(const Options& o) {
  if (o.plan) {  // the validation on cuda-plan: no device, no timing
    std::vector<std::string> vrows;
    const bool valid = validate_all(Target(true, nullptr), o.decode_only, vrows);
    write_json(o.json, {}, vrows, valid, {}, "");
    std::printf("validation on cuda-plan (the CPU) %s\n", valid ? "passed" : "FAILED");
    return valid ? 0 : 1;
  }
  const std::string reason = cuda::cuda_unavailable_reason();
  if (!reason.empty()) {
    std::printf("ringkv_cuda_bench: skipped: %s\n", reason.c_str());
    write_json(o.json, {}, {}, false, {}, reason);
    return 0;
  }
  Device dev;
  {
    int id = 0;
    CK(cudaGetDevice(&id));
    cudaDeviceProp p{};
    CK(cudaGetDeviceProperties(&p, id));
    dev.name = p.name;
    dev.sms = p.multiProcessorCount;
    dev.l2 = static_cast<size_t>(p.l2CacheSize);
    size_t free_b = 0;
    CK(cudaMemGetInfo(&free_b, &dev.total));
    std::printf("device: %s, sm_%d%d, %d SMs, L2 %.0f MiB, %.1f GiB (%.1f GiB free)\n", p.name, p.major, p.minor,
                dev.sms, static_cast<double>(dev.l2) / 1048576.0, static_cast<double>(dev.total) / 1073741824.0,
                static_cast<double>(free_b) / 1073741824.0);
  }
  Stream stream;

  // ---- 1. validation ----
  std::vector<std::string> vrows;
  const bool valid = validate_all(Target(false, stream.get()), o.decode_only, vrows);
  if (!valid || o.validate_only) {
    write_json(o.json, dev, vrows, valid, {}, "");
    std::printf("validation %s\n", valid ? "passed" : "FAILED: the engine disagrees with the oracle beyond the bound");
    return valid ? 0 : 1;
  }

  // One timed decode row: step time, bytes read, and the same bytes copied device to device.
  const auto measure = [&](CudaEngine& engine, const InputSets& in, int B, int64_t W, CopyTimer& copy,
                           const char* path, const std::string& kvname, int E) {
    Row r = time_decode(engine, in, B, stream.get(), o, W + 16);
    r.path = path;
    r.kv = kvname;
    r.copy_us = copy.time_us(static_cast<size_t>(r.kv_bytes), stream.get(), o);
    r.copy_gbps = 2.0 * r.kv_bytes / (r.copy_us * 1e3);
    r.note = "engine batch " + std::to_string(E);
    print_row(r);
    return r;
  };

  // ---- 2. timing ----
  std::vector<Row> rows;
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));
  const size_t budget = free_b / 3;  // ring; the copy pool takes as much again
  const int max_b = *std::max_element(o.batches.begin(), o.batches.end());
  std::printf("\nfused decode (step_device, bf16 inputs, Hq=%d Hkv=%d D=%d, one layer; median of %d runs of %d steps)\n",
              o.q_heads, o.kv_heads, o.head_dim, o.runs, o.steps);
  print_header();
  for (const std::string& kvname : o.kvs) {
    for (const int64_t W : o.windows) {
      const KvFormat kv = kv_format(kvname);
      const size_t per_seq = ring_bytes_per_seq(bench_config(o, kv, W, 1));
      const int E = engine_batch(max_b, per_seq, dev, budget);
      if (sz(E) * per_seq > budget) {
        std::printf("%-7s %-5s %4d %6" PRId64 "  skipped: %.1f GiB of rings do not fit\n", "fused", kvname.c_str(), max_b, W,
                    static_cast<double>(sz(E) * per_seq) / 1073741824.0);
        continue;
      }
      const Config cfg = bench_config(o, kv, W, E);
      CudaEngine engine(cfg, DecodePath::fused, stream.get());
      const InputSets in(E, 8, cfg, 0xbe9c4ull + static_cast<uint64_t>(W));
      advance_all(engine, in, W + 16, stream.get(), (kvname + " W=" + std::to_string(W)).c_str());
      CopyTimer copy(per_seq * sz(max_b), dev);
      for (const int B : o.batches) {
        rows.push_back(measure(engine, in, B, W, copy, "fused", kvname, E));
      }
    }
  }

  // ---- the cuBLAS path at B = 32, W = 4096 ----
  if (o.cublas) {
    std::printf("\ncuBLAS decode path (cuda-cublas), B=%d, W=%" PRId64 "\n", o.cublas_batch, o.cublas_window);
    print_header();
    for (const std::string& kvname : o.kvs) {
      const KvFormat kv = kv_format(kvname);
      const int64_t W = o.cublas_window;
      const int B = o.cublas_batch;
      const size_t per_seq = ring_bytes_per_seq(bench_config(o, kv, W, 1));
      const int E = engine_batch(B, per_seq, dev, budget);
      const Config cfg = bench_config(o, kv, W, E);
      CudaEngine engine(cfg, DecodePath::cublas, stream.get());
      const InputSets in(E, 8, cfg, 0xc0b1ull);
      prefill_all(engine, W + 16, stream.get(), ("cublas " + kvname).c_str());
      CopyTimer copy(per_seq * sz(B), dev);
      rows.push_back(measure(engine, in, B, W, copy, "cublas", kvname, E));
    }
  }

  // ---- t = 64·W against t = W ----
  if (o.far) {
    const int64_t W = o.far_window;
    const int B = o.far_batch;
    const KvFormat kv = kv_format("bf16");
    const size_t per_seq = ring_bytes_per_seq(bench_config(o, kv, W, 1));
    const int E = engine_batch(B, per_seq, dev, budget);
    const Config cfg = bench_config(o, kv, W, E);
    std::printf("\nstep time far past the window (fused, bf16, B=%d, W=%" PRId64 ")\n", B, W);
    print_header();
    CudaEngine engine(cfg, DecodePath::fused, stream.get());
    const InputSets in(E, 8, cfg, 0xfa7ull);
    CopyTimer copy(per_seq * sz(B), dev);
    advance_all(engine, in, W + 16, stream.get(), "t = W");
    Row near = time_decode(engine, in, B, stream.get(), o, W + 16);
    const int64_t timed = int64_t{o.warmup + o.runs} * o.steps / std::max(1, E / B);  // tokens the timing added per sequence
    advance_all(engine, in, 64 * W - (W + 16) - timed, stream.get(), "t = 64·W");
    Row far = time_decode(engine, in, B, stream.get(), o, 64 * W);
    for (Row* r : {&near, &far}) {
      r->path = "fused";
      r->kv = "bf16";
      r->copy_us = copy.time_us(static_cast<size_t>(r->kv_bytes), stream.get(), o);
      r->copy_gbps = 2.0 * r->kv_bytes / (r->copy_us * 1e3);
    }
    near.note = "t = W";
    char buf[128];
    std::snprintf(buf, sizeof buf, "t = 64W: %.3fx the step time at t = W", far.us / near.us);
    far.note = buf;
    print_row(near);
    print_row(far);
    rows.push_back(near);
    rows.push_back(far);
  }
  write_json(o.json, dev, vrows, valid, rows, "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringkv_cuda_bench: error: %s\n", e.what());
    return 1;
  }
}
