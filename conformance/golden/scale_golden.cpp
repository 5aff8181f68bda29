// ringkv golden: scale cases in golden format, and their outputs files judged on the sampled rows
// (golden/scale_golden.hpp, docs/scale.md "Scale cases in files").
#include "golden/scale_golden.hpp"
#include "golden/detail.hpp"
#include "golden/rope_verdict.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <regex>
#include <set>
#include <stdexcept>

#include "ringkv/error.hpp"
#include "support/case.hpp"

namespace ringkv::golden {

using conformance::ScaleCase;
using namespace detail;

std::string scale_golden_name(const ScaleCase& sc) {
  std::string name = sc.name;
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

namespace {

constexpr conformance::ScaleTier kTiers[] = {conformance::ScaleTier::ci, conformance::ScaleTier::host,
                                             conformance::ScaleTier::gpu, conformance::ScaleTier::gpu_long};

/// An engine that hands back an outputs file's rows: each append gets `out` of its chunk's rows. It
/// keeps nothing else; a step the file lists in refused_steps it refuses, as the engine did.
class OutputsReplay final : public Engine {
 public:
  OutputsReplay(const Config& config, const GoldenCase& layout, std::shared_ptr<const GoldenOutputs> outputs,
                const PrecisionProfile& profile)
      : config_(config), layout_(layout), outputs_(std::move(outputs)), profile_(profile) {}

  EngineInfo info() const override { return {"outputs file", profile_, true}; }
  const Config& config() const override { return config_; }

  void step(const StepBatch& batch) override {
    const int st = step_++;
    const std::vector<int>& refused = outputs_->refused_steps;
    if (std::binary_search(refused.begin(), refused.end(), st)) {
      throw StepError("step " + std::to_string(st) + " refused (the outputs file's __metadata__ refused_steps lists it)");
    }
    const auto Hq = static_cast<size_t>(config_.num_q_heads), D = static_cast<size_t>(config_.head_dim);
    for (const SequenceStep& a : batch.appends) {
      const GoldenChunk* ch = next_ < layout_.chunks.size() ? &layout_.chunks[next_++] : nullptr;
      if (!ch || ch->step != st || ch->sequence != a.sequence || ch->n_tokens != a.n_tokens) {
        throw std::logic_error("ringkv's own error: the outputs replay is out of step with the case's schedule at step " +
                               std::to_string(st) + ", sequence " + std::to_string(a.sequence));
      }
      const size_t per_layer = static_cast<size_t>(a.n_tokens) * Hq * D;
      for (int l = 0; l < layout_.layers(); ++l) {
        std::copy_n(outputs_->out.begin() + static_cast<std::ptrdiff_t>(layout_.q_offset(l, ch->row_begin, 0)), per_layer,
                    a.out + static_cast<size_t>(l) * per_layer);
      }
    }
  }
  void reset(int, int64_t) override { throw std::logic_error("the outputs replay takes resets only within a step"); }
  std::optional<CacheSnapshot> snapshot(int, int) const override { return std::nullopt; }
  size_t cache_bytes() const override { return 0; }

 private:
  Config config_;
  const GoldenCase& layout_;
  std::shared_ptr<const GoldenOutputs> outputs_;
  PrecisionProfile profile_;
  int step_ = 0;
  size_t next_ = 0;
};

/// RoPE apart (golden-format §7) for a scale case: the rotation of every row against spec §8, then
/// attention from the engine's own q_rot/k_rot on the sampled rows, the bound's RoPE term off. The
/// first failure (after any of the run's own) becomes the case's.
void judge_rope(const ScaleCase& sc, const GoldenOutputs& o, const PrecisionProfile& profile, ScaleOutputsOutcome* r) {
  const auto t0 = std::chrono::steady_clock::now();
  const GoldenCase g = make_scale_golden(sc);
  RopeVerdict v = check_rotation(g, o.q_rot, o.k_rot, profile.rope_angle);
  const RotatedOracle oracle(g, o.q_rot, o.k_rot);
  const std::vector<std::set<int64_t>> sample = conformance::sample_scale_queries(sc.c, sc.sample_every);
  const auto B = static_cast<size_t>(sc.c.config.batch);
  const auto judged = [&](int layer, int64_t row) {
    const GoldenRow& x = g.rows[static_cast<size_t>(row)];
    return sample[static_cast<size_t>(layer) * B + static_cast<size_t>(x.sequence)].count(x.index) > 0;
  };
  GoldenOutcome tight;
  check_attention_tightly(g, o, profile, oracle, judged, &v, &tight);
  r->scale.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r->scale.passed && v.kind == RopeVerdict::Kind::failed) {
    r->scale.passed = false;
    r->scale.failure = "RoPE: " + v.failure;
  } else if (r->scale.passed && !tight.failure.empty()) {
    r->scale.passed = false;
    r->scale.failure = "attention from the engine's own q_rot/k_rot (bound's RoPE term off): " + tight.failure;
  }
  r->rope = std::move(v);
}

}  // namespace

GoldenCase scale_golden_layout(const ScaleCase& sc) {
  GoldenCase g;
  g.name = scale_golden_name(sc);
  g.classes = derive_classes(sc.c);
  g.c = sc.c;
  g.scale_case = sc.name;
  g.sample_every = sc.sample_every;
  g.refused = rollback_schedule(g.c);
  layout_rows(g.c, g.refused, &g.rows, &g.chunks);
  return g;
}

GoldenCase make_scale_golden(const ScaleCase& sc) {
  GoldenCase g = scale_golden_layout(sc);
  const Dims d = dims_of(g.c, g.num_rows());
  g.q.resize(count({d.L, d.R, d.Hq, d.D}));
  g.k.resize(count({d.L, d.R, d.Hkv, d.D}));
  g.v.resize(g.k.size());
  std::vector<float> buf;
  for (const GoldenChunk& ch : g.chunks) {
    const GoldenRow& first = g.rows[static_cast<size_t>(ch.row_begin)];
    const int64_t n = ch.n_tokens;
    // fill_chunk writes [L][n][H][D]; the file's rows of one layer are contiguous, so each layer is one copy.
    for (const auto& [t, heads, dst] : {std::tuple{conformance::Tensor::q, d.Hq, &g.q},
                                        std::tuple{conformance::Tensor::k, d.Hkv, &g.k},
                                        std::tuple{conformance::Tensor::v, d.Hkv, &g.v}}) {
      buf.resize(count({d.L, n, heads, d.D}));
      conformance::fill_chunk(g.c, t, first.stream, first.index, n, buf.data());
      const size_t per_layer = count({n, heads, d.D});
      for (int64_t l = 0; l < d.L; ++l) {
        const size_t at = count({l, d.R, heads, d.D}) + count({ch.row_begin, heads, d.D});
        std::copy_n(buf.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(l) * per_layer), per_layer,
                    dst->begin() + static_cast<std::ptrdiff_t>(at));
      }
    }
  }
  return g;
}

