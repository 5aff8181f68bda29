// ringkv: the command-line tool.
//
//   ringkv check [--engine reference|cuda|cuda-cublas|cuda-plan|cuda-plan-cublas|cuda-sim[@SMS]|cuda-sim-cublas[@SMS]|PATH.so] [--golden DIR] [--properties [--cases N]] ...
//   ringkv check --outputs DIR [--profile NAME|FILE] (engines that wrote their outputs to files)
//   ringkv golden generate [--out DIR] [--random N | --scale TIER] | verify [DIR] | describe CASE | list [--capabilities FILE] | matrix
//   ringkv check --shard I/N --json SHARD.json ...; ringkv report merge SHARD.json... [--json] [--junit] [--html]
//   ringkv memory --layers L --kv-heads H --head-dim D --dtype f16 [--window W] ...
//
// Exit codes: 0 all passed, 1 a check failed, 2 bad arguments or unreadable input.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "golden/coverage.hpp"
#include "golden/pairs.hpp"
#include "golden/golden.hpp"
#include "golden/scale_golden.hpp"
#include "support/capabilities.hpp"
#include "memory.hpp"
#include "report_merge.hpp"
#include "ringkv/error.hpp"
#include "support/config_json.hpp"
#include "support/data_dir.hpp"
#include "support/profiles.hpp"

#ifndef RINGKV_DEFAULT_GOLDEN_DIR
#define RINGKV_DEFAULT_GOLDEN_DIR "golden"
#endif

