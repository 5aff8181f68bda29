// Fuzz target: the outputs reader of `ringkv check --outputs` (check_golden_outputs, which reads the
// file with read_golden_outputs and judges it, conformance/golden/golden.hpp), against a small fixed
// golden case (golden/cases/window_1.safetensors: 2 layers, W = 1, sinks). The input is written to a file.
#include "clear_error.hpp"
#include "golden/golden.hpp"
#include "temp_dir.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringkv::golden;
  static const GoldenCase g = read_golden(RINGKV_GOLDEN_DIR "/cases/window_1.safetensors");
  const std::string path = ringkv::fuzz::write_temp("outputs.safetensors", data, size);
  ringkv::fuzz::accepts("check_golden_outputs", [&] { (void)check_golden_outputs(g, path, ringkv::PrecisionProfile{}); });
  return 0;
}
