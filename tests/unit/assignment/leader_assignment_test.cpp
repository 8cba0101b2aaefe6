// Leader-based assignment (LeaseAssignment::kLeader) end to end on a ManualClock: real
// HeldLeases and AssignmentAgents over in-memory lease and coordination stores, each
// worker's heartbeat, poll and leader steps run when they ask to. After every step the test
// checks the safety invariant: no lease is held (HeldLeases::holds) by two workers.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "assignment/assignment_agent.h"
#include "coordination/in_memory_coordination_store.h"
#include "support/captured_log.h"
#include "support/lease_test_util.h"
#include "unit/assignment/faulty_stores.h"
#include "unit/assignment/leader_test_util.h"

namespace kcl::leases {
namespace {

using namespace ::kcl::assignment;
using namespace ::kcl::coordination;

using namespace std::chrono_literals;
using testing::shard;

class NodeListener final : public LeaseListener {
 public:
  void on_lease_gained(const Lease& lease) override { gained.push_back(lease.lease_key); }
  void on_lease_lost(const std::string& key, const Status&) override { lost.push_back(key); }
  void on_handoff_requested(const std::string& key, const std::string&) override {
    handoffs.push_back(key);
  }
  std::vector<std::string> gained, lost, handoffs;
};

struct Node {
  std::string id;
  std::unique_ptr<LeaderAssignment> assignment;
  HeldLeases* coordinator = nullptr;  // the assignment's held leases
  AssignmentAgent* agent = nullptr;   // its steps, run by the test
  NodeListener listener;
  bool running = true;
  bool complete_handoffs = true;  // as a worker whose processor checkpoints at once
  Clock::MonoTime next_heartbeat, next_poll, next_lead;
  std::size_t held() const { return coordinator->held_count(); }
};

class LeaderAssignmentTest : public ::testing::Test {
 protected:
  LeaseConfig config(const std::string& id) {
    LeaseConfig c;
    c.application_name = "leader-test";
    c.worker_id = id;
    c.assignment = LeaseAssignment::kLeader;
    c.interval_jitter = 0;
    return c;
  }

  // `store` and `logger`: the node's own (a faulty store, a captured log); else the test's.
  Node& start(const std::string& id, std::function<void(LeaseConfig&)> tweak = {},
              LeaseStore* store = nullptr, Logger* logger = nullptr,
              CoordinationStore* coordination = nullptr) {
    auto n = std::make_unique<Node>();
    n->id = id;
    LeaseConfig c = config(id);
    if (tweak) tweak(c);
    n->assignment = testing::make_leader_assignment(
        c, store ? *store : leases_, coordination ? *coordination : coordination_, clock_, metrics_,
        logger, static_cast<std::uint64_t>(nodes_.size() + 7));
    n->coordinator = &n->assignment->held();
    n->agent = &n->assignment->agent();
    n->coordinator->set_listener(&n->listener);
    n->next_heartbeat = n->next_poll = n->next_lead = clock_.now();
    nodes_.push_back(std::move(n));
    return *nodes_.back();
  }

  Node& node(const std::string& id) {
    for (auto& n : nodes_) {
      if (n->id == id) return *n;
    }
    throw std::runtime_error("no node " + id);
  }

  Node* leader() {
    for (auto& n : nodes_) {
      if (n->running && n->agent->leading()) return n.get();
    }
    return nullptr;
  }

  void check_invariant() {
    std::map<std::string, int> holders;
    for (auto& n : nodes_) {
      for (const Lease& l : n->coordinator->held_leases()) ++holders[l.lease_key];
    }
    for (auto& [key, count] : holders) {
      if (count > 1) {
        ++violations_;
        ADD_FAILURE() << key << " held by " << count << " workers at once";
      }
    }
  }

  void step(Node& n) {
    const auto now = clock_.now();
    if (n.next_heartbeat <= now) n.next_heartbeat = n.agent->heartbeat_step();
    check_invariant();
    if (n.next_poll <= now) {
      n.next_poll = n.agent->poll_step();
      if (n.complete_handoffs) {
        auto keys = std::move(n.listener.handoffs);
        n.listener.handoffs.clear();
        for (const auto& k : keys) (void)n.coordinator->complete_handoff(k);
      }
    }
    check_invariant();
    if (n.next_lead <= now) n.next_lead = n.agent->leader_step();
    check_invariant();
  }

