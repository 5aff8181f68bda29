// Fuzz target: the safetensors reader (conformance/golden/safetensors.hpp). A file it accepts must
// write back to bytes that read as the same tensors and metadata.
#include <cstdio>
#include <cstdlib>

#include "clear_error.hpp"
#include "golden/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringkv::golden;
  StFile file;
  if (!ringkv::fuzz::accepts("parse_safetensors", [&] { file = parse_safetensors(data, size, "fuzz.safetensors"); })) {
    return 0;
  }
  StFile again;
  if (!ringkv::fuzz::accepts("parse_safetensors (of its own output)",
                             [&] { again = parse_safetensors(serialize_safetensors(file), "rewritten.safetensors"); })) {
    ringkv::fuzz::finding("serialize_safetensors", "a file", "that the reader rejects");
  }
  bool same = again.metadata == file.metadata && again.tensors.size() == file.tensors.size();
  for (auto a = again.tensors.begin(), b = file.tensors.begin(); same && a != again.tensors.end(); ++a, ++b) {
    same = a->first == b->first && a->second.dtype == b->second.dtype && a->second.shape == b->second.shape &&
           a->second.data == b->second.data;
  }
  if (!same) ringkv::fuzz::finding("serialize_safetensors", "a file", "that reads back different");
  return 0;
}
