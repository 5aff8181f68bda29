// Fuzz target: the golden case reader (golden_from_safetensors, conformance/golden/golden.hpp) on
// any safetensors bytes.
#include "clear_error.hpp"
#include "golden/golden.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringkv::golden;
  ringkv::fuzz::accepts("golden_from_safetensors",
                        [&] { (void)golden_from_safetensors(parse_safetensors(data, size, "fuzz.safetensors")); });
  return 0;
}
