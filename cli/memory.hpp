// ringkv CLI: the KV-cache memory formula (ringkv memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ringkv/config.hpp"

namespace ringkv::cli {

struct MemoryQuery {
  int64_t layers = 32, kv_heads = 8, q_heads = 0, head_dim = 128, batch = 1;
  DType dtype = DType::f16;
  Int8Scheme int8_scheme = Int8Scheme::per_head;
  int64_t window = 0, sinks = 0;  ///< window 0: no ring
  int64_t rollback_reserve = 0;   ///< Q (spec 1.1 §3): ring slots kept beyond S + W for rollbacks
  std::vector<int64_t> contexts{4096, 32768, 131072};
};

/// Bytes one token's K and V take in all layers: 2 * layers * kv_heads * head_dim * element bytes,
/// plus the INT8 scales (per_head: one f32 per (token, head) for K and for V; q8_0: one f16 per 32).
int64_t kv_bytes_per_token(const MemoryQuery& q, int64_t kv_heads);

/// The formatted report: per token and per context, full cache against ring cache, GQA against MHA.
std::string memory_report(const MemoryQuery& q);

/// "4 GiB", "512 MiB", "128 KiB", "96 B".
std::string human_bytes(double bytes);

}  // namespace ringkv::cli
