#include "plugin_host.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "capabilities_check.hpp"
#include "capabilities_map.hpp"
#include "ringkv/error.hpp"
#include "support/config_json.hpp"

namespace ringkv::abi {

using namespace wire;

namespace {

const char* status_name(uint32_t s) {
  switch (s) {
    case RINGKV_OK: return "RINGKV_OK";
    case RINGKV_ERR_INVALID_ARGUMENT: return "RINGKV_ERR_INVALID_ARGUMENT";
    case RINGKV_ERR_CONFIG: return "RINGKV_ERR_CONFIG";
    case RINGKV_ERR_STEP: return "RINGKV_ERR_STEP";
    case RINGKV_ERR_UNSUPPORTED: return "RINGKV_ERR_UNSUPPORTED";
    case RINGKV_ERR_OUT_OF_MEMORY: return "RINGKV_ERR_OUT_OF_MEMORY";
    case RINGKV_ERR_INTERNAL: return "RINGKV_ERR_INTERNAL";
    case RINGKV_ERR_VERSION: return "RINGKV_ERR_VERSION";
    default: return "unknown status";
  }
}

}  // namespace

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

PluginHost::PluginHost(std::string path, PluginOptions opts)
    : path_(std::move(path)), name_(base_name(path_)), opts_(std::move(opts)) {
  opts_.guard_floats = std::max(4, (opts_.guard_floats + 3) / 4 * 4);
  std::lock_guard<std::mutex> lock(mu_);
  start_locked();
}

void PluginHost::destroy_async(uint64_t generation, std::vector<uint8_t>& payload) {
  std::lock_guard<std::mutex> lock(mu_);
  drain_locked();
  if (!worker_ || generation != generation_) return;
  Header h;
  h.code = static_cast<uint32_t>(Op::destroy);
  h.length = payload.size();
  const Io io = send_message(worker_->fd(), h, payload.data(), payload.size(),
                             Clock::now() + std::chrono::milliseconds(opts_.timeout_ms));
  if (io == Io::ok) {
    ++unread_replies_;
  } else if (io == Io::timeout) {
    kill_worker_locked("timed out after " + std::to_string(opts_.timeout_ms) + " ms in destroy");
  } else {
    const std::string how = worker_->reap();
    worker_.reset();
    death_ = how + " during destroy";
  }
}

std::string PluginHost::memory_note(const std::string& what) const {
  if (opts_.memory_limit_mib <= 0) return "";
  for (const char* sign : {"bad_alloc", "out of memory", "Cannot allocate", "crashed with", "killed"}) {
    if (what.find(sign) != std::string::npos) {
      return " [out of memory? the worker runs under a memory limit of " + std::to_string(opts_.memory_limit_mib) +
             " MiB (--memory-limit)]";
    }
  }
  return "";
}

void PluginHost::throw_plugin_status(uint32_t status, const std::string& raw, const std::string& during) const {
  const std::string msg = raw.empty() ? raw : raw + memory_note(raw);
  switch (status) {
    case RINGKV_ERR_CONFIG:
      throw ConfigError(msg.empty() ? "plugin " + name_ + " rejected the config" : msg);
    case RINGKV_ERR_STEP:
      throw StepError(msg.empty() ? "plugin " + name_ + " rejected the " + during : msg);
    default:
      throw Error("plugin " + name_ + ": " + during + " failed with " + status_name(status) +
                  (msg.empty() ? "" : ": " + msg));
  }
}

std::string PluginHost::config_json(const Config& config) const {
  nlohmann::json j = conformance::config_to_json(config);
  const bool left = caps_.window_convention == RINGKV_WINDOW_LEFT;
  j["window_convention"] = left ? "left" : "w";
  j["qk_rotated"] = caps_.wants_rotated_qk != 0;
  if (left) {
    for (nlohmann::json& layer : j["layers"]) {
      layer["window_left"] = layer["window"].get<int64_t>() - 1;
      layer.erase("window");
    }
  }
  return j.dump();
}

void PluginHost::start_locked() {
  const std::string worker = find_worker(opts_);
  if (worker.find('/') != std::string::npos && !is_executable(worker)) {
    throw Error("plugin " + name_ + ": the worker executable " + worker +
                " is missing or not executable (set PluginOptions::worker_path or $RINGKV_PLUGIN_WORKER)");
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    throw Error("plugin " + name_ + ": socketpair failed: " + std::strerror(errno));
  }
  const std::string guard = std::to_string(opts_.guard_floats);
  std::vector<char*> argv{const_cast<char*>(worker.c_str()), const_cast<char*>(path_.c_str()),
                          const_cast<char*>(guard.c_str()), nullptr};
  const bool search = worker.find('/') == std::string::npos;
  sigset_t no_signals;
  sigemptyset(&no_signals);
  struct rlimit address_space {};
  address_space.rlim_cur = address_space.rlim_max = static_cast<rlim_t>(opts_.memory_limit_mib) << 20;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    throw Error("plugin " + name_ + ": fork failed: " + std::strerror(errno));
  }
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    ::sigprocmask(SIG_SETMASK, &no_signals, nullptr);  // whatever this thread blocked, the worker does not
    if (address_space.rlim_cur > 0 && ::setrlimit(RLIMIT_AS, &address_space) != 0) ::_exit(126);
    if (sv[1] == kWorkerFd) {
      ::fcntl(kWorkerFd, F_SETFD, 0);
    } else {
      ::dup2(sv[1], kWorkerFd);  // the copy is not close-on-exec
    }
    if (search) {
      ::execvp(argv[0], argv.data());
    } else {
      ::execv(argv[0], argv.data());
    }
    static const char msg[] = "ringkv: cannot exec the plugin worker\n";
    [[maybe_unused]] const ssize_t w = ::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(sv[1]);
  worker_ = std::make_unique<Worker>(pid, sv[0]);
  unread_replies_ = 0;
  ++started_;
  ++generation_;
  declared_ = 0;
  death_.clear();
  std::vector<uint8_t> none;
  const Reply r = call_locked(generation_, Op::hello, none, kLoading, opts_.startup_timeout_ms, {});
  Reader in(r.payload.data(), r.payload.size());
  abi_version_ = in.get<uint32_t>();
  in.get<uint32_t>();  // the table's struct_size (checked by the worker)
  flags_ = in.get<uint32_t>();
  caps_ = in.get<ringkv_capabilities>();
  // A capability whose function is missing: refused at load, naming both (never a call through NULL).
  if (caps_.snapshot != 0 && !has(kHasSnapshot)) {
    kill_worker_locked("refused at load");
    throw Error("plugin " + path_ + ": its capabilities declare snapshot = " + std::to_string(caps_.snapshot) +
                ", but the snapshot function in its table is NULL (implement it, or declare snapshot = 0)");
  }
  // A field outside its documented range: refused at load, naming each (never read as something else).
  if (const std::vector<std::string> bad = capability_range_errors(caps_, abi_version_); !bad.empty()) {
    kill_worker_locked("refused at load");
    std::string list;
    for (const std::string& b : bad) list += (list.empty() ? "" : "; ") + b;
    throw Error("plugin " + path_ + ": its capabilities declare " + list +
                " (the ranges: docs/engine-abi.md, \"Capabilities\")");
  }
  mapped_ = map_capabilities(caps_, has(kHasSnapshot), abi_version_);
}

