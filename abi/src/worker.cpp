// ringkv_plugin_worker: the process a plugin engine runs in (its main: worker_main.cpp; this file
// serves the requests, worker.hpp).
//
//   ringkv_plugin_worker PLUGIN.so GUARD_FLOATS      (started by plugin_host.cpp, never by hand)
//
// It dlopens the plugin, checks its ABI version, and serves the host's
// requests (protocol.hpp) on fd 3 until the host closes it. Every output
// buffer it hands the plugin sits between two guard bands of GUARD_FLOATS
// sentinel floats (a NaN pattern) and, beyond them, PROT_NONE pages; after
// each call it checks the bands and reports an out-of-bounds write instead of
// the result, and a write into a protected page is reported the same way from
// the SIGSEGV handler. Inputs are compared with the request's bytes after each
// call, so a plugin that writes into q, k or v is reported too. A crash, abort or hang of the
// plugin takes only this process down; the host reports it and starts a fresh
// worker for the next engine.
//
// This program deliberately links nothing of ringkv: the plugin carries its
// own copy of whatever it needs, and nothing here can interpose on it.
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "worker.hpp"

#include "protocol.hpp"
#include "ringkv/engine_abi.h"

namespace {

using namespace ringkv::abi::wire;

// ---------------------------------------------------------------- io

int g_fd = kWorkerFd;  // the socket requests come from and replies go to (serve_requests' fd)

bool read_full(int fd, void* buf, size_t n) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_full(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const uint8_t*>(buf);
  while (n > 0) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// A request's payload of n bytes, the buffer grown as they arrive: a garbled length (up to
// kMaxPayload, 64 GiB) allocates no more than the bytes actually sent, plus one 16 MiB chunk.
bool read_payload(int fd, uint64_t n, std::vector<uint8_t>& payload) {
  constexpr uint64_t kChunk = uint64_t{1} << 24;
  payload.clear();
  while (payload.size() < n) {
    const size_t have = payload.size(), more = static_cast<size_t>(std::min(kChunk, n - have));
    payload.resize(have + more);
    if (!read_full(fd, payload.data() + have, more)) return false;
  }
  return true;
}

// Header and payload in one sendmsg (one wake-up of the host, not two); the rest, if the socket
// took only part, with plain sends.
bool write_message(int fd, const Header& h, const uint8_t* payload, size_t n) {
  iovec iov[2];
  iov[0].iov_base = const_cast<Header*>(&h);
  iov[0].iov_len = sizeof h;
  iov[1].iov_base = const_cast<uint8_t*>(payload);
  iov[1].iov_len = n;
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n > 0 ? 2 : 1;
  ssize_t r;
  do {
    r = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  size_t sent = static_cast<size_t>(r);
  if (sent < sizeof h) {
    if (!write_full(fd, reinterpret_cast<const uint8_t*>(&h) + sent, sizeof h - sent)) return false;
    sent = sizeof h;
  }
  return write_full(fd, payload + (sent - sizeof h), n - (sent - sizeof h));
}

void reply(uint32_t status, const std::vector<uint8_t>& payload) {
  Header h;
  h.code = status;
  h.length = payload.size();
  if (!write_message(g_fd, h, payload.data(), payload.size())) _exit(0);
}

void reply_error(uint32_t status, const std::string& message) {
  reply(status, std::vector<uint8_t>(message.begin(), message.end()));
}

// ---------------------------------------------------------------- guard bands and guard pages

constexpr uint32_t kSentinelBits = 0x7fc0ffeeu;  // a quiet NaN with a payload no engine computes
size_t g_guard_floats = 64;

// Memory the plugin must not write where it faults: the PROT_NONE pages around every buffer the
// plugin writes. A fault inside one is reported as an out-of-bounds write naming the buffer (the
// reply the host waits for, written from the signal handler); any other fault is the plugin's
// own crash and keeps its default action.
struct GuardPage {
  uintptr_t begin = 0, end = 0;  // the PROT_NONE page
  uintptr_t body = 0;            // the buffer's first element
  size_t elem = 1, n = 0;
  const std::string* what = nullptr;
};
std::vector<GuardPage> g_guard_pages;  // changed only between plugin calls, read by the handler during one

// Async-signal-safe text building for the handler.
struct SignalText {
  char buf[1024];
  size_t n = 0;
  void add(const char* s, size_t len) {
    for (size_t i = 0; i < len && n < sizeof buf; ++i) buf[n++] = s[i];
  }
  void add(const char* s) { add(s, std::strlen(s)); }
  void add(long long v) {
    char d[24];
    size_t k = 0;
    const bool neg = v < 0;
    unsigned long long u = neg ? 0ull - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
    do {
      d[k++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (neg) add("-", 1);
    while (k > 0) add(&d[--k], 1);
  }
};

void on_fault(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const GuardPage& g : g_guard_pages) {
    if (addr < g.begin || addr >= g.end) continue;
    const auto offset = static_cast<long long>(addr) - static_cast<long long>(g.body);
    const long long index = offset >= 0 ? offset / static_cast<long long>(g.elem)
                                        : -((-offset + static_cast<long long>(g.elem) - 1) / static_cast<long long>(g.elem));
    SignalText t;
    t.add(g.what->data(), g.what->size());
    t.add(" (");
    t.add(static_cast<long long>(g.n));
    t.add(offset >= 0 ? " elements): wrote past its end, beyond its guard band, into a protected page at index "
                      : " elements): wrote before its start, beyond its guard band, into a protected page at index ");
    t.add(index);
    Header h;
    h.code = kStatusOutOfBounds;
    h.length = t.n;
    (void)!::write(g_fd, &h, sizeof h);
    (void)!::write(g_fd, t.buf, t.n);
    _exit(4);
  }
  ::signal(sig, SIG_DFL);  // not ours: returning re-runs the access, which now ends the process as before
}

size_t page_size() {
  static const size_t p = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

// Mappings of [PROT_NONE page][usable pages][PROT_NONE page], kept for reuse: a step's buffers have
// the same sizes as the last step's, so after the first steps no call maps or protects anything.
class PagePool {
 public:
  uint8_t* take(size_t usable_pages) {
    const auto it = free_.find(usable_pages);
    if (it != free_.end()) {
      uint8_t* m = it->second;
      free_.erase(it);
      return m;
    }
    const size_t page = page_size(), bytes = (usable_pages + 2) * page;
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::runtime_error("worker: cannot map " + std::to_string(bytes) + " bytes for a buffer");
    auto* base = static_cast<uint8_t*>(m);
    ::mprotect(base, page, PROT_NONE);
    ::mprotect(base + (usable_pages + 1) * page, page, PROT_NONE);
    return base;
  }
  void give(size_t usable_pages, uint8_t* base) {
    if (free_.size() >= 256) {
      ::munmap(base, (usable_pages + 2) * page_size());
      return;
    }
    free_.emplace(usable_pages, base);
  }

 private:
  std::multimap<size_t, uint8_t*> free_;
};
PagePool g_pages;

// n elements of T that the plugin writes. Both sides carry a guard band of at least g_guard_floats
// sentinel floats (the same bytes for any T, so that a byte buffer's guard catches a write of one
// byte past its end): a write there is found by check() after the call. Beyond the bands lie
// PROT_NONE pages: a write there faults, and on_fault reports it, naming the buffer.
template <typename T>
class Guarded {
 public:
  Guarded(std::string what, size_t n, T init) : what_(std::move(what)), n_(n) {
    const size_t page = page_size(), band = 4 * g_guard_floats, body = n * sizeof(T);
    pages_ = (2 * band + body + 64 + page - 1) / page;
    base_ = g_pages.take(pages_);
    usable_ = base_ + page;
    // The back band ends at the trailing protected page; the body is 64-byte aligned.
    const uintptr_t end = reinterpret_cast<uintptr_t>(usable_) + pages_ * page;
    body_ = reinterpret_cast<uint8_t*>((end - band - body) & ~uintptr_t{63});
    uint8_t pattern[4];
    std::memcpy(pattern, &kSentinelBits, 4);
    for (size_t i = 0; i < pages_ * page; ++i) usable_[i] = pattern[i % 4];
    for (size_t i = 0; i < n; ++i) data()[i] = init;
    const auto body_at = reinterpret_cast<uintptr_t>(body_);
    g_guard_pages.push_back({reinterpret_cast<uintptr_t>(base_), reinterpret_cast<uintptr_t>(usable_), body_at, sizeof(T), n, &what_});
    g_guard_pages.push_back({end, end + page, body_at, sizeof(T), n, &what_});
  }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  Guarded(Guarded&& o) noexcept
      : what_(std::move(o.what_)), n_(o.n_), pages_(o.pages_), base_(o.base_), usable_(o.usable_), body_(o.body_) {
    o.base_ = nullptr;
    for (GuardPage& g : g_guard_pages) {
      if (g.body == reinterpret_cast<uintptr_t>(body_)) g.what = &what_;
    }
  }
  ~Guarded() {
    if (base_ == nullptr) return;
    const auto body_at = reinterpret_cast<uintptr_t>(body_);
    std::erase_if(g_guard_pages, [&](const GuardPage& g) { return g.body == body_at; });
    g_pages.give(pages_, base_);
  }
  T* data() { return reinterpret_cast<T*>(body_); }
  size_t size() const { return n_; }

  // "" if both guard bands are intact, else what was overwritten.
  std::string check() const {
    uint8_t pattern[4];
    std::memcpy(pattern, &kSentinelBits, 4);
    const size_t front = static_cast<size_t>(body_ - usable_), body = n_ * sizeof(T);
    const size_t total = pages_ * page_size(), back = total - front - body;
    size_t before = 0, after = 0, nearest_before = 0, nearest_after = back;
    for (size_t i = 0; i < front; ++i) {
      if (usable_[i] != pattern[i % 4]) ++before, nearest_before = front - i;
    }
    for (size_t i = 0; i < back; ++i) {
      const size_t at = front + body + i;
      if (usable_[at] != pattern[at % 4]) {
        ++after;
        if (i < nearest_after) nearest_after = i;
      }
    }
    if (before == 0 && after == 0) return "";
    const size_t el = sizeof(T);
    std::string s = what_ + " (" + std::to_string(n_) + " elements): ";
    if (after > 0) {
      s += "wrote past its end (" + std::to_string((after + el - 1) / el) + " element(s) of the " +
           std::to_string(back / el) + "-element guard band after it changed, the nearest at index " +
           std::to_string(n_ + nearest_after / el) + ")";
    }
    if (before > 0) {
      s += std::string(after > 0 ? "; and " : "") + "wrote before its start (" +
           std::to_string((before + el - 1) / el) + " element(s) of the guard band before it changed, the nearest at index -" +
           std::to_string((nearest_before + el - 1) / el) + ")";
    }
    return s;
  }

 private:
  std::string what_;
  size_t n_;
  size_t pages_ = 0;
  uint8_t* base_ = nullptr;    // the leading protected page
  uint8_t* usable_ = nullptr;  // the first writable byte
  uint8_t* body_ = nullptr;
};

// An input the plugin reads: a copy of the request's bytes, compared with them after the call,
// so that a plugin writing into q, k, v or the snapshot positions is reported, naming the input.
template <typename T>
class Input {
 public:
  Input(std::string what, Reader& in, size_t n) : what_(std::move(what)), n_(n) {
    // Before allocating: a garbled count must not allocate more than the request holds.
    if (n > in.remaining() / sizeof(T)) throw std::runtime_error("protocol: message too short for " + what_);
    data_.resize(n);
    wire_ = in.here();
    in.get_array(data_.data(), n);
  }
  T* data() { return data_.data(); }
  // "" if unchanged, else where the plugin wrote.
  std::string check() const {
    if (n_ == 0 || std::memcmp(data_.data(), wire_, n_ * sizeof(T)) == 0) return "";
    size_t i = 0;
    while (std::memcmp(&data_[i], wire_ + i * sizeof(T), sizeof(T)) == 0) ++i;
    return what_ + " (" + std::to_string(n_) + " elements): the engine wrote into this input, first at index " +
           std::to_string(i) + " (inputs are read-only)";
  }

 private:
  std::string what_;
  size_t n_;
  std::vector<T> data_;
  const uint8_t* wire_ = nullptr;  // the same bytes in the request, which the plugin never sees
};

// ---------------------------------------------------------------- the plugin

std::string g_plugin_path;
std::string g_load_error;  // non-empty: the plugin cannot be used, and every request says why
const ringkv_engine_api* g_api = nullptr;

std::string describe_version(uint32_t v) {
  return std::to_string(RINGKV_ABI_VERSION_GET_MAJOR(v)) + "." + std::to_string(RINGKV_ABI_VERSION_GET_MINOR(v));
}

void use_table(ringkv_engine_api_get_fn get);

void load_plugin() {
  void* lib = ::dlopen(g_plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = ::dlerror();
    g_load_error = "cannot load plugin " + g_plugin_path + ": " + (e ? e : "dlopen failed");
    return;
  }
  void* sym = ::dlsym(lib, RINGKV_ENGINE_API_SYMBOL);
  if (sym == nullptr) {
    g_load_error = "plugin " + g_plugin_path + " does not export " RINGKV_ENGINE_API_SYMBOL
                   " (declare it extern \"C\" with RINGKV_ABI_EXPORT)";
    return;
  }
  ringkv_engine_api_get_fn get = nullptr;
  static_assert(sizeof(get) == sizeof(sym));
  std::memcpy(&get, &sym, sizeof get);
  use_table(get);
}

// The version and table checks on the plugin's ringkv_engine_api_get.
void use_table(ringkv_engine_api_get_fn get) {
  const ringkv_engine_api* api = get(RINGKV_ABI_VERSION_MAJOR);
  const std::string ours = describe_version(RINGKV_ABI_VERSION);
  if (api == nullptr) {
    g_load_error = "plugin " + g_plugin_path + ": " RINGKV_ENGINE_API_SYMBOL "(" +
                   std::to_string(RINGKV_ABI_VERSION_MAJOR) + ") returned NULL: the plugin has no table for ringkv engine ABI " +
                   std::to_string(RINGKV_ABI_VERSION_MAJOR) + ".x (this ringkv speaks ABI " + ours +
                   "; rebuild the plugin against this ringkv's engine_abi.h)";
    return;
  }
  if (RINGKV_ABI_VERSION_GET_MAJOR(api->abi_version) != RINGKV_ABI_VERSION_MAJOR) {
    g_load_error = "plugin " + g_plugin_path + " implements ringkv engine ABI " + describe_version(api->abi_version) +
                   ", but this ringkv speaks ABI " + ours + ": the major versions must match (rebuild the plugin "
                   "against this ringkv's engine_abi.h)";
    return;
  }
  const size_t needed = offsetof(ringkv_engine_api, poison_empty_slots) + sizeof(api->poison_empty_slots);
  if (api->struct_size < needed) {
    g_load_error = "plugin " + g_plugin_path + ": its ringkv_engine_api.struct_size is " +
                   std::to_string(api->struct_size) + " bytes; ABI " + ours + " needs at least " + std::to_string(needed);
    return;
  }
  std::string missing;
  const auto require = [&](bool present, const char* name) {
    if (!present) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  require(api->get_capabilities != nullptr, "get_capabilities");
  require(api->create != nullptr, "create");
  require(api->destroy != nullptr, "destroy");
  require(api->last_error != nullptr, "last_error");
  require(api->step != nullptr, "step");
  require(api->reset != nullptr, "reset");
  require(api->cache_bytes != nullptr, "cache_bytes");
  if (!missing.empty()) {
    g_load_error = "plugin " + g_plugin_path + ": required functions are NULL in its table: " + missing;
    return;
  }
  g_api = api;
}

struct Handle {
  ringkv_engine* engine = nullptr;
  uint32_t L = 0, Hq = 0, Hkv = 0, D = 0, B = 0;
};
std::unordered_map<uint64_t, Handle> g_engines;
uint64_t g_next_handle = 1;

std::string plugin_message(ringkv_engine* e) {
  const char* m = g_api->last_error(e);
  return m ? std::string(m) : std::string();
}

ringkv_tensor tensor(float* data, uint32_t L, int64_t n, uint32_t H, uint32_t D) {
  ringkv_tensor t;
  std::memset(&t, 0, sizeof t);
  t.struct_size = sizeof(ringkv_tensor);
  t.dtype = RINGKV_DTYPE_F32;
  t.memory = RINGKV_MEMORY_HOST;
  t.ndim = 4;
  t.shape[0] = L, t.shape[1] = n, t.shape[2] = H, t.shape[3] = D;
  t.strides[3] = 1, t.strides[2] = D, t.strides[1] = int64_t{H} * D, t.strides[0] = n * H * D;
  t.data = data;
  return t;
}

Handle& handle_of(uint64_t id) {
  const auto it = g_engines.find(id);
  if (it == g_engines.end()) throw std::runtime_error("protocol: unknown engine handle " + std::to_string(id));
  return it->second;
}

void serve(Op op, Reader& in) {
  if (!g_load_error.empty()) return reply_error(kStatusWorkerError, g_load_error);
  Writer out;
  switch (op) {
    case Op::hello: {
      ringkv_capabilities caps;
      std::memset(&caps, 0, sizeof caps);
      caps.struct_size = sizeof caps;
      caps.precision.struct_size = sizeof caps.precision;
      caps.precision2.struct_size = sizeof caps.precision2;
      const ringkv_status st = g_api->get_capabilities(&caps);
      if (st != RINGKV_OK) {
        return reply_error(kStatusWorkerError, "plugin " + g_plugin_path + ": get_capabilities failed with status " +
                                                   std::to_string(static_cast<int>(st)));
      }
      caps.name[RINGKV_NAME_SIZE - 1] = '\0';
      uint32_t flags = 0;
      if (g_api->get_info) flags |= kHasInfo;
      if (g_api->snapshot) flags |= kHasSnapshot;
      if (g_api->poison_empty_slots) flags |= kHasPoison;
      out.put(g_api->abi_version);
      out.put(g_api->struct_size);
      out.put(flags);
      out.put(caps);
      return reply(RINGKV_OK, out.bytes());
    }
    case Op::create: {
      Handle h;
      h.L = in.get<uint32_t>(), h.Hq = in.get<uint32_t>(), h.Hkv = in.get<uint32_t>(), h.D = in.get<uint32_t>();
      h.B = in.get<uint32_t>();
      const std::string json = in.rest();
      std::vector<char> err(4096, '\0');
      ringkv_engine* e = nullptr;
      const ringkv_status st = g_api->create(json.c_str(), json.size(), &e, err.data(), err.size());
      err.back() = '\0';
      if (st != RINGKV_OK || e == nullptr) {
        if (e != nullptr) g_api->destroy(e);
        std::string m = err.data();
        if (st == RINGKV_OK) return reply_error(RINGKV_ERR_INTERNAL, "create returned RINGKV_OK but no engine");
        return reply_error(st, m);
      }
      h.engine = e;
      // The engine's info in the same reply (one round trip per engine, not two).
      uint32_t info_status = RINGKV_ERR_UNSUPPORTED;
      ringkv_engine_info info_copy{};
      std::string info_message;
      if (g_api->get_info) {
        Guarded<ringkv_engine_info> info("the ringkv_engine_info struct", 1, ringkv_engine_info{});
        info.data()->struct_size = sizeof(ringkv_engine_info);
        info.data()->precision.struct_size = sizeof(ringkv_precision_profile);
        info.data()->precision2.struct_size = sizeof(ringkv_precision_profile2);
        const ringkv_status ist = g_api->get_info(e, info.data());
        const std::string oob = info.check();
        if (!oob.empty()) return reply_error(kStatusOutOfBounds, oob);  // the host kills this worker
        info_status = static_cast<uint32_t>(ist);
        if (ist == RINGKV_OK) {
          info.data()->name[RINGKV_NAME_SIZE - 1] = '\0';
          info_copy = *info.data();
        } else {
          info_message = plugin_message(e);
        }
      }
      const uint64_t id = g_next_handle++;
      g_engines[id] = h;
      out.put(id);
      out.put(info_status);
      if (info_status == RINGKV_OK) {
        out.put(info_copy);
      } else {
        out.put_string(info_message);
      }
      return reply(RINGKV_OK, out.bytes());
    }
    case Op::info: {
      Handle& h = handle_of(in.get<uint64_t>());
      if (!g_api->get_info) return reply_error(RINGKV_ERR_UNSUPPORTED, "no get_info");
      Guarded<ringkv_engine_info> info("the ringkv_engine_info struct", 1, ringkv_engine_info{});
      info.data()->struct_size = sizeof(ringkv_engine_info);
      info.data()->precision.struct_size = sizeof(ringkv_precision_profile);
      info.data()->precision2.struct_size = sizeof(ringkv_precision_profile2);
      const ringkv_status st = g_api->get_info(h.engine, info.data());
      const std::string oob = info.check();
      if (!oob.empty()) return reply_error(kStatusOutOfBounds, oob);
      if (st != RINGKV_OK) return reply_error(st, plugin_message(h.engine));
      info.data()->name[RINGKV_NAME_SIZE - 1] = '\0';
      out.put(*info.data());
      return reply(RINGKV_OK, out.bytes());
    }
    case Op::step: {
      Handle& h = handle_of(in.get<uint64_t>());
      const uint32_t nr = in.get<uint32_t>(), na = in.get<uint32_t>();
      // 12 bytes per reset and per append follow: garbled counts must not allocate before that is checked.
      if ((uint64_t{nr} + na) * 12 > in.remaining()) {
        throw std::runtime_error("protocol: step of " + std::to_string(nr) + " resets and " + std::to_string(na) +
                                 " appends in " + std::to_string(in.remaining()) + " bytes");
      }
      std::vector<ringkv_reset> resets(nr);
      for (ringkv_reset& r : resets) {
        std::memset(&r, 0, sizeof r);
        r.struct_size = sizeof r;
        r.sequence = in.get<int32_t>();
        r.start_position = in.get<int64_t>();
      }
      std::vector<ringkv_append> appends(na);
      std::vector<Input<float>> inputs;
      std::vector<Guarded<float>> outs;
      inputs.reserve(3 * na);
      outs.reserve(na);
      for (ringkv_append& a : appends) {
        std::memset(&a, 0, sizeof a);
        a.struct_size = sizeof a;
        a.sequence = in.get<int32_t>();
        a.n_tokens = in.get<int64_t>();
        if (a.n_tokens < 0 || a.n_tokens > (int64_t{1} << 31)) throw std::runtime_error("protocol: bad n_tokens");
      }
      for (size_t i = 0; i < appends.size(); ++i) {
        ringkv_append& a = appends[i];
        const int64_t n = a.n_tokens;
        const size_t qn = size_t{h.L} * static_cast<size_t>(n) * h.Hq * h.D;
        const size_t kvn = size_t{h.L} * static_cast<size_t>(n) * h.Hkv * h.D;
        const std::string of = " of append " + std::to_string(i) + " (sequence " + std::to_string(a.sequence) + ", " +
                               std::to_string(n) + " tokens)";
        inputs.emplace_back("q" + of, in, qn);
        inputs.emplace_back("k" + of, in, kvn);
        inputs.emplace_back("v" + of, in, kvn);
        const size_t base = inputs.size() - 3;
        outs.emplace_back("out" + of, qn, std::nanf(""));
        a.q = tensor(inputs[base].data(), h.L, n, h.Hq, h.D);
        a.k = tensor(inputs[base + 1].data(), h.L, n, h.Hkv, h.D);
        a.v = tensor(inputs[base + 2].data(), h.L, n, h.Hkv, h.D);
        a.out = tensor(outs.back().data(), h.L, n, h.Hq, h.D);
      }
      // ABI 1.3: the rollbacks, after the inputs (protocol.hpp); none when nothing follows them.
      uint32_t nrb = 0;
      if (in.remaining() > 0) {
        nrb = in.get<uint32_t>();
        if (uint64_t{nrb} * 12 != in.remaining()) {
          throw std::runtime_error("protocol: step of " + std::to_string(nrb) + " rollbacks in " +
                                   std::to_string(in.remaining()) + " bytes");
        }
      }
      if (nrb > 0 && RINGKV_ABI_VERSION_GET_MINOR(g_api->abi_version) < 3) {  // the host never sends them
        return reply_error(RINGKV_ERR_UNSUPPORTED, "protocol: rollbacks for a plugin of ABI " +
                                                       describe_version(g_api->abi_version) + " (ABI 1.3 has them)");
      }
      std::vector<ringkv_rollback> rollbacks(nrb);
      for (ringkv_rollback& rb : rollbacks) {
        std::memset(&rb, 0, sizeof rb);
        rb.struct_size = sizeof rb;
        rb.sequence = in.get<int32_t>();
        rb.n_tokens = in.get<int64_t>();
      }
      ringkv_batch batch;
      std::memset(&batch, 0, sizeof batch);
      batch.struct_size = sizeof batch;
      batch.num_resets = nr;
      batch.resets = resets.data();
      batch.num_appends = na;
      batch.appends = appends.data();
      batch.num_rollbacks = nrb;
      batch.rollbacks = nrb > 0 ? rollbacks.data() : nullptr;
      const ringkv_status st = g_api->step(h.engine, &batch);
      std::string oob;
      for (uint32_t i = 0; i < na && oob.empty(); ++i) oob = outs[i].check();
      if (!oob.empty()) return reply_error(kStatusOutOfBounds, oob);
      for (const Input<float>& input : inputs) {
        if (const std::string w = input.check(); !w.empty()) return reply_error(kStatusInputWritten, w);
      }
      if (st != RINGKV_OK) return reply_error(st, plugin_message(h.engine));
      for (Guarded<float>& o : outs) out.put_array(o.data(), o.size());
      return reply(RINGKV_OK, out.bytes());
    }
    case Op::reset: {
      Handle& h = handle_of(in.get<uint64_t>());
      const int32_t seq = in.get<int32_t>();
      const int64_t p0 = in.get<int64_t>();
      const ringkv_status st = g_api->reset(h.engine, seq, p0);
      if (st != RINGKV_OK) return reply_error(st, plugin_message(h.engine));
      return reply(RINGKV_OK, out.bytes());
    }
    case Op::snapshot: {
      Handle& h = handle_of(in.get<uint64_t>());
      if (!g_api->snapshot) return reply_error(RINGKV_ERR_UNSUPPORTED, "no snapshot");
      ringkv_snapshot_request req;
      std::memset(&req, 0, sizeof req);
      req.struct_size = sizeof req;
      req.layer = in.get<int32_t>();
      req.sequence = in.get<int32_t>();
      const uint32_t count = in.get<uint32_t>();
      const uint32_t kspr = in.get<uint32_t>(), vspr = in.get<uint32_t>();
      const bool k8 = in.get<uint32_t>() != 0, v8 = in.get<uint32_t>() != 0;
      Input<int64_t> positions("snapshot positions[]", in, count);
      req.num_positions = count;
      req.positions = positions.data();
      const size_t rows = size_t{count} * h.Hkv * h.D;
      Guarded<uint8_t> present("snapshot present[]", count, uint8_t{0});
      Guarded<float> k("snapshot k", rows, std::nanf("")), v("snapshot v", rows, std::nanf(""));
      Guarded<int8_t> kc("snapshot k_codes", k8 ? rows : 0, int8_t{0}), vc("snapshot v_codes", v8 ? rows : 0, int8_t{0});
      Guarded<float> ks("snapshot k_scales", k8 ? size_t{count} * h.Hkv * kspr : 0, std::nanf(""));
      Guarded<float> vs("snapshot v_scales", v8 ? size_t{count} * h.Hkv * vspr : 0, std::nanf(""));
      Guarded<ringkv_snapshot_result> res("the ringkv_snapshot_result struct", 1, ringkv_snapshot_result{});
      ringkv_snapshot_result& r = *res.data();
      r.struct_size = sizeof r;
      r.k_scales_per_row = k8 ? kspr : 0;
      r.v_scales_per_row = v8 ? vspr : 0;
      r.present = present.data();
      r.k = k.data();
      r.v = v.data();
      r.k_codes = k8 ? kc.data() : nullptr;
      r.v_codes = v8 ? vc.data() : nullptr;
      r.k_scales = k8 && kspr > 0 ? ks.data() : nullptr;
      r.v_scales = v8 && vspr > 0 ? vs.data() : nullptr;
      const ringkv_status st = g_api->snapshot(h.engine, &req, &r);
      std::string oob = present.check();
      if (oob.empty()) oob = k.check();
      if (oob.empty()) oob = v.check();
      if (oob.empty()) oob = kc.check();
      if (oob.empty()) oob = vc.check();
      if (oob.empty()) oob = ks.check();
      if (oob.empty()) oob = vs.check();
      if (oob.empty()) oob = res.check();
      if (!oob.empty()) return reply_error(kStatusOutOfBounds, oob);
      if (const std::string w = positions.check(); !w.empty()) return reply_error(kStatusInputWritten, w);
      if (st != RINGKV_OK) return reply_error(st, plugin_message(h.engine));
      out.put(r.codes_written);
      out.put(r.capacity_rows);
      out.put_array(present.data(), count);
      out.put_array(k.data(), rows);
      out.put_array(v.data(), rows);
      if (r.codes_written) {
        out.put_array(kc.data(), kc.size());
        out.put_array(vc.data(), vc.size());
        out.put_array(ks.data(), ks.size());
        out.put_array(vs.data(), vs.size());
      }
      return reply(RINGKV_OK, out.bytes());
    }
    case Op::cache_bytes: {
      Handle& h = handle_of(in.get<uint64_t>());
      uint64_t bytes = 0;
      const ringkv_status st = g_api->cache_bytes(h.engine, &bytes);
      if (st != RINGKV_OK) return reply_error(st, plugin_message(h.engine));
      out.put(bytes);
      return reply(RINGKV_OK, out.bytes());
    }
    case Op::poison: {
      Handle& h = handle_of(in.get<uint64_t>());
      if (!g_api->poison_empty_slots) return reply_error(RINGKV_ERR_UNSUPPORTED, "no poison_empty_slots");
      const ringkv_status st = g_api->poison_empty_slots(h.engine);
      if (st != RINGKV_OK) return reply_error(st, plugin_message(h.engine));
      return reply(RINGKV_OK, out.bytes());
    }
    case Op::destroy: {
      const uint64_t id = in.get<uint64_t>();
      Handle& h = handle_of(id);
      g_api->destroy(h.engine);
      g_engines.erase(id);
      return reply(RINGKV_OK, out.bytes());
    }
  }
  reply_error(kStatusWorkerError, "protocol: unknown request " + std::to_string(static_cast<uint32_t>(op)));
}

}  // namespace

namespace ringkv::abi::worker {

void load_plugin(const std::string& path) {
  g_plugin_path = path;
  ::load_plugin();
}

void use_table(ringkv_engine_api_get_fn get, const std::string& name) {
  g_plugin_path = name;
  g_load_error.clear();
  g_api = nullptr;
  ::use_table(get);
}

void set_guard_floats(size_t n) { g_guard_floats = n; }

void install_fault_handler() {
  struct sigaction fault {};
  fault.sa_sigaction = on_fault;
  fault.sa_flags = SA_SIGINFO;
  sigemptyset(&fault.sa_mask);
  ::sigaction(SIGSEGV, &fault, nullptr);
  ::sigaction(SIGBUS, &fault, nullptr);
}

void serve_requests(int fd) {
  g_fd = fd;
  std::vector<uint8_t> payload;
  Spinner spinner;  // polls for the next request for a moment before blocking (protocol.hpp)
  for (;;) {
    Header h;
    spin_until_readable(fd, spinner);
    if (!read_full(fd, &h, sizeof h)) break;  // the host is done (or gone)
    if (h.length > kMaxPayload) {
      reply_error(kStatusWorkerError, "protocol: request of " + std::to_string(h.length) + " bytes");
      break;
    }
    if (!read_payload(fd, h.length, payload)) break;
    Reader in(payload.data(), payload.size());
    try {
      serve(static_cast<Op>(h.code), in);
    } catch (const std::exception& e) {
      reply_error(kStatusWorkerError, std::string("worker: ") + e.what());
    }
  }
}

void destroy_engines() {
  for (auto& [id, h] : g_engines) g_api->destroy(h.engine);
  g_engines.clear();
}

}  // namespace ringkv::abi::worker
