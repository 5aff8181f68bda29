#include "check.hpp"
#include "check_run.hpp"

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "coverage_verdict.hpp"
#include "golden/coverage.hpp"
#include "golden/golden.hpp"
#include "jobs.hpp"
#include "property_runner.hpp"
#include "scale_run.hpp"
#include "golden/scale_golden.hpp"
#include "shard.hpp"
#include "golden/sha256.hpp"
#include "junit_report.hpp"
#include "html_report.hpp"
#include "ringkv/cuda_engine.hpp"
#include "ringkv/reference_engine.hpp"
#ifdef RINGKV_HAVE_CUDA_SIM
#include "sim_backend.hpp"
#endif
#include "support/capabilities.hpp"
#include "support/config_json.hpp"
#include "support/profiles.hpp"
#ifdef RINGKV_HAVE_ABI
#include "plugin_declaration.hpp"
#include "plugin_engine.hpp"
#endif

namespace ringkv::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using golden::ManifestEntry;

std::vector<ManifestEntry> read_manifest(const std::string& dir) {
  if (!fs::exists(fs::path(dir) / "manifest.json")) {
    throw InputError("no golden set at " + dir + ": " + (fs::path(dir) / "manifest.json").string() +
                     " does not exist (regenerate it with `ringkv golden generate --out " + dir + "`)");
  }
  std::vector<ManifestEntry> m;
  try {
    m = golden::read_manifest(dir);
  } catch (const std::exception& e) {
    throw InputError(e.what());
  }
  for (ManifestEntry& e : m) {
    if (fs::path(e.file).is_relative()) e.file = fs::absolute(fs::path(dir) / e.file).string();
  }
  return m;
}

std::vector<std::regex> read_xfail(const std::string& file) {
  std::vector<std::regex> out;
  if (file.empty()) return out;
  std::ifstream in(file);
  if (!in) throw InputError("--xfail " + file + ": cannot open the file");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line = line.substr(0, hash);
    line.erase(0, line.find_first_not_of(" \t"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (line.empty()) continue;
    try {
      out.emplace_back(line);
    } catch (const std::regex_error& e) {
      throw InputError("--xfail " + file + ":" + std::to_string(n) + ": bad regex \"" + line + "\": " + e.what());
    }
  }
  return out;
}

std::regex make_regex(const std::string& text, const char* option) {
  try {
    return std::regex(text);
  } catch (const std::regex_error& e) {
    throw InputError(std::string(option) + " \"" + text + "\": bad regex: " + e.what());
  }
}

// The CUDA engines share the one device: their cases and properties run one at a time (--jobs).
bool shares_device(const EngineUnderTest& eng) { return eng.label == "cuda" || eng.label == "cuda-cublas"; }

// What one engine was judged on: the coverage of its classes from its cases, and the verdict.
EngineCoverage engine_coverage(const Capabilities& caps, const std::vector<golden::CaseCoverageInput>& cases,
                               const std::optional<std::regex>& required, bool require_default) {
  return coverage_verdict(golden::class_coverage(caps, cases), required, require_default);
}

// The built-in engines by name: the reference, the CUDA engine's plan on the host, and the CUDA engines.
const char* const kBuiltinEngines[] = {"reference", "cuda-plan", "cuda-plan-cublas", "cuda", "cuda-cublas"};

EngineFactory builtin_factory(const std::string& name) {
  if (name == "reference") return reference_engine_factory();
  if (name == "cuda-plan") return cuda::plan_engine_factory();
  if (name == "cuda-plan-cublas") return cuda::plan_cublas_engine_factory();
  if (name == "cuda") return cuda::cuda_engine_factory();
  return cuda::cublas_engine_factory();
}

// cuda-sim and cuda-sim-cublas (docs/cuda-sim.md): the CUDA kernels' own source on the CPU, with
// the split plan of an H200's 132 SMs, or of N SMs as cuda-sim@N. Not in the default engine list
// (the main job): their own ctest label, cuda-sim, runs them in CI.
bool is_sim_engine(const std::string& label) { return label.starts_with("cuda-sim"); }

std::optional<EngineFactory> sim_factory(const std::string& spec) {
  const size_t at = spec.find('@');
  const std::string name = spec.substr(0, at);
  if (name != "cuda-sim" && name != "cuda-sim-cublas") return std::nullopt;
  int sms = 132;
  if (at != std::string::npos) {
    const std::string n = spec.substr(at + 1);
    if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1) {
      throw InputError("--engine " + spec + ": the SM count after '@' must be a number from 1 to 9999");
    }
    sms = std::stoi(n);
  }
#ifdef RINGKV_HAVE_CUDA_SIM
  EngineFactory f = name == "cuda-sim" ? cuda::sim_engine_factory(sms) : cuda::sim_cublas_engine_factory(sms);
  if (at != std::string::npos) f.name = spec;
  return f;
#else
  (void)sms;
  throw InputError("--engine " + spec + ": this ringkv was built without cuda-sim (RINGKV_CUDA_SIM=OFF)");
#endif
}

EngineUnderTest make_engine(const std::string& spec, const CheckOptions& opt) {
  if (std::optional<EngineFactory> f = sim_factory(spec)) return {spec, *f, false, {}, false, {}, false};
  for (const char* name : kBuiltinEngines) {
    if (spec != name) continue;
    if ((spec == "cuda" || spec == "cuda-cublas") && !cuda::cuda_unavailable_reason().empty()) {
      throw InputError("--engine " + spec + ": " + cuda::cuda_unavailable_reason());
    }
    return {spec, builtin_factory(spec), false, {}, false, {}, false};
  }
  if (spec.find('/') != std::string::npos || spec.ends_with(".so")) {
#ifdef RINGKV_HAVE_ABI
    abi::PluginOptions po;
    po.timeout_ms = opt.timeout_ms;
    po.memory_limit_mib = opt.memory_limit_mib;
    po.startup_timeout_ms = opt.timeout_ms;  // loading too: a plugin that hangs in it is killed after --timeout-ms
    po.leak_limit_mib = opt.leak_limit_mib;
    const std::shared_ptr<abi::Plugin> plugin = abi::Plugin::open(spec, po);
    EngineUnderTest e{spec, abi::plugin_engine_factory(plugin), false, {}, plugin->raw_capabilities().wants_rotated_qk != 0, {}, true};
    e.plugin = plugin;
    return e;
#else
    (void)opt;
    throw InputError("--engine " + spec + ": this ringkv was built without plugin support");
#endif
  }
  throw InputError("--engine \"" + spec +
                   "\": must be reference, cuda, cuda-cublas, cuda-plan, cuda-plan-cublas, cuda-sim[@SMS], "
                   "cuda-sim-cublas[@SMS], or the path of a plugin .so");
}

constexpr int kMaxJobs = 1024;

PropertyRunOptions property_options(const CheckOptions& opt, const std::string& engine_label) {
  PropertyRunOptions po;
  po.cases = opt.cases;
  po.seed = opt.seed;
  po.filter = opt.filter;
  po.exclude = opt.exclude;
  po.shrink_time = opt.shrink_time;
  po.progress = !opt.quiet;
  po.replay = opt.replay;
  po.command = "ringkv check --engine " + shell_quote(engine_label);
  return po;
}

