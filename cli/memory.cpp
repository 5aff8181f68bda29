#include "memory.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "ringkv/quant.hpp"

namespace ringkv::cli {

int64_t kv_bytes_per_token(const MemoryQuery& q, int64_t kv_heads) {
  const int64_t elements = 2 * q.layers * kv_heads * q.head_dim;
  int64_t bytes = elements * bytes_per_element(q.dtype);
  if (q.dtype == DType::int8) {
    if (q.int8_scheme == Int8Scheme::per_head) bytes += 2 * q.layers * kv_heads * 4;                 // f32 per row
    if (q.int8_scheme == Int8Scheme::q8_0) bytes += 2 * q.layers * kv_heads * (q.head_dim / 32) * 2;  // f16 per 32
  }
  return bytes;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024.0 && u < 5) b /= 1024.0, ++u;
  char buf[64];
  if (std::fabs(b - std::round(b)) < 1e-9) {
    std::snprintf(buf, sizeof buf, "%.0f %s", b, units[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", b, units[u]);
  }
  return buf;
}

std::string memory_report(const MemoryQuery& q) {
  std::ostringstream os;
  const int64_t per_token = kv_bytes_per_token(q, q.kv_heads);
  std::string fmt = to_string(q.dtype);
  if (q.dtype == DType::int8) fmt += std::string(" ") + to_string(q.int8_scheme);
  os << "KV cache: " << q.layers << " layers x " << q.kv_heads << " kv heads x head_dim " << q.head_dim << ", "
     << fmt << ", batch " << q.batch << "\n";
  os << "  per token: 2 (K and V) x " << q.layers << " x " << q.kv_heads << " x " << q.head_dim << " x "
     << bytes_per_element(q.dtype) << " B";
  if (q.dtype == DType::int8 && q.int8_scheme != Int8Scheme::static_tensor) os << " + scales";
  os << " = " << human_bytes(static_cast<double>(per_token)) << " (" << per_token << " B)\n";
  const int64_t mha_heads = q.q_heads > 0 ? q.q_heads : 0;
  const int64_t ring_tokens = q.window > 0 ? q.sinks + q.window + q.rollback_reserve : 0;
  char line[256];
  std::snprintf(line, sizeof line, "  %-10s %14s %14s", "context", "full cache", ring_tokens ? "ring cache" : "");
  os << line;
  if (mha_heads) os << "   full cache if MHA (" << mha_heads << " kv heads)";
  os << "\n";
  for (int64_t n : q.contexts) {
    const double full = static_cast<double>(per_token) * static_cast<double>(n) * static_cast<double>(q.batch);
    std::string ring;
    if (ring_tokens) {
      const int64_t held = ring_tokens < n ? ring_tokens : n;
      ring = human_bytes(static_cast<double>(per_token) * static_cast<double>(held) * static_cast<double>(q.batch));
    }
    std::snprintf(line, sizeof line, "  %-10lld %14s %14s", static_cast<long long>(n), human_bytes(full).c_str(),
                  ring.c_str());
    os << line;
    if (mha_heads) {
      const double mha = static_cast<double>(kv_bytes_per_token(q, mha_heads)) * static_cast<double>(n) *
                         static_cast<double>(q.batch);
      os << "   " << human_bytes(mha);
    }
    os << "\n";
  }
  if (ring_tokens && q.rollback_reserve == 0) {
    os << "  ring: min(S + W, context) = min(" << q.sinks << " + " << q.window << ", context) tokens per sequence\n";
  } else if (ring_tokens) {
    os << "  ring: min(S + W + Q, context) = min(" << q.sinks << " + " << q.window << " + " << q.rollback_reserve
       << ", context) tokens per sequence\n";
    const double reserve = static_cast<double>(per_token) * static_cast<double>(q.rollback_reserve) *
                           static_cast<double>(q.batch);
    os << "  rollback reserve (spec 1.1 §3): " << q.rollback_reserve << " slots per sequence in every sliding layer = "
       << human_bytes(reserve) << " for the batch; it honours a rollback to m tokens when H - m <= Q + 1 = "
       << q.rollback_reserve + 1 << " (H: the high-water mark, spec 1.1 §5.1.2)\n";
  }
  return os.str();
}

}  // namespace ringkv::cli
