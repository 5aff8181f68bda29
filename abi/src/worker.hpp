// ringkv_plugin_worker's request handling (worker.cpp), apart from the process's main
// (worker_main.cpp) so that the wire-protocol fuzz target (fuzz/worker_protocol.cpp) serves requests
// in process, from a socket pair, against a plugin table linked into it.
#pragma once

#include <cstddef>
#include <string>

#include "ringkv/engine_abi.h"

namespace ringkv::abi::worker {

/// dlopens the plugin and checks its ABI version and table; a failure is kept, and every request is
/// answered with it (the host reports it).
void load_plugin(const std::string& path);
/// The same checks on a plugin's ringkv_engine_api_get at hand; `name` names the plugin in messages.
void use_table(ringkv_engine_api_get_fn get, const std::string& name);
/// Sentinel floats on each side of every buffer the plugin writes (the host passes its choice).
void set_guard_floats(size_t n);
/// SIGSEGV and SIGBUS: a write into a guard page is reported to the host as an out-of-bounds write.
void install_fault_handler();
/// Serves the requests read from fd (protocol.hpp), replying on fd, until the other side closes it.
/// A reply that cannot be written ends the process.
void serve_requests(int fd);
/// Destroys every engine still made. The worker process never does (its host has stopped
/// listening); the fuzz target does between inputs.
void destroy_engines();

}  // namespace ringkv::abi::worker
