// Writes the generated seed inputs of the fuzz corpora (fuzz/corpus/<target>/):
//   worker_protocol/  request streams as the host sends them (protocol.hpp): a session making an
//                     engine for a small config, stepping it, snapshotting, resetting and destroying it
//   golden_outputs/   outputs files for the fixed case (golden/cases/window_1.safetensors): its expected
//                     outputs with a profile, with everything an outputs file holds, and "unsupported"
//
//   ringkv_fuzz_seeds GOLDEN_DIR CORPUS_DIR
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "golden/golden.hpp"
#include "protocol.hpp"
#include "support/config_json.hpp"

namespace {

using namespace ringkv::abi::wire;

void message(Writer& stream, Op op, Writer& payload) {
  Header h;
  h.code = static_cast<uint32_t>(op);
  h.length = payload.bytes().size();
  stream.put(h);
  stream.put_array(payload.bytes().data(), payload.bytes().size());
}

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  ringkv::golden::write_file_bytes(path, bytes);
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}

// A session on `config`: hello, create, info, a step of `tokens` tokens per sequence, cache_bytes,
// snapshot of the first positions of layer 0, reset, poison, destroy.
std::vector<uint8_t> session(const ringkv::Config& config, int64_t tokens, bool int8) {
  const auto L = static_cast<uint32_t>(config.layers.size()), Hq = static_cast<uint32_t>(config.num_q_heads),
             Hkv = static_cast<uint32_t>(config.num_kv_heads), D = static_cast<uint32_t>(config.head_dim),
             B = static_cast<uint32_t>(config.batch);
  Writer s, p;
  message(s, Op::hello, p);
  p = {};
  p.put(L), p.put(Hq), p.put(Hkv), p.put(D), p.put(B);
  nlohmann::json j = ringkv::conformance::config_to_json(config);
  j["window_convention"] = "w";
  j["qk_rotated"] = false;
  p.put_string(j.dump());
  message(s, Op::create, p);
  const uint64_t handle = 1;
  p = {};
  p.put(handle);
  message(s, Op::info, p);
  p = {};
  p.put(handle), p.put(uint32_t{0}), p.put(B);
  for (uint32_t b = 0; b < B; ++b) p.put(static_cast<int32_t>(b)), p.put(tokens);
  for (uint32_t b = 0; b < B; ++b) {
    const size_t qn = size_t{L} * tokens * Hq * D, kvn = size_t{L} * tokens * Hkv * D;
    for (size_t i = 0; i < qn + 2 * kvn; ++i) p.put(static_cast<float>(i % 7) * 0.25f - 0.5f);
  }
  message(s, Op::step, p);
  p = {};
  p.put(handle);
  message(s, Op::cache_bytes, p);
  p = {};
  p.put(handle), p.put(int32_t{0}), p.put(int32_t{0}), p.put(uint32_t{2}), p.put(uint32_t{1}), p.put(uint32_t{1});
  p.put(uint32_t{int8}), p.put(uint32_t{int8}), p.put(int64_t{0}), p.put(int64_t{1});
  message(s, Op::snapshot, p);
  p = {};
  p.put(handle), p.put(int32_t{0}), p.put(int64_t{5});
  message(s, Op::reset, p);
  p = {};
  p.put(handle);
  message(s, Op::poison, p);
  p = {};
  p.put(handle);
  message(s, Op::destroy, p);
  return s.bytes();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s GOLDEN_DIR CORPUS_DIR\n", argv[0]);
    return 2;
  }
  using namespace ringkv::golden;
  const std::string golden = argv[1], corpus = argv[2];
  std::filesystem::create_directories(corpus + "/worker_protocol");
  std::filesystem::create_directories(corpus + "/golden_outputs");
  const GoldenCase small = read_golden(golden + "/cases/window_1.safetensors");
  write(corpus + "/worker_protocol/session_window_1", session(small.c.config, 2, false));
  const GoldenCase int8 = read_golden(golden + "/cases/int8_per_head.safetensors");
  write(corpus + "/worker_protocol/session_int8_per_head", session(int8.c.config, 1, true));

  const std::string out = corpus + "/golden_outputs/";
  write_golden_outputs(out + "expected_with_profile", small, small.expected, "fuzz-seed", ringkv::PrecisionProfile{});
  GoldenOutputs all;
  all.out = small.expected;
  all.q_rot = small.q;  // shapes of rotated q and k; the values need not be right for a seed
  all.k_rot = small.k;
  all.k_stored = small.k_stored;
  all.v_stored = small.v_stored;
  write_golden_outputs(out + "everything", small, all);
  GoldenOutputs unsupported;
  unsupported.unsupported = "W = 1 is not supported (fuzz seed)";
  write_golden_outputs(out + "unsupported", small, unsupported);
  return 0;
}
