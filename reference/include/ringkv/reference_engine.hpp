// ringkv: the reference ring-cache engine. Plain C++, f32 arithmetic, f64 RoPE.
// This is the code people port: read process_chunk(), write_token() and
// attend_token() top to bottom to see the whole algorithm.
//
// The protected virtual functions are the seams the conformance mutants
// (conformance/mutants/) override to plant one bug each; the engine itself
// never needs them to be virtual.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ringkv/engine.hpp"
#include "ringkv/ring.hpp"

namespace ringkv {

class ReferenceEngine : public Engine {
 public:
  /// Validates the config (throws ConfigError) and allocates every ring and
  /// every scratch buffer; step() never allocates.
  explicit ReferenceEngine(Config config);

  EngineInfo info() const override;
  const Config& config() const override { return config_; }
  void step(const StepBatch& batch) override;
  void reset(int sequence, int64_t start_position) override;
  std::optional<CacheSnapshot> snapshot(int layer, int sequence) const override;
  size_t cache_bytes() const override;
  bool poison_empty_slots() override;

  /// Tokens sequence s holds: appended since its last reset, less those rolled back.
  int64_t tokens_seen(int sequence) const { return seen_[static_cast<size_t>(sequence)]; }
  const RingKvCache& ring(int layer, int sequence) const { return rings_[ring_index(layer, sequence)]; }

  static Capabilities capabilities();

 protected:
  /// Must be called by derived constructors that change ring_geometry().
  void rebuild_rings();

  // ---- seams (see conformance/mutants/) ----
  /// The ring of a layer: {S, W, min(S + W, max_tokens)}.
  virtual RingGeometry ring_geometry(int layer) const;
  /// Spec §2: query index i sees key index j iff j <= i and (j < S or j > i - W).
  virtual bool attends(int layer, int64_t query_index, int64_t key_index) const;
  /// Whether the key in a slot is visible: the slot is occupied and attends() says so.
  virtual bool slot_visible(int layer, int64_t query_index, int64_t slot_position, int64_t p0) const;
  /// Position RoPE uses for a token: its true position (spec §8).
  virtual int64_t rope_position(int layer, int64_t true_position, int64_t slot) const;
  /// Query head of member m of kv head g's group: g * (Hq / Hkv) + m (spec §6).
  virtual int q_head_of(int kv_head, int member) const;
  /// Appends n tokens of one sequence in one layer: write token t, then attend with it.
  virtual void process_chunk(int layer, int sequence, int64_t n, const float* q, const float* k,
                             const float* v, float* out);
  /// Forgets everything a sequence held (spec §5).
  virtual void clear_sequence(int sequence);
  /// Throws StepError if a rollback of the batch is refused (spec 1.1 §5.1.2, the high-water rule).
  virtual void check_rollbacks(const StepBatch& batch) const;
  /// Takes a sequence back to its first m tokens in every layer (spec 1.1 §5.1.1, §5.1.6).
  virtual void roll_back(int sequence, int64_t m);
  /// Whether rolling a sequence that starts at p0 back to m tokens removes what `slot` holds: the
  /// slot holds a token of index >= m (spec 1.1 §5.1.3).
  virtual bool slot_rolled_back(const RingKvCache& ring, int64_t slot, int64_t p0, int64_t m) const;
  /// Encodes one rotated K row (is_key) or one V row for storage (spec §10).
  virtual void encode_kv_row(bool is_key, const KvFormat& format, const float* x, uint8_t* bytes, float* scales) const;
  /// Rounds the rotated query before q·k, if an engine does (the reference does not).
  virtual void round_query(float* q_rot, int n) const;
  /// Rounds the normalised weights P before P·V, if an engine does (the reference does not).
  virtual void round_weights(float* p, int64_t n) const;
  /// Adds p·v[0..n) to the P·V accumulator acc[0..n) (the reference: in f32).
  virtual void accumulate_pv(float* acc, float p, const float* v, int n) const;
  /// The RoPE angles of a position (the reference: rope_angles, in f64).
  virtual void rotation_angles(const RopeConfig& rope, int64_t position, double* cos_out, double* sin_out) const;
  /// Rounds one head's output, if an engine does (the reference does not).
  virtual void round_output(float* o, int n) const;
  /// Orders the visible slots of one query before the sums over them (the reference keeps slot order).
  virtual void order_visible(int64_t* slots, int64_t n) const;
  /// The declared precision profile.
  virtual PrecisionProfile precision() const;
  /// Whether the engine declares itself deterministic (the reference is).
  virtual bool deterministic() const { return true; }
  virtual const char* engine_name() const { return "reference"; }

  // ---- the algorithm ----
  /// Rotates and stores token `index` (since reset) of a sequence into its ring.
  void write_token(int layer, int sequence, int64_t index, const float* k, const float* v);
  /// Computes the outputs of token `index` for all q heads from what the ring holds now.
  void attend_token(int layer, int sequence, int64_t index, const float* q, float* out);
  /// Rolls one layer of a sequence back to m tokens: empties every slot slot_rolled_back() names and
  /// lowers the layer's high-water mark (spec 1.1 §5.1.3, §5.1.2).
  void roll_back_layer(int layer, int sequence, int64_t m);

  size_t ring_index(int layer, int sequence) const {
    return static_cast<size_t>(layer) * static_cast<size_t>(config_.batch) + static_cast<size_t>(sequence);
  }
  RingKvCache& ring_mut(int layer, int sequence) { return rings_[ring_index(layer, sequence)]; }
  int64_t start_of(int sequence) const { return p0_[static_cast<size_t>(sequence)]; }
  int64_t seen_of(int sequence) const { return seen_[static_cast<size_t>(sequence)]; }
  int64_t& high_water(int layer, int sequence) { return high_water_[ring_index(layer, sequence)]; }
  int64_t& seen_mut(int sequence) { return seen_[static_cast<size_t>(sequence)]; }

  Config config_;

 private:
  void validate_batch(const StepBatch& batch) const;

  std::vector<RingKvCache> rings_;  // [layer][sequence]
  std::vector<int64_t> p0_;         // [sequence]
  std::vector<int64_t> seen_;       // [sequence] tokens held since reset
  std::vector<int64_t> high_water_; // [layer][sequence] H_l: spec 1.1 §5.1.2
  mutable RollbackReplay replay_;   // the reserve a refusal names (§5.1.4); a refused step joins it

  // Scratch, sized once at construction.
  std::vector<double> cos_, sin_;      // [R/2]
  std::vector<float> q_rot_;           // [Hq][D]
  std::vector<float> k_rot_;           // [D]
  std::vector<float> row_;             // [D] one decoded K or V row
  std::vector<int64_t> visible_;       // [max capacity] visible slots of the current query
  std::vector<float> scores_;          // [Hq/Hkv][max capacity]
  std::vector<float> acc_;             // [Hq/Hkv][D]
};

/// Factory for the conformance suite.
EngineFactory reference_engine_factory();
std::unique_ptr<Engine> make_reference_engine(const Config& config);

}  // namespace ringkv
