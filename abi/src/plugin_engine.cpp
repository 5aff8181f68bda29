#include "plugin_engine.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "protocol.hpp"
#include "ringkv/error.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/ring.hpp"
#include "ringkv/rope.hpp"
#include "support/capabilities.hpp"
#include "support/config_json.hpp"

#ifndef RINGKV_ABI_DEFAULT_WORKER
#define RINGKV_ABI_DEFAULT_WORKER ""
#endif

namespace ringkv::abi {

using namespace wire;
using Clock = std::chrono::steady_clock;

namespace {

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGPIPE: return "SIGPIPE";
    case SIGXCPU: return "SIGXCPU";
    default: return "signal " + std::to_string(sig);
  }
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

std::string find_worker(const PluginOptions& opts) {
  if (!opts.worker_path.empty()) return opts.worker_path;
  if (const char* env = std::getenv("RINGKV_PLUGIN_WORKER"); env && *env) return env;
  std::vector<char> self(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n > 0) {
    const std::string exe(self.data(), static_cast<size_t>(n));
    const std::string next_to = exe.substr(0, exe.find_last_of('/') + 1) + "ringkv_plugin_worker";
    if (is_executable(next_to)) return next_to;
  }
  if (is_executable(RINGKV_ABI_DEFAULT_WORKER)) return RINGKV_ABI_DEFAULT_WORKER;
  return "ringkv_plugin_worker";  // PATH
}

std::string abi_version_text(uint32_t v) {
  return std::to_string(RINGKV_ABI_VERSION_GET_MAJOR(v)) + "." + std::to_string(RINGKV_ABI_VERSION_GET_MINOR(v));
}

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

// Maps between ringkv's enums and the ABI's (the same order, checked here once).
static_assert(static_cast<int>(DType::int8) == RINGKV_DTYPE_INT8 && static_cast<int>(DType::fp8_e5m2) == RINGKV_DTYPE_FP8_E5M2);
static_assert(static_cast<int>(Int8Scheme::static_tensor) == RINGKV_INT8_STATIC_TENSOR);
static_assert(static_cast<int>(Rounding::half_away) == RINGKV_ROUNDING_HALF_AWAY);
static_assert(static_cast<int>(RopeStyle::gptj) == RINGKV_ROPE_GPTJ);
static_assert(static_cast<int>(RopeScaling::ntk) == RINGKV_ROPE_SCALING_NTK);
static_assert(static_cast<int>(Precision::int8) == RINGKV_PRECISION_INT8 && static_cast<int>(Precision::tf32) == RINGKV_PRECISION_TF32);

template <typename E>
bool in_mask(uint32_t mask, E e) {
  return (mask >> static_cast<unsigned>(e)) & 1u;
}

template <typename E, size_t N>
std::vector<E> from_mask(uint32_t mask, const E (&all)[N], E fallback) {
  std::vector<E> out;
  for (E e : all) {
    if (in_mask(mask, e)) out.push_back(e);
  }
  if (out.empty()) out.push_back(fallback);
  return out;
}


Precision precision_of(int32_t p, DType configured, const std::string& field) {
  if (p == RINGKV_PRECISION_AS_CONFIGURED) return ringkv::precision_of(configured);
  if (p < RINGKV_PRECISION_F64 || p > RINGKV_PRECISION_INT8) {
    throw Error("plugin declares precision." + field + " = " + std::to_string(p) + ": not a ringkv_precision");
  }
  return static_cast<Precision>(p);
}


constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8};
constexpr Int8Scheme kSchemes[] = {Int8Scheme::per_head, Int8Scheme::q8_0, Int8Scheme::static_tensor};
constexpr Rounding kRoundings[] = {Rounding::nearest_even, Rounding::half_away};
constexpr RopeStyle kStyles[] = {RopeStyle::none, RopeStyle::neox, RopeStyle::gptj};
constexpr RopeScaling kScalings[] = {RopeScaling::none, RopeScaling::linear, RopeScaling::ntk};

// ---------------------------------------------------------------- the worker process

