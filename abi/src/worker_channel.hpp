// ringkv ABI, host side: the framed I/O with the worker process, every read and write bounded by a
// deadline (the socket is non-blocking; poll waits for readiness until the deadline). The messages
// themselves (Header, payloads) are protocol.hpp's; the requests the host makes are plugin_host.cpp's.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "protocol.hpp"

namespace ringkv::abi {

using Clock = std::chrono::steady_clock;

/// The outcome of a bounded read or write: done, the deadline passed, or the other side is gone.
enum class Io { ok, timeout, closed };

/// Writes all n bytes, waiting for the socket while the deadline allows.
Io send_all(int fd, const uint8_t* p, size_t n, Clock::time_point deadline);

/// Header and payload with one sendmsg where the socket takes them (one wake-up of the worker, not
/// two); whatever it did not take, with send_all.
Io send_message(int fd, const wire::Header& h, const uint8_t* p, size_t n, Clock::time_point deadline);

/// Reads exactly n bytes, waiting for the socket while the deadline allows.
Io recv_all(int fd, uint8_t* p, size_t n, Clock::time_point deadline);

/// One reply of the worker: its status (a ringkv_status, or one of protocol.hpp's kStatus*) and payload.
struct Reply {
  uint32_t status = 0;
  std::vector<uint8_t> payload;
  std::string message() const { return std::string(payload.begin(), payload.end()); }
};

}  // namespace ringkv::abi