  // Runs every running node's due steps, 10 ms of fake time at a time, until `done` or
  // `limit` of fake time has passed. Returns whether `done` became true.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
    const auto end = clock_.now() + limit;
    while (clock_.now() < end) {
      for (auto& n : nodes_) {
        if (n->running) step(*n);
      }
      if (done()) return true;
      clock_.advance(10ms);
    }
    return done();
  }
  void run_for(std::chrono::milliseconds d) {
    (void)run_until([] { return false; }, d);
  }
  // A graceful stop as the worker makes it: drain, the consumers stopping for `consumers`
  // (the steps go on meanwhile), the leases handed back, leave.
  void stop(Node& n, std::chrono::milliseconds consumers = 0ms) {
    n.agent->drain();
    run_for(consumers);
    ASSERT_TRUE(n.agent->release_all().ok());
    n.running = false;
    ASSERT_TRUE(n.agent->leave().ok());
  }
  std::size_t total_gains() const {
    std::size_t n = 0;
    for (auto& node : nodes_) n += node->listener.gained.size();
    return n;
  }

  ManualClock clock_;
  InMemoryLeaseStore leases_;
  InMemoryCoordinationStore coordination_;
  testing::RecordingMetrics metrics_;
  std::vector<std::unique_ptr<Node>> nodes_;
  int violations_ = 0;
};

// A discovery that fails for good (a role without dynamodb:Query on the owner index) while
// the lock reads succeed: both were one series, so each poll logged the discovery's failure
// and then the lock read's "recovered", several lines a second for ever. Now the discovery
// has a series of its own, logged once with a count; the lock reads log nothing.
TEST_F(LeaderAssignmentTest, ADiscoveryFailingForGoodIsLoggedOncePerSeriesNotAtEveryPoll) {
  testing::add_free_leases(leases_, 2);
  testing::FaultyLeaseStore faulty(leases_);
  faulty.faults().set_script([](std::string_view op, std::string_view) {
    testing::InjectedFault f;
    if (op == "owned_lease_keys") {
      f.when = testing::InjectedFault::When::kBefore;
      f.code = StatusCode::kPermissionDenied;
    }
    return f;
  });
  kcl::testing::CapturedLog log(LogLevel::kInfo);
  start("a", {}, &faulty, &log);
  run_for(20s);
  std::size_t poll_lines = 0, discovery_lines = 0;
  for (const std::string& line : log.lines()) {
    if (line.find("own-entry poll") != std::string::npos) ++poll_lines;
    if (line.find("lease discovery failed") != std::string::npos) ++discovery_lines;
  }
  EXPECT_EQ(poll_lines, 0u) << "the lock reads succeeded";
  EXPECT_GE(discovery_lines, 1u);
  EXPECT_LE(discovery_lines, 4u) << "logged at every poll";
}

// A stopping worker whose membership is fenced during its stop registers a new incarnation:
// it registered as an ordinary member (draining only from its next heartbeat, seconds later),
// and the leader handed it leases meanwhile. Now it registers draining.
TEST_F(LeaderAssignmentTest, AStoppingWorkerThatRegistersAgainIsStillDraining) {
  testing::add_free_leases(leases_, 2);
  Node& a = start("a");
  ASSERT_TRUE(run_until([&] { return a.held() == 2; }, 10s));
  a.agent->drain();
  run_for(1s);
  auto view = coordination_.read_all(Consistency::kStrong);
  ASSERT_TRUE(view.ok() && view->workers.size() == 1u);
  ASSERT_TRUE(view->workers[0].draining);
  ASSERT_TRUE(coordination_.fence_worker(view->workers[0]).ok());
  ASSERT_TRUE(run_until(
      [&] {
        auto now = coordination_.read_all(Consistency::kStrong);
        return now.ok() && now->workers.size() == 1u &&
               now->workers[0].incarnation != view->workers[0].incarnation;
      },
      10s))
      << "never registered again";
  auto again = coordination_.read_all(Consistency::kStrong);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->workers[0].draining) << "registered again as an ordinary member";
}

