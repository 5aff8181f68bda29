// A directory of the fuzz process's own for the readers that read files by name (removed at exit).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace ringkv::fuzz {

struct TempDir {
  std::string path;
  TempDir() {
    path = (std::filesystem::temp_directory_path() / "ringkv-fuzz-XXXXXX").string();
    if (::mkdtemp(path.data()) == nullptr) std::abort();
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

inline const std::string& temp_dir() {
  static const TempDir dir;
  return dir.path;
}

/// Writes the bytes to temp_dir()/name and returns the path.
inline std::string write_temp(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  return path;
}

}  // namespace ringkv::fuzz
