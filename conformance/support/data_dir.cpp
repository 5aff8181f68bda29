#include "support/data_dir.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

namespace ringkv::conformance {

std::string executable_dir() {
  std::vector<char> self(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n <= 0) return "";
  return std::filesystem::path(std::string(self.data(), static_cast<size_t>(n))).parent_path().string();
}

std::string data_dir(const std::string& name, const std::string& build_tree_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const char* env = std::getenv("RINGKV_DATA_DIR"); env && *env) {
    const fs::path p = fs::path(env) / name;
    if (fs::is_directory(p, ec)) return p.string();
  }
  if (const std::string exe = executable_dir(); !exe.empty()) {
    const fs::path p = fs::path(exe) / ".." / "share" / "ringkv" / name;
    if (fs::is_directory(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return build_tree_dir;
}

}  // namespace ringkv::conformance
