// Property 3, second half: no allocation happens after construction. This
// binary replaces the global operator new to count allocations, so it is
// separate from the other tests.
#include <atomic>
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "ringkv/reference_engine.hpp"
#include "support/case.hpp"
#include "support/generators.hpp"
#include "support/show.hpp"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// GCC cannot see that these deletes pair with the malloc-based news above them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace ringkv::conformance {
namespace {

struct PreparedStep {
  std::vector<SequenceRollback> rollbacks;
  std::vector<SequenceReset> resets;
  std::vector<std::vector<float>> q, k, v, out;
  std::vector<SequenceStep> appends;
};

// Builds every step's buffers before the engine runs, so the count covers the engine alone.
std::vector<PreparedStep> prepare(const Case& c) {
  const Config& cfg = c.config;
  const auto L = static_cast<int64_t>(cfg.layers.size());
  std::vector<PreparedStep> steps(c.steps.size());
  std::vector<int> stream(static_cast<size_t>(cfg.batch));
  std::vector<int64_t> seen(static_cast<size_t>(cfg.batch), 0);
  for (int s = 0; s < cfg.batch; ++s) stream[static_cast<size_t>(s)] = c.initial_stream(s);
  ScheduleTracker tracker(c);
  for (size_t i = 0; i < c.steps.size(); ++i) {
    PreparedStep& p = steps[i];
    // A refused step (spec 1.1) throws, and an exception allocates: only honoured steps are sent.
    if (!tracker.honoured(c.steps[i])) continue;
    tracker.apply(c.steps[i]);
    for (const RollbackPlan& rb : c.steps[i].rollbacks) {
      p.rollbacks.push_back({rb.sequence, rb.n_tokens});
      stream[static_cast<size_t>(rb.sequence)] = rb.stream;
      seen[static_cast<size_t>(rb.sequence)] -= rb.n_tokens;
    }
    for (const ResetPlan& r : c.steps[i].resets) {
      p.resets.push_back({r.sequence, r.start_position});
      stream[static_cast<size_t>(r.sequence)] = r.stream;
      seen[static_cast<size_t>(r.sequence)] = 0;
    }
    for (int s = 0; s < cfg.batch; ++s) {
      const int64_t n = c.steps[i].tokens[static_cast<size_t>(s)];
      if (n == 0) continue;
      auto& q = p.q.emplace_back(static_cast<size_t>(L * n * cfg.num_q_heads * cfg.head_dim));
      auto& k = p.k.emplace_back(static_cast<size_t>(L * n * cfg.num_kv_heads * cfg.head_dim));
      auto& v = p.v.emplace_back(k.size());
      p.out.emplace_back(q.size());
      fill_chunk(c, Tensor::q, stream[static_cast<size_t>(s)], seen[static_cast<size_t>(s)], n, q.data());
      fill_chunk(c, Tensor::k, stream[static_cast<size_t>(s)], seen[static_cast<size_t>(s)], n, k.data());
      fill_chunk(c, Tensor::v, stream[static_cast<size_t>(s)], seen[static_cast<size_t>(s)], n, v.data());
      seen[static_cast<size_t>(s)] += n;
    }
    size_t a = 0;
    for (int s = 0; s < cfg.batch; ++s) {
      const int64_t n = c.steps[i].tokens[static_cast<size_t>(s)];
      if (n == 0) continue;
      p.appends.push_back({s, n, p.q[a].data(), p.k[a].data(), p.v[a].data(), p.out[a].data()});
      ++a;
    }
  }
  return steps;
}

void expect_no_allocation(const Case& c) {
  std::vector<PreparedStep> steps = prepare(c);
  ReferenceEngine engine(c.config);
  const long before = g_allocations.load();
  for (const PreparedStep& p : steps) engine.step(StepBatch{p.resets, p.appends, p.rollbacks});
  engine.reset(0, 0);
  const long during = g_allocations.load() - before;
  RC_ASSERT(during == 0L);
}

RC_GTEST_PROP(ReferenceEngine, NoAllocationAfterConstruction, ()) {
  expect_no_allocation(*gen_case(ReferenceEngine::capabilities()));
}

// Spec 1.1: rollbacks (and the reserve's larger rings) allocate nothing either.
RC_GTEST_PROP(ReferenceEngine, NoAllocationAfterConstructionWithRollbacks, ()) {
  const Case c = *gen_rollback_case(ReferenceEngine::capabilities());
  RC_TAG(ScheduleTracker::has_rollbacks(c) ? "with rollbacks" : "without");
  expect_no_allocation(c);
}

// The counter works: a vector allocation is seen.
TEST(AllocationCounter, CountsAVectorAllocation) {
  const long before = g_allocations.load();
  std::vector<int>* v = new std::vector<int>(100);
  const long after = g_allocations.load();
  delete v;
  EXPECT_GE(after - before, 2);
}

}  // namespace
}  // namespace ringkv::conformance
