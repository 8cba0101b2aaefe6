// LeaseAdopter and the tenures of HeldLeases: a lease the worker still holds, but whose hold
// deadline has passed while a heartbeat or lock renewal is late, is not taken again. The
// membership decides: a renewal that lands makes the lease current again in the same tenure;
// a lapse gives every lease up (the listener is told), and only then is it adopted anew.
// Taking it in between would start a second tenure beside the first one's consumer, whose
// checkpoints would then fail without it ever being told its lease had ended.
#include "assignment/lease_adopter.h"

#include <gtest/gtest.h>

#include <coroutine>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "assignment/membership.h"
#include "kcl/clock.h"
#include "leases/held_leases.h"
#include "leases/in_memory_lease_store.h"

namespace kcl::assignment {
namespace {

using namespace std::chrono_literals;

class Listener final : public leases::LeaseListener {
 public:
  void on_lease_gained(const Lease& lease) override {
    events.push_back("gained " + lease.lease_key);
  }
  void on_lease_lost(const std::string& key, const Status&) override {
    events.push_back("lost " + key);
  }
  std::vector<std::string> events;
};

class LeaseAdopterTest : public ::testing::Test {
 protected:
  LeaseAdopterTest()
      : config_(make_config()),
        hold_(std::make_shared<MembershipHold>(config_)),
        held_(store_, config_, clock_, NoopMetricsSink::instance(), hold_),
        adopter_(held_, store_, config_, clock_, NoopMetricsSink::instance()) {
    held_.set_listener(&listener_);
    Lease l;
    l.lease_key = kKey;
    l.lease_owner = "a";  // the leader assigned it to this worker
    store_.put(l);
    hold_->set_basis(clock_.now());
  }

  static LeaseConfig make_config() {
    LeaseConfig c;
    c.application_name = "adopter-test";
    c.worker_id = "a";
    c.assignment = LeaseAssignment::kLeader;
    c.failover_time = 2s;
    return c;
  }

  std::int64_t counter_in_table() const {
    for (const Lease& l : store_.snapshot()) {
      if (l.lease_key == kKey) return l.lease_counter;
    }
    return -1;
  }

