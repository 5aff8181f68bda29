// ringkv ABI: the wire protocol between the host (plugin_engine.cpp) and the
// plugin worker process (worker.cpp). Internal: both sides are built from the
// same sources, on the same machine, so PODs cross as raw bytes.
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
//   create     u32 L, Hq, Hkv, D, B, json bytes -> u64 handle
//   info       u64 handle -> ringkv_engine_info
//   step       u64 handle, u32 nr, u32 na, nr x (i32 seq, i64 p0), na x (i32 seq, i64 n),
//              then per append: q, k, v floats -> per append: out floats
//   reset      u64 handle, i32 seq, i64 p0 -> (empty)
//   snapshot   u64 handle, i32 layer, i32 seq, u32 count, u32 k_spr, u32 v_spr, u32 k_int8, u32 v_int8,
//              count x i64 positions
//              -> i32 codes_written, i64 capacity_rows, count x u8 present, k, v floats,
//                 [k codes, v codes (if int8), k scales, v scales (if spr > 0)] when codes_written
//   cache_bytes u64 handle -> u64 bytes
//   poison     u64 handle -> (empty)
//   destroy    u64 handle -> (empty)
#pragma once

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
    need(n * sizeof(T));
    std::memcpy(out, data_ + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
  }
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_ - pos_);
    pos_ = size_;
    return s;
  }
  size_t remaining() const { return size_ - pos_; }

 private:
  void need(size_t n) const {
    if (n > size_ - pos_) throw std::runtime_error("protocol: message too short");
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace ringkv::abi::wire
