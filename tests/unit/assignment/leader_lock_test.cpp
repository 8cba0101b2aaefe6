// LeaderLock: when a worker tries to lead (nobody holds the lock, it names this worker, or it
// has not moved for failover_time; never while stopping), what counts as activity (a new
// holder, a call for attention), and what a lost or unrenewable lock costs (the incarnation)
// against a graceful hand-back (which keeps it). Inline calls on the in-memory store.
#include "assignment/leader_lock.h"

#include <gtest/gtest.h>

#include "assignment/membership.h"
#include "coordination/in_memory_coordination_store.h"
#include "kcl/clock.h"

namespace kcl::assignment {
namespace {

using namespace ::kcl::coordination;
using namespace std::chrono_literals;

class LeaderLockTest : public ::testing::Test {
 protected:
  LeaderLockTest()
      : config_(make_config()),
        hold_(config_),
        membership_(store_, hold_, config_, clock_, NoopMetricsSink::instance(), 1,
                    Membership::Callbacks{[] { return WorkerEntry{}; },
                                          [this](const Status&) { ++ended_; }}),
        lock_(store_, membership_, config_, clock_, NoopMetricsSink::instance(), nullptr) {
    const Membership::RenewResult r = membership_.renew().run_inline();
    EXPECT_TRUE(r.registered) << r.status.to_string();
  }

  static LeaseConfig make_config() {
    LeaseConfig c;
    c.application_name = "lock-test";
    c.worker_id = "a";
    c.failover_time = 3s;
    return c;
  }

  std::string incarnation() const { return membership_.entry()->incarnation; }
  std::optional<LeaderEntry> read() { return *store_.read_leader(Consistency::kStrong); }

  ManualClock clock_;
  InMemoryCoordinationStore store_;
  LeaseConfig config_;
  MembershipHold hold_;
  int ended_ = 0;
  Membership membership_;
  LeaderLock lock_;
};

TEST_F(LeaderLockTest, NobodyHoldsItSoTheWorkerTakesItAndLeads) {
  const auto seen = read();
  EXPECT_TRUE(lock_.observe(seen, incarnation(), clock_.now(), false).lead);
  EXPECT_TRUE(lock_.try_lead(seen, clock_.now()).run_inline());
  EXPECT_TRUE(lock_.leading());
  EXPECT_EQ(lock_.terms(), 1u);
  ASSERT_TRUE(read().has_value());
  EXPECT_EQ(read()->owner, "a");
  EXPECT_EQ(read()->owner_incarnation, incarnation());
}

TEST_F(LeaderLockTest, AStoppingWorkerNeverTakesIt) {
  EXPECT_FALSE(lock_.observe(read(), incarnation(), clock_.now(), true).lead);
}

TEST_F(LeaderLockTest, AnotherHoldersLockIsTakenOnlyOnceItHasNotMovedForTheFailoverTime) {
  auto taken = store_.acquire_leadership(read(), "b", "b-1");
  ASSERT_TRUE(taken.ok());
  const LeaderLock::Observed first = lock_.observe(*taken, incarnation(), clock_.now(), false);
  EXPECT_FALSE(first.lead);
  EXPECT_TRUE(first.activity) << "a new holder";
  EXPECT_EQ(lock_.lapses_at(), clock_.now() + config_.failover_time);
  clock_.advance(config_.failover_time - 1ms);
  EXPECT_FALSE(lock_.observe(*taken, incarnation(), clock_.now(), false).lead);
  clock_.advance(1ms);
  const LeaderLock::Observed lapsed = lock_.observe(*taken, incarnation(), clock_.now(), false);
  EXPECT_TRUE(lapsed.lead);
  EXPECT_FALSE(lapsed.activity) << "nothing moved";
}

TEST_F(LeaderLockTest, ACallForAttentionIsActivity) {
  auto taken = store_.acquire_leadership(read(), "b", "b-1");
  ASSERT_TRUE(taken.ok());
  (void)lock_.observe(*taken, incarnation(), clock_.now(), false);
  auto called = store_.call_attention(*taken);
  ASSERT_TRUE(called.ok());
  EXPECT_TRUE(lock_.observe(*called, incarnation(), clock_.now(), false).activity);
}

TEST_F(LeaderLockTest, ALockTakenByAnotherWorkerCostsTheIncarnation) {
  ASSERT_TRUE(lock_.try_lead(read(), clock_.now()).run_inline());
  ASSERT_TRUE(store_.acquire_leadership(read(), "b", "b-1").ok());
  EXPECT_TRUE(lock_.renew(false).run_inline());
  EXPECT_FALSE(lock_.leading());
  EXPECT_EQ(ended_, 1) << "the next leader may fence this incarnation at once";
}

TEST_F(LeaderLockTest, HandingTheLockBackKeepsTheIncarnationAndFreesTheLock) {
  ASSERT_TRUE(lock_.try_lead(read(), clock_.now()).run_inline());
  (void)lock_.hand_back().run_inline();
  EXPECT_FALSE(lock_.leading());
  EXPECT_EQ(ended_, 0);
  const auto after = read();
  EXPECT_TRUE(!after || !after->owner) << "the lock still names " << after->owner.value_or("");
  EXPECT_TRUE(lock_.release().run_inline().ok()) << "nothing left to release";
}

}  // namespace
}  // namespace kcl::assignment
