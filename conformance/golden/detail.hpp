// ringkv golden: helpers shared by the files of the golden library (not installed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "golden/golden.hpp"
#include "ringkv/quant.hpp"
#include "support/case.hpp"

namespace ringkv::golden::detail {

constexpr int64_t k2p20 = int64_t{1} << 20;
constexpr int64_t k2p24 = int64_t{1} << 24;
constexpr int64_t k2p30 = int64_t{1} << 30;

inline std::string fmt(double x) {
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}

template <typename T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

/// Rows and chunks of a case: they follow from the schedule alone (defined in record.cpp).
void layout_rows(const conformance::Case& c, std::vector<GoldenRow>* rows, std::vector<GoldenChunk>* chunks);

/// The dimensions of a case's tensors with R rows (docs/golden-format.md §3).
struct Dims {
  int64_t L, R, Hq, Hkv, D, T, B;
  int64_t k_spr, v_spr;
};

inline Dims dims_of(const conformance::Case& c, int64_t R) {
  const Config& cfg = c.config;
  return Dims{static_cast<int64_t>(cfg.layers.size()), R, cfg.num_q_heads, cfg.num_kv_heads, cfg.head_dim,
              static_cast<int64_t>(c.steps.size()), cfg.batch, scales_per_row(cfg.k_format, cfg.head_dim),
              scales_per_row(cfg.v_format, cfg.head_dim)};
}

inline size_t count(std::initializer_list<int64_t> dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

// Tokens per stream between resets: the max_tokens a schedule needs.
inline int64_t needed_max_tokens(const conformance::Case& c) {
  std::vector<int64_t> seen(static_cast<size_t>(c.config.batch), 0);
  int64_t most = 1;
  for (const conformance::StepPlan& st : c.steps) {
    for (const conformance::ResetPlan& r : st.resets) seen[static_cast<size_t>(r.sequence)] = 0;
    for (size_t s = 0; s < st.tokens.size(); ++s) {
      seen[s] += st.tokens[s];
      most = std::max(most, seen[s]);
    }
  }
  return most;
}

}  // namespace ringkv::golden::detail
