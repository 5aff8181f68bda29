// ringkv golden: declared repeats (spec 1.2, golden format §3.1). A row repeats an earlier one when a
// sequence re-sends another's tokens from the same start position: the same position and the same q, k
// and v in every layer, so that an adapter can give both the same token id and a prefix cache can hit.
// The declaration is __metadata__ 'repeats', runs [row, of, n]: a key readers before spec 1.2 ignore.
#include "golden/detail.hpp"

#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "ringkv/error.hpp"

namespace ringkv::golden::detail {

using nlohmann::json;

std::vector<int32_t> repeat_rows(const conformance::Case& c, const std::vector<GoldenRow>& rows) {
  std::vector<int32_t> out(rows.size(), -1);
  std::map<std::tuple<int, int64_t, int64_t>, int32_t> first;  // (data stream, index, position) -> row
  for (size_t r = 0; r < rows.size(); ++r) {
    const GoldenRow& row = rows[r];
    const auto key = std::make_tuple(conformance::data_stream(c, row.stream, row.index), row.index, row.position);
    const auto [it, fresh] = first.emplace(key, static_cast<int32_t>(r));
    if (!fresh) out[r] = it->second;
  }
  return out;
}

std::string repeats_to_json(const std::vector<int32_t>& repeat_of) {
  json runs = json::array();
  for (size_t r = 0; r < repeat_of.size(); ++r) {
    if (repeat_of[r] < 0) continue;
    if (!runs.empty()) {
      json& last = runs.back();
      const auto row = last[0].get<int64_t>(), of = last[1].get<int64_t>(), n = last[2].get<int64_t>();
      if (row + n == static_cast<int64_t>(r) && of + n == repeat_of[r]) {
        last[2] = n + 1;
        continue;
      }
    }
    runs.push_back(json::array({static_cast<int64_t>(r), repeat_of[r], 1}));
  }
  return runs.empty() ? std::string() : runs.dump();
}

namespace {

// The first element where rows a and b of a [L][R][H][D] tensor differ bitwise, as "[l, b, h, d]", or "".
std::string first_difference(const std::vector<float>& t, const Dims& d, int64_t H, int64_t a, int64_t b) {
  for (int64_t l = 0; l < d.L; ++l) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t e = 0; e < d.D; ++e) {
        const auto at = [&](int64_t r) { return static_cast<size_t>(((l * d.R + r) * H + h) * d.D + e); };
        if (std::memcmp(&t[at(a)], &t[at(b)], sizeof(float)) != 0) {
          return "[" + std::to_string(l) + ", " + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(e) + "]";
        }
      }
    }
  }
  return "";
}

// The runs of a 'repeats' value: a JSON array of [row, of, n] with integers (else throws `bad`).
std::vector<std::array<int64_t, 3>> parse_runs(const std::string& text, const std::function<Error(const std::string&)>& bad) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw bad(std::string("is not JSON: ") + e.what());
  }
  if (!j.is_array()) throw bad("must be a JSON array of runs [row, of, n]");
  std::vector<std::array<int64_t, 3>> runs;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& x = j[i];
    if (!x.is_array() || x.size() != 3 || !x[0].is_number_integer() || !x[1].is_number_integer() || !x[2].is_number_integer()) {
      throw bad("[" + std::to_string(i) + "] = " + x.dump() + ": every run is [row, of, n], three integers");
    }
    runs.push_back({x[0].get<int64_t>(), x[1].get<int64_t>(), x[2].get<int64_t>()});
  }
  return runs;
}

}  // namespace

std::vector<int32_t> read_repeats(const GoldenCase& g, const std::string& text, const std::string& src) {
  const Dims d = dims_of(g.c, g.num_rows());
  const auto bad = [&](const std::string& why) {
    return Error(src + ": __metadata__ repeats" + why + " (a corrupt golden: the file, not the engine)");
  };
  const std::vector<std::array<int64_t, 3>> runs = parse_runs(text, bad);
  std::vector<int32_t> rep(static_cast<size_t>(d.R), -1);
  int64_t end = 0;  // runs ascend and do not overlap
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto [row, of, n] = runs[i];
    const std::string at = "[" + std::to_string(i) + "] = [" + std::to_string(row) + ", " + std::to_string(of) + ", " +
                           std::to_string(n) + "]";
    if (n < 1 || row < end || row > d.R - n) {
      throw bad(at + ": rows [row, row + n) must lie in [" + std::to_string(end) + ", R = " + std::to_string(d.R) +
                "), n >= 1, after the previous run");
    }
    if (of < 0 || of >= row) throw bad(at + ": of must lie in [0, row = " + std::to_string(row) + "): a repeat names an earlier row");
    for (int64_t k = 0; k < n; ++k) rep[static_cast<size_t>(row + k)] = static_cast<int32_t>(of + k);
    end = row + n;
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto [row, of, n] = runs[i];
    for (int64_t k = 0; k < n; ++k) {
      const int64_t r = row + k, j = of + k;
      const std::string at = "[" + std::to_string(i) + "]: row " + std::to_string(r) + " repeats row " + std::to_string(j);
      if (rep[static_cast<size_t>(j)] != -1) {
        throw bad(at + ", itself a repeat of row " + std::to_string(rep[static_cast<size_t>(j)]) + ": name the first occurrence");
      }
      const GoldenRow &a = g.rows[static_cast<size_t>(j)], &b = g.rows[static_cast<size_t>(r)];
      if (a.position != b.position) {
        throw bad(at + ", but tensor 'positions' holds " + std::to_string(b.position) + " and " + std::to_string(a.position) +
                  ": a repeat has the same position");
      }
      const std::pair<const char*, const std::vector<float>*> inputs[] = {{"q", &g.q}, {"k", &g.k}, {"v", &g.v}};
      for (const auto& [name, t] : inputs) {
        const std::string diff = first_difference(*t, d, t == &g.q ? d.Hq : d.Hkv, j, r);
        if (!diff.empty()) {
          throw bad(at + ", but tensor '" + name + "' differs at " + diff + ": a repeat has bitwise-equal q, k and v in every layer");
        }
      }
    }
  }
  return rep;
}

}  // namespace ringkv::golden::detail
