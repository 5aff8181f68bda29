// A user's engine (here a thin one): it runs its attention through a ringkv::ReferenceEngine built
// from the config it is given. With `window_bug`, it hands its kernel W + 1 for every sliding layer,
// the classic off-by-one of an exclusive window bound.
#pragma once

#include <memory>
#include <optional>

#include <ringkv/engine.hpp>
#include <ringkv/reference_engine.hpp>

class MyEngine : public ringkv::Engine {
 public:
  MyEngine(const ringkv::Config& config, bool window_bug) : config_(config), kernel_(kernel_config(config, window_bug)) {}

  ringkv::EngineInfo info() const override {
    ringkv::EngineInfo i = kernel_.info();
    i.name = "my-engine";
    return i;
  }
  const ringkv::Config& config() const override { return config_; }
  void step(const ringkv::StepBatch& batch) override { kernel_.step(batch); }
  void reset(int sequence, int64_t start_position) override { kernel_.reset(sequence, start_position); }
  std::optional<ringkv::CacheSnapshot> snapshot(int layer, int sequence) const override {
    return kernel_.snapshot(layer, sequence);
  }
  size_t cache_bytes() const override { return kernel_.cache_bytes(); }
  bool poison_empty_slots() override { return kernel_.poison_empty_slots(); }

 private:
  static ringkv::Config kernel_config(ringkv::Config c, bool window_bug) {
    if (window_bug) {
      for (ringkv::LayerConfig& l : c.layers) {
        if (l.window < c.max_tokens) l.window += 1;
      }
    }
    return c;
  }
  ringkv::Config config_;
  ringkv::ReferenceEngine kernel_;
};

inline ringkv::EngineFactory my_engine_factory(bool window_bug) {
  ringkv::EngineFactory f;
  f.name = window_bug ? "my-buggy-engine" : "my-engine";
  f.capabilities = ringkv::ReferenceEngine::capabilities();
  f.create = [window_bug](const ringkv::Config& c) -> std::unique_ptr<ringkv::Engine> {
    return std::make_unique<MyEngine>(c, window_bug);
  };
  return f;
}
