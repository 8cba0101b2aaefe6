// LeaseLeader driven pass by pass on a ManualClock over in-memory stores: its settling across
// passes and terms (a membership change noted by a pass that ended early, and a new term), and
// how it times a worker's silence when an eventually consistent read is served stale.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "assignment/lease_leader.h"
#include "coordination/in_memory_coordination_store.h"
#include "support/lease_test_util.h"
#include "unit/assignment/faulty_stores.h"

namespace kcl::leases {
namespace {

using namespace ::kcl::assignment;
using namespace ::kcl::coordination;
using namespace std::chrono_literals;
using testing::InjectedFault;

WorkerEntry worker(const std::string& id) {
  WorkerEntry w;
  w.worker_id = id;
  w.incarnation = id + "-1";
  return w;
}

// Leader "a" over in-memory stores (4 free leases), reading the coordination table through a
// FaultyCoordinationStore.
struct FaultyTableLeader {
  FaultyTableLeader() { testing::add_free_leases(leases, 4); }
  ManualClock clock;
  InMemoryLeaseStore leases;
  InMemoryCoordinationStore table;
  testing::FaultyCoordinationStore coordination{table};
  LeaseConfig config = [] {
    LeaseConfig c;
    c.application_name = "leader-test";
    c.worker_id = "a";
    c.assignment = LeaseAssignment::kLeader;
    return c;
  }();
  testing::RecordingMetrics metrics;
  LeaseLeader leader{leases, coordination, config, clock, metrics, nullptr};
};

// A leader that saw a worker join in a pass that ended early (its lease-table read failed)
// and then stopped leading has that join noted still. When it leads again, the new term
// starts unsettled as every new term does: the old note does not make it settled at once.
TEST(LeaseLeaderSettleTest, ANewTermStartsUnsettledWhateverAnEarlierTermLeftNoted) {
  ManualClock clock;
  InMemoryLeaseStore leases;
  testing::add_free_leases(leases, 4);
  testing::FaultyLeaseStore lease_view(leases);
  bool scans_fail = false;
  lease_view.faults().set_script([&](std::string_view op, std::string_view) {
    InjectedFault f;
    if (scans_fail && op == "list_leases") f.when = InjectedFault::When::kBefore;
    return f;
  });
  InMemoryCoordinationStore coordination;
  LeaseConfig config;
  config.application_name = "settle-test";
  config.worker_id = "a";
  config.assignment = LeaseAssignment::kLeader;
  config.lease_scan_interval = 100ms;  // every pass reads the lease table
  testing::RecordingMetrics metrics;
  LeaseLeader leader(lease_view, coordination, config, clock, metrics, nullptr);
  ASSERT_TRUE(coordination.register_worker(worker("a")).ok());
  ASSERT_TRUE(coordination.register_worker(worker("b")).ok());

  leader.begin(std::nullopt);
  for (int i = 0; i < 20 && leader.first_settling(); ++i) {
    ASSERT_TRUE(leader.run_pass().status.ok());
    clock.advance(50ms);
  }
  ASSERT_FALSE(leader.first_settling()) << "the first term never settled";

  scans_fail = true;
  ASSERT_TRUE(coordination.register_worker(worker("c")).ok());
  clock.advance(200ms);
  EXPECT_FALSE(leader.run_pass().status.ok()) << "the pass that sees c fails at the scan";
  leader.end();
  scans_fail = false;

  clock.advance(2s);  // well past settle_time, well within failover_time
  leader.begin(std::nullopt);
  ASSERT_TRUE(leader.run_pass().status.ok());
  EXPECT_TRUE(leader.first_settling()) << "a new term was settled at its first pass";
}

// A worker's silence is timed from the last heartbeat the leader saw change. An eventually
// consistent read of the worker entries may be served by a replica that lags and show an older
// heartbeat of the same incarnation; that is not a sign of life (a heartbeat only grows), so
// the dead worker is still fenced failover_time after its last heartbeat was first seen.
TEST(LeaseLeaderSilenceTest, AStaleReadOfAnOlderHeartbeatDoesNotRestartASilence) {
  FaultyTableLeader f;
  auto& [clock, leases, table, coordination, config, metrics, leader] = f;
  ASSERT_TRUE(table.register_worker(worker("a")).ok());
  auto b = table.register_worker(worker("b"));
  ASSERT_TRUE(b.ok());
  WorkerEntry held = *b;
  for (int i = 0; i < 3; ++i) {
    auto next = table.heartbeat(held, WorkerEntry{});
    ASSERT_TRUE(next.ok());
    held = *next;
  }
  auto before_last = table.read_all(Consistency::kStrong);
  ASSERT_TRUE(before_last.ok());  // b at its third heartbeat: what a lagging replica keeps
  ASSERT_TRUE(table.heartbeat(held, WorkerEntry{}).ok());  // b's last heartbeat; then it dies

  leader.begin(std::nullopt);
  ASSERT_TRUE(leader.run_pass().status.ok());  // sees b's last heartbeat
  const auto first_seen = clock.now();
  clock.advance(config.failover_time / 2);
  coordination.serve_stale(*before_last);
  ASSERT_TRUE(leader.run_pass().status.ok());  // the lagging replica: an older heartbeat
  clock.advance(100ms);
  ASSERT_TRUE(leader.run_pass().status.ok());  // the last heartbeat again
  int fenced = 0;
  while (clock.now() - first_seen < config.failover_time + 200ms) {
    clock.advance(50ms);
    LeaderPassResult r = leader.run_pass();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    fenced += r.fenced;
  }
  EXPECT_EQ(fenced, 1) << "b was not fenced within failover_time + 200 ms of its last heartbeat";
  auto view = table.read_all(Consistency::kStrong);
  ASSERT_TRUE(view.ok());
  for (const WorkerEntry& w : view->workers) EXPECT_NE(w.worker_id, "b") << "b's entry is left";
}

// A pass of a leader whose lock lapsed meanwhile (its read of the workers stuck in retries for
// longer than failover_time) fences nobody once it may no longer lead, and never the worker the
// lock names: that one does not heartbeat while it leads, so its entry looks silent to the
// stale pass. Fenced, the new leader would find its own entry gone and get no lease all term.
// Run with an authority that says the old leader's renewals have lapsed (it stops the pass),
// and without one (the lock as read guards alone).
TEST(LeaseLeaderFenceTest, AStalePassOfTheOldLeaderLeavesTheNewLeadersEntry) {
  for (const bool with_authority : {false, true}) {
    SCOPED_TRACE(with_authority ? "with an authority" : "without an authority");
    FaultyTableLeader f;
    auto& [clock, leases, table, coordination, config, metrics, leader] = f;
    bool lapsed = false;
    if (with_authority) {
      leader.set_authority([&]() -> std::optional<std::string> {
        if (lapsed) return "its lock renewals lapsed";
        return std::nullopt;
      });
    }
    ASSERT_TRUE(table.register_worker(worker("a")).ok());
    ASSERT_TRUE(table.register_worker(worker("b")).ok());
    ASSERT_TRUE(table.acquire_leadership(std::nullopt, "a", "a-1").ok());
    leader.begin(std::nullopt);
    ASSERT_TRUE(leader.run_pass().status.ok());  // sees b

    // The next pass's eventual read misses b; its strong read stalls for 11 s, meanwhile the
    // lock lapses and b takes it (and stops heartbeating: the lock holds its membership).
    auto stale = table.read_all(Consistency::kStrong);
    ASSERT_TRUE(stale.ok());
    std::erase_if(stale->workers, [](const WorkerEntry& w) { return w.worker_id == "b"; });
    coordination.serve_stale(*stale);
    bool stalled = false;
    coordination.faults().set_script([&](std::string_view op, std::string_view) {
      if (op == "read_all" && !stalled) {
        stalled = true;
        clock.advance(11s);
        lapsed = true;
        auto lock = table.read_leader(Consistency::kStrong);
        EXPECT_TRUE(lock.ok() && table.acquire_leadership(*lock, "b", "b-1").ok());
      }
      return InjectedFault{};
    });
    const LeaderPassResult r = leader.run_pass();
    ASSERT_TRUE(stalled);
    EXPECT_EQ(r.fenced, 0) << r.status.to_string();
    EXPECT_EQ(r.status.ok(), !with_authority) << "the authority did not stop the pass";
    EXPECT_TRUE(table.peek_worker("b").has_value()) << "the new leader's entry was fenced";
  }
}

// A fenced worker is forgotten once the leases it owned have moved. A lease it read to its end
// (SHARD_END) never moves: no one reads it again, and the shard sync deletes it once its
// children have started. Counted as still to move, it kept the leader on its short interval
// (a pass every leader_poll_interval instead of the idle interval) for as long as the lease
// was in the table.
TEST(LeaseLeaderFenceTest, ADeadWorkersEndedLeaseDoesNotKeepTheLeaderBusy) {
  FaultyTableLeader f;
  auto& [clock, leases, table, coordination, config, metrics, leader] = f;
  Lease ended;
  ended.lease_key = testing::shard(9);
  ended.lease_owner = "b";
  ended.lease_counter = 7;
  ended.checkpoint = ExtendedSequenceNumber::shard_end();
  leases.put(ended);
  ASSERT_TRUE(table.register_worker(worker("a")).ok());
  ASSERT_TRUE(table.register_worker(worker("b")).ok());  // b dies at once: no heartbeat
  ASSERT_TRUE(table.acquire_leadership(std::nullopt, "a", "a-1").ok());
  leader.begin(std::nullopt);
  int fenced = 0;
  bool idle = false;
  const auto until = clock.now() + config.failover_time * 4;
  while (clock.now() < until && !idle) {
    const LeaderPassResult r = leader.run_pass();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    fenced += r.fenced;
    idle = fenced > 0 && !leader.wants_attention(r);
    clock.advance(config.leader_poll_interval);
  }
  EXPECT_EQ(fenced, 1) << "b was not fenced";
  EXPECT_TRUE(idle) << "the leader still wants a pass every " << config.leader_poll_interval.count()
                    << " ms, " << (config.failover_time * 4).count()
                    << " ms on, with nothing left to move";
  auto kept = leases.get_lease(ended.lease_key);
  ASSERT_TRUE(kept.ok() && kept->has_value());
  EXPECT_EQ((**kept).lease_owner, std::optional<std::string>("b")) << "the ended lease moved";
}

}  // namespace
}  // namespace kcl::leases