// A stopping leader whose hand-back of the lock failed did not try again when it left: the
// lock went on naming its incarnation, the fleet had no leader until it lapsed, and the next
// leader fenced the (still draining) worker at once. Now leave() releases it.
TEST_F(LeaderAssignmentTest, ALockWhoseHandBackFailedIsReleasedWhenTheWorkerLeaves) {
  testing::add_free_leases(leases_, 2);
  testing::FaultyCoordinationStore faulty(coordination_);
  int failures = 1;
  faulty.faults().set_script([&](std::string_view op, std::string_view) {
    testing::InjectedFault f;
    if (op == "release_leadership" && failures > 0) {
      --failures;
      f.when = testing::InjectedFault::When::kBefore;
    }
    return f;
  });
  Node& a = start("a", {}, nullptr, nullptr, &faulty);
  ASSERT_TRUE(run_until([&] { return a.held() == 2 && a.agent->leading(); }, 10s));
  stop(a);
  EXPECT_EQ(failures, 0) << "the hand-back was never tried";
  auto view = coordination_.read_all(Consistency::kStrong);
  ASSERT_TRUE(view.ok());
  ASSERT_TRUE(view->leader.has_value());
  EXPECT_FALSE(view->leader->owner.has_value()) << "the lock still names the worker that left";
}

TEST_F(LeaderAssignmentTest, AJoiningWorkerHoldsItsShareWithinSecondsAndNothingMovesAfterwards) {
  testing::add_free_leases(leases_, 8);
  Node& a = start("a");
  ASSERT_TRUE(run_until([&] { return a.held() == 8; }, 10s)) << "a holds " << a.held();
  ASSERT_TRUE(a.agent->leading());

  const auto joined = clock_.now();
  Node& b = start("b");
  ASSERT_TRUE(run_until([&] { return b.held() == 4 && a.held() == 4; }, 10s))
      << "a " << a.held() << ", b " << b.held();
  const auto took = clock_.now() - joined;
  EXPECT_LE(took, 5s) << "join took "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms";
  EXPECT_EQ(a.listener.lost.size(), 0u) << "planned moves are handoffs, not losses";
  EXPECT_EQ(a.listener.handoffs.size(), 0u);

  const std::size_t gains = total_gains();
  run_for(60s);
  EXPECT_EQ(total_gains(), gains) << "no lease moved in the minute after the join";
  EXPECT_EQ(a.held() + b.held(), 8u);
  EXPECT_EQ(violations_, 0);
}

