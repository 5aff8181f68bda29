// ringkv golden: random golden sets from the property generators, for engines reached through files
// (`ringkv golden generate --random N --seed S`). They cannot run the RapidCheck properties in process;
// a fresh set of small random cases, replayed like the committed set, gives them the generators' reach.
#include "golden/golden.hpp"

#include <string>

#include <rapidcheck.h>

#include "property/properties.hpp"
#include "support/capabilities.hpp"
#include "support/generators.hpp"
#include "support/rng.hpp"

namespace ringkv::golden {

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
    GoldenSpec g{"random_" + std::to_string(seed) + "_" + std::to_string(i), derive_classes(c), std::move(c)};
    set.push_back(std::move(g));
  }
  return set;
}

}  // namespace ringkv::golden
