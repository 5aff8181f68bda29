// ringkv_outputs_fixture: writes outputs files (docs/golden-format.md §7) for the CLI tests of
// `ringkv check --outputs`, one per committed case, as an external engine would.
//   ringkv_outputs_fixture GOLDEN_DIR OUT_DIR MODE
// MODE:
//   f16-in-file    outputs rounded to f16, the f16 profile that fits them in each file's metadata
//   f16-no-profile the same outputs, no profile in the files (the default or --profile applies)
//   unsupported    every case of class int8-q8_0 declared unsupported, the others the oracle's outputs
//   missing        the oracle's outputs, but no file for decode_w8
//   rotated        the oracle's outputs with q_rot and k_rot rotated as spec §8 says (f64, rounded once to f32)
//   stored         the oracle's outputs with the spec's stored cache (k_stored, v_stored, codes, scales)
//   stored-bad     the same with one INT8 V code of int8_per_head moved by one outside the tie window
//   core-f32-caps  a capabilities.json declaring spec 1 core with f32 K/V, and the oracle's outputs for
//                  the cases within it only (the others need no file)
//   core-f32-caps-missing  the same without the file of the first case within the capabilities
//   unsupported-needles    every case of class needle-W+1 declared unsupported, the others the oracle's
//   engine:NAME    an engine of conformance/mutants (a control), or the reference, run on every case within
//                  its capabilities, with its profile in each file and its capabilities in capabilities.json
//                  (GOLDEN_DIR may be a scale set, `ringkv golden generate --scale`: its inputs replayed)
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/golden.hpp"
#include "golden/replay.hpp"
#include "mutants/mutants.hpp"
#include "ringkv/quant.hpp"
#include "ringkv/reference_engine.hpp"
#include "support/capabilities.hpp"
#include "support/config_json.hpp"
#include "support/oracle.hpp"

namespace {

using namespace ringkv;
using namespace ringkv::golden;

// What a typical f16 engine declares: q, P and output in f16 (golden-format §5).
const char* const kF16Profile =
    R"({"q_dot":"f16","accumulator":"f32","p_before_pv":"f16","output":"f16","rope_angle":"f64"})";

// q or k rotated at each row's true position in f64 and rounded once to f32 (spec §8).
std::vector<float> rotated(const GoldenCase& g, const std::vector<float>& x, int heads) {
  const int D = g.c.config.head_dim;
  std::vector<float> y(x.size());
  std::vector<double> r(static_cast<size_t>(D));
  for (int l = 0; l < g.layers(); ++l) {
    for (int64_t row = 0; row < g.num_rows(); ++row) {
      for (int h = 0; h < heads; ++h) {
        const size_t o = (((static_cast<size_t>(l) * g.rows.size()) + static_cast<size_t>(row)) * static_cast<size_t>(heads) +
                          static_cast<size_t>(h)) * static_cast<size_t>(D);
        conformance::oracle_rope(g.c.config.layers[static_cast<size_t>(l)].rope, D, g.rows[static_cast<size_t>(row)].position,
                                 x.data() + o, r.data());
        for (int d = 0; d < D; ++d) y[o + static_cast<size_t>(d)] = static_cast<float>(r[static_cast<size_t>(d)]);
      }
    }
  }
  return y;
}

bool has_class(const GoldenCase& g, const std::string& c) {
  for (const std::string& x : g.classes) {
    if (x == c) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: ringkv_outputs_fixture GOLDEN_DIR OUT_DIR MODE\n");
    return 2;
  }
  const std::string dir = argv[1], out = argv[2], mode = argv[3];
  try {
    std::filesystem::remove_all(out);
    std::filesystem::create_directories(out);
    const bool core_caps = mode == "core-f32-caps" || mode == "core-f32-caps-missing";
    const Capabilities core = conformance::core_capabilities({DType::f32});
    if (core_caps) {
      std::ofstream(out + "/capabilities.json")
          << R"({"format": "ringkv-capabilities", "name": "fixture-core-f32", "level": "core", "k_dtypes": ["f32"], "v_dtypes": ["f32"]})"
          << "\n";
    }
    bool dropped = false;
    std::optional<EngineFactory> engine;
    if (mode.rfind("engine:", 0) == 0) {
      for (const conformance::MutantInfo& m : conformance::all_mutants()) {
        if (mode.substr(7) == m.name) engine = m.factory;
      }
      if (mode == "engine:reference") engine = reference_engine_factory();
      if (!engine) throw std::runtime_error("no engine " + mode.substr(7) + " in conformance/mutants");
      nlohmann::json caps = conformance::capabilities_to_json(engine->capabilities);
      caps["name"] = mode.substr(7);
      std::ofstream(out + "/capabilities.json") << caps.dump(2) << "\n";
    }
    for (const ManifestEntry& e : read_manifest(dir)) {
      const GoldenCase g = read_golden(dir + "/" + e.file);
      GoldenOutputs o;
      o.engine = "outputs-fixture " + mode;
      o.out = g.expected;
      o.refused_steps = g.refused_steps();  // golden format 2: a correct engine refuses these steps
      if (mode == "f16-in-file" || mode == "f16-no-profile") {
        for (float& x : o.out) x = round_to_f16(x);
        if (mode == "f16-in-file") o.profile = conformance::profile_from_json(nlohmann::json::parse(kF16Profile));
      } else if (mode == "unsupported") {
        if (has_class(g, "int8-q8_0")) {
          o.out.clear();
          o.unsupported = "no q8_0 KV cache in this engine";
        }
      } else if (mode == "missing") {
        if (g.name == "decode_w8") continue;
      } else if (engine) {
        if (!conformance::capability_gap(engine->capabilities, g.c).empty()) continue;
        const std::unique_ptr<Engine> run = engine->create(g.c.config);
        o.out = replay_outputs(*run, g, &o.refused_steps);
        o.profile = run->info().precision;
      } else if (core_caps) {
        if (!conformance::capability_gap(core, g.c).empty()) continue;
        if (mode == "core-f32-caps-missing" && !dropped) {
          dropped = true;
          std::printf("no outputs file for %s\n", g.name.c_str());
          continue;
        }
      } else if (mode == "unsupported-needles") {
        if (has_class(g, "needle-W+1")) {
          o.out.clear();
          o.unsupported = "no needles in this engine";
        }
      } else if (mode == "rotated") {
        o.q_rot = rotated(g, g.q, g.c.config.num_q_heads);
        o.k_rot = rotated(g, g.k, g.c.config.num_kv_heads);
      } else if (mode == "stored" || mode == "stored-bad") {
        o.k_stored = g.k_stored;
        o.v_stored = g.v_stored;
        if (mode == "stored-bad" && g.name == "int8_per_head") {
          size_t i = 0;
          while (g.v_stored.tie[i] != 0 || g.v_stored.codes[i] == 127) ++i;
          o.v_stored->codes[i] = static_cast<int8_t>(o.v_stored->codes[i] + 1);
        }
      } else {
        std::fprintf(stderr, "ringkv_outputs_fixture: unknown MODE \"%s\"\n", mode.c_str());
        return 2;
      }
      write_golden_outputs(out + "/" + g.name + ".safetensors", g, o);
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "ringkv_outputs_fixture: %s\n", ex.what());
    return 1;
  }
  return 0;
}
