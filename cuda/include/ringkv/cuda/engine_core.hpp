// ringkv cuda: the engine core, shared by the CUDA engine and the cuda-plan
// engine. It owns the ring (in the backend's memory, allocated once), tracks
// positions and token counts on the host, and turns every step into the
// launches of params.hpp: for decode (n = 1, fused path) append → decode →
// merge per layer; for a chunk (n > 1, or every step on the cuBLAS path)
// append to stage rows → gather → scores GEMM → masked softmax → P·V GEMM →
// scatter → commit, per layer and per sub-chunk of at most chunk_tile() tokens.
// The backend decides only where the launches run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ringkv/cuda/backend.hpp"
#include "ringkv/engine.hpp"

namespace ringkv::cuda {

/// Which attention path the engine takes for decode steps.
enum class DecodePath {
  fused,   ///< the split-K flash-decoding kernel for n = 1; the cuBLAS path for chunks
  cublas,  ///< the cuBLAS path for every step (the independent cross-check)
};

struct CoreOptions {
  DecodePath path = DecodePath::fused;
  std::string name = "cuda";
  /// Upper bound on the prefill scratch (stage rows, f32 K/V, scores); sets chunk_tile().
  size_t prefill_scratch_bytes = size_t{256} << 20;
};

/// One sequence's tokens with tensors already in the backend's memory (the device entry point).
struct ResidentStep {
  int sequence = 0;
  int64_t n_tokens = 1;
  const void* q = nullptr;  ///< [L][n][Hq][D], input type of the batch
  const void* k = nullptr;  ///< [L][n][Hkv][D]
  const void* v = nullptr;  ///< [L][n][Hkv][D]
  float* out = nullptr;     ///< [L][n][Hq][D] f32
};

struct ResidentBatch {
  std::span<const SequenceReset> resets;
  std::span<const ResidentStep> appends;
  int input_type = kInF32;  ///< kInF32, kInF16, kInBF16
  std::span<const SequenceRollback> rollbacks{};  ///< spec 1.1, applied first, as in step()
};

class EngineCore : public Engine {
 public:
  EngineCore(Config config, std::unique_ptr<Backend> backend, CoreOptions options);
  ~EngineCore() override;
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  EngineInfo info() const override;
  const Config& config() const override { return config_; }
  /// Host tensors: staged into backend memory, run, outputs copied back; returns when done.
  void step(const StepBatch& batch) override;
  void reset(int sequence, int64_t start_position) override;
  std::optional<CacheSnapshot> snapshot(int layer, int sequence) const override;
  size_t cache_bytes() const override { return ring_bytes_; }
  bool poison_empty_slots() override;

  /// Tensors in backend memory: validated like step() (shapes, sequences, room; not the values,
  /// which stay on the device), enqueued, not waited for.
  void step_resident(const ResidentBatch& batch);

  Backend& backend() { return *backend_; }
  /// Tokens per prefill sub-chunk (from prefill_scratch_bytes).
  int64_t chunk_tile() const { return chunk_tile_; }
  /// Split count the last decode launch of a layer used (for tests and the benchmark).
  int last_splits() const { return last_splits_; }

  static Capabilities capabilities();

 private:
  struct LayerState {
    RingLayerView ring;
    RopeDesc rope;
    double* inv_freq = nullptr;     // backend memory [R/2]
    float* sink_logits = nullptr;   // backend memory [Hq], or null
  };
  struct Buffer {  // backend memory, released by the destructor
    void* p = nullptr;
    size_t bytes = 0;
  };

  void* alloc(size_t bytes);
  LayerShape shape(int layer) const;
  /// Spec 1.1 §5.1: the validated and honoured rollbacks of a step, then its resets.
  void apply_rollbacks(std::span<const SequenceRollback> rollbacks);
  void apply_resets(std::span<const SequenceReset> resets);
  /// H_l of every (layer, sequence) after a step's appends (spec 1.1 §5.1.2).
  template <class Appends>
  void raise_high_water(const Appends& appends);
  void run_decode(std::span<const SeqItem> items, int input_type);
  void run_chunk(const SeqItem& item, int input_type);

  Config config_;
  std::unique_ptr<Backend> backend_;
  CoreOptions options_;
  FormatDesc kf_, vf_;
  std::vector<LayerState> layers_;
  std::vector<Buffer> buffers_;
  std::vector<int64_t> p0_, seen_;
  std::vector<int64_t> high_water_;  // [L][B] H_l (spec 1.1 §5.1.2), as the reference keeps it
  RollbackReplay replay_;            // the reserve a refusal names (§5.1.4), as the reference keeps it
  size_t ring_bytes_ = 0;
  int64_t max_capacity_ = 1;
  int64_t chunk_tile_ = 1;
  int max_splits_ = 1;
  int last_splits_ = 0;
  int group_ = 1;

  // backend scratch
  SeqItem* items_dev_ = nullptr;        // [B + 1]: decode items, then the chunk item
  float* q_rot_dec_ = nullptr;          // [B][Hq][D]
  float* partial_acc_ = nullptr;        // [B][Hq][kMaxSplits][D]
  float* partial_ml_ = nullptr;         // [B][Hq][kMaxSplits][2]
  float* q_rot_pre_ = nullptr;          // [Hkv][m][G][D]
  StageRows stage_;                     // [m] rows of the current prefill sub-chunk
  float* kd_ = nullptr;                 // [Hkv][Cmax + m][D]
  float* vd_ = nullptr;
  int64_t* key_positions_ = nullptr;    // [Cmax + m]
  float* scores_ = nullptr;             // [Hkv][m·G][Cmax + m]
  float* o_ = nullptr;                  // [Hkv][m·G][D]
  // host-path staging (backend memory): inputs and outputs of max(B, m) tokens over all layers
  float* in_q_ = nullptr;               // [tokens][L][Hq][D] as [L][n][Hq][D] per item
  float* in_k_ = nullptr;
  float* in_v_ = nullptr;
  float* in_out_ = nullptr;
  int64_t staging_tokens_ = 1;

  // host scratch, sized once
  std::vector<SeqItem> host_items_;
  std::vector<SequenceStep> resident_view_;  // [B] step_resident's appends, for validate_step
};

/// The capabilities of the CUDA engine and of cuda-plan: every feature of spec 1, and spec 1.1's
/// rollback with a reserve up to 2^30 (config validation's bound; the ring, allocated once, never
/// exceeds max_tokens slots per layer and sequence, whatever the reserve).
Capabilities core_capabilities();

}  // namespace ringkv::cuda
