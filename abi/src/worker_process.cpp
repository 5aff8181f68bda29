#include "worker_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#ifndef RINGKV_ABI_DEFAULT_WORKER
#define RINGKV_ABI_DEFAULT_WORKER ""
#endif

namespace ringkv::abi {

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

Worker::Worker(pid_t pid, int fd)
    : pid_(pid), fd_(fd), statm_fd_(::open(("/proc/" + std::to_string(pid) + "/statm").c_str(), O_RDONLY | O_CLOEXEC)) {}

Worker::~Worker() {
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

int64_t Worker::resident_bytes() const {
  if (statm_fd_ < 0 || pid_ <= 0) return -1;
  char buf[128] = {};
  const ssize_t n = ::pread(statm_fd_, buf, sizeof buf - 1, 0);
  long long size = 0, resident = -1;
  if (n <= 0 || std::sscanf(buf, "%lld %lld", &size, &resident) != 2 || resident < 0) return -1;
  static const int64_t page = ::sysconf(_SC_PAGESIZE);
  return static_cast<int64_t>(resident) * page;
}

void Worker::kill_now() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

std::string Worker::reap() {
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

}  // namespace ringkv::abi
