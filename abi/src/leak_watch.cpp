#include "leak_watch.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "plugin_host.hpp"
#include "ringkv/error.hpp"

namespace ringkv::abi {

using namespace wire;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::string bytes_text(int64_t b) {
  char buf[64];
  const double a = static_cast<double>(b < 0 ? -b : b);
  if (a >= static_cast<double>(kMiB)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / static_cast<double>(kMiB));
  } else if (a >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(b));
  }
  return buf;
}

thread_local CaseWarnings* t_case_warnings = nullptr;

}  // namespace

CaseWarnings::CaseWarnings() : outer_(t_case_warnings) { t_case_warnings = this; }
CaseWarnings::~CaseWarnings() { t_case_warnings = outer_; }
std::vector<std::string> CaseWarnings::take() { return std::exchange(warnings_, {}); }
void CaseWarnings::add(std::string warning) {
  if (t_case_warnings != nullptr) t_case_warnings->warnings_.push_back(std::move(warning));
}

bool LeakWatch::possible() {
#if defined(__SANITIZE_ADDRESS__)
  return false;  // ASan's quarantine and shadow are resident too: LeakSanitizer checks leaks there
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return false;
#else
  return true;
#endif
#else
  return true;
#endif
}

void LeakWatch::start(PluginHost& host, uint64_t generation, uint64_t handle) {
  host_ = &host;
  generation_ = generation;
  handle_ = handle;
  Writer w;
  w.put(handle_);
  const Reply r = host_->call(generation_, Op::cache_bytes, w.bytes(), "cache_bytes after create");
  Reader in(r.payload.data(), r.payload.size());
  declared_self_ = declared_at_create_ = in.get<uint64_t>();
  declared_before_ = host_->add_declared(declared_self_) - declared_self_;
  rss_start_ = host_->resident_bytes(generation_);
}

LeakWatch::Growth LeakWatch::growth(bool ask_cache, int64_t steps) {
  Growth g;
  if (rss_start_ < 0) return g;
  const int64_t now = host_->resident_bytes(generation_);
  if (now < 0) return g;
  if (ask_cache) {  // the engine's own cache may have grown since create (a lazy engine)
    Writer w;
    w.put(handle_);
    const Reply r = host_->call(generation_, Op::cache_bytes, w.bytes(), "cache_bytes after step " + std::to_string(steps));
    Reader in(r.payload.data(), r.payload.size());
    declared_self_ = std::max(declared_self_, in.get<uint64_t>());
  }
  g.growth = now - rss_start_;
  g.declared = static_cast<int64_t>(declared_self_ + (host_->declared() - declared_before_ - declared_at_create_));
  return g;
}

std::string LeakWatch::growth_text(const Growth& g, const std::string& over) const {
  return "worker resident memory grew " + bytes_text(g.growth) + " " + over + ", " + bytes_text(g.beyond()) +
         " beyond the " + bytes_text(g.declared) + " its cache declares (cache_bytes)";
}

void LeakWatch::check_limit(const std::string& during, int64_t steps) {
  if (host_ == nullptr) return;  // not watched
  const int64_t limit = host_->options().leak_limit_mib;
  if (limit <= 0) return;
  Growth g = growth(false, steps);
  if (g.growth < 0 || g.beyond() <= limit * kMiB) return;
  g = growth(true, steps);
  if (g.growth < 0 || g.beyond() <= limit * kMiB) return;
  const std::string what = growth_text(g, "by " + during);
  host_->kill_worker(generation_, "leaked memory: " + what);
  throw Error("plugin " + host_->name() + ": " + what + ", above the leak limit of " + std::to_string(limit) +
              " MiB (--leak-limit): it leaks (the worker was killed; the next engine gets a fresh one)");
}

void LeakWatch::warn(int64_t steps) noexcept {
  if (host_ == nullptr) return;  // not watched
  try {
    const int64_t slack = host_->options().leak_slack_mib * kMiB;
    Growth g = growth(false, steps);
    if (g.growth < 0 || g.beyond() <= slack) return;
    g = growth(true, steps);
    if (g.growth < 0 || g.beyond() <= slack) return;
    CaseWarnings::add("plugin " + host_->name() + ": " + growth_text(g, "over the case") + ", more than the " +
                      std::to_string(host_->options().leak_slack_mib) + " MiB allowed for allocator noise: a leak? (" +
                      std::to_string(steps) + " steps; a failure above --leak-limit " +
                      std::to_string(host_->options().leak_limit_mib) + " MiB)");
  } catch (...) {  // a worker that dies here is reported by the next engine
  }
}

}  // namespace ringkv::abi
