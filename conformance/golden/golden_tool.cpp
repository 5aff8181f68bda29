// ringkv_golden_tool: writes and verifies the committed golden set (golden/).
//   ringkv_golden_tool generate DIR   writes DIR/cases/*.safetensors and DIR/manifest.json
//   ringkv_golden_tool verify DIR     checks hashes against the manifest and bytes against a regeneration
//   ringkv_golden_tool bounds CASE OUT [PROFILE_JSON]
//                                     writes the bound of every output of CASE (tensor "bound", F64, the
//                                     layout of "expected") under a profile (default: the reference's, f32)
//   ringkv_golden_tool check-outputs CASE OUTPUTS [PROFILE_JSON]
//                                     compares an outputs file (file-exchange mode) with the case; exit 1 on failure
// The logic lives in the library (golden/golden.hpp); `ringkv golden generate|verify` is the same.
#include <cstdio>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "golden/golden.hpp"
#include "support/config_json.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: ringkv_golden_tool generate DIR   write DIR/cases/*.safetensors and DIR/manifest.json\n"
               "       ringkv_golden_tool verify DIR     check DIR against its manifest and a fresh regeneration\n"
               "       ringkv_golden_tool bounds CASE.safetensors OUT.safetensors [PROFILE_JSON]\n"
               "                                         write the bound of every output under a precision profile\n"
               "       ringkv_golden_tool check-outputs CASE.safetensors OUTPUTS.safetensors [PROFILE_JSON]\n"
               "                                         compare an engine's outputs file with the case\n");
  return 2;
}

// The reference engine's profile for a case: f32 throughout, storage as configured, f64 RoPE.
ringkv::PrecisionProfile reference_profile(const ringkv::golden::GoldenCase& g) {
  ringkv::PrecisionProfile p;
  p.k_storage = ringkv::parse_precision(ringkv::to_string(g.c.config.k_format.dtype));
  p.v_storage = ringkv::parse_precision(ringkv::to_string(g.c.config.v_format.dtype));
  return p;
}

size_t g_total = 0;
void progress(const std::string& name, size_t bytes) {
  g_total += bytes;
  std::fprintf(stderr, "  %-28s %9zu bytes\n", name.c_str(), bytes);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string cmd = argv[1], dir = argv[2];
  try {
    if (cmd == "bounds" && (argc == 4 || argc == 5)) {
      using namespace ringkv::golden;
      const GoldenCase g = read_golden(argv[2]);
      ringkv::PrecisionProfile profile = reference_profile(g);
      if (argc == 5) profile = ringkv::conformance::profile_from_json(nlohmann::json::parse(argv[4]));
      StFile f;
      f.metadata["profile"] = ringkv::conformance::profile_to_json(profile).dump();
      f.metadata["id"] = g.id();
      const ringkv::Config& c = g.c.config;
      f.tensors["bound"] = make_tensor({g.layers(), g.num_rows(), c.num_q_heads, c.head_dim}, golden_bounds(g, profile));
      write_safetensors(argv[3], f);
      return 0;
    }
    if (cmd == "check-outputs" && (argc == 4 || argc == 5)) {
      using namespace ringkv::golden;
      const GoldenCase g = read_golden(argv[2]);
      ringkv::PrecisionProfile profile = reference_profile(g);
      if (argc == 5) {
        profile = ringkv::conformance::profile_from_json(nlohmann::json::parse(argv[4]));
      } else if (const auto declared = read_golden_outputs(argv[3], g).profile) {
        profile = *declared;  // the profile the outputs file declares
      }
      const GoldenOutcome r = check_golden_outputs(g, argv[3], profile);
      std::printf("%s: %s, %lld outputs, worst %.3g of the bound%s%s\n", g.name.c_str(), r.passed ? "passed" : "FAILED",
                  static_cast<long long>(r.outputs_checked), r.worst_ratio, r.failure.empty() ? "" : "\n  ",
                  r.failure.c_str());
      return r.passed ? 0 : 1;
    }
    if (argc != 3) return usage();
    if (cmd == "generate") {
      ringkv::golden::generate_golden_set(dir, progress);
      std::printf("wrote %zu cases, %zu bytes, and %s/manifest.json\n", ringkv::golden::golden_set().size(), g_total,
                  dir.c_str());
      return 0;
    }
    if (cmd == "verify") {
      const std::vector<std::string> problems = ringkv::golden::verify_golden_set(dir);
      for (const std::string& p : problems) std::printf("PROBLEM: %s\n", p.c_str());
      std::printf("%s: %s\n", dir.c_str(), problems.empty() ? "OK (hashes match the manifest and a fresh regeneration)"
                                                            : "FAILED");
      return problems.empty() ? 0 : 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringkv_golden_tool: %s\n", e.what());
    return 1;
  }
  return usage();
}
