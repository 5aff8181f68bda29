// ringkv ABI, host side: one plugin's worker over its life. PluginHost starts the worker (fork + exec
// of ringkv_plugin_worker), reads what the plugin declared at load (its ABI version, its table's
// optional functions, its capabilities), sends each request with a deadline and reads its reply,
// turns a crash, hang, garbled reply or out-of-bounds write into a ringkv::Error naming it, kills the
// worker then, and starts a fresh one for the next engine. Shared by the Plugin and its engines
// (plugin_engine.cpp); one request at a time (a mutex).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin_engine.hpp"
#include "protocol.hpp"
#include "support/capabilities.hpp"
#include "worker_channel.hpp"
#include "worker_process.hpp"

namespace ringkv::abi {

/// The file name of a path (the plugin's name in messages).
std::string base_name(const std::string& path);

class PluginHost {
 public:
  /// What a worker does before it answers its first request (the hello).
  static constexpr const char* kLoading = "dlopen, ringkv_engine_api_get or get_capabilities";

  PluginHost(std::string path, PluginOptions opts);

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  const ringkv_capabilities& caps() const { return caps_; }
  const Capabilities& mapped() const { return mapped_; }
  uint32_t abi_version() const { return abi_version_; }
  bool has(uint32_t flag) const { return (flags_ & flag) != 0; }
  int started() const {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
  }
  int pid() const {
    std::lock_guard<std::mutex> lock(mu_);
    return worker_ ? worker_->pid() : -1;
  }

  /// The generation of a live worker, starting one if none is alive.
  uint64_t ensure_worker() {
    std::lock_guard<std::mutex> lock(mu_);
    drain_locked();
    if (!worker_) start_locked();
    return generation_;
  }

  /// Destroys a remote engine without waiting for the reply, which is read before the next
  /// request. A destroy never reported anything: a worker that dies or hangs in one is gone, and
  /// the next engine gets a fresh one, as before.
  void destroy_async(uint64_t generation, std::vector<uint8_t>& payload);
  bool alive(uint64_t generation) const {
    std::lock_guard<std::mutex> lock(mu_);
    return worker_ && generation == generation_;
  }

  const PluginOptions& options() const { return opts_; }

  /// The worker's resident memory in bytes (/proc/<pid>/statm: resident pages x the page size), or -1
  /// if that worker is gone or the file cannot be read. Between requests the worker is idle.
  int64_t resident_bytes(uint64_t generation) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!worker_ || generation != generation_) return -1;
    return worker_->resident_bytes();
  }
  /// The sum of cache_bytes() over the engines created in the current worker so far (an engine's
  /// leak allowance counts the caches of the engines made during its life).
  uint64_t add_declared(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    return declared_ += bytes;
  }
  uint64_t declared() const {
    std::lock_guard<std::mutex> lock(mu_);
    return declared_;
  }
  void kill_worker(uint64_t generation, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (worker_ && generation == generation_) kill_worker_locked(why);
  }

  /// One request. Throws for every failure except the plugin statuses in `pass` (returned to the caller).
  Reply call(uint64_t generation, wire::Op op, std::vector<uint8_t>& payload, const std::string& during,
             std::initializer_list<uint32_t> pass = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    return call_locked(generation, op, payload, during, opts_.timeout_ms, pass);
  }

  /// Kills the worker (after an out-of-bounds write its memory is suspect).
  void kill_worker_locked(const std::string& why) {
    if (worker_) worker_->kill_now();
    worker_.reset();
    unread_replies_ = 0;
    death_ = why;
  }

  /// The error a plugin status stands for (a ConfigError, a StepError, or an Error naming it).
  /// Where the worker runs under a memory limit and `what` looks like an allocation failure or a death,
  /// says so: the engine ran out of the memory --memory-limit gave it.
  std::string memory_note(const std::string& what) const;

  [[noreturn]] void throw_plugin_status(uint32_t status, const std::string& raw, const std::string& during) const;

  /// The JSON document create() sends for a config (window convention and rotation applied).
  std::string config_json(const Config& config) const;

  /// Why the config lies outside the plugin's declaration ("" if it does not): the one rule of
  /// conformance/support/capabilities.hpp on the mapped capabilities.
  std::string unsupported(const Config& c) const { return conformance::capability_gap(mapped_, c); }

 private:
  void start_locked();

  // Reads the replies of the destroys the host did not wait for (they report nothing).
  void drain_locked();

  Reply call_locked(uint64_t generation, wire::Op op, std::vector<uint8_t>& payload, const std::string& during,
                    int timeout_ms, std::initializer_list<uint32_t> pass);

  std::string path_, name_;
  PluginOptions opts_;
  ringkv_capabilities caps_{};
  Capabilities mapped_;
  uint32_t abi_version_ = 0, flags_ = 0;

  mutable std::mutex mu_;
  std::unique_ptr<Worker> worker_;
  uint64_t generation_ = 0;
  int started_ = 0;
  int unread_replies_ = 0;  // replies of destroys sent without waiting
  uint64_t declared_ = 0;   // cache_bytes() of the engines created in this worker
  wire::Spinner spinner_;         // polls for a reply for a moment before sleeping (protocol.hpp)
  std::string death_;
};

}  // namespace ringkv::abi
