// ringkv ABI, host side: a third-party engine plugin (a shared library
// implementing abi/include/ringkv/engine_abi.h) as a ringkv::EngineFactory.
//
// The plugin never runs in the calling process. plugin_engine_factory()
// starts a persistent worker process (ringkv_plugin_worker, fork + exec, so
// call it before the host touches CUDA), which dlopens the plugin and checks
// its ABI version; every Engine call becomes one request to that worker, with
// a timeout. When the plugin crashes, aborts, hangs or writes outside an
// output buffer, the call throws ringkv::Error saying so ("plugin
// libx.so crashed with SIGSEGV during step 3"), the worker is killed, and the
// next create() starts a fresh one: a run reports that case and goes on.
// See docs/engine-abi.md.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "abi_versions.hpp"
#include "capabilities_map.hpp"
#include "ringkv/engine.hpp"
#include "ringkv/engine_abi.h"

namespace ringkv::abi {

struct PluginOptions {
  /// Limit for every request (a create, a step, a snapshot, ...), in milliseconds. A request that takes
  /// longer kills the worker and throws.
  int timeout_ms = 10000;
  /// Limit for starting the worker, loading the plugin and querying its capabilities.
  int startup_timeout_ms = 30000;
  /// Sentinel floats before and after every output buffer the plugin writes (rounded up to a multiple of 4).
  int guard_floats = 64;
  /// The worker's address-space limit (RLIMIT_AS) in MiB, so that a runaway allocation fails in the
  /// worker and is reported as out of memory instead of exhausting the machine. 0 (the default): no
  /// limit, because AddressSanitizer and the CUDA driver reserve far more address space than they use,
  /// so a limit that suits one engine breaks another; set it for CPU plugins (`--memory-limit`).
  int64_t memory_limit_mib = 0;
  /// Leaks: the worker's resident memory (/proc/<pid>/statm) is read when an engine has been created
  /// and before it is destroyed, and after each of its steps. Growth beyond what the engines created
  /// meanwhile declare (cache_bytes()) by more than leak_slack_mib is a warning (CaseWarnings, at the
  /// engine's end); by more than leak_limit_mib, the step fails and the worker is killed
  /// (`--leak-limit`; 0: no limit). Off in an AddressSanitizer build, whose quarantine and shadow
  /// memory are resident too (LeakSanitizer checks leaks there). docs/reliability.md, "Plugin limits".
  int64_t leak_limit_mib = 256;
  /// 8 MiB: the reference plugin's largest growth beyond its cache over the committed goldens and
  /// the property cases is 1.2 MiB (test LeakPlugin.TheReferencePluginNeverWarnsOnTheGoldensOrThePropertyCases).
  int64_t leak_slack_mib = 8;
  /// The worker executable. Empty: $RINGKV_PLUGIN_WORKER, else ringkv_plugin_worker next to the running
  /// executable, else the one in this build tree, else ringkv_plugin_worker on PATH.
  std::string worker_path;
};

class PluginHost;

/// A loaded plugin: its worker process and what it declared. Shared by the factory and its engines.
class Plugin {
 public:
  /// Starts the worker, loads the plugin, checks the ABI version and reads the capabilities.
  /// Throws ringkv::Error with a clear message (naming both versions on a mismatch).
  static std::shared_ptr<Plugin> open(const std::string& plugin_path, PluginOptions options = {});
  ~Plugin();

  const std::string& path() const;
  /// The plugin's capabilities as declared (struct_size = what the plugin filled).
  const ringkv_capabilities& raw_capabilities() const;
  /// The same, mapped to what the generators use.
  const Capabilities& capabilities() const;
  /// ABI version of the plugin's table.
  uint32_t abi_version() const;
  /// Found at load: the plugin (ABI minor >= 2) leaves every ABI 1.2 capability field at zero, as a
  /// plugin written for ABI 1.1 and recompiled does (abi_versions.hpp); nullopt otherwise.
  const std::optional<ZeroAbi12Fields>& zero_abi_1_2_fields() const;
  /// "" if the config is inside the declared capabilities, else the first reason it is not.
  std::string unsupported(const Config& config) const;
  /// Creates an engine (restarting the worker first if the last one died). Throws ConfigError for a
  /// config the plugin rejects, ringkv::Error for a crash, hang or out-of-bounds write.
  std::unique_ptr<Engine> create(const Config& config);
  /// The JSON document create() would send for a config (window convention and rotation applied).
  std::string config_json(const Config& config) const;

  /// Workers started so far (1 after open; +1 for each restart after a failure).
  int workers_started() const;
  /// pid of the current worker, or -1 if none is running.
  int worker_pid() const;

 private:
  explicit Plugin(std::unique_ptr<PluginHost> host);
  std::shared_ptr<PluginHost> host_;
  std::optional<ZeroAbi12Fields> zero_abi_1_2_fields_;
};

/// Collects the warnings of the plugin engines destroyed on this thread while it lives (the innermost
/// one, if nested): "plugin libx.so: worker resident memory grew 96.0 MiB over the case, ...". A run
/// wraps each case in one and reports what take() returns with the case's verdict.
class CaseWarnings {
 public:
  CaseWarnings();
  ~CaseWarnings();
  CaseWarnings(const CaseWarnings&) = delete;
  CaseWarnings& operator=(const CaseWarnings&) = delete;
  /// The warnings so far (and clears them).
  std::vector<std::string> take();
  /// Adds a warning to this thread's innermost CaseWarnings; dropped if there is none.
  static void add(std::string warning);

 private:
  CaseWarnings* outer_;
  std::vector<std::string> warnings_;
};

/// The factory: name "plugin:<file name>", capabilities from the plugin, engines in the worker.
EngineFactory plugin_engine_factory(const std::string& plugin_path, PluginOptions opts = {});
EngineFactory plugin_engine_factory(std::shared_ptr<Plugin> plugin);

// map_capabilities() and map_profile(): capabilities_map.hpp.

}  // namespace ringkv::abi
