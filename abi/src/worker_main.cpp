// ringkv_plugin_worker's main: the process a plugin engine runs in (worker.cpp serves the requests).
//
//   ringkv_plugin_worker PLUGIN.so GUARD_FLOATS      (started by plugin_host.cpp, never by hand)
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "protocol.hpp"
#include "worker.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PLUGIN.so GUARD_FLOATS (started by ringkv, not by hand)\n", argv[0]);
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  ringkv::abi::worker::install_fault_handler();
  // If the host dies while the plugin hangs, nobody is left to kill us: leave when we are orphaned.
  const pid_t host = ::getppid();
  std::thread([host] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (::getppid() != host) _exit(3);
    }
  }).detach();
  ::dup2(2, 1);  // whatever the plugin prints goes to stderr, never into the host's stdout
  ringkv::abi::worker::set_guard_floats(static_cast<size_t>(std::strtoul(argv[2], nullptr, 10)));
  ringkv::abi::worker::load_plugin(argv[1]);
  ringkv::abi::worker::serve_requests(ringkv::abi::wire::kWorkerFd);
  // Exit without destroying the remaining engines: the host has stopped listening, and a plugin's
  // teardown (a device context, say) must not keep it waiting.
  _exit(0);
}
