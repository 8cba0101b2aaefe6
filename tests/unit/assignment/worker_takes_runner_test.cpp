// WorkerTakesAssignment's threads on real time (short intervals), over the in-memory store.
// Waits for conditions with deadlines, never for fixed times.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "assignment/worker_takes_assignment.h"
#include "leases/in_memory_lease_store.h"
#include "support/captured_log.h"
#include "support/eventually.h"
#include "support/lease_test_util.h"
#include "support/thread_names.h"

namespace kcl::leases {
namespace {

using namespace ::kcl::assignment;
using namespace ::kcl::coordination;

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

LeaseConfig fast(const std::string& id) {
  LeaseConfig c = leases::testing::test_config(id);
  c.failover_time = 300ms;  // renew every 100 ms, give up after 270 ms
  c.take_interval = 100ms;
  return c;
}

using kcl::testing::eventually;
using leases::InMemoryLeaseStore;

AssignmentParts parts(InMemoryLeaseStore& store, std::uint64_t seed) {
  AssignmentParts p;
  p.store = &store;
  p.clock = &SystemClock::instance();
  p.metrics = &NoopMetricsSink::instance();
  p.seed = seed;
  return p;
}

TEST(WorkerTakesAssignmentTest, TakesRenewsBalancesAndFailsOver) {
  InMemoryLeaseStore store;
  leases::testing::add_free_leases(store, 6);
  WorkerTakesAssignment ra(fast("A"), parts(store, 1));
  WorkerTakesAssignment rb(fast("B"), parts(store, 2));
  leases::HeldLeases& a = ra.held();
  leases::HeldLeases& b = rb.held();
  ra.start();
  ASSERT_TRUE(eventually([&] { return a.held_count() == 6; }));
  // The coordinator times the passes; each runs on a lane of its own, named for what it does
  // (top -H), so a slow take pass never delays a renewal.
  EXPECT_TRUE(eventually([] {
    auto names = kcl::testing::thread_names();
    return names["kcl-coordinate"] == 1 && names["kcl-io-renew"] == 1 && names["kcl-io-poll"] == 1;
  }));
  // Renewals keep it: after many failover times A still holds everything.
  const auto counter = store.peek(leases::testing::shard(0))->lease_counter;
  ASSERT_TRUE(eventually(
      [&] { return store.peek(leases::testing::shard(0))->lease_counter > counter + 5; }));
  EXPECT_EQ(a.held_count(), 6u);

  rb.start();
  ASSERT_TRUE(eventually([&] { return a.held_count() == 3 && b.held_count() == 3; }))
      << a.held_count() << "/" << b.held_count();

  // A's threads stop without handing back (as if the process died): B takes A's leases once
  // they expire, and A itself stops claiming them by its own deadline.
  const auto stopped = Steady::now();
  ra.stop();
  ASSERT_TRUE(eventually([&] { return b.held_count() == 6; }));
  const auto took = Steady::now() - stopped;
  EXPECT_GE(took, 300ms - 110ms);       // A renewed at most a renew interval (+jitter) before
  EXPECT_LE(took, 300ms + 100ms + 1s);  // the tight bound is checked against dynalite
  EXPECT_EQ(a.held_count(), 0u) << "past its deadline A does not report the leases as held";
  rb.stop();
}

// Take passes failing in a row (the Scan denied): nothing was logged and nothing reported,
// so the worker read nothing without a word and /healthz showed no warning. Now the series is
// logged once with its count and reported among the failing calls.
TEST(WorkerTakesAssignmentTest, FailingPassesAreLoggedOncePerSeriesAndReported) {
  InMemoryLeaseStore store;
  leases::testing::add_free_leases(store, 2);
  store.fail_next(1000000, StatusCode::kPermissionDenied);
  kcl::testing::CapturedLog log(LogLevel::kInfo);
  AssignmentParts p = parts(store, 1);
  p.logger = &log;
  WorkerTakesAssignment a(fast("A"), p);
  a.start();
  ASSERT_TRUE(eventually([&] {
    for (const FailingCalls& f : a.report().failing) {
      if (f.operation == "take_pass" && f.consecutive >= 5) return true;
    }
    return false;
  })) << "no failing take pass reported";
  a.stop();
  std::size_t lines = 0;
  for (const std::string& line : log.lines()) {
    if (line.find("lease take pass failed") != std::string::npos) ++lines;
  }
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 3u) << "logged at every pass";
}

TEST(WorkerTakesAssignmentTest, GracefulHandBackIsTakenOnTheNextPass) {
  InMemoryLeaseStore store;
  leases::testing::add_free_leases(store, 4);
  LeaseConfig slow_failover = fast("A");
  slow_failover.failover_time = 10s;  // a crash would leave the leases for 10 s
  slow_failover.take_interval = 100ms;
  LeaseConfig slow_b = slow_failover;
  slow_b.worker_id = "B";
  WorkerTakesAssignment ra(slow_failover, parts(store, 1));
  WorkerTakesAssignment rb(slow_b, parts(store, 2));
  leases::HeldLeases& a = ra.held();
  leases::HeldLeases& b = rb.held();
  ra.start();
  ASSERT_TRUE(eventually([&] { return a.held_count() == 4; }));
  rb.start();
  ASSERT_TRUE(eventually([&] { return a.held_count() == 2 && b.held_count() == 2; }));
  ra.drain();  // a graceful stop: take nothing more, hand everything back
  ASSERT_TRUE(a.release_all().ok());
  ra.stop();
  const auto released = Steady::now();
  ASSERT_TRUE(eventually([&] { return b.held_count() == 4; }));
  EXPECT_LE(Steady::now() - released, 1s) << "not the 10 s failover time";
  rb.stop();
}

}  // namespace
}  // namespace kcl::leases