// `ringkv check --property-shard NAME`: one property on the one engine, its outcome as JSON on stdout.
int run_property_shard(const CheckOptions& opt) {
  if (opt.engines.size() != 1) throw InputError("--property-shard needs exactly one --engine");
  const EngineUnderTest eng = make_engine(opt.engines[0], opt);
  PropertyRunOptions po = property_options(opt, eng.label);
  po.only = opt.property_shard;
#ifdef RINGKV_HAVE_ABI
  abi::CaseWarnings plugin_warnings;  // a plugin's worker that grew beyond its cache (a leak?), per property
  po.take_warnings = [&] { return plugin_warnings.take(); };
#endif
  std::vector<PropertyOutcome> outcomes;
  try {
    outcomes = run_properties(eng.factory, po);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  std::string out;
  for (const PropertyOutcome& o : outcomes) out += outcome_to_json(o) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 2;
}

// Estimated costs, for balancing shards: a golden case grows with its file (~0.01 s per MB on the
// reference), a property with its cases (~0.01 s per case).
double golden_cost(const ManifestEntry& e) { return static_cast<double>(e.bytes) * 1e-8; }
double property_cost(const CheckOptions& opt) { return opt.cases * 1e-2; }

// --shard I/N, else the runner's environment (cli/shard.hpp), else the whole run (1/1).
ShardSpec resolve_shard(const CheckOptions& opt, bool progress) {
  std::optional<ShardSpec> s;
  if (!opt.shard.empty()) {
    s = parse_shard(opt.shard);
  } else if (opt.replay.empty()) {
    s = shard_from_environment([](const char* name) { return std::getenv(name); }, opt.shard_count);
  }
  if (!s) {
    if (opt.shard_count > 0) throw InputError("--shard-count needs JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) set");
    return {};
  }
  if (!opt.replay.empty() && s->count > 1) throw InputError("--shard cannot be combined with --replay (one property case)");
  // Bazel runs a test sharded only when it says it shards: it touches GTEST_SHARD_STATUS_FILE.
  if (const char* status = std::getenv("GTEST_SHARD_STATUS_FILE"); status && *status && s->source.starts_with("GTEST_")) {
    std::ofstream touch(status, std::ios::app);
  }
  if (progress) {
    write_stderr("ringkv check: shard " + std::to_string(s->index) + "/" + std::to_string(s->count) + " (from " + s->source +
                 ")\n");
  }
  return *s;
}

// The shard header of the JSON report: what `ringkv report merge` checks before merging (the same
// options, golden set, engines and work list in every shard) and the work list with each item's shard.
json shard_header(const CheckOptions& opt, const ShardSpec& shard, const std::vector<EngineUnderTest>& engines,
                  const std::vector<WorkItem>& work, bool require_default) {
  json options = {{"cases", opt.cases}, {"seed", opt.seed}, {"shrink_time", opt.shrink_time},
                  {"properties", opt.properties || !opt.replay.empty()}, {"no_golden", opt.no_golden},
                  {"replay", opt.replay}, {"filter", opt.filter}, {"exclude", opt.exclude},
                  {"xfail_sha256", opt.xfail_file.empty() ? "" : golden::sha256_file(opt.xfail_file)},
                  {"require_classes", opt.require_classes}, {"require_default", require_default},
                  {"profile", opt.profile_file}, {"capabilities", opt.capabilities_file}, {"outputs", opt.outputs_dir},
                  {"timeout_ms", opt.timeout_ms}, {"memory_limit_mib", opt.memory_limit_mib},
                  {"leak_limit_mib", opt.leak_limit_mib}, {"scale", opt.scale}};
  json golden_set = {{"dir", opt.no_golden ? "" : opt.golden_dir}, {"manifest_sha256", ""}};
  if (!opt.no_golden) golden_set["manifest_sha256"] = golden::sha256_file((fs::path(opt.golden_dir) / "manifest.json").string());
  json ids = json::array();
  for (const EngineUnderTest& eng : engines) {
    // A built-in engine is this ringkv; a plugin is its file's contents; outputs are their folder.
    const bool builtin = is_sim_engine(eng.label) ||
                         std::find(std::begin(kBuiltinEngines), std::end(kBuiltinEngines), eng.label) != std::end(kBuiltinEngines);
    const std::string id = builtin                  ? "built-in"
                           : eng.external_outputs   ? "outputs"
                           : fs::is_regular_file(eng.label) ? "sha256:" + golden::sha256_file(eng.label)
                                                            : "unreadable";
    ids.push_back({{"engine", eng.label}, {"identity", id}, {"external_outputs", eng.external_outputs}});
  }
  json items = json::array();
  std::string keys;
  for (const WorkItem& w : work) {
    const char* kind = w.entry ? "golden" : w.scale >= 0 ? "scale" : "property";
    items.push_back({{"kind", kind}, {"engine", engines[w.engine].label}, {"name", w.name}, {"cost", w.cost}, {"shard", w.shard}});
    keys += std::string(kind) + "\t" + engines[w.engine].label + "\t" + w.name + "\n";
  }
  json h = {{"index", shard.index}, {"count", shard.count}, {"options", options}, {"golden", golden_set},
            {"engines", ids}, {"work_sha256", golden::sha256_hex(keys)}, {"work", items}};
  h["fingerprint"] = golden::sha256_hex(options.dump() + golden_set.dump() + ids.dump() + h["work_sha256"].get<std::string>());
  return h;
}

// Stage 1, inputs: the options checked, the golden cases selected, the profiles, the required classes.
void read_inputs(CheckRun& run) {
  const CheckOptions& opt = run.opt;
  auto& keep = run.keep;
  auto& drop = run.drop;
  auto& xfails = run.xfails;
  auto& properties = run.properties;
  auto& selected = run.selected;
  auto& set_generator = run.set_generator;
  auto& external_profiles = run.external_profiles;
  auto& required = run.required;
  auto& require_default = run.require_default;
  keep = make_regex(opt.filter.empty() ? ".*" : opt.filter, "--filter");
  drop = make_regex(opt.exclude.empty() ? "$^" : opt.exclude, "--exclude");
  xfails = read_xfail(opt.xfail_file);
  properties = opt.properties || !opt.replay.empty();
  if (opt.no_golden && !properties && opt.scale.empty()) {
    throw InputError("--no-golden needs --properties or --scale: there would be nothing to check");
  }
  if (!opt.scale.empty()) run.scale_cases = select_scale_cases(opt.scale, keep, drop);
  if (!opt.replay.empty()) {
    try {
      replay_property(opt.replay);
    } catch (const std::invalid_argument& e) {
      throw InputError(e.what());
    }
  }
  if (!(opt.shrink_time >= 0)) throw InputError("--shrink-time must be >= 0 seconds");
  if (!opt.no_golden) {
    for (const ManifestEntry& e : read_manifest(opt.golden_dir)) {
      std::string key = e.name + " " + e.id;
      for (const std::string& c : e.classes) key += " " + c;
      if (std::regex_search(key, keep) && !std::regex_search(key, drop)) selected.push_back(e);
    }
    if (selected.empty()) throw InputError("no golden case matches --filter/--exclude in " + opt.golden_dir);
    run.golden_cases = selected.size();
    try {
      set_generator = golden::golden_set_generator(opt.golden_dir);
    } catch (const std::exception& e) {
      throw InputError(e.what());
    }
    if (set_generator.rfind("ringkv golden generate --scale ", 0) == 0) {  // inputs only: judged on sampled rows
      throw InputError("--golden " + opt.golden_dir + " is a set of scale cases (`" + set_generator +
                       "`): they hold no expected outputs; judge an engine's outputs of them with `ringkv check --outputs "
                       "DIR --scale TIER --no-golden` (docs/scale.md)");
    }
  }

  // --profile: a named profile of profiles/ or a profile file; default f32 everywhere, storage as
  // configured, f64 RoPE. Resolved per case from its classes (conformance/support/profiles.hpp).
  if (!opt.profile_file.empty()) {
    try {
      external_profiles = conformance::load_profile_set(opt.profile_file);
    } catch (const std::exception& e) {
      throw InputError(std::string("--profile: ") + e.what());  // the message names the file or profile
    }
  }
  // --require-classes: a regex over class names; without it, runs with --filter/--exclude require
  // nothing, the others the structural classes within each engine's capabilities.
  const bool filtered = !opt.filter.empty() || !opt.exclude.empty();
  if (!opt.require_classes.empty()) required = make_regex(opt.require_classes, "--require-classes");
  require_default = !required && !filtered;
}

// Stage 2, engines: the engines under test, opened (a plugin that cannot be loaded is an error against it).
void open_engines(CheckRun& run) {
  const CheckOptions& opt = run.opt;
  auto& progress = run.progress;
  auto& properties = run.properties;
  auto& selected = run.selected;
  auto& external_profiles = run.external_profiles;
  auto& engines = run.engines;
  auto& unloadable = run.unloadable;
  if (!opt.outputs_dir.empty()) {
    if (!opt.engines.empty() || properties) throw InputError("--outputs cannot be combined with --engine or --properties");
    EngineUnderTest e{"outputs:" + opt.outputs_dir, {}, true, {}, false, {}, false};
    // The engine's capabilities file: --capabilities, else capabilities.json beside its outputs.
    std::string caps_path = opt.capabilities_file;
    if (caps_path.empty() && fs::exists(fs::path(opt.outputs_dir) / "capabilities.json")) {
      caps_path = (fs::path(opt.outputs_dir) / "capabilities.json").string();
    }
    if (!caps_path.empty()) {
      try {
        const conformance::CapabilitiesFile f = conformance::read_capabilities_file(caps_path);
        e.factory.capabilities = f.capabilities;
        e.capabilities_source = caps_path;
        // Profile precedence: the outputs file's own, then --profile, then the capabilities file's.
        if (opt.profile_file.empty() && f.profile) external_profiles = conformance::ProfileSet{f.name, *f.profile, {}};
      } catch (const std::exception& ex) {
        throw InputError(std::string("--capabilities: ") + ex.what());
      }
    }
    engines.push_back(e);
  } else if (opt.engines.empty()) {
    // Every built-in engine; the CUDA engines are listed as skipped, with the reason, where this
    // machine cannot run them (built without CUDA, or no device).
    for (const char* name : kBuiltinEngines) {
      EngineUnderTest e{name, builtin_factory(name), false, {}, false, {}, false};
      if (e.label == "cuda" || e.label == "cuda-cublas") e.unavailable = cuda::cuda_unavailable_reason();
      engines.push_back(e);
    }
  } else {
    for (const std::string& e : opt.engines) {
      try {
        engines.push_back(make_engine(e, opt));
      } catch (const InputError&) {
        throw;
      } catch (const std::exception& ex) {
        // A plugin that cannot be loaded (no table, a NULL function, a hang while loading, another ABI
        // major): an error against that engine, exit code 2 unless something failed; the others run.
        engines.push_back({e, {}, false, ex.what(), false, {}, false});
        unloadable.insert(e);
      }
    }
  }
#ifdef RINGKV_HAVE_ABI
  for (EngineUnderTest& eng : engines) {  // what a plugin's declaration costs, said at load and with its verdict
    if (!eng.plugin) continue;
    eng.declaration_warnings = declaration_warnings(*eng.plugin, opt.golden_dir, selected);
    for (const std::string& w : eng.declaration_warnings) {
      if (progress) write_stderr("WARNING: engine " + eng.label + ": " + w + "\n");
    }
  }
#endif
}

// Stage 3, the work list and this run's shard of it.
void plan_work(CheckRun& run) {
  const CheckOptions& opt = run.opt;
  auto& progress = run.progress;
  auto& properties = run.properties;
  auto& selected = run.selected;
  auto& engines = run.engines;
  auto& jobs = run.jobs;
  auto& shard = run.shard;
  auto& work = run.work;
  // ---- the work list, and this run's part of it (--shard I/N, cli/shard.hpp) ----
  // Every golden case on every engine that runs, then each property of it, with its estimated cost:
  // the unsharded run does all of it, shard I of N the items assign_shards gives it.
  jobs = opt.replay.empty() ? opt.jobs : 1;
  shard = resolve_shard(opt, progress);
  for (size_t i = 0; i < engines.size(); ++i) {
    if (!engines[i].unavailable.empty()) continue;
    for (const ManifestEntry& e : selected) work.push_back({i, &e, e.name, golden_cost(e), 1});
    for (size_t k = 0; k < run.scale_cases.size(); ++k) {  // an engine reached through files: its outputs files
      const conformance::ScaleCase& sc = run.scale_cases[k];
      work.push_back({i, nullptr, sc.name, scale_cost(sc), 1, static_cast<int>(k)});
    }
    if (!properties) continue;
    const std::vector<std::string> names =
        opt.replay.empty() ? property_names(property_options(opt, engines[i].label)) : std::vector<std::string>{replay_property(opt.replay)};
    for (const std::string& name : names) work.push_back({i, nullptr, name, property_cost(opt), 1});
  }
  {
    std::vector<double> costs;
    for (const WorkItem& w : work) costs.push_back(w.cost);
    const std::vector<int> parts = assign_shards(costs, shard.count);
    for (size_t k = 0; k < work.size(); ++k) work[k].shard = parts[k];
  }
}

// Stage 4, goldens and properties: this shard's items on --jobs workers; the results in work-list order.
void run_work(CheckRun& run) {
  const CheckOptions& opt = run.opt;
  auto& progress = run.progress;
  auto& xfails = run.xfails;
  auto& selected = run.selected;
  auto& set_generator = run.set_generator;
  auto& external_profiles = run.external_profiles;
  auto& engines = run.engines;
  auto& jobs = run.jobs;
  auto& shard = run.shard;
  auto& work = run.work;
  auto& results = run.results;
  auto& props = run.props;
  auto& failed = run.failed;
  // ---- the golden cases and the properties, on opt.jobs workers (--jobs) ----
  // One golden case on one engine: its result. `factory` is the job's own instance of the engine.
  const auto run_case = [&](const EngineUnderTest& eng, const EngineFactory& factory, const ManifestEntry& e) {
    CaseResult r;
    r.engine = eng.label;
    r.name = e.name;
    r.id = e.id;
    r.classes = e.classes;
    r.reproduce = "ringkv check " + (eng.external_outputs ? "--outputs " + shell_quote(opt.outputs_dir)
                                                          : "--engine " + shell_quote(eng.label)) +
                  " --golden " + shell_quote(opt.golden_dir) + " --filter " + shell_quote("^" + e.name + " ");
    if (!set_generator.empty()) r.reproduce = set_generator + "\n  then: " + r.reproduce;
    bool expect_fail = false;
    for (const std::regex& x : xfails) expect_fail = expect_fail || std::regex_search(e.name, x) || std::regex_search(e.id, x);
    golden::GoldenOutcome o;
    std::optional<std::string> unusable;  // the golden file cannot be used: its own verdict
    try {
      const golden::GoldenCase g = golden::load_manifest_case(opt.golden_dir, e);
      if (eng.external_outputs) {
        const fs::path out = fs::path(opt.outputs_dir) / (e.name + ".safetensors");
        const std::string gap = eng.capabilities_source.empty() ? "" : conformance::capability_gap(eng.factory.capabilities, g.c);
        if (!fs::exists(out) && !gap.empty()) {
          o.skipped = true;  // outside what the capabilities file declares: not applicable
          o.skip_reason = "outside the capabilities in " + eng.capabilities_source + ": " + gap;
        } else if (!fs::exists(out)) {
          o.passed = false;
          o.failure = "no outputs file " + out.string() +
                      (eng.capabilities_source.empty() ? "" : " (the case is within the capabilities in " + eng.capabilities_source + ")");
        } else {
          o = golden::check_golden_outputs(g, out.string(), conformance::resolve_profile(external_profiles, e.classes));
        }
      } else {
        golden::GoldenCheckOptions check_options;
        check_options.qk_rotated_by_ringkv = eng.qk_rotated_by_ringkv;
#ifdef RINGKV_HAVE_ABI
        abi::CaseWarnings plugin_warnings;  // a plugin's worker that grew beyond its cache (a leak?)
#endif
        o = golden::check_golden(factory, g, check_options);
#ifdef RINGKV_HAVE_ABI
        r.warnings = plugin_warnings.take();
#endif
      }
    } catch (const golden::GoldenInputError& ex) {
      unusable = ex.what();
    } catch (const std::exception& ex) {
      o.passed = false;
      o.skipped = false;
      o.failure = ex.what();
    }
    if (unusable) {
      r.status = CaseResult::Status::error;
      r.detail = *unusable + "; no verdict on the engine (run `ringkv golden verify " + opt.golden_dir + "`)";
      return r;
    }
    r.worst_ratio = o.worst_ratio;
    r.outputs = o.outputs_checked;
    // The profile the outputs were judged under, and whence: the reproduce line carries both.
    if (eng.external_outputs && !opt.profile_file.empty()) r.reproduce += " --profile " + shell_quote(opt.profile_file);
    if (o.profile) {
      r.profile = conformance::profile_to_json(*o.profile).dump();
      r.profile_source = !eng.external_outputs    ? "declared by the engine"
                         : o.profile_from_file     ? "the outputs file's metadata"
                         : opt.profile_file.empty() ? "the default (no --profile)"
                                                    : "--profile " + opt.profile_file;
      r.reproduce += "  # profile " + r.profile + " from " + r.profile_source;
    }
    r.rope = o.rope;
    if (o.skipped) {
      r.status = CaseResult::Status::skipped;
      r.detail = o.skip_reason;
    } else if (o.passed) {
      r.status = expect_fail ? CaseResult::Status::xpass : CaseResult::Status::passed;
      if (expect_fail) r.detail = "passed but is listed in --xfail";
    } else {
      r.status = expect_fail ? CaseResult::Status::xfail : CaseResult::Status::failed;
      r.detail = o.failure;
    }
    return r;
  };
  // The jobs: this run's golden cases and properties. With one job all of them in this process, with
  // more each property in a process of its own (run_property_process). Results are kept by job, so
  // the report's order, and the report, are the same for any number of jobs.
  struct GoldenJob {  // a golden case (entry) or a scale case (scale >= 0)
    size_t engine;
    const ManifestEntry* entry;
    int scale = -1;
  };
  struct PropertyJob {
    size_t engine;
    std::string property;  // "": the --replay token's case
  };
  std::vector<GoldenJob> golden_jobs;
  std::vector<PropertyJob> property_jobs;
  // The order jobs start in: engine by engine (its golden cases, then its properties) with one job;
  // with more, the properties (the longest jobs) first.
  std::vector<std::pair<bool, size_t>> order, property_order;  // (a property job?, its index)
  for (const WorkItem& w : work) {
    if (w.shard != shard.index) continue;
    if (w.entry || w.scale >= 0) {
      order.emplace_back(false, golden_jobs.size());
      golden_jobs.push_back({w.engine, w.entry, w.scale});
      continue;
    }
    (jobs == 1 ? order : property_order).emplace_back(true, property_jobs.size());
    property_jobs.push_back({w.engine, opt.replay.empty() ? w.name : ""});
  }
  order.insert(order.begin(), property_order.begin(), property_order.end());

  results.assign(golden_jobs.size(), CaseResult{});
  std::vector<std::vector<PropertyOutcome>> outcomes(property_jobs.size());
  std::vector<std::map<size_t, EngineFactory>> own_engines(static_cast<size_t>(jobs));  // per worker: its plugins
  std::vector<std::atomic<size_t>> started(engines.size());  // golden cases started, per engine (progress)
  std::mutex device;
  run_jobs(order.size(), jobs, [&](size_t k, int worker) {
    const auto [is_property, i] = order[k];
    const size_t ei = is_property ? property_jobs[i].engine : golden_jobs[i].engine;
    const EngineUnderTest& eng = engines[ei];
    std::unique_lock<std::mutex> device_lock(device, std::defer_lock);
    if (shares_device(eng)) device_lock.lock();
    if (is_property) {
      if (jobs > 1) {
        outcomes[i] = run_property_process(opt, eng.label, property_jobs[i].property);
        return;
      }
      PropertyRunOptions po = property_options(opt, eng.label);
      po.only = property_jobs[i].property;
#ifdef RINGKV_HAVE_ABI
      abi::CaseWarnings plugin_warnings;  // a plugin's worker that grew beyond its cache (a leak?), per property
      po.take_warnings = [&] { return plugin_warnings.take(); };
#endif
      try {
        outcomes[i] = run_properties(eng.factory, po);
      } catch (const std::invalid_argument& e) {
        throw InputError(e.what());
      }
      return;
    }
    const int scale = golden_jobs[i].scale;
    const std::string& name = scale >= 0 ? run.scale_cases[static_cast<size_t>(scale)].name : golden_jobs[i].entry->name;
    if (progress) {
      write_stderr("[" + eng.label + " " + std::to_string(++started[ei]) + "/" +
                   std::to_string(selected.size() + run.scale_cases.size()) + "] " + name + "\n");
    }
    // Worker 0 uses the engine opened above; the others open their own where an engine needs it.
    const EngineFactory* factory = &eng.factory;
    if (worker > 0 && eng.per_job) {
      std::map<size_t, EngineFactory>& own = own_engines[static_cast<size_t>(worker)];
      auto it = own.find(ei);
      if (it == own.end()) it = own.emplace(ei, make_engine(eng.label, opt).factory).first;
      factory = &it->second;
    }
    if (scale < 0) {
      results[i] = run_case(eng, *factory, *golden_jobs[i].entry);
      return;
    }
    const conformance::ScaleCase& sc = run.scale_cases[static_cast<size_t>(scale)];
    CaseResult r =
        eng.external_outputs
            ? run_scale_outputs_item(eng, sc, (fs::path(opt.outputs_dir) / (golden::scale_golden_name(sc) + ".safetensors")).string(),
                                     external_profiles,
                                     "ringkv golden generate --scale " + opt.scale + " --out SCALE_DIR  # the inputs the engine replayed into " +
                                         opt.outputs_dir,
                                     opt)
            : run_scale_item(eng, *factory, sc, opt);
    bool expect_fail = false;
    for (const std::regex& x : xfails) expect_fail = expect_fail || std::regex_search(r.name, x);
    if (expect_fail && r.status == CaseResult::Status::failed) r.status = CaseResult::Status::xfail;
    if (expect_fail && r.status == CaseResult::Status::passed) {
      r.status = CaseResult::Status::xpass;
      r.detail = "passed but is listed in --xfail";
    }
    results[i] = std::move(r);
  });

  for (const CaseResult& r : results) {
    if (r.status == CaseResult::Status::failed || r.status == CaseResult::Status::xpass) failed = true;
  }
  for (size_t i = 0; i < property_jobs.size(); ++i) {
    for (const PropertyOutcome& p : outcomes[i]) {
      if (!p.passed) failed = true;
      props.emplace_back(engines[property_jobs[i].engine].label, p);
    }
  }
}

// Stage 5, coverage: on which classes each engine was judged, and the reasons the run fails beyond its cases.
void judge_coverage(CheckRun& run) {
  const CheckOptions& opt = run.opt;
  auto& required = run.required;
  auto& require_default = run.require_default;
  auto& engines = run.engines;
  auto& unloadable = run.unloadable;
  auto& shard = run.shard;
  auto& results = run.results;
  auto& coverage = run.coverage;
  auto& failed = run.failed;
  auto& errors = run.errors;
  auto& reasons = run.reasons;
  // ---- coverage: on which classes each engine was judged (golden/coverage.hpp) ----
  for (const EngineUnderTest& eng : engines) {
    if (!eng.unavailable.empty() || opt.no_golden) continue;  // an engine that did not run is not judged at all
    std::vector<golden::CaseCoverageInput> cases;
    for (const CaseResult& r : results) {
      if (r.engine != eng.label) continue;
      const bool judged = r.status == CaseResult::Status::passed || r.status == CaseResult::Status::failed ||
                          r.status == CaseResult::Status::xpass;
      cases.push_back({r.classes, judged});
    }
    // A shard saw part of the cases: its coverage is partial, judged by `ringkv report merge`.
    EngineCoverage c = shard.count == 1 ? engine_coverage(eng.factory.capabilities, cases, required, require_default)
                                        : engine_coverage(eng.factory.capabilities, cases, std::nullopt, false);
    if (!c.missing.empty()) {
      failed = true;
      reasons.push_back(missing_classes_reason(eng.label, c, opt.require_classes, eng.external_outputs));
    }
    coverage.emplace(eng.label, std::move(c));
  }
  // Unusable input: golden files that could not be used, engines that could not be loaded.
  for (const CaseResult& r : results) errors += r.status == CaseResult::Status::error ? 1 : 0;
  errors += static_cast<int>(unloadable.size());
}

// Stage 7, the report as data: the JSON document, and the JUnit and HTML pages written from it.
void write_reports(CheckRun& run) {
  const CheckOptions& opt = run.opt;
  auto& selected = run.selected;
  auto& require_default = run.require_default;
  auto& engines = run.engines;
  auto& unloadable = run.unloadable;
  auto& shard = run.shard;
  auto& work = run.work;
  auto& results = run.results;
  auto& props = run.props;
  auto& coverage = run.coverage;
  auto& failed = run.failed;
  auto& errors = run.errors;
  auto& reasons = run.reasons;
  // ---- the report as data: the JSON report, which the JUnit and HTML writers read too ----
  {
    json j;
    j["passed"] = !failed && errors == 0;
    j["errors"] = errors;
    j["reasons"] = reasons;
    for (const EngineUnderTest& eng : engines) {
      if (unloadable.count(eng.label)) {
        j["engine_errors"].push_back({{"engine", eng.label}, {"error", eng.unavailable}});
      } else if (!eng.unavailable.empty()) {
        j["skipped_engines"].push_back({{"engine", eng.label}, {"reason", eng.unavailable}});
      }
      for (const std::string& w : eng.declaration_warnings) j["engine_warnings"].push_back({{"engine", eng.label}, {"warning", w}});
    }
    for (const CaseResult& r : results) {
      json jc = {{"engine", r.engine}, {"name", r.name}, {"id", r.id}, {"classes", r.classes},
                 {"status", status_name(r.status)}, {"worst_ratio", r.worst_ratio},
                 {"outputs_checked", r.outputs}, {"detail", r.detail}, {"reproduce", r.reproduce}};
      jc["warnings"] = r.warnings;
      if (!r.profile.empty()) {
        jc["profile"] = json::parse(r.profile);
        jc["profile_source"] = r.profile_source;
      }
      if (r.rope) {
        const golden::RopeVerdict& v = *r.rope;
        jc["rope"] = {{"verdict", golden::to_string(v.kind)}, {"line", v.line}};
        if (v.worst_row >= 0) {
          jc["rope"]["worst_angle_error"] = v.worst_angle_error;
          jc["rope"]["worst"] = {{"tensor", v.worst_tensor}, {"layer", v.worst_layer}, {"row", v.worst_row},
                                 {"position", v.worst_position}, {"head", v.worst_head}, {"dim", v.worst_dim}};
          jc["rope"]["tight_checked"] = v.tight_checked;
          jc["rope"]["tight_failed"] = v.tight_failed;
        }
        if (v.rope_dominated > 0) {
          jc["rope"]["rope_dominated"] = v.rope_dominated;
          jc["rope"]["rope_dominated_from_position"] = v.rope_dominated_from;
        }
      }
      j["cases"].push_back(jc);
    }
    for (const auto& [label, cov] : coverage) j["coverage"].push_back(coverage_to_json(label, cov));
    for (const auto& [eng, p] : props) {
      json jp = {{"engine", eng}, {"name", p.name}, {"passed", p.passed}, {"skipped", p.skipped}, {"report", p.report}};
      jp["warnings"] = p.warnings;
      if (!p.passed && p.error.empty()) {
        const auto fc = [](const FailingCase& c) {
          return json{{"id", c.id}, {"shape", c.shape}, {"tokens", c.tokens}, {"steps", c.steps},
                      {"first_failing_step", c.step}, {"reason", c.reason}, {"replay", c.replay}};
        };
        jp["seed"] = opt.seed;
        jp["failing_case"] = p.failing_case;
        jp["first_case"] = fc(p.first);
        jp["shrunk_case"] = fc(p.shrunk);
        jp["shrink"] = {{"attempted", p.shrink_attempted}, {"fully_shrunk", p.fully_shrunk},
                        {"steps", p.shrink_steps}, {"tried", p.shrink_tries},
                        {"seconds_to_first", p.seconds_to_first}, {"seconds_shrinking", p.seconds_shrinking}};
      }
      j["properties"].push_back(jp);
    }
    for (const EngineUnderTest& eng : engines) {  // every engine, in order, and whether it ran
      // "availability", not "status": scripts read a report's statuses by pattern (cases' and classes').
      const std::string availability = unloadable.count(eng.label) ? "unloadable" : !eng.unavailable.empty() ? "skipped" : "ran";
      j["engines"].push_back({{"engine", eng.label}, {"availability", availability}, {"reason", eng.unavailable},
                              {"external_outputs", eng.external_outputs}, {"capabilities_source", eng.capabilities_source},
                              {"golden_cases", opt.no_golden ? size_t{0} : selected.size()}});
    }
    j["shard"] = shard_header(opt, shard, engines, work, require_default);
    if (!opt.json_file.empty()) std::ofstream(opt.json_file) << j.dump(2) << "\n";
    if (!opt.junit_file.empty()) write_junit_report(j, opt.junit_file);
    if (!opt.html_file.empty()) write_html_report(j, opt.html_file);
  }
}

}  // namespace

