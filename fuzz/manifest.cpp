// Fuzz target: the manifest reader (read_manifest, conformance/golden/golden.hpp), which reads
// DIR/manifest.json: the input is written there.
#include "clear_error.hpp"
#include "golden/golden.hpp"
#include "temp_dir.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringkv::fuzz::write_temp("manifest.json", data, size);
  ringkv::fuzz::accepts("read_manifest", [&] { (void)ringkv::golden::read_manifest(ringkv::fuzz::temp_dir()); });
  return 0;
}
