// The exact cache check of the properties (run_case with check_ring; spec §11.1) where an engine's
// declaration changes the stored bits: RoPE angles coarser than f64 loosen stored K by the rotation's
// slack (support/rotation_bound.hpp) and no more; a fixed storage coarser than the config's dtype
// judges stored values against that storage. Before, K was not compared at all under such angles.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "mutants/mutants.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/case.hpp"
#include "support/runner.hpp"

namespace ringkv::conformance {
namespace {

// An engine's snapshot with a change applied; everything else forwarded.
class EditedSnapshot final : public Engine {
 public:
  EditedSnapshot(std::unique_ptr<Engine> inner, std::function<void(CacheSnapshot&)> edit, std::optional<Precision> k_storage)
      : inner_(std::move(inner)), edit_(std::move(edit)), k_storage_(k_storage) {}
  EngineInfo info() const override {
    EngineInfo i = inner_->info();
    if (k_storage_) i.precision.k_storage = k_storage_;
    return i;
  }
  const Config& config() const override { return inner_->config(); }
  void step(const StepBatch& b) override { inner_->step(b); }
  void reset(int s, int64_t p0) override { inner_->reset(s, p0); }
  std::optional<CacheSnapshot> snapshot(int layer, int sequence) const override {
    std::optional<CacheSnapshot> s = inner_->snapshot(layer, sequence);
    if (s) edit_(*s);
    return s;
  }
  size_t cache_bytes() const override { return inner_->cache_bytes(); }

 private:
  std::unique_ptr<Engine> inner_;
  std::function<void(CacheSnapshot&)> edit_;
  std::optional<Precision> k_storage_;
};

EngineFactory edited(EngineFactory base, std::function<void(CacheSnapshot&)> edit, std::optional<Precision> k_storage = {}) {
  EngineFactory f = base;
  f.create = [base, edit, k_storage](const Config& c) -> std::unique_ptr<Engine> {
    return std::make_unique<EditedSnapshot>(base.create(c), edit, k_storage);
  };
  return f;
}

Case rope_case(int64_t p0) {
  Case c;
  c.config.layers = {LayerConfig{4, 0, RopeConfig{RopeStyle::neox, 10000.0, 0, RopeScaling::none, 1.0}}};
  c.config.num_q_heads = 2;
  c.config.num_kv_heads = 1;
  c.config.head_dim = 16;
  c.config.batch = 1;
  c.config.start_positions = {p0};
  c.config.max_tokens = 9;
  c.steps = {StepPlan{{}, {5}}, StepPlan{{}, {4}}};
  c.seed = 11;
  return c;
}

RunOptions ring_check() {
  RunOptions o;
  o.check_ring = true;
  return o;
}

// The first slot's first K element, moved by `by` (or with its sign flipped when by is 0).
std::function<void(CacheSnapshot&)> move_k(float by) {
  return [by](CacheSnapshot& s) { s.k[0] = by == 0 ? -s.k[0] : s.k[0] + by; };
}

TEST(SnapshotCheck, DeclaredF32AnglesPassWithinTheirSlack) {
  const EngineFactory f32angles = in_numerics("reference", "f32-rope-angles");
  const RunResult r = run_case(f32angles, rope_case(1 << 20), ring_check());
  EXPECT_TRUE(r.ok()) << r.failure;
}

TEST(SnapshotCheck, DeclaredF32AnglesStillCompareStoredK) {
  const EngineFactory f32angles = in_numerics("reference", "f32-rope-angles");
  const RunResult r = run_case(edited(f32angles, move_k(0)), rope_case(1 << 20), ring_check());
  ASSERT_FALSE(r.ok()) << "a K element with its sign flipped passed under declared f32 angles";
  EXPECT_NE(r.failure.find("K[head 0][dim 0]"), std::string::npos) << r.failure;
  EXPECT_NE(r.failure.find("for the declared rope_angle"), std::string::npos) << r.failure;
}

TEST(SnapshotCheck, F64AnglesStayExact) {
  const RunResult r = run_case(edited(reference_engine_factory(), move_k(1e-6f)), rope_case(3), ring_check());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure.find("allowed"), std::string::npos) << "f64 angles must be checked exactly: " << r.failure;
}

// A bf16-storing engine on an f32 config: its stored K is bf16(spec's), within the declared storage.
std::function<void(CacheSnapshot&)> k_as_bf16() {
  return [](CacheSnapshot& s) {
    for (float& x : s.k) x = round_to_bf16(x);
  };
}

TEST(SnapshotCheck, DeclaredStorageJudgesStoredValuesInThatStorage) {
  Case c = rope_case(3);
  const RunResult ok = run_case(edited(reference_engine_factory(), k_as_bf16(), Precision::bf16), c, ring_check());
  EXPECT_TRUE(ok.ok()) << ok.failure;
  const RunResult undeclared = run_case(edited(reference_engine_factory(), k_as_bf16()), c, ring_check());
  EXPECT_FALSE(undeclared.ok()) << "bf16 storage passed while declaring storage as configured (f32)";
  const RunResult beyond = run_case(edited(reference_engine_factory(),
                                           [](CacheSnapshot& s) {
                                             for (float& x : s.k) x = round_to_bf16(x);
                                             s.k[0] = s.k[0] * (1 + 0x1p-5f);
                                           },
                                           Precision::bf16),
                                    c, ring_check());
  EXPECT_FALSE(beyond.ok()) << "a K element 4 bf16 steps off passed";
}

}  // namespace
}  // namespace ringkv::conformance