class Worker {
 public:
  Worker(pid_t pid, int fd)
      : pid_(pid), fd_(fd), statm_fd_(::open(("/proc/" + std::to_string(pid) + "/statm").c_str(), O_RDONLY | O_CLOEXEC)) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() {
    if (statm_fd_ >= 0) ::close(statm_fd_);
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0) {
      // It exits as soon as it sees the socket close; give it a moment, then make sure.
      for (int i = 0; i < 200; ++i) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  int fd() const { return fd_; }

  // Resident memory in bytes (/proc/<pid>/statm: resident pages x the page size, read again through
  // the descriptor opened at the start: about 1 us), or -1 if it cannot be read.
  int64_t resident_bytes() const {
    if (statm_fd_ < 0 || pid_ <= 0) return -1;
    char buf[128] = {};
    const ssize_t n = ::pread(statm_fd_, buf, sizeof buf - 1, 0);
    long long size = 0, resident = -1;
    if (n <= 0 || std::sscanf(buf, "%lld %lld", &size, &resident) != 2 || resident < 0) return -1;
    static const int64_t page = ::sysconf(_SC_PAGESIZE);
    return static_cast<int64_t>(resident) * page;
  }

  void kill_now() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  // After the socket broke: how the process ended ("crashed with SIGSEGV", "exited with status 1").
  std::string reap() {
    if (pid_ <= 0) return "ended";
    int status = 0;
    pid_t r = 0;
    for (int i = 0; i < 2000 && r == 0; ++i) {  // it closed the socket, so it is (almost) gone
      r = ::waitpid(pid_, &status, WNOHANG);
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (r == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      return "closed its connection (killed)";
    }
    pid_ = -1;
    if (WIFSIGNALED(status)) {
      const int sig = WTERMSIG(status);
      return "crashed with " + signal_name(sig) + (sig == SIGABRT ? " (abort)" : "");
    }
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    return "ended";
  }

 private:
  pid_t pid_;
  int fd_;
  int statm_fd_;
};

enum class Io { ok, timeout, closed };

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits until fd is ready for `events` or the deadline passes (ok also after EINTR: retry).
Io wait_ready(int fd, short events, Clock::time_point deadline) {
  pollfd pfd{fd, events, 0};
  const int left = remaining_ms(deadline);
  if (left == 0) return Io::timeout;
  const int pr = ::poll(&pfd, 1, left);
  if (pr == 0) return Io::timeout;
  if (pr < 0 && errno != EINTR) return Io::closed;
  return Io::ok;
}

Io send_all(int fd, const uint8_t* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (const Io w = wait_ready(fd, POLLOUT, deadline); w != Io::ok) return w;
      continue;
    }
    return Io::closed;
  }
  return Io::ok;
}

// Header and payload with one sendmsg where the socket takes them (one wake-up of the worker, not
// two); whatever it did not take, with send_all.
Io send_message(int fd, const Header& h, const uint8_t* p, size_t n, Clock::time_point deadline) {
  iovec iov[2];
  iov[0].iov_base = const_cast<Header*>(&h);
  iov[0].iov_len = sizeof h;
  iov[1].iov_base = const_cast<uint8_t*>(p);
  iov[1].iov_len = n;
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n > 0 ? 2 : 1;
  for (;;) {
    const ssize_t r = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) {
      auto sent = static_cast<size_t>(r);
      if (sent < sizeof h) {
        if (const Io io = send_all(fd, reinterpret_cast<const uint8_t*>(&h) + sent, sizeof h - sent, deadline); io != Io::ok) {
          return io;
        }
        sent = sizeof h;
      }
      return send_all(fd, p + (sent - sizeof h), n - (sent - sizeof h), deadline);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (const Io w = wait_ready(fd, POLLOUT, deadline); w != Io::ok) return w;
      continue;
    }
    return Io::closed;
  }
}

Io recv_all(int fd, uint8_t* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return Io::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (const Io w = wait_ready(fd, POLLIN, deadline); w != Io::ok) return w;
      continue;
    }
    return Io::closed;
  }
  return Io::ok;
}

struct Reply {
  uint32_t status = 0;
  std::vector<uint8_t> payload;
  std::string message() const { return std::string(payload.begin(), payload.end()); }
};

}  // namespace

// ---------------------------------------------------------------- PluginHost

class PluginHost {
 public:
  /// What a worker does before it answers its first request (the hello).
  static constexpr const char* kLoading = "dlopen, ringkv_engine_api_get or get_capabilities";