TEST_F(LeaderAssignmentTest, ACrashedWorkersLeasesMoveWithinFailoverPlusTwoSeconds) {
  testing::add_free_leases(leases_, 8);
  Node& a = start("a");
  Node& b = start("b");
  ASSERT_TRUE(run_until([&] { return a.held() == 4 && b.held() == 4; }, 15s));
  const auto a_leases_before = a.coordinator->held_leases();

  b.running = false;  // SIGKILL
  const auto crashed = clock_.now();
  ASSERT_TRUE(run_until([&] { return a.held() == 8; }, 30s));
  const auto took = clock_.now() - crashed;
  EXPECT_LE(took, 12s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  EXPECT_GE(took, 5s) << "not before the crashed worker's hold could have lapsed";
  for (const Lease& l : a_leases_before) {
    EXPECT_EQ(std::count(a.listener.lost.begin(), a.listener.lost.end(), l.lease_key), 0)
        << "the survivor's own leases never move";
  }
  EXPECT_EQ(violations_, 0);
}

TEST_F(LeaderAssignmentTest, TheLeadersOwnCrashIsSurvivedWithinTheSameBound) {
  testing::add_free_leases(leases_, 9);
  start("a");
  start("b");
  start("c");
  ASSERT_TRUE(run_until(
      [&] {
        for (auto& n : nodes_) {
          if (n->held() != 3) return false;
        }
        return true;
      },
      20s));
  Node* old = leader();
  ASSERT_NE(old, nullptr);
  old->running = false;
  const auto crashed = clock_.now();
  ASSERT_TRUE(run_until(
      [&] {
        std::size_t held = 0;
        for (auto& n : nodes_) {
          if (n->running) held += n->held();
        }
        return held == 9;
      },
      30s));
  const auto took = clock_.now() - crashed;
  EXPECT_LE(took, 12s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  Node* now_leading = leader();
  ASSERT_NE(now_leading, nullptr);
  EXPECT_NE(now_leading, old);
  EXPECT_EQ(violations_, 0);
}

TEST_F(LeaderAssignmentTest, AZombieIsFencedAndNeverHoldsALeaseAnotherWorkerHolds) {
  testing::add_free_leases(leases_, 6);
  Node& a = start("a");
  Node& b = start("b");
  ASSERT_TRUE(run_until([&] { return a.held() == 3 && b.held() == 3; }, 15s));
  Node& zombie = a.agent->leading() ? b : a;
  Node& other = &zombie == &a ? b : a;
  zombie.running = false;  // SIGSTOP
  ASSERT_TRUE(run_until([&] { return other.held() == 6; }, 30s));
  zombie.running = true;  // SIGCONT: its clock says its hold lapsed long ago
  ASSERT_TRUE(run_until([&] { return zombie.held() == 3 && other.held() == 3; }, 20s));
  EXPECT_EQ(zombie.listener.lost.size(), 3u) << "it learned it lost its old leases";
  EXPECT_GE(zombie.agent->membership().incarnations(), 2u) << "it joined again as new";
  EXPECT_EQ(violations_, 0);
}

TEST_F(LeaderAssignmentTest, AStalledRenewalCallCostsNoLease) {
  testing::add_free_leases(leases_, 6);
  Node& a = start("a");
  Node& b = start("b");
  ASSERT_TRUE(run_until([&] { return a.held() == 3 && b.held() == 3; }, 15s));
  // Every call of b fails (a stalled connection) for 3 s: one heartbeat fails, the retry a
  // fifth of an interval later fails too, a later one succeeds well before the hold lapses.
  coordination_.set_partitioned("b", true);
  run_for(3s);
  coordination_.set_partitioned("b", false);
  run_for(20s);
  EXPECT_EQ(b.listener.lost.size(), 0u);
  EXPECT_EQ(b.held(), 3u);
  EXPECT_EQ(a.held(), 3u);

  // Cut off past its hold: it stops holding before anyone else may take its leases.
  coordination_.set_partitioned("b", true);
  ASSERT_TRUE(run_until([&] { return a.held() == 6; }, 30s));
  EXPECT_EQ(b.held(), 0u);
  EXPECT_EQ(b.listener.lost.size(), 3u);
  EXPECT_EQ(violations_, 0);
}

TEST_F(LeaderAssignmentTest, AnOldOwnerThatNeverFinishesIsOverriddenAfterTheHandoffTimeout) {
  testing::add_free_leases(leases_, 4);
  Node& a = start("a", [](LeaseConfig& c) { c.handoff_timeout = 8s; });
  ASSERT_TRUE(run_until([&] { return a.held() == 4; }, 10s));
  a.complete_handoffs = false;  // its processor is stuck in a batch
  Node& b = start("b", [](LeaseConfig& c) { c.handoff_timeout = 8s; });
  run_for(5s);
  EXPECT_EQ(b.held(), 0u) << "b waits for a to finish";
  ASSERT_TRUE(run_until([&] { return b.held() == 2; }, 10s));
  EXPECT_GE(metrics_.count_of("leases.handoffs_forced"), 2);
  EXPECT_EQ(a.held(), 2u) << "a learned it lost them (its next write fails)";
}

TEST_F(LeaderAssignmentTest, ACheckpointDuringAHandoffIsAcceptedFromTheOldOwner) {
  testing::add_free_leases(leases_, 1);
  Node& a = start("a");
  ASSERT_TRUE(run_until([&] { return a.held() == 1; }, 10s));
  Lease held = *a.coordinator->held_lease(shard(0));
  // The leader asks for a handoff to "b" (as LeaseLeader does), before a has noticed.
  ASSERT_TRUE(leases_.initiate_handoff(held, "b").ok());
  CheckpointFields f;
  f.checkpoint = ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136588898");
  auto written = a.coordinator->update_checkpoint(shard(0), f);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->checkpoint, f.checkpoint);
  EXPECT_EQ(written->checkpoint_owner, std::optional<std::string>("a"));
  EXPECT_EQ(a.listener.handoffs, std::vector<std::string>{shard(0)})
      << "the write that found the handoff told the listener";
  ASSERT_TRUE(a.coordinator->complete_handoff(shard(0)).ok());
  auto stored = leases_.peek(shard(0));
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->lease_owner, std::optional<std::string>("b"));
  EXPECT_FALSE(stored->checkpoint_owner);
  EXPECT_EQ(stored->checkpoint, f.checkpoint) << "the new owner starts after the checkpoint";
}

