// Fuzz target: the plugin worker's side of the ABI wire protocol (abi/src/protocol.hpp): the input
// is the byte stream the host would send on the worker's socket (headers and payloads). It is
// served in process by the worker's own request handling (abi/src/worker.cpp) against the reference
// plugin, linked in (abi/plugins/reference_plugin.cpp): a socket pair stands for fd 3, a thread
// plays the host (writes the input, reads every reply). A malformed request must be answered with
// an error reply; a crash, a sanitizer report, a leak, a hang or a huge allocation is a finding.
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "ringkv/engine_abi.h"
#include "worker.hpp"

extern "C" const ringkv_engine_api* ringkv_engine_api_get(uint32_t host_major);  // the reference plugin

namespace {

// The host's side of the socket, on a thread of its own (one for the whole process: a thread per
// input costs more than most inputs): writes an input, then reads every reply until the worker closes.
class Host {
 public:
  Host() : thread_([this] { run(); }) { thread_.detach(); }
  void start(int fd, const uint8_t* data, size_t size) {
    std::lock_guard lock(m_);
    fd_ = fd, data_ = data, size_ = size, busy_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [this] { return !busy_; });
  }

 private:
  void run() {
    for (;;) {
      std::unique_lock lock(m_);
      cv_.wait(lock, [this] { return busy_; });
      lock.unlock();
      if (size_ > 0) {  // else the input went in at once, and the socket is shut already
        for (size_t sent = 0; sent < size_;) {
          const ssize_t r = ::send(fd_, data_ + sent, size_ - sent, MSG_NOSIGNAL);
          if (r <= 0) break;  // the worker stopped reading (it refused a request and closed)
          sent += static_cast<size_t>(r);
        }
        ::shutdown(fd_, SHUT_WR);
      }
      char buf[1 << 16];
      while (::read(fd_, buf, sizeof buf) > 0) {
      }
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool busy_ = false;
  std::thread thread_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace worker = ringkv::abi::worker;
  static Host* const host = [] {
    worker::set_guard_floats(64);  // the host's default
    worker::use_table(&ringkv_engine_api_get, "libringkv_plugin_reference.so (linked in)");
    return new Host;  // never destroyed: its thread outlives every input
  }();
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::abort();
  // As much as the socket takes at once, before the worker looks (else it polls for it, protocol.hpp's
  // Spinner); the host thread sends the rest.
  const ssize_t first = size > 0 ? ::send(fds[0], data, size, MSG_NOSIGNAL | MSG_DONTWAIT) : 0;
  const size_t sent = first > 0 ? static_cast<size_t>(first) : 0;
  if (sent == size) ::shutdown(fds[0], SHUT_WR);
  host->start(fds[0], data + sent, size - sent);
  worker::serve_requests(fds[1]);
  ::close(fds[1]);
  host->wait();
  ::close(fds[0]);
  worker::destroy_engines();
  return 0;
}