// Stage 6, the report on stdout.
void print_text_report(const CheckRun& run) {
  const CheckOptions& opt = run.opt;
  auto& properties = run.properties;
  auto& engines = run.engines;
  auto& unloadable = run.unloadable;
  auto& shard = run.shard;
  auto& work = run.work;
  auto& results = run.results;
  auto& props = run.props;
  auto& coverage = run.coverage;
  auto& failed = run.failed;
  auto& errors = run.errors;
  auto& reasons = run.reasons;
  // ---- the report on stdout ----
  // What matters first: each failure with its reproduce line (golden cases, then properties), then
  // unusable inputs and warnings, then one verdict per engine (its cases, its coverage, RoPE notes), the
  // reasons the run failed beyond its cases, and the verdict line. --table (and --verbose) print before
  // all of it, per engine, the table per boundary class, the RoPE verdict per case and every property.
  const auto is_failure = [](const CaseResult& r) {
    return r.status == CaseResult::Status::failed || r.status == CaseResult::Status::xpass;
  };
  const auto property_line = [](const std::string& eng, const PropertyOutcome& p) {
    std::string line = "property " + std::string(p.name);
    line.resize(std::max(line.size(), size_t{31}), ' ');  // "property %-22s"
    line += std::string(" ") + (p.passed ? "passed" : "FAILED") + (p.skipped ? " (skipped)" : "");
    if (!p.passed || !p.warnings.empty()) line += " on engine " + eng;
    return line + "\n";
  };
  if (opt.table) {
    for (const EngineUnderTest& eng : engines) {
      if (!eng.unavailable.empty() || opt.no_golden) continue;  // the summary says why
      struct Row { int passed = 0, failed = 0, xfail = 0, skipped = 0, error = 0; double worst = 0; };
      std::map<std::string, Row> rows;
      for (const CaseResult& r : results) {
        if (r.engine != eng.label) continue;
        for (const std::string& c : r.classes) {
          Row& row = rows[c];
          switch (r.status) {
            case CaseResult::Status::passed: ++row.passed; break;
            case CaseResult::Status::failed:
            case CaseResult::Status::xpass: ++row.failed; break;
            case CaseResult::Status::xfail: ++row.xfail; break;
            case CaseResult::Status::skipped: ++row.skipped; break;
            case CaseResult::Status::error: ++row.error; break;
          }
          if (r.status != CaseResult::Status::skipped && r.status != CaseResult::Status::error) row.worst = std::max(row.worst, r.worst_ratio);
        }
      }
      std::printf("ringkv check: engine %s, %zu golden cases from %s\n", eng.label.c_str(), run.golden_cases,
                  opt.golden_dir.c_str());
      if (!eng.capabilities_source.empty()) std::printf("capabilities: %s\n", eng.capabilities_source.c_str());
      std::printf("%-20s %-8s %7s %7s %6s %8s %6s %12s  %s\n", "boundary class", "level", "passed", "failed", "xfail",
                  "skipped", "error", "worst/tol", "coverage");
      for (const golden::ClassCoverage& k : coverage.at(eng.label).classes) {
        const Row row = rows.count(k.name) ? rows.at(k.name) : Row{};
        const golden::ClassInfo& info = golden::class_info(k.name);
        std::string status = golden::to_string(k.status);
        if (!k.why.empty()) status += " (" + k.why + ")";
        std::printf("%-20s %-8s %7d %7d %6d %8d %6d %12.3g  %s\n", k.name.c_str(),
                    info.level == golden::ClassLevel::core ? "core" : "feature", row.passed, row.failed, row.xfail,
                    row.skipped, row.error, row.worst, status.c_str());
      }
      // RoPE checked apart from attention (golden-format §7): one line for an engine ringkv rotates
      // for, else one per case that has a verdict.
      bool rope_header = false;
      for (const CaseResult& r : results) {
        if (r.engine != eng.label || !r.rope) continue;
        if (eng.qk_rotated_by_ringkv) {
          std::printf("%s\n", r.rope->line.c_str());
          break;
        }
        if (!rope_header) std::printf("RoPE, checked apart from attention:\n");
        rope_header = true;
        std::printf("  %-24s %s\n", r.name.c_str(), r.rope->line.c_str());
      }
      std::printf("\n");
    }
    for (const auto& [eng, p] : props) {
      std::printf("%s", property_line(eng, p).c_str());
      for (const std::string& w : p.warnings) std::printf("  WARNING: %s\n", w.c_str());
    }
  }
  // Each failing case with its reproduce line; without --table the first kFailuresShown per engine, then
  // the others by name (the JSON and JUnit reports hold every one).
  constexpr int kFailuresShown = 10;
  int n_fail = 0;
  std::map<std::string, int> shown;  // per engine
  std::map<std::string, std::string> more;  // per engine: the names of the failures not shown
  for (const CaseResult& r : results) {
    if (!is_failure(r)) continue;
    ++n_fail;
    if (!opt.table && shown[r.engine] >= kFailuresShown) {
      more[r.engine] += (more[r.engine].empty() ? "" : ", ") + r.name;
      continue;
    }
    std::printf("%sFAILED %s [%s] on engine %s\n  case: %s\n  classes:", n_fail > 1 || opt.table ? "\n" : "",
                r.name.c_str(), status_name(r.status), r.engine.c_str(), r.id.c_str());
    ++shown[r.engine];
    for (const std::string& c : r.classes) std::printf(" %s", c.c_str());
    std::printf("\n  %s\n  reproduce: %s\n", r.detail.c_str(), r.reproduce.c_str());
  }
  for (const auto& [eng, names] : more) {
    std::printf("\nFAILED on engine %s, %zu more cases (--table, --json or --junit for each): %s\n", eng.c_str(),
                static_cast<size_t>(std::count(names.begin(), names.end(), ',') + 1), names.c_str());
  }
  // Golden failures (small, named cases) come first; then the properties, each failure with its
  // first failing case, its shrunk case and a replay line for each.
  int n_prop_fail = 0;
  for (const auto& [eng, p] : props) {
    if (p.passed) continue;
    std::printf("%s%s%s", n_fail + n_prop_fail++ > 0 || opt.table ? "\n" : "", property_line(eng, p).c_str(),
                p.report.c_str());
    for (const std::string& w : p.warnings) std::printf("  WARNING: %s\n", w.c_str());
  }
  // Unusable golden files: an error of the input, never a verdict on the engine (exit code 2 when
  // nothing failed).
  for (const CaseResult& r : results) {
    if (r.status != CaseResult::Status::error) continue;
    std::printf("\nERROR %s (engine %s not judged on it)\n  %s\n", r.name.c_str(), r.engine.c_str(), r.detail.c_str());
  }
  for (const std::string& label : unloadable) {
    std::printf("\nERROR: engine %s could not be loaded (not judged)\n", label.c_str());
  }
  int warned = 0;
  for (const CaseResult& r : results) {
    if (r.warnings.empty()) continue;
    ++warned;
    std::printf("\nWARNING %s [%s] on engine %s\n", r.name.c_str(), status_name(r.status), r.engine.c_str());
    for (const std::string& w : r.warnings) std::printf("  %s\n", w.c_str());
  }
  int prop_warned = 0;
  if (!opt.table) {  // a passing property's warnings (--table lists them under the property)
    for (const auto& [eng, p] : props) {
      if (!p.passed || p.warnings.empty()) continue;
      std::printf("%s%s", prop_warned++ == 0 ? "\n" : "", property_line(eng, p).c_str());
      for (const std::string& w : p.warnings) std::printf("  WARNING: %s\n", w.c_str());
    }
  }
  // One verdict per engine: its golden cases, properties, coverage and RoPE notes.
  if (opt.table || n_fail + n_prop_fail + errors + warned + prop_warned > 0) std::printf("\n");
  for (const EngineUnderTest& eng : engines) {
    if (unloadable.count(eng.label)) {
      std::printf("ringkv check: ERROR: engine %s could not be loaded, not judged: %s\n", eng.label.c_str(),
                  eng.unavailable.c_str());
      continue;
    }
    if (!eng.unavailable.empty()) {
      std::printf("ringkv check: engine %s skipped: %s\n", eng.label.c_str(), eng.unavailable.c_str());
      continue;
    }
    int n[6] = {}, n_props = 0, props_failed = 0;
    int n_scale = 0, scale_failed = 0, scale_errors = 0, scale_skipped = 0;
    double worst = 0, scale_worst = 0;
    std::vector<const CaseResult*> rope_not_checked;
    std::map<golden::RopeVerdict::Kind, int> rope_kinds;
    const CaseResult* rotated_by_ringkv = nullptr;
    for (const CaseResult& r : results) {
      if (r.engine != eng.label) continue;
      if (is_scale_result(r)) {  // counted apart: "N golden cases" stays the golden set's count
        ++n_scale;
        scale_failed += is_failure(r) ? 1 : 0;
        scale_errors += r.status == CaseResult::Status::error ? 1 : 0;
        scale_skipped += r.status == CaseResult::Status::skipped ? 1 : 0;  // an outputs file's: not applicable, unsupported
        if (r.status != CaseResult::Status::error) scale_worst = std::max(scale_worst, r.worst_ratio);
        continue;
      }
      ++n[static_cast<int>(r.status)];
      if (r.status != CaseResult::Status::skipped && r.status != CaseResult::Status::error) worst = std::max(worst, r.worst_ratio);
      if (!r.rope) continue;
      ++rope_kinds[r.rope->kind];
      if (r.rope->kind == golden::RopeVerdict::Kind::rotated_by_ringkv && !rotated_by_ringkv) rotated_by_ringkv = &r;
      if (r.rope->kind == golden::RopeVerdict::Kind::not_checked) rope_not_checked.push_back(&r);
    }
    for (const auto& [e, p] : props) {
      if (e != eng.label) continue;
      ++n_props;
      props_failed += p.passed ? 0 : 1;
    }
    const auto count = [&](CaseResult::Status s) { return n[static_cast<int>(s)]; };
    const auto cov = coverage.find(eng.label);
    const bool missing = cov != coverage.end() && !cov->second.missing.empty();
    const int case_failures = count(CaseResult::Status::failed) + count(CaseResult::Status::xpass);
    const char* verdict = case_failures || scale_failed || props_failed || missing ? "FAILED"
                          : count(CaseResult::Status::error) || scale_errors     ? "ERROR"
                                                                                 : "PASSED";
    std::printf("engine %s: %s", eng.label.c_str(), verdict);  // "engine reference: PASSED, 80 golden cases from ...: "
    if (!opt.no_golden) {
      std::printf(", %zu golden cases from %s: %d passed, %d failed, %d xfail, %d skipped", run.golden_cases, opt.golden_dir.c_str(),
                  count(CaseResult::Status::passed), case_failures, count(CaseResult::Status::xfail),
                  count(CaseResult::Status::skipped));
      if (count(CaseResult::Status::error)) std::printf(", %d unusable", count(CaseResult::Status::error));
      std::printf("; worst error %.3g of the bound", worst);
    }
    if (n_scale) {
      std::printf("%s%d scale cases (tier %s): %d passed, %d failed", opt.no_golden ? ", " : "; ", n_scale,
                  opt.scale.c_str(), n_scale - scale_failed - scale_errors - scale_skipped, scale_failed);
      if (scale_skipped) std::printf(", %d skipped", scale_skipped);
      if (scale_errors) std::printf(", %d not judged (ringkv's own error)", scale_errors);
      std::printf(", worst error %.3g of the bound on the sampled rows", scale_worst);
    }
    if (n_props) std::printf("%s%d properties: %d passed, %d failed", opt.no_golden && !n_scale ? ", " : "; ", n_props, n_props - props_failed, props_failed);
    std::printf("\n");
    if (!eng.capabilities_source.empty()) std::printf("  capabilities: %s\n", eng.capabilities_source.c_str());
    if (cov != coverage.end()) std::printf("  coverage of %s: %s\n", eng.label.c_str(), cov->second.line.c_str());
    for (const std::string& w : eng.declaration_warnings) std::printf("  WARNING: %s\n", w.c_str());
    if (missing) {
      std::printf("  %zu required class(es) not judged (below)\n", cov->second.missing.size());
    }
    if (rotated_by_ringkv) {
      std::printf("  %s\n", rotated_by_ringkv->rope->line.c_str());
    } else if (!rope_kinds.empty()) {
      std::string checked;
      for (const auto& [kind, k] : rope_kinds) {
        if (kind == golden::RopeVerdict::Kind::not_checked) continue;
        checked += (checked.empty() ? "" : ", ") + std::to_string(k) + " " + golden::to_string(kind);
      }
      if (!checked.empty()) std::printf("  RoPE, checked apart from attention: %s\n", checked.c_str());
      if (!rope_not_checked.empty()) {
        std::string names;
        for (size_t i = 0; i < rope_not_checked.size() && i < 4; ++i) names += (i ? ", " : "") + rope_not_checked[i]->name;
        if (rope_not_checked.size() > 4) names += ", and " + std::to_string(rope_not_checked.size() - 4) + " more";
        std::printf("  RoPE not checked apart (no q_rot/k_rot; its bound term dominated) in %zu case(s): %s\n",
                    rope_not_checked.size(), names.c_str());
      }
    }
    for (const CaseResult& r : results) {  // RoPE beyond the declared bound: the case, whatever its verdict
      if (r.engine == eng.label && r.rope && r.rope->kind == golden::RopeVerdict::Kind::failed) {
        std::printf("  RoPE of %s: %s\n", r.name.c_str(), r.rope->line.c_str());
      }
    }
  }
  if (!opt.table) std::printf("(--table: the table per boundary class, each case's RoPE verdict, every property)\n");
  if (shard.count > 1) {
    size_t mine = 0;
    for (const WorkItem& w : work) mine += w.shard == shard.index;
    std::printf("shard %d/%d (from %s): %zu of %zu work items; the coverage verdict of the whole run is `ringkv report merge`'s\n",
                shard.index, shard.count, shard.source.c_str(), mine, work.size());
  }
  for (const std::string& why : reasons) std::printf("\nFAILED: %s\n", why.c_str());
  int passed = 0, golden_failed = 0, skipped = 0, xf = 0, scale_passed = 0, scale_total = 0;
  for (const CaseResult& r : results) {
    if (is_scale_result(r)) {  // counted with the scale cases
      ++scale_total;
      scale_passed += r.status == CaseResult::Status::passed;
      continue;
    }
    passed += r.status == CaseResult::Status::passed;
    golden_failed += is_failure(r) ? 1 : 0;
    skipped += r.status == CaseResult::Status::skipped;
    xf += r.status == CaseResult::Status::xfail;
  }
  std::printf("\n%s: %d passed, %d failed, %d xfail, %d skipped golden cases", failed ? "FAILED" : errors ? "ERROR" : "PASSED",
              passed, golden_failed, xf, skipped);
  if (errors > static_cast<int>(unloadable.size())) std::printf(", %d unusable golden file(s)", errors - static_cast<int>(unloadable.size()));
  if (!unloadable.empty()) std::printf(", %zu engine(s) could not be loaded", unloadable.size());
  if (warned) std::printf(", %d case(s) with warnings", warned);
  if (scale_total) {
    std::printf("; %d of %d scale cases (tier %s) passed", scale_passed, scale_total, opt.scale.c_str());
  }
  for (const auto& [label, cov] : coverage) {
    std::printf("; %s: core %d of %d classes judged, features %d of %d", label.c_str(), cov.core_judged,
                cov.core_applicable, cov.features_judged, cov.features_applicable);
    if (const std::vector<std::string> na = below_core(cov); !na.empty()) {
      std::string list;
      for (const std::string& k : na) list += (list.empty() ? "" : ", ") + k;
      std::printf(" (below the spec 1 core: %zu core classes not applicable: %s)", na.size(), list.c_str());
    }
  }
  if (properties) {
    int pf = 0, pw = 0;
    for (const auto& pr : props) {
      pf += pr.second.passed ? 0 : 1;
      pw += pr.second.warnings.empty() ? 0 : 1;
    }
    if (opt.replay.empty()) {
      std::printf("; %zu properties (seed %llu, %d cases each), %d failed", props.size(),
                  static_cast<unsigned long long>(opt.seed), opt.cases, pf);
      if (pw) std::printf(", %d with warnings", pw);
    } else {
      std::printf("; replayed %s: %s", opt.replay.c_str(), pf ? "FAILED" : "passed");
    }
  }
  std::printf("\n");
}

