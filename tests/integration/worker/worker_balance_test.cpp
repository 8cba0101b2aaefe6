// Worker against kinesalite + dynalite: two workers of one application share a 4-shard
// stream 2/2 (the second one steals from the first until balanced), every record is
// delivered, and graceful shutdown hands every lease back (no owner left in the table).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "worker_test_support.h"

namespace kcl::worker_test {
namespace {

class WorkerBalanceTest : public WorkerTest {
 protected:
  // Owner -> number of leases, from the table.
  std::map<std::string, int> owners() {
    std::map<std::string, int> out;
    for (const auto& l : leases()) out[l.lease_owner.value_or("")]++;
    return out;
  }
};

TEST_F(WorkerBalanceTest, TwoWorkersSplitFourShardsTwoTwoAndHandThemBackOnShutdown) {
  create_stream(4);
  const auto first = names("r", 0, 40);
  ASSERT_EQ(put(first).size(), 40u);

  Worker a(config("A"), factory("A"));
  ASSERT_TRUE(a.start().ok());
  ASSERT_TRUE(eventually([&] { return a.stats().leases_held == 4; }, 30s)) << a.stats().leases_held;
  Worker b(config("B"), factory("B"));
  ASSERT_TRUE(b.start().ok());

  ASSERT_TRUE(eventually(
      [&] {
        auto o = owners();
        return o["A"] == 2 && o["B"] == 2 && a.stats().leases_held == 2 &&
               b.stats().leases_held == 2;
      },
      60s))
      << "A holds " << a.stats().leases_held << ", B holds " << b.stats().leases_held;

  // Balanced: records written now reach both workers, and everything is delivered.
  const auto second = names("r", 40, 40);
  ASSERT_EQ(put(second).size(), 40u);
  ASSERT_TRUE(log_->wait_until(
      [&](const std::vector<Event>& ev) {
        for (const auto& d : first) {
          if (!EventLog::delivered(ev, d)) return false;
        }
        for (const auto& d : second) {
          if (!EventLog::delivered(ev, d)) return false;
        }
        return true;
      },
      60s));
  {
    const auto ev = log_->events();
    std::set<std::string> from_a;
    std::set<std::string> from_b;
    for (const auto& r : EventLog::records(ev, "A")) from_a.insert(r.data);
    for (const auto& r : EventLog::records(ev, "B")) from_b.insert(r.data);
    std::size_t a_second = 0;
    std::size_t b_second = 0;
    for (const auto& d : second) {
      a_second += from_a.count(d);
      b_second += from_b.count(d);
    }
    EXPECT_GT(a_second, 0u);
    EXPECT_GT(b_second, 0u);
    // The balance held while the records were read: still 2/2.
    EXPECT_EQ(a.stats().leases_held, 2u);
    EXPECT_EQ(b.stats().leases_held, 2u);
  }

  auto done_a = a.shutdown();
  auto done_b = b.shutdown();
  ASSERT_EQ(done_a.wait_for(30s), std::future_status::ready);
  ASSERT_EQ(done_b.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(done_a.get().ok()) << done_a.get();
  EXPECT_TRUE(done_b.get().ok()) << done_b.get();

  const auto all = leases();
  ASSERT_EQ(all.size(), 4u);
  for (const auto& l : all) {
    EXPECT_FALSE(l.lease_owner.has_value()) << l.lease_key << " still owned by " << *l.lease_owner;
    // The final checkpoints of shutdown_requested are in the table.
    EXPECT_TRUE(l.checkpoint.is_sequence_number())
        << l.lease_key << " " << l.checkpoint.to_string();
  }
  const auto ev = log_->events();
  // Each worker's processors were asked to shut down, one per lease it held at the end.
  EXPECT_EQ(EventLog::count(ev, EventKind::kShutdownRequested, "", "A"), 2u);
  EXPECT_EQ(EventLog::count(ev, EventKind::kShutdownRequested, "", "B"), 2u);
}

}  // namespace
}  // namespace kcl::worker_test
