#include "property_runner.hpp"

#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <rapidcheck.h>

#include "property/properties.hpp"
#include "support/show.hpp"

namespace ringkv::cli {
namespace {

using namespace ringkv::conformance;
using Clock = std::chrono::steady_clock;
using rc::detail::CaseResult;

// A progress message, written to stderr whole (write_stderr) when the statement ends.
class StderrMessage {
 public:
  StderrMessage() = default;
  StderrMessage(const StderrMessage&) = delete;
  StderrMessage& operator=(const StderrMessage&) = delete;
  ~StderrMessage() { write_stderr(os_.str()); }
  template <typename T>
  StderrMessage& operator<<(const T& value) {
    os_ << value;
    return *this;
  }

 private:
  std::ostringstream os_;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.1f s", s);
  return buf;
}

// RapidCheck's size schedule (src/detail/Testing.cpp, sizeFor): sizes spread evenly over
// [0, max_size], the largest always used.
int size_for(int max_success, int max_size, int i) {
  const int num_sizes = max_size + 1;
  const int num_regular = (max_success / num_sizes) * num_sizes;
  if (i < num_regular) return i % num_sizes;
  const int num_rest = max_success - num_regular;
  if (num_rest == 1) return 0;
  return ((i % num_sizes) * max_size) / (num_rest - 1);
}
constexpr int kMaxSize = 100;          // RapidCheck's default maxSize
constexpr int kMaxDiscardRatio = 10;   // and maxDiscardRatio

// ---------------------------------------------------------------- replay tokens

// "<property>:seed=<u64>:case=<i>:size=<n>:shrink=<i.j.k>" (shrink empty: the case as generated).
struct Replay {
  std::string property;
  uint64_t seed = 0;
  int index = 0;  // splits of the search's Random before this case (its index in the search)
  int size = 0;
  std::vector<size_t> path;  // shrink path: at each level, the index of the accepted candidate
};

std::string to_token(const Replay& r) {
  std::string s = r.property + ":seed=" + std::to_string(r.seed) + ":case=" + std::to_string(r.index) +
                  ":size=" + std::to_string(r.size) + ":shrink=";
  for (size_t i = 0; i < r.path.size(); ++i) s += (i ? "." : "") + std::to_string(r.path[i]);
  return s;
}

Replay parse_token(const std::string& token) {
  static const std::regex re(R"(^([A-Za-z0-9_]+):seed=([0-9]+):case=([0-9]+):size=([0-9]+):shrink=([0-9.]*)$)");
  std::smatch m;
  if (!std::regex_match(token, m, re)) {
    throw std::invalid_argument("--replay \"" + token +
                                "\": not a replay token (PROPERTY:seed=N:case=N:size=N:shrink=I.J.K, as a report prints it)");
  }
  Replay r;
  r.property = m[1];
  try {
    r.seed = std::stoull(m[2]);
    r.index = std::stoi(m[3]);
    r.size = std::stoi(m[4]);
    std::stringstream path(m[5]);
    for (std::string part; std::getline(path, part, '.');) {
      if (part.empty()) throw std::invalid_argument("empty shrink index");
      r.path.push_back(static_cast<size_t>(std::stoull(part)));
    }
  } catch (const std::exception& e) {
    throw std::invalid_argument("--replay \"" + token + "\": " + e.what());
  }
  return r;
}

// ---------------------------------------------------------------- describing a case

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

FailingCase describe_case(const Case& c, const std::string& reason) {
  FailingCase f;
  f.id = c.id();
  int64_t W = 0;
  for (const LayerConfig& l : c.config.layers) W = std::max(W, std::min(l.window, c.config.max_tokens));
  for (const StepPlan& st : c.steps) {
    for (int64_t n : st.tokens) f.tokens += n;
  }
  f.steps = static_cast<int64_t>(c.steps.size());
  std::ostringstream os;
  os << "T=" << f.tokens << " tokens in " << f.steps << " steps, B=" << c.config.batch
     << ", L=" << c.config.layers.size() << ", Hq=" << c.config.num_q_heads << ", Hkv=" << c.config.num_kv_heads
     << ", D=" << c.config.head_dim << ", W<=" << W;
  f.shape = os.str();
  f.reason = reason;
  // The first step the reason names (runner: "step 3, ...", "after step 3, ...", "(step 3, position ..."):
  // only its first line, which is the property's own message (the rest describes the case).
  static const std::regex step_re(R"((after )?step [0-9]+)");
  std::smatch m;
  const std::string head = first_line(reason);
  if (std::regex_search(head, m, step_re)) f.step = m.str();
  return f;
}

std::string indent(const std::string& text, const std::string& pad) {
  std::string out = pad;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\n' && i + 1 < text.size()) out += pad;
  }
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string reproduce_line(const PropertyRunOptions& opt, const std::string& token) {
  if (const size_t at = opt.command.find("{token}"); at != std::string::npos) {
    return opt.command.substr(0, at) + quote(token) + opt.command.substr(at + 7);
  }
  return opt.command + " --no-golden --replay " + quote(token);
}

// ---------------------------------------------------------------- one property

// The body RapidCheck's exec runs: draws a case and runs the property on it. The state it
// shares with the runner lives behind a pointer (RapidCheck copies the body into every shrink).
struct Shared {
  const EngineFactory* factory = nullptr;
  const PropertyInfo* prop = nullptr;
  bool generate_only = false;  // replaying a shrink path: only the recipe is needed
  std::optional<Case> last;    // the case the last run drew
};

class PropertyRun {
 public:
  PropertyRun(const EngineFactory& factory, const PropertyInfo& prop, const PropertyRunOptions& opt)
      : opt_(opt), adapter_(Body{&shared_}), gen_(rc::gen::detail::execRaw(adapter_)) {
    shared_.factory = &factory;
    shared_.prop = &prop;
    out_.name = prop.name;
  }