void PluginHost::drain_locked() {
  std::vector<uint8_t> discard;
  while (worker_ && unread_replies_ > 0) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(opts_.timeout_ms);
    Header rh;
    Io io = recv_all(worker_->fd(), reinterpret_cast<uint8_t*>(&rh), sizeof rh, deadline);
    if (io == Io::ok && rh.length > kMaxPayload) {
      kill_worker_locked("sent a garbled reply");
      return;
    }
    if (io == Io::ok) {
      discard.resize(rh.length);
      io = recv_all(worker_->fd(), discard.data(), discard.size(), deadline);
    }
    if (io == Io::timeout) {
      kill_worker_locked("timed out after " + std::to_string(opts_.timeout_ms) + " ms in destroy");
      return;
    }
    if (io == Io::closed) {
      const std::string how = worker_->reap();
      worker_.reset();
      unread_replies_ = 0;
      death_ = how + " during destroy";
      return;
    }
    --unread_replies_;
    if (rh.code == kStatusOutOfBounds || rh.code == kStatusWorkerError || rh.code == kStatusInputWritten) {
      kill_worker_locked(std::string(discard.begin(), discard.end()));
      return;
    }
  }
}

Reply PluginHost::call_locked(uint64_t generation, Op op, std::vector<uint8_t>& payload, const std::string& during,
                              int timeout_ms, std::initializer_list<uint32_t> pass) {
  drain_locked();
  if (!worker_ || generation != generation_) {
    throw Error("plugin " + name_ + ": the worker process of this engine is gone (" +
                (death_.empty() ? std::string("restarted") : death_) + "); create a new engine");
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  Header h;
  h.code = static_cast<uint32_t>(op);
  h.length = payload.size();
  const int fd = worker_->fd();
  Io io = send_message(fd, h, payload.data(), payload.size(), deadline);
  Reply reply;
  Header rh;
  if (io == Io::ok) spin_until_readable(fd, spinner_);
  if (io == Io::ok) io = recv_all(fd, reinterpret_cast<uint8_t*>(&rh), sizeof rh, deadline);
  if (io == Io::ok && rh.length > kMaxPayload) {
    kill_worker_locked("sent a garbled reply");
    throw Error("plugin " + name_ + ": the worker sent a garbled reply during " + during);
  }
  if (io == Io::ok) {
    reply.payload.resize(rh.length);
    io = recv_all(fd, reply.payload.data(), reply.payload.size(), deadline);
  }
  if (io == Io::timeout && op == Op::hello) {
    kill_worker_locked("timed out after " + std::to_string(timeout_ms) + " ms while loading");
    throw Error("plugin " + name_ + " timed out after " + std::to_string(timeout_ms) + " ms while loading (" + kLoading +
                " never returned; the worker was killed): it cannot be used");
  }
  if (io == Io::timeout) {
    kill_worker_locked("timed out after " + std::to_string(timeout_ms) + " ms in " + during);
    throw Error("plugin " + name_ + " timed out after " + std::to_string(timeout_ms) + " ms in " + during +
                " (the worker was killed; the next engine gets a fresh one)");
  }
  if (io == Io::closed) {
    const std::string how = worker_->reap();
    worker_.reset();
    unread_replies_ = 0;
    death_ = how + " during " + during;
    throw Error("plugin " + name_ + " " + how + " during " + during +
                (op == Op::hello ? std::string(": it cannot be used") : " (the next engine gets a fresh worker)") +
                memory_note(how));
  }
  reply.status = rh.code;
  if (reply.status == RINGKV_OK) return reply;
  for (uint32_t s : pass) {
    if (reply.status == s) return reply;
  }
  const std::string msg = reply.message();
  switch (reply.status) {
    case kStatusOutOfBounds:
      kill_worker_locked("wrote out of bounds during " + during);
      throw Error("plugin " + name_ + " wrote out of bounds during " + during + ": " + msg +
                  " (the worker was killed; the next engine gets a fresh one)");
    case kStatusInputWritten:
      kill_worker_locked("wrote into its input during " + during);
      throw Error("plugin " + name_ + " wrote into its input during " + during + ": " + msg +
                  " (the worker was killed; the next engine gets a fresh one)");
    case kStatusWorkerError:
      kill_worker_locked(msg);
      throw Error(msg);
    default:
      throw_plugin_status(reply.status, msg, during);
  }
}

}  // namespace ringkv::abi