int default_jobs() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

std::string list_golden(const std::string& dir, const std::string& capabilities_file, const std::string& level) {
  if (!level.empty() && level != "core" && level != "feature") {
    throw InputError("--level \"" + level + "\": must be core or feature");
  }
  std::optional<conformance::CapabilitiesFile> caps;
  if (!capabilities_file.empty()) {
    try {
      caps = conformance::read_capabilities_file(capabilities_file);
    } catch (const std::exception& e) {
      throw InputError(std::string("--capabilities: ") + e.what());
    }
  }
  std::ostringstream os;
  int listed = 0, total = 0;
  for (const ManifestEntry& e : read_manifest(dir)) {
    if (!level.empty() && e.level != level) continue;
    ++total;
    if (caps) {
      const golden::GoldenCase g = golden::load_manifest_case(dir, e);
      if (!conformance::capability_gap(caps->capabilities, g.c).empty()) continue;
    }
    ++listed;
    std::string features;
    for (const std::string& f : e.features) features += (features.empty() ? "" : ",") + f;
    os << e.name << "  " << e.level << (features.empty() ? "" : "  " + features) << "\n";
  }
  if (caps) os << "# " << listed << " of " << total << " cases within the capabilities in " << capabilities_file << "\n";
  return os.str();
}

std::string describe_golden(const std::string& dir, const std::string& name_or_path) {
  std::string path = name_or_path;
  if (!fs::exists(path)) {
    for (const ManifestEntry& e : read_manifest(dir)) {
      if (e.name == name_or_path || e.id == name_or_path) path = e.file;
    }
  }
  if (!fs::exists(path)) throw InputError("golden describe: no case named \"" + name_or_path + "\" in " + dir);
  const golden::GoldenCase g = golden::read_golden(path);
  std::ostringstream os;
  os << "name: " << g.name << "\nclasses:";
  for (const std::string& c : g.classes) os << " " << c;
  os << "\n" << g.c.describe();
  return os.str();
}

int run_check(const CheckOptions& opt) {
  if (opt.jobs < 1 || opt.jobs > kMaxJobs) {
    throw InputError("--jobs " + std::to_string(opt.jobs) + ": must be from 1 to " + std::to_string(kMaxJobs) +
                     " (parallel workers; default: the number of cores, " + std::to_string(default_jobs()) + " here)");
  }
  if (!opt.property_shard.empty()) return run_property_shard(opt);
  CheckRun run(opt);
  read_inputs(run);
  open_engines(run);
  plan_work(run);
  run_work(run);
  judge_coverage(run);
  print_text_report(run);
  write_reports(run);
  return run.failed ? 1 : run.errors ? 2 : 0;
}

}  // namespace ringkv::cli
