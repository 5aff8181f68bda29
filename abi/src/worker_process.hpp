// ringkv ABI, host side: one worker process (ringkv_plugin_worker, which dlopens the plugin): where its
// executable is found, and the process over its life: its socket, its resident memory, killing it,
// and how it ended. PluginHost (plugin_host.cpp) starts it (fork + exec) and restarts it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "plugin_engine.hpp"

namespace ringkv::abi {

/// "SIGSEGV", "SIGABRT", ... or "signal N".
std::string signal_name(int sig);

bool is_executable(const std::string& path);

/// The worker executable: PluginOptions::worker_path, else $RINGKV_PLUGIN_WORKER, else
/// ringkv_plugin_worker next to the running executable, else the one in this build tree, else
/// ringkv_plugin_worker on PATH.
std::string find_worker(const PluginOptions& opts);

/// A started worker process and the host's end of its socket. The destructor closes the socket, which
/// ends the worker, and reaps it (killing it if it does not end at once).
class Worker {
 public:
  Worker(pid_t pid, int fd);
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker();
  pid_t pid() const { return pid_; }
  int fd() const { return fd_; }

  // Resident memory in bytes (/proc/<pid>/statm: resident pages x the page size, read again through
  // the descriptor opened at the start: about 1 us), or -1 if it cannot be read.
  int64_t resident_bytes() const;

  /// Kills it now (SIGKILL) and reaps it.
  void kill_now();
  // After the socket broke: how the process ended ("crashed with SIGSEGV", "exited with status 1").
  std::string reap();

 private:
  pid_t pid_;
  int fd_;
  int statm_fd_;
};

}  // namespace ringkv::abi
