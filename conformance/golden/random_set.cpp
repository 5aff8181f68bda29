// ringkv golden: random golden sets from the property generators, for engines reached through files
// (`ringkv golden generate --random N --seed S`). They cannot run the RapidCheck properties in process;
// a fresh set of small random cases, replayed like the committed set, gives them the generators' reach.
#include "golden/golden.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <rapidcheck.h>

#include "property/properties.hpp"
#include "support/capabilities.hpp"
#include "support/generators.hpp"
#include "support/rng.hpp"

namespace ringkv::golden {

namespace {

// Spec 1.2 (issue 35): in one case of three, each stream that starts at the start position of an earlier
// stream (another sequence's, or its own before a reset) repeats that stream's first tokens (a shared or
// re-sent prefix): by turns fewer than the smallest sliding window W (1 .. W - 1) and more (W + 1 ..
// W + 8), so random sets draw prefix-shared and prefix-reused. Cases with rollbacks keep independent
// data. Only the data change: the schedule is what gen_case drew.
void declare_random_prefixes(conformance::Case& c, uint64_t s) {
  if (conformance::ScheduleTracker::has_rollbacks(c)) return;
  struct Start {
    int stream;
    int64_t p0;
  };
  std::vector<Start> starts;
  for (int b = 0; b < c.config.batch; ++b) starts.push_back({c.initial_stream(b), start_position(c.config, b)});
  for (const conformance::StepPlan& st : c.steps) {
    for (const conformance::ResetPlan& r : st.resets) starts.push_back({r.stream, r.start_position});
  }
  int64_t W = 0;  // the smallest sliding window (0: none)
  for (const LayerConfig& l : c.config.layers) {
    if (conformance::is_sliding(l, c.config)) W = W == 0 ? l.window : std::min(W, l.window);
  }
  if (W == 0) W = 8;
  for (size_t x = 1; x < starts.size(); ++x) {
    for (size_t y = 0; y < x; ++y) {
      const bool taken = std::any_of(c.shared_prefixes.begin(), c.shared_prefixes.end(),
                                     [&](const conformance::SharedPrefix& p) { return p.stream == starts[x].stream; });
      if (taken || starts[y].p0 != starts[x].p0 || starts[y].stream == starts[x].stream) continue;
      const uint64_t h = conformance::hash_coords(0x707265666978ull, s, x);
      const int64_t n = (c.shared_prefixes.size() % 2 == 0 || W == 1) ? W + 1 + static_cast<int64_t>(h % 8)
                                                                       : 1 + static_cast<int64_t>(h % static_cast<uint64_t>(W - 1));
      c.shared_prefixes.push_back({starts[x].stream, starts[y].stream, n});
      try {
        conformance::check_shared_prefixes(c);  // a stream id that starts twice could close a cycle
      } catch (const std::logic_error&) {
        c.shared_prefixes.pop_back();
        continue;
      }
      break;
    }
  }
}

}  // namespace

conformance::CaseOptions random_set_options() {
  conformance::CaseOptions o;
  o.max_window = 16;        // small windows: many wraps in few tokens
  o.max_batch = 3;
  o.max_layers = 2;
  o.work_budget = 40'000;   // small files: a few hundred cases stay a few tens of MB at most
  return o;
}

std::vector<GoldenSpec> random_golden_set(int n, uint64_t seed, const Capabilities& caps) {
  if (n < 1 || n > 100000) throw Error("random golden set: n = " + std::to_string(n) + " must be in [1, 100000]");
  std::vector<GoldenSpec> set;
  const std::vector<conformance::PropertyInfo>& properties = conformance::all_properties();
  for (int i = 0; i < n; ++i) {
    // Case i depends on (seed, i) only, and grows with i as a property's cases do (size i % 100).
    const uint64_t s = conformance::hash_coords(0x72616e646f6dull, seed, static_cast<uint64_t>(i));
    // Case i draws its schedule as property i mod 13 does, so rollback schedules come in the proportion
    // the properties use (the Rollback property's generator, 1 case in 13) wherever the capabilities
    // declare rollback (spec 1.1); without it, every case is a spec 1 case.
    conformance::CaseOptions opt = random_set_options();
    opt.rollbacks = caps.rollback && properties[static_cast<size_t>(i) % properties.size()].options.rollbacks;
    conformance::Case c = conformance::gen_case(caps, opt)(rc::Random(s), i % 100).value();
    conformance::freeze_needles(c);
    if (const std::string gap = conformance::capability_gap(caps, c); !gap.empty()) {
      throw Error("random golden set: the generator left the capabilities (" + gap + ") for case " + std::to_string(i));
    }
    if (i % 3 == 2) declare_random_prefixes(c, s);
    GoldenSpec g{"random_" + std::to_string(seed) + "_" + std::to_string(i), derive_classes(c), std::move(c)};
    set.push_back(std::move(g));
  }
  return set;
}

}  // namespace ringkv::golden
