// ringkv golden: SHA-256 (FIPS 180-4), for the hashes in golden/manifest.json.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringkv::golden {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  /// The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t used_ = 0;
  uint64_t total_ = 0;  // bytes
};

/// Lower-case hex of a digest.
std::string to_hex(const std::array<uint8_t, 32>& digest);
/// SHA-256 of bytes, as 64 lower-case hex digits.
std::string sha256_hex(const void* data, size_t size);
inline std::string sha256_hex(const std::vector<uint8_t>& bytes) { return sha256_hex(bytes.data(), bytes.size()); }
inline std::string sha256_hex(const std::string& text) { return sha256_hex(text.data(), text.size()); }
/// SHA-256 of a file's contents; throws ringkv::Error if it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace ringkv::golden