TEST_F(LeaderAssignmentTest, LeasesOfAnUnknownOwnerAreTakenOnlyOnceTheirCounterStopsMoving) {
  Lease dead;
  dead.lease_key = shard(0);
  dead.lease_owner = "java-worker-gone";
  dead.lease_counter = 40;
  leases_.put(dead);
  Lease alive;
  alive.lease_key = shard(1);
  alive.lease_owner = "java-worker-alive";
  alive.lease_counter = 7;
  leases_.put(alive);
  Node& a = start("a");
  // The live one renews every 3 s, as a Java KCL 2.x worker does.
  auto renew_alive = [&] {
    Lease l = *leases_.peek(shard(1));
    ASSERT_TRUE(leases_.renew_lease(l).ok());
  };
  for (int i = 0; i < 10; ++i) {
    run_for(3s);
    renew_alive();
  }
  EXPECT_TRUE(a.coordinator->holds(shard(0))) << "taken after the failover time";
  EXPECT_FALSE(a.coordinator->holds(shard(1))) << "a renewing owner keeps its lease";
  EXPECT_EQ(leases_.peek(shard(1))->lease_owner, std::optional<std::string>("java-worker-alive"));
}

// A lease the table gives a worker is read by that worker whatever the leader told it: here
// no post, no leasesVersion bump and no scan of the leader's (30 s apart) tell anyone of it,
// and the worker finds it by reading the leases the table gives it (every fifth idle read:
// within 5 x idle_lock_read_interval, 25 s with the defaults, plus jitter).
TEST_F(LeaderAssignmentTest, ALeaseTheTableGivesAWorkerIsReadWithoutAnyPost) {
  testing::add_free_leases(leases_, 2);
  Node& a = start("a");
  Node& b = start("b");
  ASSERT_TRUE(run_until([&] { return a.held() == 1 && b.held() == 1; }, 15s));
  run_for(12s);  // every worker idle again
  Node& follower = a.agent->leading() ? b : a;
  Lease extra;
  extra.lease_key = shard(2);
  leases_.put(extra);
  ASSERT_TRUE(leases_.take_lease(extra, follower.id).ok());
  const auto assigned = clock_.now();
  ASSERT_TRUE(run_until([&] { return follower.coordinator->holds(shard(2)); }, 40s))
      << follower.id << " never adopted the lease the table gives it";
  const auto took = clock_.now() - assigned;
  EXPECT_LE(took, 28s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  EXPECT_EQ(violations_, 0);
}

// A fleet stopped gracefully at any moment, here while a dead worker's leases are being
// moved, leaves no lease owned by a worker that stopped: a worker that is stopping is
// assigned nothing, a stopping leader hands the lock over and assigns nothing more, and each
// worker hands back, as it leaves, whatever was assigned to it after its last look. (What the
// dead worker still owns stays in its name; the next fleet takes it once its counter has not
// moved for the failover time.) The parameter: when the stop begins, in ms after the dead
// worker was fenced.
class FleetStopTest : public LeaderAssignmentTest, public ::testing::WithParamInterface<int> {};

TEST_P(FleetStopTest, AFleetStoppedWhileADeadWorkersLeasesMoveLeavesNoLeaseOwnedByIt) {
  testing::add_free_leases(leases_, 6);
  Node& a = start("a");
  Node& b = start("b");
  Node& c = start("c");
  ASSERT_TRUE(run_until([&] { return a.held() == 2 && b.held() == 2 && c.held() == 2; }, 20s));
  Node& dead = c.agent->leading() ? a : c;  // a follower dies: the leader reassigns
  dead.running = false;
  auto fenced = [&] {
    auto view = coordination_.read_all(Consistency::kStrong);
    if (!view.ok()) return false;
    for (const WorkerEntry& w : view->workers) {
      if (w.worker_id == dead.id) return false;
    }
    return true;
  };
  ASSERT_TRUE(run_until(fenced, 30s));
  run_for(std::chrono::milliseconds(GetParam()));
  std::vector<Node*> stopping;
  for (auto& n : nodes_) {
    if (n->running) stopping.push_back(n.get());
  }
  for (Node* n : stopping) n->agent->drain();
  run_for(1500ms);  // the consumers stop meanwhile; the steps go on
  for (Node* n : stopping) {
    ASSERT_TRUE(n->agent->release_all().ok());
    n->running = false;
  }
  for (Node* n : stopping) EXPECT_TRUE(n->agent->leave().ok());
  for (const Lease& l : leases_.snapshot()) {
    if (!l.lease_owner) continue;
    EXPECT_EQ(*l.lease_owner, dead.id) << l.lease_key << " still owned by " << *l.lease_owner;
  }
  EXPECT_EQ(violations_, 0);
}

INSTANTIATE_TEST_SUITE_P(StopMoments, FleetStopTest, ::testing::Range(0, 3001, 250));

// a and b hold two leases each, their processors slow to stop (they do not complete
// handoffs); c joins, and a lease is being handed to it (`handed`, from its old owner).
class MidHandoffTest : public LeaderAssignmentTest {
 protected:
  void SetUp() override {
    testing::add_free_leases(leases_, 4);
    a_ = &start("a");
    b_ = &start("b");
    ASSERT_TRUE(run_until([&] { return a_->held() == 2 && b_->held() == 2; }, 15s));
    a_->complete_handoffs = b_->complete_handoffs = false;
    c_ = &start("c");
    ASSERT_TRUE(run_until([&] { return (handed_ = handing_to_c()).has_value(); }, 15s));
    old_owner_ = &node(*handed_->checkpoint_owner);
  }

  std::optional<Lease> handing_to_c() const {
    for (const Lease& l : leases_.snapshot()) {
      if (l.lease_owner == "c" && l.checkpoint_owner) return l;
    }
    return std::nullopt;
  }

  std::optional<Lease> handed_now() {
    auto l = leases_.get_lease(handed_->lease_key);
    return l.ok() ? *l : std::nullopt;
  }

  Node *a_ = nullptr, *b_ = nullptr, *c_ = nullptr, *old_owner_ = nullptr;
  std::optional<Lease> handed_;
};

// A worker that stops while a lease is still being handed to it leaves that lease to its old
// owner, a member still reading it: a write of the receiver would make the old owner's last
// checkpoint fail (records read twice). The old owner completes the handoff later; the lease
// then names a worker that left, and the leader, which reads such a lease at each pass, moves
// it on at once, not at its next scan of the table (lease_scan_interval, 30 s).
TEST_F(MidHandoffTest, AReceiverThatStopsLeavesTheLeaseToItsOldOwner) {
  ASSERT_NO_FATAL_FAILURE(stop(*c_, 500ms));
  const std::optional<Lease> left = handed_now();
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->checkpoint_owner, handed_->checkpoint_owner)
      << "the handoff was not left to the old owner, which still reads the shard";

  old_owner_->complete_handoffs = true;  // its processor checkpoints and lets go
  const auto completing = clock_.now();
  auto moved_on = [&] {
    const std::optional<Lease> l = handed_now();
    return l && l->lease_owner && *l->lease_owner != "c" && !l->checkpoint_owner &&
           a_->held() + b_->held() == 4;
  };
  ASSERT_TRUE(run_until(moved_on, 40s));
  const auto took = clock_.now() - completing;
  EXPECT_LE(took, 5s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  EXPECT_EQ(violations_, 0);
}

// The same when the old owner never completes the handoff (its processor is stuck): its hold
// of the lease ends (MembershipHold), nobody else would read it, and the leader assigns it once
// it has not moved for handoff_timeout + failover_time, as a live receiver would take it.
TEST_F(MidHandoffTest, AHandoffToAReceiverGoneThatTheOldOwnerNeverCompletesIsAssigned) {
  ASSERT_NO_FATAL_FAILURE(stop(*c_, 500ms));
  ASSERT_EQ(handed_now()->checkpoint_owner, handed_->checkpoint_owner);
  const LeaseConfig defaults;
  run_for(defaults.handoff_timeout + defaults.failover_time + 20s);
  const std::optional<Lease> l = handed_now();
  ASSERT_TRUE(l.has_value());
  EXPECT_FALSE(l->checkpoint_owner.has_value()) << "still handed from " << *l->checkpoint_owner;
  ASSERT_TRUE(l->lease_owner == "a" || l->lease_owner == "b")
      << "owned by " << l->lease_owner.value_or("nobody");
  EXPECT_TRUE(node(*l->lease_owner).coordinator->holds(l->lease_key));
  EXPECT_EQ(violations_, 0);
}

// The same when the old owner is gone (its membership ended, its entry removed) before the
// receiver stops: nobody would complete the handoff, so the receiver hands the lease back and
// the fleet, stopped, leaves no lease owned (seen once in CI as "still owned" after every
// worker exited).
TEST_F(MidHandoffTest, AReceiverThatStopsWhenTheOldOwnerIsGoneHandsTheLeaseBack) {
  old_owner_->running = false;
  auto view = coordination_.read_all(Consistency::kStrong);
  ASSERT_TRUE(view.ok());
  for (const WorkerEntry& w : view->workers) {
    if (w.worker_id == old_owner_->id) {
      ASSERT_TRUE(coordination_.fence_worker(w).ok());
    }
  }
  // The receiver stops before any leader pass sees the old owner gone.
  ASSERT_NO_FATAL_FAILURE(stop(*c_));
  const std::optional<Lease> left = handed_now();
  ASSERT_TRUE(left.has_value());
  EXPECT_FALSE(left->lease_owner.has_value()) << "still owned by " << *left->lease_owner;
  EXPECT_FALSE(left->checkpoint_owner.has_value());
  EXPECT_EQ(violations_, 0);
}

// A fleet stopped while a lease is being handed: the receiver stops first and leaves the lease
// to its old owner, which still reads it; the old owner, stopping later, completes the handoff
// as it hands its leases back and then finds the receiver gone, so it frees the lease instead
// of leaving it in the name of a worker that left (the next fleet would wait the failover
// time for it).
TEST_F(MidHandoffTest, AFleetStoppedWhileALeaseIsHandedLeavesNoLeaseOwned) {
  ASSERT_NO_FATAL_FAILURE(stop(*c_, 500ms));
  ASSERT_EQ(handed_now()->checkpoint_owner, handed_->checkpoint_owner);
  for (Node* n : {a_, b_}) n->agent->drain();
  for (Node* n : {a_, b_}) {
    ASSERT_TRUE(n->agent->release_all().ok());
    n->running = false;
  }
  for (Node* n : {a_, b_}) EXPECT_TRUE(n->agent->leave().ok());
  for (const Lease& l : leases_.snapshot()) {
    EXPECT_FALSE(l.lease_owner.has_value()) << l.lease_key << " still owned by " << *l.lease_owner;
    EXPECT_FALSE(l.checkpoint_owner.has_value()) << l.lease_key;
  }
  EXPECT_EQ(violations_, 0);
}

// The same stop the other way round: the old owner stops first while the receiver goes on;
// the handoff completes and the receiver reads the lease (nothing is freed under it).
TEST_F(MidHandoffTest, AnOldOwnerThatStopsCompletesTheHandoffToALiveReceiver) {
  ASSERT_NO_FATAL_FAILURE(stop(*old_owner_));
  const std::optional<Lease> left = handed_now();
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->lease_owner, "c") << "the handoff to a live receiver was undone";
  EXPECT_FALSE(left->checkpoint_owner.has_value());
  ASSERT_TRUE(run_until([&] { return c_->coordinator->holds(handed_->lease_key); }, 10s));
  EXPECT_EQ(violations_, 0);
}

