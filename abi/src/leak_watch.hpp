// ringkv ABI, host side: the leak watch. The worker's resident memory over one plugin engine's life
// (PluginOptions::leak_*): read after create, after each step and before destroy; growth beyond the
// caches the engines declare (cache_bytes) by more than the slack is a warning (CaseWarnings), by more
// than the limit a failure that kills the worker. docs/reliability.md, "Plugin limits".
#pragma once

#include <cstdint>
#include <string>

namespace ringkv::abi {

class PluginHost;

class LeakWatch {
 public:
  /// False in an AddressSanitizer build: its quarantine and shadow are resident too (LeakSanitizer
  /// checks leaks there).
  static bool possible();

  /// After create: the resident memory the engine starts from, and its declared cache (one cache_bytes
  /// request for the engine `handle`; throws what the request throws).
  void start(PluginHost& host, uint64_t generation, uint64_t handle);

  /// After step `steps` (`during`: "step N"): growth beyond the declared caches above
  /// PluginOptions::leak_limit_mib kills the worker and throws ringkv::Error.
  void check_limit(const std::string& during, int64_t steps);

  /// At the engine's end: growth beyond the declared caches and the slack is a warning (CaseWarnings).
  void warn(int64_t steps) noexcept;

 private:
  // Growth of the worker's resident memory since create, and the caches declared meanwhile (this
  // engine's, now, and those of the engines created during its life). growth < 0: not measured.
  struct Growth {
    int64_t growth = -1, declared = 0;
    int64_t beyond() const { return growth - declared; }
  };
  Growth growth(bool ask_cache, int64_t steps);
  std::string growth_text(const Growth& g, const std::string& over) const;

  PluginHost* host_ = nullptr;  // null: not watched
  uint64_t generation_ = 0, handle_ = 0;
  int64_t rss_start_ = -1;  // the worker's resident bytes after create (-1: not watched)
  // This engine's cache_bytes (at create, and the largest since); the host's sum before it was created.
  uint64_t declared_self_ = 0, declared_at_create_ = 0, declared_before_ = 0;
};

}  // namespace ringkv::abi