ScaleOutputsOutcome check_scale_outputs(const ScaleCase& sc, const std::string& outputs_path,
                                        const PrecisionProfile& default_profile) {
  ScaleOutputsOutcome r;
  const GoldenCase layout = scale_golden_layout(sc);
  GoldenOutputs o;
  try {
    o = read_golden_outputs(outputs_path, layout);
  } catch (const Error& e) {  // the engine's file: its case fails, naming the field
    r.scale.failure = e.what();
    return r;
  }
  r.profile = o.profile.value_or(default_profile);  // the file's own declaration first
  r.profile_from_file = o.profile.has_value();
  if (!o.unsupported.empty()) {
    r.skipped = true;
    r.skip_reason = "unsupported (outputs file): " + o.unsupported;
    return r;
  }
  for (const auto& [name, held] : {std::pair{"k_stored", o.k_stored.has_value()}, std::pair{"v_stored", o.v_stored.has_value()}}) {
    if (held) r.not_judged += std::string(r.not_judged.empty() ? "" : ", ") + name;
  }
  const auto outputs = std::make_shared<const GoldenOutputs>(std::move(o));
  const PrecisionProfile profile = *r.profile;
  EngineFactory replay{"outputs file", {}, [&layout, outputs, profile](const Config& config) -> std::unique_ptr<Engine> {
                         return std::make_unique<OutputsReplay>(config, layout, outputs, profile);
                       }};
  r.scale = conformance::run_scale_case(replay, sc);
  if (!outputs->q_rot.empty() && !r.scale.oracle_error) judge_rope(sc, *outputs, profile, &r);
  return r;
}

std::vector<GoldenSpec> scale_golden_specs(conformance::ScaleTier tier, const std::string& filter) {
  std::regex keep;
  try {
    keep = std::regex(filter.empty() ? ".*" : filter);
  } catch (const std::regex_error& e) {
    throw Error("--filter \"" + filter + "\": bad regex: " + e.what());
  }
  std::vector<GoldenSpec> specs;
  for (ScaleCase& sc : conformance::scale_cases(tier)) {
    if (!std::regex_search(sc.name + " " + sc.c.id(), keep)) continue;
    specs.push_back(GoldenSpec{scale_golden_name(sc), derive_classes(sc.c), std::move(sc.c)});
  }
  if (specs.empty()) {
    throw Error("--filter \"" + filter + "\": no scale case of tier " + conformance::to_string(tier) + " matches");
  }
  return specs;
}

GoldenCase make_scale_golden_of(const GoldenSpec& spec) {
  for (conformance::ScaleTier t : kTiers) {
    for (const ScaleCase& sc : conformance::scale_cases(t)) {
      if (scale_golden_name(sc) == spec.name) return make_scale_golden(sc);
    }
  }
  throw Error("no scale case is named " + spec.name);
}

}  // namespace ringkv::golden
