// ringkv_shrink_bench: how long `ringkv check --properties` takes to a verdict on a planted bug.
//
// Runs the properties, exactly as `ringkv check --no-golden --properties` does (the same
// runner, cli/property_runner.cpp), against every mutant of conformance/mutants/ in process and
// through its shipped plugin (libringkv_plugin_mutant_<name>.so), and against the shrink test
// plugins (libringkv_plugin_shrink_<bug>.so, the bugs of issue 16). Prints a Markdown table, one
// row per engine: the first failing property, the time to its first failing case and to its shrunk
// case (from the start of the run, properties in order), the shrink steps, the shrunk case's size,
// whether it was fully shrunk, and the whole run (every property, every shrink). A benchmark, not
// a test: docs/performance.md keeps its table.
//
//   ringkv_shrink_bench [--cases N] [--seed S] [--shrink-time SECONDS] [--filter REGEX]
//                       [--in-process-only | --plugins-only] [--plugin-dir DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "mutants/mutants.hpp"
#include "property_runner.hpp"
#ifdef RINGKV_HAVE_ABI
#include "plugin_engine.hpp"
#endif

#ifndef RINGKV_PLUGIN_DIR
#define RINGKV_PLUGIN_DIR ""
#endif

namespace {

using namespace ringkv;
using ringkv::cli::PropertyOutcome;

struct Target {
  std::string label, where;
  bool must_pass = false;
  std::string plugin;  // path, for plugins
  EngineFactory factory;
};

struct Row {
  std::string label, where;
  bool must_pass = false;
  double wall = 0;
  std::vector<PropertyOutcome> props;
  std::string error;
};

std::string secs(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f s", s);
  return b;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "ringkv_shrink_bench: %s\nusage: ringkv_shrink_bench [--cases N] [--seed S] [--shrink-time SECONDS] "
               "[--filter REGEX] [--in-process-only | --plugins-only] [--plugin-dir DIR]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  cli::PropertyRunOptions opt;
  std::string filter = ".*", plugin_dir = RINGKV_PLUGIN_DIR;
  bool in_process = true, plugins = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--cases") opt.cases = std::atoi(value().c_str());
    else if (a == "--seed") opt.seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--shrink-time") opt.shrink_time = std::strtod(value().c_str(), nullptr);
    else if (a == "--filter") filter = value();
    else if (a == "--plugin-dir") plugin_dir = value();
    else if (a == "--in-process-only") plugins = false;
    else if (a == "--plugins-only") in_process = false;
    else usage(("unknown argument " + a).c_str());
  }
  if (opt.cases < 1) usage("--cases must be >= 1");
  const std::regex keep(filter);

  std::vector<Target> targets;
  for (const conformance::MutantInfo& m : conformance::all_mutants()) {
    if (in_process && std::regex_search(m.name, keep)) targets.push_back({m.name, "in process", m.must_pass, "", m.factory});
  }
#ifdef RINGKV_HAVE_ABI
  if (plugins) {
    for (const conformance::MutantInfo& m : conformance::all_mutants()) {
      if (!std::regex_search(m.name, keep)) continue;
      targets.push_back({m.name, "plugin", m.must_pass, plugin_dir + "/libringkv_plugin_mutant_" + m.name + ".so", {}});
    }
    // The bugs of issue 16 (test plugins; "slow" is the budget test's fixture, not a bug to time).
    for (const char* bug : {"reset_clears_neighbour", "slot_from_append_count"}) {
      if (!std::regex_search(std::string(bug), keep)) continue;
      targets.push_back({bug, "plugin (test)", false, plugin_dir + "/libringkv_plugin_shrink_" + bug + ".so", {}});
    }
  }
#else
  (void)plugins;
#endif
  if (targets.empty()) usage("no engine matches --filter");

  std::vector<Row> rows;
  for (Target& t : targets) {
    Row r{t.label, t.where, t.must_pass, 0, {}, ""};
    std::cerr << "[bench] " << t.label << " (" << t.where << ") ..." << std::endl;
    const auto t0 = std::chrono::steady_clock::now();
    try {
#ifdef RINGKV_HAVE_ABI
      if (!t.plugin.empty()) {
        if (!std::filesystem::exists(t.plugin)) throw std::runtime_error("no plugin " + t.plugin);
        t.factory = abi::plugin_engine_factory(t.plugin);
      }
#endif
      r.props = cli::run_properties(t.factory, opt);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rows.push_back(r);
  }

  std::printf("Properties: %d cases each, seed %llu, shrink budget %s per property.\n\n", opt.cases,
              static_cast<unsigned long long>(opt.seed), secs(opt.shrink_time).c_str());
  std::printf("| engine | where | first failing property | its first failing case after | its shrunk case after | "
              "shrink steps (tried) | shrunk case | fully shrunk | properties failed | slowest shrink | "
              "whole run |\n");
  std::printf("|---|---|---|---:|---:|---:|---|---|---:|---:|---:|\n");
  int over_budget = 0, missed = 0, control_failed = 0;
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      std::printf("| %s | %s | error: %s | | | | | | | | %s |\n", r.label.c_str(), r.where.c_str(), r.error.c_str(),
                  secs(r.wall).c_str());
      continue;
    }
    double before = 0, slowest = 0;
    int failed = 0;
    bool all_full = true;
    const PropertyOutcome* first = nullptr;
    double t_first = 0;
    for (const PropertyOutcome& p : r.props) {
      if (!p.passed) {
        ++failed;
        slowest = std::max(slowest, p.seconds_shrinking);
        all_full = all_full && p.fully_shrunk;
        if (!first) {
          first = &p;
          t_first = before + p.seconds_to_first;
        }
      }
      before += p.seconds;
    }
    if (r.must_pass) control_failed += failed > 0;
    if (!r.must_pass && !first) ++missed;
    if (failed > 0 && !all_full) ++over_budget;
    if (!first) {
      std::printf("| %s | %s | none (%s) | | | | | | 0 of %zu | | %s |\n", r.label.c_str(), r.where.c_str(),
                  r.must_pass ? "a control: must pass" : "MISSED", r.props.size(), secs(r.wall).c_str());
      continue;
    }
    std::printf("| %s | %s | %s | %s | %s | %d (%d) | %s | %s | %d of %zu | %s | %s |\n", r.label.c_str(),
                r.where.c_str(), first->name.c_str(), secs(t_first).c_str(),
                secs(t_first + first->seconds_shrinking).c_str(), first->shrink_steps, first->shrink_tries,
                first->shrunk.shape.c_str(),
                first->fully_shrunk ? "yes" : (first->shrink_attempted ? "NO (budget)" : "not shrunk"), failed,
                r.props.size(), secs(slowest).c_str(), secs(r.wall).c_str());
  }
  std::printf("\n%zu engines; %d bugs missed, %d controls failed, %d engines with a property not fully shrunk "
              "within the budget.\n",
              rows.size(), missed, control_failed, over_budget);
  return missed || control_failed ? 1 : 0;
}