TEST_F(LeaderAssignmentTest, AGracefulLeaveHandsEverythingOverAtOnce) {
  testing::add_free_leases(leases_, 6);
  Node& a = start("a");
  Node& b = start("b");
  ASSERT_TRUE(run_until([&] { return a.held() == 3 && b.held() == 3; }, 15s));
  Node& leaving = b.agent->leading() ? b : a;  // the leader leaves: the harder case
  Node& staying = &leaving == &a ? b : a;
  ASSERT_TRUE(leaving.agent->release_all().ok());
  leaving.running = false;
  const double lost_before = metrics_.count_of("leader.lost");
  ASSERT_TRUE(leaving.agent->leave().ok());
  // Handing the lock back is planned: not counted as a lost leadership.
  EXPECT_EQ(metrics_.count_of("leader.lost"), lost_before);
  const auto left = clock_.now();
  ASSERT_TRUE(run_until([&] { return staying.held() == 6; }, 15s));
  EXPECT_LE(clock_.now() - left, 4s);
  EXPECT_TRUE(staying.agent->leading());
  EXPECT_EQ(violations_, 0);
}

// A draining leader whose drain heartbeat failed hands the lock back after its next heartbeat
// that lands: it runs no pass any more, and had it kept renewing the lock, the fleet would have
// had no leader until it left (up to shutdown_timeout).
TEST_F(LeaderAssignmentTest, ADrainingLeaderWhoseDrainHeartbeatFailedHandsTheLockBackSoon) {
  testing::add_free_leases(leases_, 4);
  Node& a = start("a");
  Node& b = start("b");
  ASSERT_TRUE(run_until([&] { return a.held() == 2 && b.held() == 2; }, 15s));
  Node& leaving = b.agent->leading() ? b : a;
  Node& staying = &leaving == &a ? b : a;
  coordination_.set_partitioned(leaving.id, true);
  leaving.agent->drain();  // its heartbeat saying draining fails
  coordination_.set_partitioned(leaving.id, false);
  ASSERT_TRUE(leaving.agent->leading());
  ASSERT_TRUE(run_until([&] { return !leaving.agent->leading(); }, 5s))
      << "the draining leader kept the lock";
  EXPECT_TRUE(run_until([&] { return staying.agent->leading(); }, 6s));
  EXPECT_EQ(violations_, 0);
}