  PropertyOutcome search() {
    const auto t0 = Clock::now();
    if (opt_.progress) {
      StderrMessage() << "[properties] " << out_.name << " (" << opt_.cases << " cases, seed " << opt_.seed << ") ...\n";
    }
    rc::Random r(opt_.seed);
    int successes = 0, discards = 0, recent_discards = 0, index = 0;
    const int max_discards = kMaxDiscardRatio * opt_.cases;
    for (; successes < opt_.cases; ++index) {
      const int size = size_for(opt_.cases, kMaxSize, successes) + recent_discards / 10;
      const rc::Random random = r.split();
      const rc::Shrinkable<Result> s = gen_(random, size);
      Result res = s.value();
      const CaseResult::Type type = res.first.result.type;
      if (type == CaseResult::Type::Failure) {
        out_.cases_run = successes + 1;
        out_.failing_case = index;
        out_.seconds_to_first = seconds_since(t0);
        Replay rp{out_.name, opt_.seed, index, size, {}};
        out_.first = failing(res, rp);
        first_found();
        shrink(rp, std::move(res));
        out_.report = report();
        out_.seconds = seconds_since(t0);
        return out_;
      }
      if (type == CaseResult::Type::Discard) {
        ++recent_discards;
        if (++discards > max_discards) {
          out_.cases_run = successes;
          out_.error = "gave up after " + std::to_string(successes) + " cases and " + std::to_string(discards) +
                       " discarded ones: " + res.first.result.description;
          out_.report = "  " + out_.error + "\n";
          out_.seconds = seconds_since(t0);
          return out_;
        }
        continue;
      }
      ++successes;
      recent_discards = 0;
    }
    out_.passed = true;
    out_.cases_run = successes;
    out_.seconds = seconds_since(t0);
    return out_;
  }

  PropertyOutcome replay(const Replay& rp) {
    out_.replayed = true;
    if (opt_.progress) StderrMessage() << "[properties] " << out_.name << ": replaying " << to_token(rp) << "\n";
    rc::Random r(rp.seed), random;
    for (int i = 0; i <= rp.index; ++i) random = r.split();
    rc::Shrinkable<Result> s = gen_(random, rp.size);
    shared_.generate_only = true;
    for (size_t level = 0; level < rp.path.size(); ++level) {
      const Result res = s.value();  // the recipe only: no engine runs
      rc::Seq<rc::Shrinkable<Result>> shrinks = rc::gen::detail::shrinksOfRecipe(adapter_, res.second);
      for (size_t i = 0; i < rp.path[level]; ++i) {
        if (!shrinks.next()) break;
      }
      rc::Maybe<rc::Shrinkable<Result>> next = shrinks.next();
      if (!next) {
        shared_.generate_only = false;
        out_.error = "--replay " + to_token(rp) + ": shrink " + std::to_string(level) + " does not exist (the token "
                     "comes from another ringkv build, or from other --engine capabilities)";
        out_.report = "  " + out_.error + "\n";
        return out_;
      }
      s = *next;
    }
    shared_.generate_only = false;
    Result res = s.value();
    out_.cases_run = 1;
    if (res.first.result.type != CaseResult::Type::Failure) {
      out_.passed = true;
      out_.report = "  the replayed case passes: " + (shared_.last ? shared_.last->id() : std::string("?")) + "\n";
      return out_;
    }
    out_.failing_case = rp.index;
    out_.first = out_.shrunk = failing(res, rp);
    out_.report = report();
    return out_;
  }