  PluginHost(std::string path, PluginOptions opts) : path_(std::move(path)), name_(base_name(path_)), opts_(std::move(opts)) {
    opts_.guard_floats = std::max(4, (opts_.guard_floats + 3) / 4 * 4);
    std::lock_guard<std::mutex> lock(mu_);
    start_locked();
  }

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
  void destroy_async(uint64_t generation, std::vector<uint8_t>& payload) {
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
  Reply call(uint64_t generation, Op op, std::vector<uint8_t>& payload, const std::string& during,
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
  std::string memory_note(const std::string& what) const {
    if (opts_.memory_limit_mib <= 0) return "";
    for (const char* sign : {"bad_alloc", "out of memory", "Cannot allocate", "crashed with", "killed"}) {
      if (what.find(sign) != std::string::npos) {
        return " [out of memory? the worker runs under a memory limit of " + std::to_string(opts_.memory_limit_mib) +
               " MiB (--memory-limit)]";
      }
    }
    return "";
  }

  [[noreturn]] void throw_plugin_status(uint32_t status, const std::string& raw, const std::string& during) const {
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

  std::string config_json(const Config& config) const {
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

  /// Why the config lies outside the plugin's declaration ("" if it does not): the one rule of
  /// conformance/support/capabilities.hpp on the mapped capabilities.
  std::string unsupported(const Config& c) const { return conformance::capability_gap(mapped_, c); }

 private:
  void start_locked() {
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
    mapped_ = map_capabilities(caps_, has(kHasSnapshot), abi_version_);
  }

  // Reads the replies of the destroys the host did not wait for (they report nothing).
  void drain_locked() {
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

  Reply call_locked(uint64_t generation, Op op, std::vector<uint8_t>& payload, const std::string& during,
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
  Spinner spinner_;         // polls for a reply for a moment before sleeping (protocol.hpp)
  std::string death_;
};

// ---------------------------------------------------------------- the engine

namespace {

class PluginEngine final : public Engine {
 public:
  PluginEngine(std::shared_ptr<PluginHost> host, const Config& config) : host_(std::move(host)), config_(config) {
    validate(config_);
    // A reserve is sent only to a plugin that declared rollback and a reserve that large (ABI 1.3).
    const Capabilities& caps = host_->mapped();
    for (size_t l = 0; l < config_.layers.size(); ++l) {
      const int64_t q = config_.layers[l].rollback_reserve;
      if (q <= caps.max_rollback_reserve) continue;
      throw ConfigError("config.layers[" + std::to_string(l) + "].rollback_reserve = " + std::to_string(q) +
                        ": must be in [0, max_rollback_reserve = " + std::to_string(caps.max_rollback_reserve) +
                        "]: plugin " + host_->name() +
                        (caps.rollback ? " declares no larger reserve"
                                       : " declares no rollback (ABI " + abi_version_text(host_->abi_version()) +
                                             "; rollback needs ABI 1.3 and ringkv_capabilities.rollback = 1)"));
    }
    if (const std::string why = host_->unsupported(config_); !why.empty()) {
      throw ConfigError("config outside plugin " + host_->name() + "'s declared capabilities: " + why);
    }
    const auto B = static_cast<size_t>(config_.batch);
    p0_.resize(B);
    seen_.assign(B, 0);
    for (int s = 0; s < config_.batch; ++s) p0_[static_cast<size_t>(s)] = start_position(config_, s);
    rotate_ = host_->caps().wants_rotated_qk != 0;

    generation_ = host_->ensure_worker();
    Writer w;
    w.put(static_cast<uint32_t>(config_.layers.size()));
    w.put(static_cast<uint32_t>(config_.num_q_heads));
    w.put(static_cast<uint32_t>(config_.num_kv_heads));
    w.put(static_cast<uint32_t>(config_.head_dim));
    w.put(static_cast<uint32_t>(config_.batch));
    w.put_string(host_->config_json(config_));
    // One round trip: the reply carries the engine's get_info too (protocol.hpp).
    Reply r;
    try {
      r = host_->call(generation_, Op::create, w.bytes(), "create");
    } catch (const ConfigError& e) {
      // The host sends only configs inside the declaration (checked above): a refusal means the
      // capabilities claim more than the engine does.
      throw ConfigError("plugin " + host_->name() + " rejected a config inside its declared capabilities: " + e.what() +
                        " (the capabilities claim more than the engine does: fix the declaration or the engine)");
    }
    Reader in(r.payload.data(), r.payload.size());
    handle_ = in.get<uint64_t>();
    try {
      const auto info_status = in.get<uint32_t>();
      info_.name = std::string("plugin:") + host_->caps().name;
      info_.deterministic = host_->caps().deterministic != 0;
      info_.precision = map_profile(host_->caps().precision, host_->caps().precision2, config_);
      if (info_status == RINGKV_OK) {
        const auto info = in.get<ringkv_engine_info>();
        if (info.name[0] != '\0') info_.name = std::string("plugin:") + info.name;
        info_.deterministic = info.deterministic != 0;
        info_.precision = map_profile(info.precision, info.precision2, config_);
      } else if (info_status != RINGKV_ERR_UNSUPPORTED) {
        host_->throw_plugin_status(info_status, in.rest(), "get_info");
      }
    } catch (...) {
      destroy_remote();  // no engine object will own the handle
      throw;
    }
    start_leak_watch();
  }

  ~PluginEngine() override { destroy_remote(); }

  EngineInfo info() const override { return info_; }
  const Config& config() const override { return config_; }

  void step(const StepBatch& batch) override {
    if (!batch.rollbacks.empty() && !host_->mapped().rollback) {  // never sent: the plugin would not know them
      throw StepError("step.rollbacks: plugin " + host_->name() + " declares no rollback (ABI " +
                      abi_version_text(host_->abi_version()) +
                      "; rollback needs ABI 1.3 and ringkv_capabilities.rollback = 1), so it is never sent one");
    }
    const std::string during = "step " + std::to_string(steps_);
    const int B = config_.batch;
    const auto L = static_cast<int64_t>(config_.layers.size());
    const int64_t Hq = config_.num_q_heads, Hkv = config_.num_kv_heads, D = config_.head_dim;
    // Positions after this step's rollbacks and resets (for rotation and for our own bookkeeping); a
    // bad count is the plugin's to reject (it changes nothing then, and neither do we).
    std::vector<int64_t> p0 = p0_, seen = seen_;
    for (const SequenceRollback& r : batch.rollbacks) {
      if (r.sequence >= 0 && r.sequence < B) {
        int64_t& held = seen[static_cast<size_t>(r.sequence)];
        held = std::clamp<int64_t>(held - r.n_tokens, 0, held);
      }
    }
    for (const SequenceReset& r : batch.resets) {
      if (r.sequence >= 0 && r.sequence < B) {
        p0[static_cast<size_t>(r.sequence)] = r.start_position;
        seen[static_cast<size_t>(r.sequence)] = 0;
      }
    }
    for (size_t a = 0; a < batch.appends.size(); ++a) {
      const SequenceStep& s = batch.appends[a];
      const std::string at = "step.appends[" + std::to_string(a) + "].";
      if (s.n_tokens < 0 || s.n_tokens > config_.max_tokens) {
        throw StepError(at + "n_tokens = " + std::to_string(s.n_tokens) + ": must be in [1, max_tokens = " +
                        std::to_string(config_.max_tokens) + "]");
      }
      if (s.n_tokens > 0 && (!s.q || !s.k || !s.v || !s.out)) throw StepError(at + "q/k/v/out: must be non-null");
    }
    Writer w;
    size_t floats = 0;
    for (const SequenceStep& s : batch.appends) floats += static_cast<size_t>(L * s.n_tokens * (2 * Hq + 2 * Hkv) * D);
    w.reserve(64 + 12 * (batch.resets.size() + batch.appends.size() + batch.rollbacks.size()) + 4 * floats);
    w.put(handle_);
    w.put(static_cast<uint32_t>(batch.resets.size()));
    w.put(static_cast<uint32_t>(batch.appends.size()));
    for (const SequenceReset& r : batch.resets) {
      w.put(static_cast<int32_t>(r.sequence));
      w.put(r.start_position);
    }
    for (const SequenceStep& s : batch.appends) {
      w.put(static_cast<int32_t>(s.sequence));
      w.put(s.n_tokens);
    }
    std::vector<float> rot;
    for (const SequenceStep& s : batch.appends) {
      const auto n = s.n_tokens;
      const size_t qn = static_cast<size_t>(L * n * Hq * D), kvn = static_cast<size_t>(L * n * Hkv * D);
      const bool can_rotate = rotate_ && s.sequence >= 0 && s.sequence < B;
      if (can_rotate) {
        const int64_t first = p0[static_cast<size_t>(s.sequence)] + seen[static_cast<size_t>(s.sequence)];
        rotated(s.q, n, Hq, first, rot);
        w.put_array(rot.data(), qn);
        rotated(s.k, n, Hkv, first, rot);
        w.put_array(rot.data(), kvn);
      } else {
        w.put_array(s.q, qn);
        w.put_array(s.k, kvn);
      }
      w.put_array(s.v, kvn);
    }
    if (!batch.rollbacks.empty()) {  // ABI 1.3, after the inputs (protocol.hpp); absent when there are none
      w.put(static_cast<uint32_t>(batch.rollbacks.size()));
      for (const SequenceRollback& rb : batch.rollbacks) {
        w.put(static_cast<int32_t>(rb.sequence));
        w.put(rb.n_tokens);
      }
    }
    const Reply r = host_->call(generation_, Op::step, w.bytes(), during);
    ++steps_;
    Reader in(r.payload.data(), r.payload.size());
    for (const SequenceStep& s : batch.appends) in.get_array(s.out, static_cast<size_t>(L * s.n_tokens * Hq * D));
    check_leak_limit(during);
    for (const SequenceStep& s : batch.appends) {
      if (s.sequence >= 0 && s.sequence < B) seen[static_cast<size_t>(s.sequence)] += s.n_tokens;
    }
    p0_ = std::move(p0);
    seen_ = std::move(seen);
  }

  void reset(int sequence, int64_t start_position) override {
    Writer w;
    w.put(handle_);
    w.put(static_cast<int32_t>(sequence));
    w.put(start_position);
    host_->call(generation_, Op::reset, w.bytes(), "reset of sequence " + std::to_string(sequence) + " after step " +
                                                       std::to_string(steps_));
    if (sequence >= 0 && sequence < config_.batch) {
      p0_[static_cast<size_t>(sequence)] = start_position;
      seen_[static_cast<size_t>(sequence)] = 0;
    }
  }

  std::optional<CacheSnapshot> snapshot(int layer, int sequence) const override {
    if (!host_->mapped().snapshot) return std::nullopt;
    if (layer < 0 || layer >= static_cast<int>(config_.layers.size())) {
      throw StepError("snapshot layer = " + std::to_string(layer) + ": must be in [0, " +
                      std::to_string(config_.layers.size()) + ")");
    }
    if (sequence < 0 || sequence >= config_.batch) {
      throw StepError("snapshot sequence = " + std::to_string(sequence) + ": must be in [0, " +
                      std::to_string(config_.batch) + ")");
    }
    // The spec ring of this (layer, sequence): which token each slot may hold now (spec §3): the sinks
    // and the last C - S tokens, one per slot. After a rollback (spec 1.1 §5.1.6) it holds only the
    // intact ones among them (a removed token's slot is empty, and the key it overwrote is gone):
    // those are the most recent keys, so they lie in this range, and the engine says which it holds.
    const LayerConfig& Lc = config_.layers[static_cast<size_t>(layer)];
    const RingGeometry geo{Lc.sinks, Lc.window, ring_capacity(Lc, config_.max_tokens)};
    const int64_t seen = seen_[static_cast<size_t>(sequence)], p0 = p0_[static_cast<size_t>(sequence)];
    std::vector<int64_t> token_of(static_cast<size_t>(geo.capacity), -1);
    const int64_t ring = geo.capacity - geo.sinks;
    for (int64_t j = 0; j < std::min(seen, geo.sinks); ++j) token_of[static_cast<size_t>(j)] = j;  // the sinks
    for (int64_t j = std::max(geo.sinks, seen - ring); j < seen; ++j) {  // the last `ring` tokens, one per slot
      token_of[static_cast<size_t>(geo.slot_of(j))] = j;
    }
    std::vector<int64_t> slots, positions;
    for (int64_t slot = 0; slot < geo.capacity; ++slot) {
      if (token_of[static_cast<size_t>(slot)] >= 0) {
        slots.push_back(slot);
        positions.push_back(p0 + token_of[static_cast<size_t>(slot)]);
      }
    }
    const int H = config_.num_kv_heads, D = config_.head_dim;
    const bool k8 = config_.k_format.dtype == DType::int8, v8 = config_.v_format.dtype == DType::int8;
    const auto kspr = static_cast<uint32_t>(scales_per_row(config_.k_format, D));
    const auto vspr = static_cast<uint32_t>(scales_per_row(config_.v_format, D));
    Writer w;
    w.put(handle_);
    w.put(static_cast<int32_t>(layer));
    w.put(static_cast<int32_t>(sequence));
    w.put(static_cast<uint32_t>(positions.size()));
    w.put(kspr);
    w.put(vspr);
    w.put(static_cast<uint32_t>(k8));
    w.put(static_cast<uint32_t>(v8));
    w.put_array(positions.data(), positions.size());
    const Reply r = host_->call(generation_, Op::snapshot, w.bytes(),
                                "snapshot of layer " + std::to_string(layer) + ", sequence " + std::to_string(sequence) +
                                    " after step " + std::to_string(steps_),
                                {RINGKV_ERR_UNSUPPORTED});
    if (r.status == RINGKV_ERR_UNSUPPORTED) return std::nullopt;
    Reader in(r.payload.data(), r.payload.size());
    const auto codes_written = in.get<int32_t>();
    const auto capacity_rows = in.get<int64_t>();
    const size_t count = positions.size(), row = static_cast<size_t>(H) * static_cast<size_t>(D);
    std::vector<uint8_t> present(count);
    std::vector<float> k(count * row), v(count * row);
    in.get_array(present.data(), count);
    in.get_array(k.data(), k.size());
    in.get_array(v.data(), v.size());
    std::vector<int8_t> kc, vc;
    std::vector<float> ks, vs;
    if (codes_written) {
      kc.resize(k8 ? count * row : 0);
      vc.resize(v8 ? count * row : 0);
      ks.resize(k8 ? count * static_cast<size_t>(H) * kspr : 0);
      vs.resize(v8 ? count * static_cast<size_t>(H) * vspr : 0);
      in.get_array(kc.data(), kc.size());
      in.get_array(vc.data(), vc.size());
      in.get_array(ks.data(), ks.size());
      in.get_array(vs.data(), vs.size());
    }
    // Back to the slot layout of ringkv::CacheSnapshot: the spec's slot of each position it holds.
    CacheSnapshot snap;
    snap.capacity = capacity_rows > 0 ? capacity_rows : geo.capacity;
    snap.num_kv_heads = H;
    snap.head_dim = D;
    const auto slots_n = static_cast<size_t>(std::max(snap.capacity, geo.capacity));
    snap.positions.assign(slots_n, RingKvCache::kEmpty);
    snap.k.assign(slots_n * row, 0.0f);
    snap.v.assign(slots_n * row, 0.0f);
    if (codes_written && k8) snap.k_codes.assign(slots_n * row, 0), snap.k_scales.assign(slots_n * H * kspr, 0.0f);
    if (codes_written && v8) snap.v_codes.assign(slots_n * row, 0), snap.v_scales.assign(slots_n * H * vspr, 0.0f);
    for (size_t i = 0; i < count; ++i) {
      if (!present[i]) continue;
      const auto slot = static_cast<size_t>(slots[i]);
      snap.positions[slot] = positions[i];
      std::copy_n(k.begin() + static_cast<std::ptrdiff_t>(i * row), row, snap.k.begin() + static_cast<std::ptrdiff_t>(slot * row));
      std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(i * row), row, snap.v.begin() + static_cast<std::ptrdiff_t>(slot * row));
      const auto copy_int8 = [&](const std::vector<int8_t>& codes, const std::vector<float>& scales, uint32_t spr,
                                 std::vector<int8_t>& codes_out, std::vector<float>& scales_out) {
        if (codes.empty()) return;
        std::copy_n(codes.begin() + static_cast<std::ptrdiff_t>(i * row), row,
                    codes_out.begin() + static_cast<std::ptrdiff_t>(slot * row));
        const size_t sr = static_cast<size_t>(H) * spr;
        std::copy_n(scales.begin() + static_cast<std::ptrdiff_t>(i * sr), sr,
                    scales_out.begin() + static_cast<std::ptrdiff_t>(slot * sr));
      };
      copy_int8(kc, ks, kspr, snap.k_codes, snap.k_scales);
      copy_int8(vc, vs, vspr, snap.v_codes, snap.v_scales);
    }
    return snap;
  }

  size_t cache_bytes() const override {
    Writer w;
    w.put(handle_);
    const Reply r = host_->call(generation_, Op::cache_bytes, w.bytes(), "cache_bytes after step " + std::to_string(steps_));
    Reader in(r.payload.data(), r.payload.size());
    return static_cast<size_t>(in.get<uint64_t>());
  }

  bool poison_empty_slots() override {
    if (!host_->has(kHasPoison)) return false;
    Writer w;
    w.put(handle_);
    const Reply r = host_->call(generation_, Op::poison, w.bytes(), "poison_empty_slots after step " + std::to_string(steps_),
                                {RINGKV_ERR_UNSUPPORTED});
    return r.status == RINGKV_OK;
  }

 private:
  // ---- leaks: the worker's resident memory over the engine's life (PluginOptions::leak_*) ----
  static constexpr int64_t kMiB = int64_t{1} << 20;

  static std::string bytes_text(int64_t b) {
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

  static bool leak_watch_possible() {
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

  // After create: the resident memory the engine starts from, and its declared cache.
  void start_leak_watch() {
    if (!leak_watch_possible()) return;
    try {
      Writer w;
      w.put(handle_);
      const Reply r = host_->call(generation_, Op::cache_bytes, w.bytes(), "cache_bytes after create");
      Reader in(r.payload.data(), r.payload.size());
      declared_self_ = declared_at_create_ = in.get<uint64_t>();
    } catch (...) {
      destroy_remote();
      throw;
    }
    declared_before_ = host_->add_declared(declared_self_) - declared_self_;
    rss_start_ = host_->resident_bytes(generation_);
  }

  // Growth of the worker's resident memory since create, and the caches declared meanwhile (this
  // engine's, now, and those of the engines created during its life). growth < 0: not measured.
  struct Growth {
    int64_t growth = -1, declared = 0;
    int64_t beyond() const { return growth - declared; }
  };
  Growth leak_growth(bool ask_cache) {
    Growth g;
    if (rss_start_ < 0) return g;
    const int64_t now = host_->resident_bytes(generation_);
    if (now < 0) return g;
    if (ask_cache) {  // the engine's own cache may have grown since create (a lazy engine)
      Writer w;
      w.put(handle_);
      const Reply r = host_->call(generation_, Op::cache_bytes, w.bytes(), "cache_bytes after step " + std::to_string(steps_));
      Reader in(r.payload.data(), r.payload.size());
      declared_self_ = std::max(declared_self_, in.get<uint64_t>());
    }
    g.growth = now - rss_start_;
    g.declared = static_cast<int64_t>(declared_self_ + (host_->declared() - declared_before_ - declared_at_create_));
    return g;
  }

  std::string growth_text(const Growth& g, const std::string& over) const {
    return "worker resident memory grew " + bytes_text(g.growth) + " " + over + ", " + bytes_text(g.beyond()) +
           " beyond the " + bytes_text(g.declared) + " its cache declares (cache_bytes)";
  }

  void check_leak_limit(const std::string& during) {
    const int64_t limit = host_->options().leak_limit_mib;
    if (limit <= 0) return;
    Growth g = leak_growth(false);
    if (g.growth < 0 || g.beyond() <= limit * kMiB) return;
    g = leak_growth(true);
    if (g.growth < 0 || g.beyond() <= limit * kMiB) return;
    const std::string what = growth_text(g, "by " + during);
    host_->kill_worker(generation_, "leaked memory: " + what);
    throw Error("plugin " + host_->name() + ": " + what + ", above the leak limit of " + std::to_string(limit) +
                " MiB (--leak-limit): it leaks (the worker was killed; the next engine gets a fresh one)");
  }

  // At the engine's end: growth beyond the declared caches and the slack is a warning.
  void warn_leak() noexcept {
    try {
      const int64_t slack = host_->options().leak_slack_mib * kMiB;
      Growth g = leak_growth(false);
      if (g.growth < 0 || g.beyond() <= slack) return;
      g = leak_growth(true);
      if (g.growth < 0 || g.beyond() <= slack) return;
      CaseWarnings::add("plugin " + host_->name() + ": " + growth_text(g, "over the case") + ", more than the " +
                        std::to_string(host_->options().leak_slack_mib) + " MiB allowed for allocator noise: a leak? (" +
                        std::to_string(steps_) + " steps; a failure above --leak-limit " +
                        std::to_string(host_->options().leak_limit_mib) + " MiB)");
    } catch (...) {  // a worker that dies here is reported by the next engine
    }
  }

  void destroy_remote() noexcept {
    if (!host_->alive(generation_)) return;
    warn_leak();
    if (!host_->alive(generation_)) return;
    try {
      Writer w;
      w.put(handle_);
      host_->destroy_async(generation_, w.bytes());  // no wait: the next request reads the reply
    } catch (...) {  // reports nothing; the next create() sees a dead worker and restarts it
    }
  }

  // q or k of one chunk rotated per spec §8 at positions first, first + 1, ... (layer by layer).
  void rotated(const float* x, int64_t n, int64_t heads, int64_t first, std::vector<float>& out) const {
    const auto L = static_cast<int64_t>(config_.layers.size());
    const int D = config_.head_dim;
    out.assign(x, x + L * n * heads * D);
    std::vector<double> c(static_cast<size_t>(D)), s(static_cast<size_t>(D));
    for (int64_t l = 0; l < L; ++l) {
      const RopeConfig& rope = config_.layers[static_cast<size_t>(l)].rope;
      if (rope.style == RopeStyle::none) continue;
      for (int64_t t = 0; t < n; ++t) {
        rope_angles(rope, D, first + t, c.data(), s.data());
        for (int64_t h = 0; h < heads; ++h) {
          float* row = out.data() + ((l * n + t) * heads + h) * D;
          rope_rotate(rope, D, c.data(), s.data(), row, row);
        }
      }
    }
  }

  std::shared_ptr<PluginHost> host_;
  Config config_;
  EngineInfo info_;
  uint64_t generation_ = 0, handle_ = 0;
  std::vector<int64_t> p0_, seen_;
  int64_t steps_ = 0;
  bool rotate_ = false;
  int64_t rss_start_ = -1;                       // the worker's resident bytes after create (-1: not watched)
  // This engine's cache_bytes (at create, and the largest since); the host's sum before it was created.
  uint64_t declared_self_ = 0, declared_at_create_ = 0, declared_before_ = 0;
};

}  // namespace

// ---------------------------------------------------------------- public API

PrecisionProfile map_profile(const ringkv_precision_profile& p, const ringkv_precision_profile2& p2, const Config& c) {
  PrecisionProfile r;
  r.q_dot = precision_of(p.q_dot, c.k_format.dtype, "q_dot");
  r.k_storage = precision_of(p.k_storage, c.k_format.dtype, "k_storage");
  r.v_storage = precision_of(p.v_storage, c.v_format.dtype, "v_storage");
  r.qk_accumulator = r.pv_accumulator = precision_of(p.accumulator, c.k_format.dtype, "accumulator");
  if (p2.split_accumulators != 0) {
    r.qk_accumulator = precision_of(p2.qk_accumulator, c.k_format.dtype, "qk_accumulator");
    r.pv_accumulator = precision_of(p2.pv_accumulator, c.k_format.dtype, "pv_accumulator");
  }
  if (p2.q_quant != RINGKV_Q_QUANT_NONE && p2.q_quant != RINGKV_Q_QUANT_Q8_0) {
    throw Error("plugin declares precision2.q_quant = " + std::to_string(p2.q_quant) + ": not a ringkv_q_quant (0 none, 1 q8_0)");
  }
  r.q_quant = p2.q_quant == RINGKV_Q_QUANT_Q8_0 ? QueryQuant::q8_0 : QueryQuant::none;
  r.p_before_pv = precision_of(p.p_before_pv, c.k_format.dtype, "p_before_pv");
  r.output = precision_of(p.output, c.k_format.dtype, "output");
  r.rope_angle = precision_of(p.rope_angle, c.k_format.dtype, "rope_angle");
  return r;
}

Capabilities map_capabilities(const ringkv_capabilities& k, bool has_snapshot, uint32_t plugin_abi_version) {
  Capabilities c;
  c.k_dtypes = from_mask(k.k_dtypes, kDTypes, DType::f32);
  c.v_dtypes = from_mask(k.v_dtypes, kDTypes, DType::f32);
  c.int8_schemes = from_mask(k.int8_schemes, kSchemes, Int8Scheme::per_head);
  if (k.int8_schemes == 0) {  // no scheme: no INT8 at all
    c.int8_schemes.clear();
    std::erase(c.k_dtypes, DType::int8);
    std::erase(c.v_dtypes, DType::int8);
    if (c.k_dtypes.empty()) c.k_dtypes = {DType::f32};
    if (c.v_dtypes.empty()) c.v_dtypes = {DType::f32};
  }
  c.rope_styles = from_mask(k.rope_styles, kStyles, RopeStyle::none);
  c.rope_scalings = from_mask(k.rope_scalings, kScalings, RopeScaling::none);
  c.head_dims.assign(k.head_dims, k.head_dims + std::min<uint32_t>(k.num_head_dims, RINGKV_MAX_HEAD_DIMS));
  c.sinks = k.sinks != 0;
  c.sink_logits = k.sink_logits != 0;
  c.softcap = k.softcap != 0;
  if (k.max_layers > 0) c.max_layers = k.max_layers;
  if (k.max_batch > 0) c.max_batch = k.max_batch;
  c.int8_roundings = from_mask(k.int8_roundings == 0 ? 1u : k.int8_roundings, kRoundings, Rounding::nearest_even);
  c.snapshot = k.snapshot != 0 && has_snapshot;
  if (k.max_window > 0) c.max_window = k.max_window;
  if (k.max_tokens > 0) c.max_tokens = k.max_tokens;
  // A fixed storage in the profile: the engine rounds what it is given, so it runs f32 cases too.
  if (k.precision.k_storage != RINGKV_PRECISION_AS_CONFIGURED && k.precision.k_storage >= RINGKV_PRECISION_F64 &&
      k.precision.k_storage <= RINGKV_PRECISION_INT8) {
    c.k_storage = static_cast<Precision>(k.precision.k_storage);
  }
  if (k.precision.v_storage != RINGKV_PRECISION_AS_CONFIGURED && k.precision.v_storage >= RINGKV_PRECISION_F64 &&
      k.precision.v_storage <= RINGKV_PRECISION_INT8) {
    c.v_storage = static_cast<Precision>(k.precision.v_storage);
  }
  if (RINGKV_ABI_VERSION_GET_MINOR(plugin_abi_version) >= 2) {  // ABI 1.2 fields; older plugins: spec 1's range
    if (k.max_sliding_windows > 0) c.max_sliding_windows = k.max_sliding_windows;
    c.per_layer_rope = k.per_layer_rope != 0;
    c.partial_rotary = k.partial_rotary != 0;
    c.settable_p0 = k.settable_p0 != 0;
    if (k.min_window > 0) c.min_window = k.min_window;
    if (k.max_position > 0) c.max_position = std::min<int64_t>(k.max_position, c.max_position);
    c.kv_formats_differ = k.kv_formats_differ != 0;
  }
  if (RINGKV_ABI_VERSION_GET_MINOR(plugin_abi_version) >= 3 && k.rollback != 0) {  // ABI 1.3; older: no rollback
    constexpr int64_t kMaxReserve = int64_t{1} << 30;
    if (k.max_rollback_reserve < 0 || k.max_rollback_reserve > kMaxReserve) {
      throw Error("plugin declares max_rollback_reserve = " + std::to_string(k.max_rollback_reserve) +
                  ": must be in [0, 2^30]");
    }
    c.rollback = true;
    c.max_rollback_reserve = k.max_rollback_reserve;
  }
  return c;
}

namespace {
thread_local CaseWarnings* t_case_warnings = nullptr;
}  // namespace

CaseWarnings::CaseWarnings() : outer_(t_case_warnings) { t_case_warnings = this; }
CaseWarnings::~CaseWarnings() { t_case_warnings = outer_; }
std::vector<std::string> CaseWarnings::take() { return std::exchange(warnings_, {}); }
void CaseWarnings::add(std::string warning) {
  if (t_case_warnings != nullptr) t_case_warnings->warnings_.push_back(std::move(warning));
}

Plugin::Plugin(std::unique_ptr<PluginHost> host) : host_(std::move(host)) {}
Plugin::~Plugin() = default;

std::shared_ptr<Plugin> Plugin::open(const std::string& plugin_path, PluginOptions options) {
  return std::shared_ptr<Plugin>(new Plugin(std::make_unique<PluginHost>(plugin_path, std::move(options))));
}

const std::string& Plugin::path() const { return host_->path(); }
const ringkv_capabilities& Plugin::raw_capabilities() const { return host_->caps(); }
const Capabilities& Plugin::capabilities() const { return host_->mapped(); }
uint32_t Plugin::abi_version() const { return host_->abi_version(); }
std::string Plugin::unsupported(const Config& config) const { return host_->unsupported(config); }
std::string Plugin::config_json(const Config& config) const { return host_->config_json(config); }
std::unique_ptr<Engine> Plugin::create(const Config& config) { return std::make_unique<PluginEngine>(host_, config); }
int Plugin::workers_started() const { return host_->started(); }
int Plugin::worker_pid() const { return host_->pid(); }

EngineFactory plugin_engine_factory(std::shared_ptr<Plugin> plugin) {
  EngineFactory f;
  f.name = "plugin:" + base_name(plugin->path());
  f.capabilities = plugin->capabilities();
  f.create = [plugin](const Config& c) { return plugin->create(c); };
  return f;
}

EngineFactory plugin_engine_factory(const std::string& plugin_path, PluginOptions opts) {
  return plugin_engine_factory(Plugin::open(plugin_path, std::move(opts)));
}

}  // namespace ringkv::abi
