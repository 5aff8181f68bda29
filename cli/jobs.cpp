#include "jobs.hpp"

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ringkv::cli {

void run_jobs(size_t n, int jobs, const std::function<void(size_t task, int worker)>& run) {
  if (jobs <= 1 || n <= 1) {
    for (size_t i = 0; i < n; ++i) run(i, 0);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::vector<std::exception_ptr> errors(n);
  const auto work = [&](int worker) {
    for (size_t i; !stop && (i = next++) < n;) {
      try {
        run(i, worker);
      } catch (...) {
        errors[i] = std::current_exception();
        stop = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < jobs && static_cast<size_t>(w) < n; ++w) threads.emplace_back(work, w);
  work(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}


// ---- property shards in processes of their own (--jobs N > 1) ----
// RapidCheck keeps the parameters of its generators (rc::detail::ImplicitParam<...>::m_stack and
// rc::detail::ImplicitScope::m_scopes) in plain static members, not thread_local: two properties
// drawing cases on two threads would corrupt each other's stacks. So with more than one job each
// property runs in a process of its own: ringkv runs itself (/proc/self/exe) as
// `ringkv check --engine E --property-shard NAME ...`, which runs that one property exactly as one
// job would (same seed, same cases, its own shrink budget and its own engine instance, a plugin its
// own worker) and prints its PropertyOutcome as JSON (outcome_to_json) on stdout; its progress goes
// to the shared stderr, line by line.

namespace {

std::string self_executable() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0 || static_cast<size_t>(n) >= path.size()) {
    throw std::runtime_error(std::string("--jobs: cannot find this ringkv executable (/proc/self/exe): ") + std::strerror(errno));
  }
  path.resize(static_cast<size_t>(n));
  return path;
}

std::string seconds_arg(double s) {
  if (std::isinf(s)) return "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", s);
  return buf;
}

}  // namespace

std::vector<PropertyOutcome> run_property_process(const CheckOptions& opt, const std::string& engine, const std::string& property) {
  // Every option that make_engine or property_options reads is passed on.
  std::vector<std::string> args = {self_executable(), "check", "--engine=" + engine, "--property-shard=" + property,
                                   "--cases=" + std::to_string(opt.cases), "--seed=" + std::to_string(opt.seed),
                                   "--shrink-time=" + seconds_arg(opt.shrink_time),
                                   "--timeout-ms=" + std::to_string(opt.timeout_ms),
                                   "--memory-limit=" + std::to_string(opt.memory_limit_mib),
                                   "--leak-limit=" + std::to_string(opt.leak_limit_mib)};
  if (opt.quiet) args.push_back("--quiet");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string what = "property " + property + " on engine " + engine;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(what + ": pipe failed: " + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawned != 0) {
    ::close(fds[0]);
    throw std::runtime_error(what + ": cannot start " + args[0] + ": " + std::strerror(spawned));
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::vector<PropertyOutcome> outcomes;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      try {
        outcomes.push_back(outcome_from_json(line));
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(what + ": its process reported " + e.what());
      }
    }
    return outcomes;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
    throw InputError(what + ": its process ended with exit code 2 (unusable input; its message is above)");
  }
  // A crash in the property's own process: a failure of that property on that engine, as one job
  // would have died of it.
  PropertyOutcome o;
  o.name = property;
  o.error = WIFSIGNALED(status) ? "its process (ringkv check --property-shard) died of signal " + std::to_string(WTERMSIG(status)) +
                                      " (" + strsignal(WTERMSIG(status)) + ")"
                                : "its process (ringkv check --property-shard) ended with exit code " +
                                      std::to_string(WEXITSTATUS(status)) + " without a result";
  o.report = "  " + o.error + "; run it alone with --jobs 1 --filter '^" + property + "$' to see where\n";
  return {o};
}

}  // namespace ringkv::cli