 private:
  using Result = std::pair<rc::detail::TaggedResult, rc::gen::detail::Recipe>;
  struct Body {
    Shared* shared;
    void operator()() const {
      shared->last.reset();  // a run that fails to draw its case must not report the previous one
      Case c = *gen_case(shared->factory->capabilities, shared->prop->options);
      shared->last = c;
      if (!shared->generate_only) shared->prop->run(*shared->factory, c);
    }
  };
  using Adapter = rc::detail::PropertyAdapter<Body>;

  FailingCase failing(const Result& res, const Replay& rp) const {
    FailingCase f = shared_.last ? describe_case(*shared_.last, property_report(res.first.result.description)) : FailingCase{};
    if (!shared_.last) f.reason = property_report(res.first.result.description);  // no case was drawn: the reason says why
    f.replay = to_token(rp);
    return f;
  }

  void first_found() const {
    if (!opt_.progress) return;
    const FailingCase& f = out_.first;
    StderrMessage() << "[properties] " << out_.name << " FAILED at case " << out_.failing_case << " of " << opt_.cases
              << " after " << fmt_seconds(out_.seconds_to_first) << ": " << f.shape << "\n"
              << "  case: " << f.id << "\n"
              << "  first failing step: " << (f.step.empty() ? "(not named by the property)" : f.step) << "\n"
              << "  reason: " << first_line(f.reason) << "\n"
              << "  reproduce: " << reproduce_line(opt_, f.replay) << "\n";
  }

  void shrink(Replay rp, Result best) {
    out_.shrunk = out_.first;
    const double budget = opt_.shrink_time;
    if (budget <= 0) return;
    out_.shrink_attempted = true;
    const auto t0 = Clock::now();
    auto last_line = t0;
    if (opt_.progress) {
      StderrMessage() << "[shrink] " << out_.name << ": shrinking "
                << (std::isinf(budget) ? std::string("with no time limit") : "for at most " + fmt_seconds(budget))
                << " (--shrink-time) ...\n";
    }
    const auto progress = [&](bool accepted) {
      if (!opt_.progress) return;
      const double since = std::chrono::duration<double>(Clock::now() - last_line).count();
      if (!(accepted && (out_.shrink_steps == 1 || since >= 1.0)) && since < 5.0) return;
      last_line = Clock::now();
      StderrMessage() << "[shrink] " << out_.name << ": " << out_.shrink_steps << " steps, " << out_.shrink_tries
                << " tried, case " << out_.shrunk.shape << ", " << fmt_seconds(seconds_since(t0)) << "\n";
    };
    rc::Seq<rc::Shrinkable<Result>> shrinks = rc::gen::detail::shrinksOfRecipe(adapter_, best.second);
    size_t i = 0;
    bool done = false;
    while (seconds_since(t0) < budget) {
      rc::Maybe<rc::Shrinkable<Result>> candidate = shrinks.next();
      if (!candidate) {
        done = true;
        break;
      }
      Result res = candidate->value();
      ++out_.shrink_tries;
      if (res.first.result.type == CaseResult::Type::Failure) {
        rp.path.push_back(i);
        i = 0;
        ++out_.shrink_steps;
        out_.shrunk = failing(res, rp);
        // The accepted case's own recipe gives its shrinks: no second run (RapidCheck's loop re-runs it).
        shrinks = rc::gen::detail::shrinksOfRecipe(adapter_, res.second);
        best = std::move(res);
        progress(true);
      } else {
        ++i;
        progress(false);
      }
    }
    out_.fully_shrunk = done;
    out_.seconds_shrinking = seconds_since(t0);
    if (opt_.progress) {
      StderrMessage() << "[shrink] " << out_.name << ": "
                << (done ? "fully shrunk" : "stopped, the budget is spent: NOT FULLY SHRUNK") << " after "
                << out_.shrink_steps << " steps, " << out_.shrink_tries << " tried, "
                << fmt_seconds(out_.seconds_shrinking) << "; case " << out_.shrunk.shape << "\n";
    }
  }

