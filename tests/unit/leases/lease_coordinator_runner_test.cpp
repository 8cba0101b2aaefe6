// The threaded runner on real time (short intervals), over the in-memory store. Waits for
// conditions with deadlines, never for fixed times.
#include "leases/lease_coordinator_runner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "leases/in_memory_lease_store.h"
#include "unit/leases/lease_test_util.h"

namespace kcl::leases {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

LeaseConfig fast(const std::string& id) {
  LeaseConfig c = testing::test_config(id);
  c.failover_time = 300ms;  // renew every 100 ms, give up after 270 ms
  c.take_interval = 100ms;
  return c;
}

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds deadline = 10s) {
  auto until = Steady::now() + deadline;
  while (Steady::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

TEST(LeaseCoordinatorRunnerTest, TakesRenewsBalancesAndFailsOver) {
  InMemoryLeaseStore store;
  testing::add_free_leases(store, 6);
  LeaseCoordinator a(store, fast("A"), SystemClock::instance(), NoopMetricsSink::instance(), 1);
  LeaseCoordinator b(store, fast("B"), SystemClock::instance(), NoopMetricsSink::instance(), 2);
  LeaseCoordinatorRunner ra(a, 1);
  ra.start();
  ASSERT_TRUE(eventually([&] { return a.held_count() == 6; }));
  // Renewals keep it: after many failover times A still holds everything.
  const auto counter = store.peek(testing::shard(0))->lease_counter;
  ASSERT_TRUE(
      eventually([&] { return store.peek(testing::shard(0))->lease_counter > counter + 5; }));
  EXPECT_EQ(a.held_count(), 6u);

  LeaseCoordinatorRunner rb(b, 2);
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

TEST(LeaseCoordinatorRunnerTest, GracefulHandBackIsTakenOnTheNextPass) {
  InMemoryLeaseStore store;
  testing::add_free_leases(store, 4);
  LeaseConfig slow_failover = fast("A");
  slow_failover.failover_time = 10s;  // a crash would leave the leases for 10 s
  slow_failover.take_interval = 100ms;
  LeaseConfig slow_b = slow_failover;
  slow_b.worker_id = "B";
  LeaseCoordinator a(store, slow_failover, SystemClock::instance(), NoopMetricsSink::instance(), 1);
  LeaseCoordinator b(store, slow_b, SystemClock::instance(), NoopMetricsSink::instance(), 2);
  LeaseCoordinatorRunner ra(a, 1);
  LeaseCoordinatorRunner rb(b, 2);
  ra.start();
  ASSERT_TRUE(eventually([&] { return a.held_count() == 4; }));
  rb.start();
  ASSERT_TRUE(eventually([&] { return a.held_count() == 2 && b.held_count() == 2; }));
  a.stop_taking();
  ASSERT_TRUE(a.release_all().ok());
  ra.stop();
  const auto released = Steady::now();
  ASSERT_TRUE(eventually([&] { return b.held_count() == 4; }));
  EXPECT_LE(Steady::now() - released, 1s) << "not the 10 s failover time";
  rb.stop();
}

}  // namespace
}  // namespace kcl::leases