namespace {

using namespace ringkv;
using namespace ringkv::cli;

// "a, b, c" for a help text.
std::string names_of(const std::vector<std::string>& names) {
  std::string r;
  for (const std::string& n : names) r += (r.empty() ? "" : ", ") + n;
  return r;
}

DType parse_dtype(const std::string& s) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8}) {
    if (s == to_string(d)) return d;
  }
  throw CLI::ValidationError("--dtype", "\"" + s + "\" is not one of f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringkv: the reference and conformance suite for sliding-window attention with a ring KV cache.\n"
               "With no subcommand it runs `ringkv check`: every built-in engine against the committed goldens."};
  app.require_subcommand(0, 1);

  // ---- check ----
  // The golden set: share/ringkv/golden of an installed tree, else the source tree's golden/.
  const std::string default_golden_dir = conformance::data_dir("golden", RINGKV_DEFAULT_GOLDEN_DIR);
  CheckOptions chk;
  chk.golden_dir = default_golden_dir;
  CLI::App* check = app.add_subcommand("check", "Check an engine against the golden cases (and, with --properties, the "
                                                "RapidCheck properties with shrinking)");
  check->add_option("--engine", chk.engines,
                    "Engine to check: 'reference', 'cuda' (fused decode), 'cuda-cublas' (cuBLAS path), 'cuda-plan' and "
                    "'cuda-plan-cublas' (the CUDA engine's launch plan run on the CPU), 'cuda-sim' and 'cuda-sim-cublas' "
                    "(the CUDA kernels' own source run on the CPU with race, barrier and bounds checks; "
                    "'cuda-sim@114' plans splits for 114 SMs instead of 132), or the path of a plugin "
                    "shared library (C ABI, docs/engine-abi.md). Repeatable. Default: every built-in engine; the "
                    "CUDA ones are listed as skipped where no device is present");
  check->add_option("--golden", chk.golden_dir, "Folder holding manifest.json and cases/ (default: the committed set)");
  check->add_flag("--properties", chk.properties, "Also run the 13 RapidCheck properties against the engine");
  check->add_flag("--no-golden", chk.no_golden, "With --properties or --scale: no golden cases");
  check->add_option("--scale", chk.scale,
                    "Also run the production-shape cases of this tier (ci, host, gpu, gpu-long; docs/scale.md), "
                    "generated here and judged by the oracle on sampled rows");
  check->add_option("--cases", chk.cases, "Cases per property with --properties (default 100)")->check(CLI::Range(1, 1000000));
  check->add_option("--seed", chk.seed, "RapidCheck seed for --properties (default 1; a failure prints it)");
  check->add_option("--shrink-time", chk.shrink_time,
                    "With --properties: seconds each failing property may spend shrinking its counterexample "
                    "(default 60; 0 = no shrinking, report the first failing case; 'inf' or any large number = "
                    "shrink to the end). When the budget runs out, the smallest failing case found so far is "
                    "reported, marked NOT FULLY SHRUNK, with a --replay line that runs exactly that case");
  check->add_option("--replay", chk.replay,
                    "Run exactly one property case: a replay token from a report (PROPERTY:seed=N:case=N:size=N:"
                    "shrink=...), the first failing case or a shrunk one. Implies --properties");
  check->add_option("--filter", chk.filter, "Only golden cases (name, id or class) and properties matching this regex");
  check->add_option("--exclude", chk.exclude, "Skip golden cases and properties matching this regex");
  check->add_option("--xfail", chk.xfail_file,
                    "File of regexes (one per line, # comments) naming cases expected to fail: they are reported as "
                    "xfail, and an unexpected pass fails the run");
  check->add_option("--require-classes", chk.require_classes,
                    "Fail if a boundary class matching this regex was not judged (no case carrying it compared). "
                    "Default, for runs without --filter/--exclude: the structural classes within each engine's "
                    "capabilities (docs/golden-format.md §10)");
  check->add_option("--capabilities", chk.capabilities_file,
                    "With --outputs: the external engine's capabilities file (default: capabilities.json in the "
                    "outputs folder, if there); cases outside it need no outputs file (docs/golden-format.md §10)");
  check->add_option("--outputs", chk.outputs_dir,
                    "Check outputs an external engine wrote (one <case>.safetensors per golden case, "
                    "docs/golden-format.md) instead of running an engine");
  check->add_option("--profile", chk.profile_file,
                    "With --outputs: the external engine's precision profile, a name from profiles/ (" +
                        names_of(conformance::named_profiles(conformance::default_profiles_dir())) +
                        ") or a profile JSON file, with optional per-class overrides (default: f32 everywhere, "
                        "storage as configured, f64 RoPE angles; docs/golden-format.md §5)");
  check->add_option("--timeout-ms", chk.timeout_ms,
                    "Plugins: per-call timeout in milliseconds, loading included (default 60000)");
  check->add_option("--memory-limit", chk.memory_limit_mib,
                    "Plugins: the worker's address-space limit in MiB (RLIMIT_AS), so that a runaway allocation is "
                    "reported as out of memory (default 0: none; ASan builds and CUDA engines need it off)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  check->add_option("--leak-limit", chk.leak_limit_mib,
                    "Plugins: growth of the worker's resident memory over a case, beyond the caches the engines "
                    "declare (cache_bytes), that fails the case, in MiB (default 256; 0: none). Beyond 8 MiB it is "
                    "a warning")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  check->add_option("--junit", chk.junit_file, "Write a JUnit XML report");
  check->add_option("--json", chk.json_file, "Write a JSON report");
  check->add_flag("--quiet", chk.quiet, "No progress on stderr");
  check->add_flag("--table,--verbose,-v", chk.table,
                  "Also print, before the report, each engine's table per boundary class (passed, failed, xfail, "
                  "skipped, error, worst error / tolerance, coverage), each case's RoPE verdict and every "
                  "property's line. Default: the failures with their reproduce lines, then a verdict per engine");
  chk.jobs = default_jobs();
  check->add_option("--jobs,-j", chk.jobs,
                    "Parallel workers for golden cases and property shards (default: the number of cores, " +
                        std::to_string(chk.jobs) +
                        " here; 1 to 1024). The report is the same for any number. Each property runs in a process "
                        "of its own, each worker opens its own instance of a plugin; the CUDA engines share the "
                        "device and run one case or property at a time; --replay runs one job. A shrink's "
                        "--shrink-time is per property: more jobs than cores leave each less CPU within it");
  check->add_option("--html", chk.html_file,
                    "Write the report as one self-contained HTML page: the verdict, the failures with their reproduce "
                    "lines, each engine's counts and the engines x boundary classes coverage matrix");
  check->add_option("--shard", chk.shard,
                    "Run only the I-th of N disjoint parts of the work (golden cases and properties, balanced by "
                    "estimated cost), I from 1 to N; `ringkv report merge` makes the unsharded report of the N "
                    "JSON reports. Without it, the index and count runners set are read: GTEST_SHARD_INDEX/"
                    "GTEST_TOTAL_SHARDS, JOB_COMPLETION_INDEX (with --shard-count or RINGKV_SHARD_COUNT), "
                    "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, CI_NODE_INDEX/CI_NODE_TOTAL, BUILDKITE_PARALLEL_JOB/"
                    "BUILDKITE_PARALLEL_JOB_COUNT, in this order (docs/fleet.md); --shard 1/1 runs everything");
  check->add_option("--shard-count", chk.shard_count,
                    "The number of shards where the runner gives only an index (a Kubernetes Indexed Job's "
                    "JOB_COMPLETION_INDEX: its completions)");
  check->add_option("--property-shard", chk.property_shard,
                    "Internal (--jobs): run this one property on the one --engine, print its outcome as JSON")
      ->group("");

  // ---- golden ----
  CLI::App* golden_cmd = app.add_subcommand("golden", "Generate, verify or describe the golden cases");
  golden_cmd->require_subcommand(1);
  std::string gen_out = default_golden_dir, verify_dir = default_golden_dir, describe_case;
  CLI::App* gen = golden_cmd->add_subcommand("generate", "Regenerate every golden case (byte-for-byte on the same toolchain)");
  gen->add_option("--out", gen_out, "Output folder (default: the committed golden/)");
  int gen_random = 0;
  uint64_t gen_seed = 1;
  std::string gen_caps;
  gen->add_option("--random", gen_random,
                  "Instead of the committed set: N random cases from the property generators, for engines reached "
                  "through files (names random_<seed>_<i>)")
      ->check(CLI::Range(1, 100000));
  gen->add_option("--seed", gen_seed, "With --random: the seed (default 1; the manifest records it)");
  gen->add_option("--capabilities", gen_caps, "With --random: keep the cases within this capabilities file "
                                              "(docs/golden-format.md §10)");
  std::string gen_scale, gen_filter;
  gen->add_option("--scale", gen_scale,
                  "Instead of the committed set: the cases of a scale tier (ci, host, gpu, gpu-long) in golden format, "
                  "inputs only, for engines reached through files (names scale_<tier>_<shape>; judge them with "
                  "`ringkv check --outputs DIR --scale TIER`, docs/scale.md)");
  gen->add_option("--filter", gen_filter, "With --scale: only the cases whose name (scale/<tier>/<shape>) or id matches "
                                          "this regex (the manifest records it)");
  CLI::App* ver = golden_cmd->add_subcommand("verify", "Check the manifest's hashes and regenerate every case in memory");
  ver->add_option("dir", verify_dir, "Golden folder (default: the committed golden/)");
  CLI::App* des = golden_cmd->add_subcommand("describe", "Print a case's config, schedule and classes");
  des->add_option("case", describe_case, "Case name (as in manifest.json) or path of a .safetensors file")->required();
  des->add_option("--golden", verify_dir, "Golden folder (default: the committed golden/)");
  std::string list_caps, list_level;
  CLI::App* lst = golden_cmd->add_subcommand("list", "List the cases with their level and features, or those an "
                                                     "engine with given capabilities should run");
  lst->add_option("--golden", verify_dir, "Golden folder (default: the committed golden/)");
  lst->add_option("--capabilities", list_caps, "Capabilities file (docs/golden-format.md §10): only the cases within it");
  lst->add_option("--level", list_level, "Only cases of this level: core or feature");
  CLI::App* mat = golden_cmd->add_subcommand("matrix", "Print the coverage matrix of docs/golden-format.md "
                                                       "(cases per class for typical capability sets)");
  int pairs_min = 2;
  CLI::App* prs = golden_cmd->add_subcommand("pairs", "Print the pairwise coverage of the feature axes of docs/golden-format.md "
                                                      "(value pairs held by too few cases of a golden set's manifest)");
  prs->add_option("--golden", verify_dir, "Golden folder (default: the committed golden/)");
  prs->add_option("--min-cases", pairs_min, "Cases a value pair needs (default 2)")->check(CLI::Range(1, 1000));

  // ---- report merge ----
  CLI::App* report_cmd = app.add_subcommand("report", "Work with JSON reports of `ringkv check`");
  report_cmd->require_subcommand(1);
  MergeOptions merge_opt;
  CLI::App* merge = report_cmd->add_subcommand(
      "merge", "Merge the JSON reports of `ringkv check --shard I/N` (every I from 1 to N) into the report, exit code "
               "and coverage verdict of the unsharded run; shards missing, given twice or of another run are an error");
  merge->add_option("shards", merge_opt.shards, "The shards' JSON reports")->required();
  merge->add_option("--json", merge_opt.json_file, "Write the merged JSON report");
  merge->add_option("--junit", merge_opt.junit_file, "Write the merged JUnit XML report");
  merge->add_option("--html", merge_opt.html_file, "Write the merged report as one self-contained HTML page");
  merge->add_flag("--table,--verbose,-v", merge_opt.table, "The text report with each engine's table per boundary class, as `ringkv check --table`");

  // ---- memory ----
  MemoryQuery mem;
  std::string mem_dtype = "f16", mem_scheme = "per_head";
  CLI::App* memory = app.add_subcommand("memory", "The KV-cache memory formula: full cache against ring cache");
  memory->add_option("--layers", mem.layers, "Layers")->required()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  memory->add_option("--kv-heads", mem.kv_heads, "KV heads")->required()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  memory->add_option("--q-heads", mem.q_heads, "Query heads: also show the MHA cache (kv heads = q heads)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  memory->add_option("--head-dim", mem.head_dim, "Head dim")->required()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  memory->add_option("--dtype", mem_dtype, "KV dtype: f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8 (default f16)");
  memory->add_option("--int8-scheme", mem_scheme, "With --dtype int8: per_head, q8_0 or static (default per_head)");
  memory->add_option("--window", mem.window, "Sliding window W (adds the ring cache column)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  memory->add_option("--sinks", mem.sinks, "Sink tokens S")->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  memory->add_option("--rollback-reserve", mem.rollback_reserve,
                     "Rollback reserve Q (spec 1.1): ring slots beyond S + W for rolled-back draft tokens")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  memory->add_option("--context", mem.contexts, "Context lengths (repeatable; default 4096 32768 131072)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  memory->add_option("--batch", mem.batch, "Sequences")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  try {
    if (memory->parsed()) {
      mem.dtype = parse_dtype(mem_dtype);
      if (mem_scheme == "per_head") mem.int8_scheme = Int8Scheme::per_head;
      else if (mem_scheme == "q8_0") mem.int8_scheme = Int8Scheme::q8_0;
      else if (mem_scheme == "static") mem.int8_scheme = Int8Scheme::static_tensor;
      else throw CLI::ValidationError("--int8-scheme", "\"" + mem_scheme + "\" is not one of per_head, q8_0, static");
      if (mem.dtype == DType::int8 && mem.int8_scheme == Int8Scheme::q8_0 && mem.head_dim % 32 != 0) {
        throw CLI::ValidationError("--head-dim", "q8_0 needs head_dim divisible by 32");
      }
      std::cout << memory_report(mem);
      return 0;
    }
    if (report_cmd->parsed()) return run_report_merge(merge_opt);
    if (golden_cmd->parsed()) {
      if (gen->parsed()) {
        const auto progress = [](const std::string& name, size_t bytes) {
          std::cerr << "  " << name << " (" << bytes << " bytes)" << std::endl;
        };
        if (!gen_scale.empty()) {
          if (gen_random > 0 || !gen_caps.empty() || gen->count("--seed") > 0) {
            throw InputError("--scale cannot be combined with --random, --seed or --capabilities");
          }
          if (gen_out == default_golden_dir) throw InputError("--scale needs --out: the committed golden/ is not a scale set");
          const std::optional<conformance::ScaleTier> tier = conformance::parse_scale_tier(gen_scale);
          if (!tier) {
            throw InputError("--scale: \"" + gen_scale + "\" is not a tier; the tiers are " + conformance::scale_tier_names());
          }
          golden::generate_scale_golden_set(gen_out, *tier, gen_filter, progress);
          std::cout << "wrote the scale cases of tier " << gen_scale << " to " << gen_out << "\n";
          return 0;
        }
        if (!gen_filter.empty()) throw InputError("--filter needs --scale");
        if (gen_random > 0) {
          if (gen_out == default_golden_dir) throw InputError("--random needs --out: the committed golden/ is not a random set");
          Capabilities caps;
          if (!gen_caps.empty()) {
            try {
              caps = conformance::read_capabilities_file(gen_caps).capabilities;
            } catch (const std::exception& e) {
              throw InputError(std::string("--capabilities: ") + e.what());
            }
          }
          golden::generate_random_golden_set(gen_out, gen_random, gen_seed, caps, progress);
          std::cout << "wrote " << gen_random << " random cases (seed " << gen_seed << ") to " << gen_out << "\n";
          return 0;
        }
        if (!gen_caps.empty() || gen->count("--seed") > 0) throw InputError("--seed and --capabilities need --random");
        golden::generate_golden_set(gen_out, progress);
        std::cout << "wrote the golden set to " << gen_out << "\n";
        return 0;
      }
      if (ver->parsed()) {
        const std::vector<std::string> problems = golden::verify_golden_set(verify_dir);
        for (const std::string& p : problems) std::cout << "MISMATCH " << p << "\n";
        std::cout << (problems.empty() ? "golden set verified: " : "golden set does not verify: ") << verify_dir << "\n";
        return problems.empty() ? 0 : 1;
      }
      if (lst->parsed()) {
        std::cout << list_golden(verify_dir, list_caps, list_level);
        return 0;
      }
      if (mat->parsed()) {
        std::cout << golden::coverage_matrix_markdown(golden::golden_set());
        return 0;
      }
      if (prs->parsed()) {
        std::vector<std::pair<std::string, std::vector<std::string>>> cases;
        for (const golden::ManifestEntry& e : golden::read_manifest(verify_dir)) cases.emplace_back(e.name, e.classes);
        std::cout << golden::pair_gaps_markdown(cases, pairs_min);
        return 0;
      }
      std::cout << describe_golden(verify_dir, describe_case);
      return 0;
    }
    return run_check(chk);
  } catch (const CLI::ValidationError& e) {
    std::cerr << "ringkv: " << e.what() << "\n";
    return 2;
  } catch (const InputError& e) {
    std::cerr << "ringkv: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ringkv: " << e.what() << "\n";
    return 2;
  }
}
