// ringkv ABI: the wire protocol between the host (plugin_host.cpp) and the
// plugin worker process (worker.cpp). Internal: both sides are built from the
// same sources, on the same machine, so PODs cross as raw bytes. Each message
// (header and payload) goes in one sendmsg, so a request wakes the other side once.
//
// Transport: one AF_UNIX stream socket pair (a bidirectional pipe); the
// worker's end is fd kWorkerFd. Every message is a Header followed by
// `length` payload bytes. The host sends a request (Header.code = Op) and
// waits, with a timeout, for exactly one reply (Header.code = a ringkv_status,
// or kStatusOutOfBounds / kStatusWorkerError); an error reply's payload is the
// message text.
//
// Payloads (little-endian PODs, in order):
//   hello      -> u32 abi_version, u32 api_struct_size, u32 flags (kHas*), ringkv_capabilities
//   create     u32 L, Hq, Hkv, D, B, json bytes -> u64 handle, u32 info_status (the plugin's get_info,
//              RINGKV_ERR_UNSUPPORTED without one), then ringkv_engine_info if RINGKV_OK, else
//              the plugin's message bytes (so that making an engine is one round trip)
//   info       u64 handle -> ringkv_engine_info
//   step       u64 handle, u32 nr, u32 na, nr x (i32 seq, i64 p0), na x (i32 seq, i64 n),
//              then per append: q, k, v floats, then (ABI 1.3, optional: absent = none)
//              u32 nrb, nrb x (i32 seq, i64 n) rollbacks -> per append: out floats
//              (the rollbacks come last so that a step of ABI 1.2 reads as before; the plugin
//              still does them first)
//   reset      u64 handle, i32 seq, i64 p0 -> (empty)
//   snapshot   u64 handle, i32 layer, i32 seq, u32 count, u32 k_spr, u32 v_spr, u32 k_int8, u32 v_int8,
//              count x i64 positions
//              -> i32 codes_written, i64 capacity_rows, count x u8 present, k, v floats,
//                 [k codes, v codes (if int8), k scales, v scales (if spr > 0)] when codes_written
//   cache_bytes u64 handle -> u64 bytes
//   poison     u64 handle -> (empty)
//   destroy    u64 handle -> (empty); the host does not wait for this reply, it reads it before
//              its next request (a run makes and drops an engine per case)
#pragma once

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace ringkv::abi::wire {

inline constexpr int kWorkerFd = 3;  ///< the worker's end of the socket pair

enum class Op : uint32_t { hello = 1, create, info, step, reset, snapshot, cache_bytes, poison, destroy };

inline const char* op_name(Op op) {
  switch (op) {
    case Op::hello: return "hello";
    case Op::create: return "create";
    case Op::info: return "get_info";
    case Op::step: return "step";
    case Op::reset: return "reset";
    case Op::snapshot: return "snapshot";
    case Op::cache_bytes: return "cache_bytes";
    case Op::poison: return "poison_empty_slots";
    case Op::destroy: return "destroy";
  }
  return "?";
}

/// Reply codes beyond ringkv_status.
inline constexpr uint32_t kStatusOutOfBounds = 1000;  ///< a guard band was overwritten
inline constexpr uint32_t kStatusWorkerError = 1001;  ///< dlopen, symbol, version or protocol failure
inline constexpr uint32_t kStatusInputWritten = 1002;  ///< the plugin wrote into one of its inputs

/// hello flags: which optional functions the plugin has.
inline constexpr uint32_t kHasInfo = 1, kHasSnapshot = 2, kHasPoison = 4;

struct Header {
  uint32_t code = 0;  ///< Op in requests, status in replies
  uint32_t reserved = 0;
  uint64_t length = 0;  ///< payload bytes
};
static_assert(sizeof(Header) == 16);

/// Largest payload either side accepts (a garbled length must not allocate the machine).
inline constexpr uint64_t kMaxPayload = uint64_t{1} << 36;

/// Polling a socket for a moment before sleeping in a blocking read or poll(): on an idle machine
/// the other side's message (a step of a small case, the next request) mostly comes within it, and
/// being put to sleep and woken costs more than that wait (a round trip on a 2-vCPU VM: about 65 us
/// when both sides sleep, 10 us when both poll; docs/performance.md). On a busy machine the polling
/// only takes CPU from the other side: after 3 polls in a row that came back empty, a side stops
/// polling, and tries once every 64 waits.
class Spinner {
 public:
  static constexpr std::chrono::microseconds kPoll{50};
  std::chrono::microseconds budget() {
    if (misses_ < 3) return kPoll;
    return ++skipped_ % 64 == 0 ? kPoll : std::chrono::microseconds{0};
  }
  void result(bool arrived) { misses_ = arrived ? 0 : std::min(misses_ + 1, 3); }

 private:
  int misses_ = 0;
  unsigned skipped_ = 0;
};

/// Polls fd (non-blocking, MSG_PEEK) until a byte, EOF or an error is there, for at most the
/// spinner's budget; the blocking read or poll() that follows does the rest.
inline void spin_until_readable(int fd, Spinner& spinner) {
  const auto budget = spinner.budget();
  if (budget.count() == 0) return;
  const auto until = std::chrono::steady_clock::now() + budget;
  uint8_t byte;
  for (;;) {
    const ssize_t r = ::recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      spinner.result(true);
      return;
    }
    if (std::chrono::steady_clock::now() >= until) {
      spinner.result(false);
      return;
    }
  }
}

class Writer {
 public:
  template <typename T>
  void put(const T& x) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&x);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put_array(const T* x, size_t n) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (n == 0) return;
    const auto* p = reinterpret_cast<const uint8_t*>(x);
    bytes_.insert(bytes_.end(), p, p + n * sizeof(T));
  }
  void put_string(const std::string& s) { bytes_.insert(bytes_.end(), s.begin(), s.end()); }
  void reserve(size_t n) { bytes_.reserve(n); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T x;
    need(sizeof(T));
    std::memcpy(&x, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return x;
  }
  template <typename T>
  void get_array(T* out, size_t n) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (n == 0) return;
    if (n > (size_ - pos_) / sizeof(T)) throw std::runtime_error("protocol: message too short");  // n * sizeof(T) may wrap
    std::memcpy(out, data_ + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
  }
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_ - pos_);
    pos_ = size_;
    return s;
  }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }  ///< the bytes the next get reads

 private:
  void need(size_t n) const {
    if (n > size_ - pos_) throw std::runtime_error("protocol: message too short");
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace ringkv::abi::wire