// An idle worker reads only the lock; the leader calls its attention there when it assigns it
// a lease, so the lease is taken within a read of the lock (idle_poll_interval, 1 s here), not
// at its next discovery (five such reads).
TEST_F(LeaderAssignmentTest, AnIdleWorkerHearsOfAMoveAtItsNextReadOfTheLock) {
  testing::add_free_leases(leases_, 2);
  auto tweak = [](LeaseConfig& c) { c.idle_poll_interval = 1s; };
  Node& a = start("a", tweak);
  Node& b = start("b", tweak);
  ASSERT_TRUE(run_until([&] { return a.held() == 1 && b.held() == 1; }, 15s));
  run_for(20s);  // every worker idle again
  Node& follower = a.agent->leading() ? b : a;
  for (int i = 2; i < 4; ++i) {
    Lease l;
    l.lease_key = shard(i);
    leases_.put(l);
  }
  ASSERT_TRUE(coordination_.note_leases_changed().ok());
  const auto created = clock_.now();
  ASSERT_TRUE(run_until([&] { return follower.held() == 2; }, 15s));
  const auto took = clock_.now() - created;
  // The leader's idle pass (up to 2 s), then one read of the lock (1 s) and of the entry.
  EXPECT_LE(took, 3s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  EXPECT_EQ(violations_, 0);
}

// A worker that starts alone is settled settle_time after its own registration, not after its
// leader step first saw its entry: it holds every lease about settle_time after start.
TEST_F(LeaderAssignmentTest, ALoneWorkerIsAssignedSettleTimeAfterItRegistered) {
  testing::add_free_leases(leases_, 4);
  const auto started = clock_.now();
  Node& a = start("a", [](LeaseConfig& c) { c.settle_time = 200ms; });
  a.next_lead = clock_.now() + 100ms;  // its leader step first runs (and looks) 100 ms late
  ASSERT_TRUE(run_until([&] { return a.held() == 4; }, 5s));
  const auto took = clock_.now() - started;
  EXPECT_LE(took, 230ms) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  EXPECT_GE(took, 200ms) << "never before settle_time";
}

}  // namespace
}  // namespace kcl::leases