  static constexpr const char* kKey = "shardId-000000000000";
  ManualClock clock_;
  leases::InMemoryLeaseStore store_;
  LeaseConfig config_;
  std::shared_ptr<MembershipHold> hold_;
  leases::HeldLeases held_;
  LeaseAdopter adopter_;
  Listener listener_;
};

TEST_F(LeaseAdopterTest, ALeaseHeldPastItsHoldDeadlineIsNotTakenAgainBeforeTheMembershipDecides) {
  LookResult first = adopter_.discover().run_inline();
  ASSERT_TRUE(first.status.ok()) << first.status.to_string();
  ASSERT_EQ(first.gained, std::vector<std::string>{kKey});
  const auto tenure = held_.tenure_of(kKey);
  ASSERT_TRUE(tenure.has_value());
  const std::int64_t counter = counter_in_table();

  // The heartbeat is late: the hold deadline passes, the membership has not lapsed yet.
  clock_.advance(config_.failover_time);
  ASSERT_FALSE(held_.holds(kKey));
  LookResult discovered = adopter_.discover().run_inline();
  EXPECT_TRUE(discovered.gained.empty());
  EXPECT_EQ(held_.tenure_of(kKey), tenure) << "a second tenure began beside the first";
  EXPECT_EQ(counter_in_table(), counter) << "the lease was taken again";

  // The late renewal lands: the same tenure holds the lease again.
  hold_->set_basis(clock_.now());
  EXPECT_TRUE(held_.holds(kKey));
  EXPECT_EQ(held_.tenure_of(kKey), tenure);
  EXPECT_EQ(listener_.events, std::vector<std::string>{"gained " + std::string(kKey)});
}

TEST_F(LeaseAdopterTest, AfterTheMembershipLapsesTheLeaseIsAdoptedInANewTenure) {
  ASSERT_EQ(adopter_.discover().run_inline().gained.size(), 1u);
  const auto tenure = held_.tenure_of(kKey);
  clock_.advance(config_.failover_time);
  // What Membership::abandon does through its ended callback.
  adopter_.membership_ended(Status(StatusCode::kLeaseLost, "lapsed"));
  ASSERT_FALSE(held_.tenure_of(kKey).has_value());
  hold_->set_basis(clock_.now());  // registered again
  LookResult again = adopter_.discover().run_inline();
  EXPECT_EQ(again.gained, std::vector<std::string>{kKey});
  ASSERT_TRUE(held_.tenure_of(kKey).has_value());
  EXPECT_NE(held_.tenure_of(kKey), tenure);
  EXPECT_EQ(listener_.events,
            (std::vector<std::string>{"gained " + std::string(kKey), "lost " + std::string(kKey),
                                      "gained " + std::string(kKey)}));
}

// Whatever path takes a lease the worker still holds, the earlier tenure ends first, and the
// listener hears of it: its consumer stops rather than run on with checkpoints that fail.
TEST_F(LeaseAdopterTest, GainingALeaseStillHeldEndsTheEarlierTenureAndSaysSo) {
  ASSERT_EQ(adopter_.discover().run_inline().gained.size(), 1u);
  const auto tenure = held_.tenure_of(kKey);
  const Lease current = *held_.held_lease(kKey);
  auto taken = store_.take_lease(current, "a");
  ASSERT_TRUE(taken.ok());
  held_.gain(*taken, clock_.now());
  EXPECT_NE(held_.tenure_of(kKey), tenure);
  EXPECT_EQ(listener_.events,
            (std::vector<std::string>{"gained " + std::string(kKey), "lost " + std::string(kKey),
                                      "gained " + std::string(kKey)}));
}

// A worker whose membership ends while it hands a lease off (its consumer stops without
// completing the handoff) completes the handoff at its next discover(), when it registered
// again: the receiver takes the lease then instead of after handoff_timeout. The owner index
// does not find the lease (its leaseOwner is the receiver already); without this the
// receiver waited, and a fleet stopped meanwhile left the lease owned.
TEST_F(LeaseAdopterTest, AHandoffInProgressWhenTheMembershipEndsIsCompletedByTheNextDiscover) {
  ASSERT_EQ(adopter_.discover().run_inline().gained.size(), 1u);
  auto handed = store_.initiate_handoff(*held_.held_lease(kKey), "b");  // the leader's move
  ASSERT_TRUE(handed.ok()) << handed.status().to_string();
  const LookResult noted = adopter_.discover().run_inline();
  ASSERT_EQ(noted.handoffs_requested, std::vector<std::string>{kKey});
  clock_.advance(config_.failover_time);
  adopter_.membership_ended(Status(StatusCode::kLeaseLost, "lapsed"));
  hold_->set_basis(clock_.now());  // registered again
  LookResult after = adopter_.discover().run_inline();
  ASSERT_TRUE(after.status.ok()) << after.status.to_string();
  const Lease now = *store_.get_lease(kKey).value();
  EXPECT_EQ(now.lease_owner, std::optional<std::string>("b"));
  EXPECT_FALSE(now.checkpoint_owner.has_value()) << "the handoff was left pending";
}

// A worker that stops while a lease is being handed to it (the old owner has not completed
// the handoff) is told of that lease by hand_back_unread(); hand_back() then gives it back
// (the agent asks for it when the old owner no longer reads: AssignmentAgent), so no lease is
// left owned by a worker that is gone. The old owner's writes then fail on the counter.
TEST_F(LeaseAdopterTest, ALeaseStillBeingHandedToAStoppingWorkerIsReportedAndCanBeHandedBack) {
  Lease l;
  l.lease_key = kKey;
  l.lease_owner = "x";
  store_.put(l);
  auto handed = store_.initiate_handoff(*store_.get_lease(kKey).value(), "a");
  ASSERT_TRUE(handed.ok()) << handed.status().to_string();
  LookResult seen = adopter_.discover().run_inline();
  ASSERT_TRUE(seen.gained.empty());
  ASSERT_TRUE(adopter_.has_pending_incoming());
  adopter_.stop_taking();
  auto left = adopter_.hand_back_unread().run_inline();
  ASSERT_TRUE(left.ok()) << left.status().to_string();
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].key, kKey);
  EXPECT_EQ((*left)[0].from, "x");
  EXPECT_EQ(store_.get_lease(kKey).value()->lease_owner, std::optional<std::string>("a"))
      << "left to the old owner until asked";
  Status back = adopter_.hand_back(kKey).run_inline();
  ASSERT_TRUE(back.ok()) << back.to_string();
  const Lease now = *store_.get_lease(kKey).value();
  EXPECT_FALSE(now.lease_owner.has_value()) << "still owned by " << *now.lease_owner;
  EXPECT_FALSE(now.checkpoint_owner.has_value());
  auto late = store_.evict_lease(*handed);  // the old owner completing the handoff
  EXPECT_EQ(late.status().code(), StatusCode::kConditionFailed);
}

// Holds every call until step() runs the oldest and resumes the step that awaited it, as the
// coordinator's lanes do, in an order the test chooses.
class QueuedRunner final : public CallRunner {
 public:
  void run(Lane, std::function<void()> call, std::coroutine_handle<> waiting) override {
    calls_.push_back({std::move(call), waiting});
  }
  bool step() {
    if (calls_.empty()) return false;
    auto [call, waiting] = std::move(calls_.front());
    calls_.pop_front();
    call();
    waiting.resume();
    return true;
  }

 private:
  std::deque<std::pair<std::function<void()>, std::coroutine_handle<>>> calls_;
};

// The poll step and the leader's step (after a pass that moved one of its leases) read the
// same lease before either took it: one take lands, the other's condition fails, and the lease
// read again is this worker's. It is not taken a second time: that would end the first tenure
// and start a second consumer beside it (seen as records delivered twice by a worker on a
// fake clock).
TEST_F(LeaseAdopterTest, TwoStepsLookingAtOneLeaseAtOnceTakeItOnce) {
  QueuedRunner runner;
  adopter_.set_call_runner(&runner);
  CallTask<LookResult> poll = adopter_.discover();
  CallTask<LookResult> leader = adopter_.discover();
  poll.start();    // awaits its Query of the owner index
  leader.start();  // awaits its Query too: neither holds the lease yet
  while (runner.step()) {
  }
  ASSERT_TRUE(poll.done() && leader.done());
  EXPECT_TRUE(poll.result().status.ok());
  EXPECT_TRUE(leader.result().status.ok());
  EXPECT_EQ(listener_.events, std::vector<std::string>{"gained " + std::string(kKey)});
  EXPECT_EQ(held_.tenure_of(kKey), std::optional<std::uint64_t>(1));
  EXPECT_EQ(counter_in_table(), 1) << "one take of the lease";
}

}  // namespace
}  // namespace kcl::assignment