  std::string report() const {
    std::ostringstream os;
    const FailingCase& f = out_.first;
    const auto step = [](const FailingCase& c) { return c.step.empty() ? std::string("(not named by the property)") : c.step; };
    if (out_.replayed) {
      os << "  replayed case: " << f.shape << "\n    case: " << f.id << "\n    first failing step: " << step(f) << "\n"
         << indent(f.reason, "    ") << "    reproduce: " << reproduce_line(opt_, f.replay) << "\n";
      return os.str();
    }
    os << "  first failing case: case " << out_.failing_case << " of " << opt_.cases << " (seed " << opt_.seed
       << "), found after " << fmt_seconds(out_.seconds_to_first) << ": " << f.shape << "\n"
       << "    case: " << f.id << "\n"
       << "    first failing step: " << step(f) << "\n"
       << "    reason: " << first_line(f.reason) << "\n"
       << "    reproduce: " << reproduce_line(opt_, f.replay) << "\n";
    const FailingCase& s = out_.shrunk;
    if (!out_.shrink_attempted) {
      os << "  not shrunk (--shrink-time 0): the first failing case is the one reported\n"
         << indent(f.reason, "    ");
      return os.str();
    }
    os << "  shrunk case: " << s.shape << "\n    ";
    if (out_.fully_shrunk) {
      os << "fully shrunk: " << out_.shrink_steps << " steps, " << out_.shrink_tries << " candidates tried, "
         << fmt_seconds(out_.seconds_shrinking);
    } else {
      os << "NOT FULLY SHRUNK: the " << fmt_seconds(opt_.shrink_time) << " budget (--shrink-time) was spent after "
         << out_.shrink_steps << " steps, " << out_.shrink_tries
         << " candidates tried; this is the smallest failing case found (--shrink-time inf shrinks to the end)";
    }
    os << "\n    case: " << s.id << "\n    first failing step: " << step(s) << "\n"
       << indent(s.reason, "    ") << "    reproduce: " << reproduce_line(opt_, s.replay) << "\n";
    return os.str();
  }

  const PropertyRunOptions& opt_;
  Shared shared_;
  Adapter adapter_;
  rc::Gen<Result> gen_;
  PropertyOutcome out_;
};

}  // namespace

std::string replay_property(const std::string& token) { return parse_token(token).property; }

void write_stderr(const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is gone: progress is not worth failing the run for
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::vector<std::string> property_names(const PropertyRunOptions& opt) {
  std::vector<std::string> names;
  const std::regex keep(opt.filter.empty() ? ".*" : opt.filter), drop(opt.exclude.empty() ? "$^" : opt.exclude);
  for (const PropertyInfo& p : all_properties()) {
    if (!opt.only.empty() ? p.name == opt.only : std::regex_search(p.name, keep) && !std::regex_search(p.name, drop)) {
      names.push_back(p.name);
    }
  }
  return names;
}

std::vector<PropertyOutcome> run_properties(const EngineFactory& factory, const PropertyRunOptions& opt) {
  std::vector<PropertyOutcome> out;
  std::optional<Replay> replay;
  if (!opt.replay.empty()) replay = parse_token(opt.replay);
  const std::regex keep(opt.filter.empty() ? ".*" : opt.filter), drop(opt.exclude.empty() ? "$^" : opt.exclude);
  if (opt.take_warnings) (void)opt.take_warnings();  // raised before the first property: not a property's
  const auto keep_warnings = [&](PropertyOutcome& o) {
    if (!opt.take_warnings) return;
    std::vector<std::string> w = opt.take_warnings();
    if (w.size() > kMaxPropertyWarnings) {
      const size_t more = w.size() - kMaxPropertyWarnings;
      w.resize(kMaxPropertyWarnings);
      w.push_back("... and " + std::to_string(more) + " more warning(s) like these from this property's cases");
    }
    o.warnings = std::move(w);
  };
  for (const PropertyInfo& p : all_properties()) {
    if (replay) {
      if (replay->property != p.name) continue;
    } else if (!opt.only.empty()) {
      if (opt.only != p.name) continue;
    } else if (!std::regex_search(p.name, keep) || std::regex_search(p.name, drop)) {
      continue;
    }
    const char* skip = p.needs_snapshot && !factory.capabilities.snapshot
                           ? "skipped: the engine exposes no cache snapshot"
                       : p.needs_rollback && !factory.capabilities.rollback
                           ? "skipped: rollback: not supported (the engine does not declare spec 1.1 rollback)"
                           : nullptr;
    if (skip) {
      PropertyOutcome o;
      o.name = p.name;
      o.passed = o.skipped = true;
      o.report = skip;
      out.push_back(o);
      continue;
    }
    PropertyRun run(factory, p, opt);
    out.push_back(replay ? run.replay(*replay) : run.search());
    keep_warnings(out.back());
  }
  if (replay && out.empty()) {
    throw std::invalid_argument("--replay: no property named " + replay->property);
  }
  return out;
}

// ---------------------------------------------------------------- outcomes as JSON

// Every field, by name (a field added to either struct belongs here too).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FailingCase, id, shape, tokens, steps, step, reason, replay)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PropertyOutcome, name, passed, skipped, cases_run, report, failing_case, first, shrunk,
                                   shrink_attempted, fully_shrunk, shrink_steps, shrink_tries, seconds, seconds_to_first,
                                   seconds_shrinking, replayed, error, warnings)

std::string outcome_to_json(const PropertyOutcome& outcome) { return nlohmann::json(outcome).dump(); }

PropertyOutcome outcome_from_json(const std::string& text) {
  try {
    return nlohmann::json::parse(text).get<PropertyOutcome>();
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("a property outcome that is not what outcome_to_json writes: ") + e.what());
  }
}

}  // namespace ringkv::cli
