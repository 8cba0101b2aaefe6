// Deterministic tests of the worker-takes strategy (LeaseTaker's take and renew passes over the
// held-lease core) on the in-memory store and a fake clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "assignment/lease_taker.h"
#include "leases/in_memory_lease_store.h"
#include "simulation/lease_simulation.h"
#include "support/lease_test_util.h"

namespace kcl::leases {
namespace {

using namespace ::kcl::assignment;
using namespace ::kcl::coordination;

using namespace std::chrono_literals;
using leases::CheckpointFields;
using leases::InMemoryLeaseStore;
using leases::testing::add_free_leases;
using leases::testing::RecordingListener;
using leases::testing::shard;
using leases::testing::TakesWorker;
using leases::testing::test_config;

class CoordinatorTest : public ::testing::Test {
 protected:
  std::unique_ptr<TakesWorker> make(const std::string& id, LeaseConfig config,
                                    const Clock* clock = nullptr, std::uint64_t seed = 1) {
    config.worker_id = id;
    EXPECT_TRUE(config.validate().empty());
    return std::make_unique<TakesWorker>(store_, config, clock ? *clock : clock_,
                                         NoopMetricsSink::instance(), seed);
  }
  std::unique_ptr<TakesWorker> make(const std::string& id) { return make(id, test_config(id)); }

  ManualClock clock_;
  InMemoryLeaseStore store_;
};

// A worker at max_leases_per_worker whose two shards both split and ended (SHARD_END) takes
// their children: the ended leases count toward no share (before, its share of 2 was full of
// ended parents, and the parents are cleaned up only once their children started).
TEST_F(CoordinatorTest, EndedLeasesDoNotFillAShareSoTheChildrenAreTaken) {
  LeaseConfig c = test_config("A");
  c.max_leases_per_worker = 2;
  add_free_leases(store_, 2);
  auto a = make("A", c);
  ASSERT_EQ(a->run_take_pass().taken.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    CheckpointFields fields;
    fields.checkpoint = ExtendedSequenceNumber::shard_end();
    ASSERT_TRUE(a->update_checkpoint(shard(i), fields).ok());
  }
  add_free_leases(store_, 4, 2);  // the children
  TakePassResult r = a->run_take_pass();
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.target, 2);
  EXPECT_EQ(r.taken.size(), 2u) << "two of the four children, up to max_leases_per_worker";
  for (const std::string& key : r.taken) {
    EXPECT_FALSE(store_.peek(key)->checkpoint.is_shard_end()) << key << " is an ended parent";
  }
}

TEST_F(CoordinatorTest, TakesFreeLeasesOnFirstPassAndTellsTheListener) {
  add_free_leases(store_, 3);
  auto a = make("A");
  RecordingListener listener;
  a->set_listener(&listener);

  TakePassResult r = a->run_take_pass();
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.taken.size(), 3u);
  EXPECT_EQ(r.target, 3);
  EXPECT_EQ(a->held_count(), 3u);
  EXPECT_EQ(listener.gained().size(), 3u);
  for (int i = 0; i < 3; ++i) {
    auto l = store_.peek(shard(i));
    ASSERT_TRUE(l);
    EXPECT_EQ(l->lease_owner, "A");
    EXPECT_EQ(l->lease_counter, 1);
    EXPECT_EQ(l->owner_switches_since_checkpoint, 0) << "taking a free lease is no switch";
    EXPECT_EQ(a->held_lease(shard(i))->lease_counter, 1);
  }
}

TEST_F(CoordinatorTest, NeverTakesALeaseWhileItsOwnerRenews) {
  // One lease and two workers: B's share is 1 and A is not above it, so B never steals; the
  // only way B could get the lease is by judging it expired.
  add_free_leases(store_, 1);
  auto a = make("A");
  auto b = make("B");
  ASSERT_EQ(a->run_take_pass().taken.size(), 1u);
  // B watches for 10 minutes (60 failover times) while A renews on schedule.
  for (int i = 0; i < 180; ++i) {
    clock_.advance(3333ms);
    ASSERT_EQ(a->run_renew_pass().renewed, 1);
    TakePassResult r = b->run_take_pass();
    EXPECT_TRUE(r.taken.empty()) << "B took a lease that is being renewed, pass " << i;
    EXPECT_TRUE(r.stolen.empty());
    EXPECT_EQ(r.available, 0);
  }
  EXPECT_EQ(store_.peek(shard(0))->lease_owner, "A");
}

TEST_F(CoordinatorTest, TakesOverOnlyAfterFailoverTimeWithoutACounterChange) {
  // A and C hold one lease each; B (a third worker) is at no one's expense below its share of
  // 1, so it never steals: it can only take leases it judges expired.
  add_free_leases(store_, 2);
  LeaseConfig one = test_config("x");
  one.max_leases_per_worker = 1;
  auto a = make("A", one, nullptr, 1);
  auto c = make("C", one, nullptr, 3);
  auto b = make("B", test_config("B"), nullptr, 2);
  ASSERT_EQ(a->run_take_pass().taken.size(), 1u);
  ASSERT_EQ(c->run_take_pass().taken.size(), 1u);
  // B's first scan: it sees the counters for the first time (treated as just changed).
  TakePassResult first = b->run_take_pass();
  EXPECT_TRUE(first.taken.empty());
  EXPECT_TRUE(first.stolen.empty());
  // A and C crash now (no more renewals). Until failover time has passed on B's clock since
  // B saw the counters, B takes nothing.
  clock_.advance(9999ms);
  TakePassResult early = b->run_take_pass();
  EXPECT_TRUE(early.taken.empty());
  EXPECT_TRUE(early.stolen.empty());
  EXPECT_EQ(early.available, 0);
  clock_.advance(1ms);
  TakePassResult due = b->run_take_pass();
  EXPECT_EQ(due.available, 2);
  EXPECT_EQ(due.taken.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    auto l = store_.peek(shard(i));
    EXPECT_EQ(l->lease_owner, "B");
    EXPECT_EQ(l->owner_switches_since_checkpoint, 1) << "A or C -> B is one owner switch";
  }
}

TEST_F(CoordinatorTest, ACounterChangeRestartsTheFailoverWait) {
  add_free_leases(store_, 1);
  auto a = make("A");
  auto b = make("B");
  ASSERT_EQ(a->run_take_pass().taken.size(), 1u);
  (void)b->run_take_pass();
  clock_.advance(8s);
  ASSERT_EQ(a->run_renew_pass().renewed, 1);  // A's last sign of life
  clock_.advance(1s);
  (void)b->run_take_pass();  // B sees the new counter at t = 9 s
  clock_.advance(9s);        // 18 s: 10 s after A's renewal, 9 s after B saw it
  EXPECT_TRUE(b->run_take_pass().taken.empty());
  clock_.advance(1s);
  EXPECT_EQ(b->run_take_pass().taken.size(), 1u);
}

TEST_F(CoordinatorTest, WallClocksMinutesApartDoNotMatterAndAreNeverRead) {
  add_free_leases(store_, 6);
  // Three hosts: monotonic epochs days apart, wall clocks minutes apart (one behind by 7
  // minutes, one ahead by 11).
  OffsetClock ca(clock_, 0s, 0s);
  OffsetClock cb(clock_, std::chrono::hours(50), -7min);
  OffsetClock cc(clock_, std::chrono::hours(900), 11min);
  leases::testing::MonotonicOnlyClock wa(ca, 0s), wb(cb, 0s), wc(cc, 0s);
  LeaseConfig base = test_config("x");
  base.max_leases_per_worker = 2;  // everyone gets exactly 2 of 6: no stealing
  auto a = make("A", base, &wa, 1);
  auto b = make("B", base, &wb, 2);
  auto c = make("C", base, &wc, 3);
  ASSERT_EQ(a->run_take_pass().taken.size(), 2u);
  ASSERT_EQ(b->run_take_pass().taken.size(), 2u);
  ASSERT_EQ(c->run_take_pass().taken.size(), 2u);
  for (int i = 0; i < 200; ++i) {
    clock_.advance(3s);
    // Wall clocks keep jumping too.
    clock_.skew_wall(i % 2 ? 5min : -5min);
    EXPECT_EQ(a->run_renew_pass().renewed, 2);
    EXPECT_EQ(b->run_renew_pass().renewed, 2);
    EXPECT_EQ(c->run_renew_pass().renewed, 2);
    if (i % 7 == 0) {
      EXPECT_TRUE(a->run_take_pass().taken.empty());
      EXPECT_TRUE(b->run_take_pass().taken.empty());
      EXPECT_TRUE(c->run_take_pass().taken.empty());
    }
  }
  EXPECT_EQ(store_.stats().owner_changes, 6) << "only the initial takes";
  EXPECT_EQ(wa.wall_reads() + wb.wall_reads() + wc.wall_reads(), 0);
}

TEST_F(CoordinatorTest, RenewLosesALeaseTakenByAnotherWorkerAndSaysSoAtOnce) {
  add_free_leases(store_, 2);
  auto a = make("A");
  RecordingListener listener;
  a->set_listener(&listener);
  ASSERT_EQ(a->run_take_pass().taken.size(), 2u);
  // Another worker takes shard 0 (e.g. it judged it expired after a long pause of A).
  Lease seen = *store_.peek(shard(0));
  ASSERT_TRUE(store_.take_lease(seen, "B").ok());

  RenewPassResult r = a->run_renew_pass();
  EXPECT_EQ(r.renewed, 1);
  ASSERT_EQ(r.lost, std::vector<std::string>{shard(0)});
  ASSERT_EQ(listener.lost(), std::vector<std::string>{shard(0)});
  EXPECT_EQ(listener.reasons()[0].code(), StatusCode::kLeaseLost);
  EXPECT_NE(listener.reasons()[0].message().find("taken by B"), std::string::npos)
      << listener.reasons()[0];
  EXPECT_FALSE(a->holds(shard(0)));
  EXPECT_TRUE(a->holds(shard(1)));
  EXPECT_EQ(store_.peek(shard(0))->lease_owner, "B");
}

TEST_F(CoordinatorTest, FencingAfterTakeoverRejectsOldOwnersCheckpointAndRenew) {
  add_free_leases(store_, 2);
  auto a = make("A");
  auto b = make("B");
  RecordingListener la;
  a->set_listener(&la);
  ASSERT_EQ(a->run_take_pass().taken.size(), 2u);
  // B steals one (A holds 2 > B's share of 1).
  TakePassResult stolen = b->run_take_pass();
  ASSERT_EQ(stolen.stolen.size(), 1u);
  const std::string key = stolen.stolen[0];
  const Lease before = *store_.peek(key);
  ASSERT_EQ(before.lease_owner, "B");

  // A has not noticed yet: it still believes it holds the lease, with the old counter.
  ASSERT_TRUE(a->holds(key));
  CheckpointFields fields;
  fields.checkpoint = ExtendedSequenceNumber("12345");
  auto written = a->update_checkpoint(key, fields);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), StatusCode::kLeaseLost);
  EXPECT_NE(written.status().message().find("taken by B"), std::string::npos) << written.status();
  EXPECT_EQ(*store_.peek(key), before) << "the old owner wrote nothing";
  EXPECT_EQ(la.lost(), std::vector<std::string>{key});

  // The lease is gone from A's held set; its renew pass renews only the other one.
  RenewPassResult r = a->run_renew_pass();
  EXPECT_EQ(r.renewed, 1);
  EXPECT_EQ(*store_.peek(key), before);
}

TEST_F(CoordinatorTest, FencingAfterTakeoverRejectsRenewBeforeAnyCheckpoint) {
  add_free_leases(store_, 2);
  auto a = make("A");
  auto b = make("B");
  ASSERT_EQ(a->run_take_pass().taken.size(), 2u);
  TakePassResult stolen = b->run_take_pass();
  ASSERT_EQ(stolen.stolen.size(), 1u);
  const Lease before = *store_.peek(stolen.stolen[0]);
  RenewPassResult r = a->run_renew_pass();
  EXPECT_EQ(r.lost, stolen.stolen);
  EXPECT_EQ(*store_.peek(stolen.stolen[0]), before) << "the rejected renewal changed nothing";
  // B renews fine.
  EXPECT_EQ(b->run_renew_pass().renewed, 1);
}

TEST_F(CoordinatorTest, PausedWorkerFindsItsLeasesGoneAndWritesNothing) {
  add_free_leases(store_, 3);
  auto a = make("A");
  auto b = make("B");
  RecordingListener la;
  a->set_listener(&la);
  ASSERT_EQ(a->run_take_pass().taken.size(), 3u);
  TakePassResult first = b->run_take_pass();  // B steals one (A is above B's share of 2)
  ASSERT_EQ(first.stolen.size(), 1u);
  // A stops (GC pause, SIGSTOP) for 30 s. B takes the rest once they expire.
  clock_.advance(5s);
  ASSERT_EQ(b->run_renew_pass().renewed, 1);
  clock_.advance(5s);
  TakePassResult r = b->run_take_pass();
  EXPECT_EQ(r.taken.size(), 2u);
  EXPECT_EQ(b->held_count(), 3u);
  EXPECT_FALSE(a->holds(shard(0))) << "past its deadline A no longer reports the lease as held";
  EXPECT_TRUE(a->held_leases().empty());
  clock_.advance(20s);
  // A wakes up: a checkpoint attempt is refused without a write.
  const auto writes = store_.stats().writes;
  CheckpointFields fields;
  fields.checkpoint = ExtendedSequenceNumber("99");
  for (int i = 0; i < 3; ++i) {
    auto written = a->update_checkpoint(shard(i), fields);
    EXPECT_EQ(written.status().code(), StatusCode::kLeaseLost);
  }
  RenewPassResult renew = a->run_renew_pass();
  EXPECT_EQ(renew.renewed, 0);
  EXPECT_EQ(store_.stats().writes, writes) << "nothing is even attempted past the deadline";
  EXPECT_EQ(la.lost().size(), 3u);
  EXPECT_EQ(a->held_count(), 0u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(store_.peek(shard(i))->lease_owner, "B");
    EXPECT_EQ(store_.peek(shard(i))->checkpoint, ExtendedSequenceNumber::trim_horizon());
  }
}

TEST_F(CoordinatorTest, PartitionedWorkerGivesUpBeforeAnyoneElseCanTake) {
  add_free_leases(store_, 1);
  leases::testing::PartitionableStore a_view(store_);
  LeaseConfig ac = test_config("A");
  ac.worker_id = "A";
  TakesWorker a(a_view, ac, clock_, NoopMetricsSink::instance(), 1);
  RecordingListener la;
  a.set_listener(&la);
  auto b = make("B");
  ASSERT_EQ(a.run_take_pass().taken.size(), 1u);
  (void)b->run_take_pass();
  clock_.advance(2s);
  ASSERT_EQ(a.run_renew_pass().renewed, 1);  // last successful renewal at t = 2 s
  a_view.set_partitioned(true);

  // Step through time in small increments: A keeps trying to renew, B keeps scanning. The
  // moment B takes a lease, A must already have given it up and said so.
  bool b_took = false;
  Clock::MonoTime a_gave_up{};
  for (int step = 0; step < 400 && !b_took; ++step) {
    clock_.advance(50ms);
    RenewPassResult ar = a.run_renew_pass();
    if (!ar.lost.empty() && a_gave_up == Clock::MonoTime{}) a_gave_up = clock_.now();
    TakePassResult br = b->run_take_pass();
    if (!br.taken.empty()) {
      b_took = true;
      for (const auto& key : br.taken) {
        EXPECT_FALSE(a.holds(key)) << key;
        const auto lost = la.lost();
        EXPECT_NE(std::find(lost.begin(), lost.end(), key), lost.end()) << key;
      }
    }
  }
  ASSERT_TRUE(b_took);
  ASSERT_NE(a_gave_up, Clock::MonoTime{});
  // A gave up 9 s (failover - margin) after its last successful renewal started.
  EXPECT_EQ(a_gave_up - (Clock::MonoTime{} + 2s), 9s);
}

TEST_F(CoordinatorTest, NextDeadlineIsTheEarliestGiveUpTime) {
  add_free_leases(store_, 1);
  auto a = make("A");
  EXPECT_FALSE(a->next_deadline());
  ASSERT_EQ(a->run_take_pass().taken.size(), 1u);
  EXPECT_EQ(*a->next_deadline(), clock_.now() + 9s);
  clock_.advance(3s);
  ASSERT_EQ(a->run_renew_pass().renewed, 1);
  EXPECT_EQ(*a->next_deadline(), clock_.now() + 9s);
}

TEST_F(CoordinatorTest, TransientRenewFailureKeepsTheLeaseUntilItsDeadline) {
  add_free_leases(store_, 1);
  auto a = make("A");
  RecordingListener la;
  a->set_listener(&la);
  ASSERT_EQ(a->run_take_pass().taken.size(), 1u);
  store_.fail_next(2);
  clock_.advance(3s);
  RenewPassResult r1 = a->run_renew_pass();
  EXPECT_EQ(r1.failed, 1);
  EXPECT_EQ(r1.status.code(), StatusCode::kUnavailable);
  clock_.advance(3s);
  EXPECT_EQ(a->run_renew_pass().failed, 1);
  EXPECT_TRUE(a->holds(shard(0)));
  clock_.advance(2s);
  EXPECT_EQ(a->run_renew_pass().renewed, 1);
  EXPECT_TRUE(la.lost().empty());
  EXPECT_EQ(store_.peek(shard(0))->lease_counter, 2);
}

TEST_F(CoordinatorTest, OwnUnseenWriteIsAdoptedNotMistakenForALoss) {
  add_free_leases(store_, 1);
  auto a = make("A");
  RecordingListener la;
  a->set_listener(&la);
  ASSERT_EQ(a->run_take_pass().taken.size(), 1u);
  // The renewal reaches DynamoDB, but the response is lost (a timeout).
  store_.fail_next(1, StatusCode::kUnavailable, /*after_apply=*/true);
  EXPECT_EQ(a->run_renew_pass().failed, 1);
  EXPECT_EQ(store_.peek(shard(0))->lease_counter, 2);
  EXPECT_EQ(a->held_lease(shard(0))->lease_counter, 1);
  // The next write's condition fails; the re-read shows A still owns it: adopt and retry.
  CheckpointFields fields;
  fields.checkpoint = ExtendedSequenceNumber("42");
  auto written = a->update_checkpoint(shard(0), fields);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->lease_counter, 3);
  EXPECT_EQ(store_.peek(shard(0))->checkpoint, ExtendedSequenceNumber("42"));
  EXPECT_EQ(a->held_lease(shard(0))->lease_counter, 3);
  EXPECT_TRUE(la.lost().empty());
}

// A lease that passed through another worker's tenure and came back to this one while this
// worker did not look (taken for another, written by it, then given back to this worker's id:
// a leader that took it for another just as this worker registered again, then handed it
// back). The table names this worker, but what it read since its own take is not its to
// checkpoint: the write is refused as lost, not adopted as an unseen write of its own.
TEST_F(CoordinatorTest, ALeaseThatWasHeldByAnotherMeanwhileIsLostNotAdopted) {
  add_free_leases(store_, 1);
  auto a = make("A");
  RecordingListener la;
  a->set_listener(&la);
  ASSERT_EQ(a->run_take_pass().taken.size(), 1u);
  const std::string key = shard(0);
  auto taken_for_b = store_.take_lease(*store_.peek(key), "B");
  ASSERT_TRUE(taken_for_b.ok());
  CheckpointFields bs;
  bs.checkpoint = ExtendedSequenceNumber("500");
  ASSERT_TRUE(store_.update_checkpoint(*taken_for_b, bs).ok());
  ASSERT_TRUE(store_.take_lease(*store_.peek(key), "A").ok());  // given back to A's id
  const Lease before = *store_.peek(key);
  ASSERT_EQ(before.lease_owner, "A");
  CheckpointFields fields;
  fields.checkpoint = ExtendedSequenceNumber("42");
  auto written = a->update_checkpoint(key, fields);
  ASSERT_FALSE(written.ok()) << "a checkpoint of the earlier tenure was accepted";
  EXPECT_EQ(written.status().code(), StatusCode::kLeaseLost);
  EXPECT_NE(written.status().message().find("held by another worker meanwhile"), std::string::npos)
      << written.status();
  EXPECT_EQ(*store_.peek(key), before) << "the earlier tenure wrote nothing";
  EXPECT_EQ(la.lost(), std::vector<std::string>{key});
}

TEST_F(CoordinatorTest, DeletedLeaseIsLost) {
  add_free_leases(store_, 1);
  auto a = make("A");
  RecordingListener la;
  a->set_listener(&la);
  ASSERT_EQ(a->run_take_pass().taken.size(), 1u);
  ASSERT_TRUE(store_.delete_lease(shard(0)).ok());
  RenewPassResult r = a->run_renew_pass();
  EXPECT_EQ(r.lost.size(), 1u);
  EXPECT_NE(la.reasons().at(0).message().find("no longer exists"), std::string::npos);
}

TEST_F(CoordinatorTest, HandBackLetsAnotherWorkerTakeOnItsVeryNextPass) {
  add_free_leases(store_, 10);
  auto a = make("A");
  auto b = make("B");
  ASSERT_EQ(a->run_take_pass().taken.size(), 10u);
  ASSERT_EQ(b->run_take_pass().stolen.size(), 1u);  // A 9, B 1
  clock_.advance(1s);
  ASSERT_EQ(a->run_renew_pass().renewed, 9);
  // A shuts down gracefully: final checkpoints done, it hands back everything.
  auto a_leases = a->held_leases();
  ASSERT_EQ(a_leases.size(), 9u);
  ASSERT_TRUE(a->release_all().ok());
  EXPECT_EQ(a->held_count(), 0u);
  EXPECT_TRUE(a->taking_stopped());
  for (const auto& l : a_leases) {
    auto in_table = store_.peek(l.lease_key);
    EXPECT_FALSE(in_table->lease_owner);
    EXPECT_EQ(in_table->lease_counter, l.lease_counter + 1);
  }
  // B's very next pass, without waiting out the failover time, takes them all.
  clock_.advance(1ms);
  TakePassResult r = b->run_take_pass();
  EXPECT_EQ(r.taken.size(), 9u);
  EXPECT_EQ(b->held_count(), 10u);
  for (const auto& l : a_leases) {
    // As the Java KCL: only a take from one owner straight to another counts as a switch;
    // taking a handed-back (ownerless) lease does not.
    EXPECT_EQ(store_.peek(l.lease_key)->owner_switches_since_checkpoint, 0);
  }
  // A takes nothing any more.
  EXPECT_TRUE(a->run_take_pass().taken.empty());
}

TEST_F(CoordinatorTest, WithoutHandBackLeasesOfADeadWorkerWaitForFailover) {
  add_free_leases(store_, 2);
  LeaseConfig one = test_config("x");
  one.max_leases_per_worker = 1;
  auto a = make("A", one, nullptr, 1);
  auto c = make("C", one, nullptr, 3);
  auto b = make("B", test_config("B"), nullptr, 2);
  ASSERT_EQ(a->run_take_pass().taken.size(), 1u);
  ASSERT_EQ(c->run_take_pass().taken.size(), 1u);
  (void)b->run_take_pass();
  // A and C die without handing back: B's next pass finds nothing to take.
  clock_.advance(1s);
  TakePassResult r = b->run_take_pass();
  EXPECT_TRUE(r.taken.empty());
  EXPECT_EQ(r.available, 0);
}

TEST_F(CoordinatorTest, StealsOnlyFromAWorkerAboveTheTargetAndAtMostNAtATime) {
  add_free_leases(store_, 10);
  auto a = make("A");
  ASSERT_EQ(a->run_take_pass().taken.size(), 10u);
  // B joins: target ceil(10/2) = 5, needs 5, nothing free: steals 1 (the default maximum).
  LeaseConfig bc = test_config("B");
  auto b = make("B", bc, nullptr, 2);
  TakePassResult r = b->run_take_pass();
  EXPECT_EQ(r.target, 5);
  EXPECT_EQ(r.stolen.size(), 1u);
  EXPECT_TRUE(r.taken.empty());
  EXPECT_EQ(store_.peek(r.stolen[0])->owner_switches_since_checkpoint, 1);
  // With max 3 at once, C steals 3 from the most loaded (A has 9).
  LeaseConfig cc = test_config("C");
  cc.max_leases_to_steal_at_once = 3;
  auto c = make("C", cc, nullptr, 3);
  TakePassResult rc = c->run_take_pass();
  EXPECT_EQ(rc.target, 4);
  EXPECT_EQ(rc.stolen.size(), 3u);
  for (const auto& k : rc.stolen) EXPECT_EQ(store_.peek(k)->lease_owner, "C");
  EXPECT_EQ(a->run_renew_pass().lost.size(), 4u);
}

// Puts `n` leases owned by `owner` (keys from `first`).
void own(InMemoryLeaseStore& store, const std::string& owner, int first, int n) {
  for (int i = first; i < first + n; ++i) {
    Lease l;
    l.lease_key = shard(i);
    l.lease_owner = owner;
    l.lease_counter = 7;
    store.put(l);
  }
}

std::map<std::string, int> owner_counts(const InMemoryLeaseStore& store) {
  std::map<std::string, int> counts;
  for (const auto& l : store.snapshot()) counts[l.lease_owner.value_or("")]++;
  return counts;
}

TEST_F(CoordinatorTest, NoLeaseMovesOnceEveryoneIsWithinOne) {
  own(store_, "A", 0, 4);
  own(store_, "B", 4, 3);
  own(store_, "C", 7, 3);
  std::vector<std::unique_ptr<TakesWorker>> ws;
  ws.push_back(make("A", test_config("A"), nullptr, 1));
  ws.push_back(make("B", test_config("B"), nullptr, 2));
  ws.push_back(make("C", test_config("C"), nullptr, 3));
  for (int round = 0; round < 50; ++round) {
    for (auto& w : ws) {
      (void)w->run_renew_pass();
      TakePassResult r = w->run_take_pass();
      EXPECT_TRUE(r.stolen.empty()) << w->worker_id() << " round " << round;
      if (round > 0) {
        EXPECT_TRUE(r.taken.empty());  // round 0 adopts their own leases
      }
    }
    clock_.advance(3s);
  }
  EXPECT_EQ(store_.stats().owner_changes, 0);
  EXPECT_EQ(owner_counts(store_), (std::map<std::string, int>{{"A", 4}, {"B", 3}, {"C", 3}}));
}

TEST_F(CoordinatorTest, OneCorrectiveStealWhenTwoBelowAndTheMostLoadedIsAtTarget) {
  own(store_, "A", 0, 4);
  own(store_, "B", 4, 4);
  own(store_, "C", 8, 2);
  std::vector<std::unique_ptr<TakesWorker>> ws;
  ws.push_back(make("A", test_config("A"), nullptr, 1));
  ws.push_back(make("B", test_config("B"), nullptr, 2));
  ws.push_back(make("C", test_config("C"), nullptr, 3));
  int steals = 0;
  for (int round = 0; round < 20; ++round) {
    for (auto& w : ws) {
      (void)w->run_renew_pass();
      steals += static_cast<int>(w->run_take_pass().stolen.size());
    }
    clock_.advance(3s);
  }
  // C needs 2 of its target 4 and A and B sit at the target: it steals exactly one (as the
  // Java KCL), which leaves 3/4/3 or 4/3/3, and then nothing moves.
  EXPECT_EQ(steals, 1);
  auto counts = owner_counts(store_);
  int most = 0, least = 100;
  for (const auto& [o, n] : counts) {
    most = std::max(most, n);
    least = std::min(least, n);
  }
  EXPECT_EQ(counts.size(), 3u);
  EXPECT_LE(most - least, 1);
}

TEST_F(CoordinatorTest, RampDoublesHoldingsPerPass) {
  add_free_leases(store_, 100);
  auto a = make("A");
  std::vector<std::size_t> held;
  for (int i = 0; i < 6; ++i) {
    TakePassResult r = a->run_take_pass();
    held.push_back(a->held_count());
    clock_.advance(1s);
    (void)a->run_renew_pass();
  }
  EXPECT_EQ(held, (std::vector<std::size_t>{10, 20, 40, 80, 100, 100}));
}

TEST_F(CoordinatorTest, RampOffTakesTheWholeShareAtOnce) {
  add_free_leases(store_, 100);
  LeaseConfig c = test_config("A");
  c.take_ramp_floor = 0;
  auto a = make("A", c);
  EXPECT_EQ(a->run_take_pass().taken.size(), 100u);
}

TEST_F(CoordinatorTest, MaxLeasesPerWorkerCapsTheShare) {
  add_free_leases(store_, 10);
  LeaseConfig c = test_config("A");
  c.max_leases_per_worker = 3;
  auto a = make("A", c);
  TakePassResult r = a->run_take_pass();
  EXPECT_EQ(r.target, 3);
  EXPECT_EQ(r.taken.size(), 3u);
  EXPECT_TRUE(a->run_take_pass().taken.empty());
}

TEST_F(CoordinatorTest, StopTakingStopsTakePassesButNotRenewals) {
  add_free_leases(store_, 2);
  auto a = make("A");
  ASSERT_EQ(a->run_take_pass().taken.size(), 2u);
  add_free_leases(store_, 2, 2);
  a->stop_taking();
  const auto scans = store_.stats().scans;
  EXPECT_TRUE(a->run_take_pass().taken.empty());
  EXPECT_EQ(store_.stats().scans, scans);
  clock_.advance(3s);
  EXPECT_EQ(a->run_renew_pass().renewed, 2);
}

TEST_F(CoordinatorTest, RestartedWorkerWithTheSameIdAdoptsItsLeasesAtOnce) {
  Lease mine;
  mine.lease_key = shard(0);
  mine.lease_owner = "A";
  mine.lease_counter = 41;
  mine.owner_switches_since_checkpoint = 2;
  store_.put(mine);
  auto a = make("A");
  TakePassResult r = a->run_take_pass();
  ASSERT_EQ(r.taken, std::vector<std::string>{shard(0)});
  auto l = store_.peek(shard(0));
  EXPECT_EQ(l->lease_counter, 42);
  EXPECT_EQ(l->owner_switches_since_checkpoint, 2) << "same owner: no switch";
}

TEST_F(CoordinatorTest, TakePassNoticesALossBeforeTheNextRenewal) {
  add_free_leases(store_, 2);
  auto a = make("A");
  RecordingListener la;
  a->set_listener(&la);
  ASSERT_EQ(a->run_take_pass().taken.size(), 2u);
  Lease seen = *store_.peek(shard(1));
  ASSERT_TRUE(store_.take_lease(seen, "B").ok());
  // The scan shows shard 1 with a newer counter and another owner.
  (void)a->run_take_pass();
  EXPECT_EQ(la.lost(), std::vector<std::string>{shard(1)});
  EXPECT_FALSE(a->holds(shard(1)));
}

TEST_F(CoordinatorTest, ScanFailureIsReportedAndTakesNothing) {
  add_free_leases(store_, 2);
  auto a = make("A");
  store_.fail_next(1);
  TakePassResult r = a->run_take_pass();
  EXPECT_EQ(r.status.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(r.taken.empty());
  EXPECT_EQ(a->run_take_pass().taken.size(), 2u);
}

TEST_F(CoordinatorTest, ConcurrentTakersNeverBothGetALease) {
  add_free_leases(store_, 50);
  std::vector<std::unique_ptr<TakesWorker>> workers;
  LeaseConfig c = test_config("x");
  c.take_ramp_floor = 0;
  for (int i = 0; i < 5; ++i) workers.push_back(make("W" + std::to_string(i), c, nullptr, i + 1));
  std::vector<std::thread> threads;
  for (auto& w : workers) {
    threads.emplace_back([&w] {
      for (int i = 0; i < 20; ++i) (void)w->run_take_pass();
    });
  }
  for (auto& t : threads) t.join();
  std::map<std::string, std::string> holder;
  for (auto& w : workers) {
    for (const auto& l : w->held_leases()) {
      // A worker that believes it holds a lease must be its owner in the table, unless it
      // was stolen after (then the thief is the owner and the victim learns at renewal).
      auto in_table = store_.peek(l.lease_key);
      if (in_table->lease_owner == w->worker_id()) {
        EXPECT_TRUE(holder.emplace(l.lease_key, w->worker_id()).second);
        EXPECT_EQ(in_table->lease_counter, l.lease_counter);
      } else {
        // Taken from it later: the thief's take bumped the counter past what the victim
        // holds. Equal counters would mean both took the same version of the lease.
        EXPECT_GT(in_table->lease_counter, l.lease_counter) << l.lease_key << " held by two";
      }
    }
  }
  EXPECT_EQ(holder.size(), 50u);
}

TEST_F(CoordinatorTest, MetricsAreReported) {
  add_free_leases(store_, 3);
  leases::testing::RecordingMetrics metrics;
  LeaseConfig c = test_config("A");
  TakesWorker a(store_, c, clock_, metrics, 1);
  ASSERT_EQ(a.run_take_pass().taken.size(), 3u);
  EXPECT_EQ(metrics.count_of("leases.taken"), 3);
  EXPECT_EQ(metrics.gauge_of("leases.held"), 3);
  Lease seen = *store_.peek(shard(0));
  ASSERT_TRUE(store_.take_lease(seen, "B").ok());
  clock_.advance(3s);
  (void)a.run_renew_pass();
  EXPECT_EQ(metrics.timings_of("leases.renew_latency"), 2);
  EXPECT_EQ(metrics.count_of("leases.lost"), 1);
  EXPECT_EQ(metrics.count_of("leases.failed_conditions{operation=renew}"), 1);
  EXPECT_EQ(metrics.gauge_of("leases.held"), 2);
  ASSERT_TRUE(a.release_all().ok());
  EXPECT_EQ(metrics.count_of("leases.released"), 2);
  EXPECT_EQ(metrics.gauge_of("leases.held"), 0);
}

TEST_F(CoordinatorTest, ACheckpointCountsAsTheRenewalUntilHalfARenewIntervalHasPassed) {
  add_free_leases(store_, 2);
  auto a = make("A");
  ASSERT_EQ(a->run_take_pass().taken.size(), 2u);
  CheckpointFields f;
  f.checkpoint = ExtendedSequenceNumber("4959000000000000000001");
  ASSERT_TRUE(a->update_checkpoint(shard(0), f).ok());
  clock_.advance(1000ms);
  RenewPassResult r = a->run_renew_pass();
  EXPECT_EQ(r.skipped, 1) << "checkpointed 1 s ago: it moved the counter already";
  EXPECT_EQ(r.renewed, 1);
  clock_.advance(1000ms);  // 2 s > renew interval / 2 since the checkpoint
  r = a->run_renew_pass();
  EXPECT_EQ(r.skipped, 0);
  EXPECT_EQ(r.renewed, 2);
}

// Forwards to a store, but the renewal of one lease (and with `checkpoints` its checkpoint
// write instead) hangs until released (a stalled connection); with lose_take_answer, the
// next take lands and its answer is lost (a timeout after DynamoDB did the work).
class StallingStore final : public LeaseStore {
 public:
  StallingStore(LeaseStore& inner, std::string stalled, bool checkpoints = false)
      : inner_(inner), stalled_(std::move(stalled)), checkpoints_(checkpoints) {}
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  // Whether a stalled call is hanging now.
  bool stalling() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_ > 0;
  }
  Status create_table_if_not_exists() override { return inner_.create_table_if_not_exists(); }
  Result<std::vector<Lease>> list_leases() override { return inner_.list_leases(); }
  Result<std::optional<Lease>> get_lease(std::string_view k) override {
    return inner_.get_lease(k);
  }
  Status create_lease_if_not_exists(const Lease& l) override {
    return inner_.create_lease_if_not_exists(l);
  }
  Result<Lease> take_lease(const Lease& seen, std::string_view o) override {
    auto taken = inner_.take_lease(seen, o);
    if (taken.ok() && std::exchange(lose_take_answer, false)) {
      return Status(StatusCode::kUnavailable, "timed out after the per-call deadline");
    }
    return taken;
  }
  bool lose_take_answer = false;
  Result<Lease> renew_lease(const Lease& held) override {
    if (held.lease_key == stalled_ && !checkpoints_) return stall();
    return inner_.renew_lease(held);
  }
  Result<Lease> evict_lease(const Lease& held) override { return inner_.evict_lease(held); }
  Result<Lease> initiate_handoff(const Lease& seen, std::string_view o) override {
    return inner_.initiate_handoff(seen, o);
  }
  Result<Lease> update_checkpoint(const Lease& held, const CheckpointFields& f) override {
    if (held.lease_key == stalled_ && checkpoints_) return stall();
    return inner_.update_checkpoint(held, f);
  }
  Status update_child_shard_ids(std::string_view k, const std::vector<std::string>& c) override {
    return inner_.update_child_shard_ids(k, c);
  }
  Status delete_lease(std::string_view k) override { return inner_.delete_lease(k); }

 private:
  Result<Lease> stall() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.wait(lock, [&] { return released_; });
    --waiting_;
    return Status(StatusCode::kUnavailable, "timed out after the per-call deadline");
  }

  LeaseStore& inner_;
  const std::string stalled_;
  const bool checkpoints_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  int waiting_ = 0;
};

TEST_F(CoordinatorTest, OneStalledRenewalDelaysNoOtherLeasesRenewal) {
  add_free_leases(store_, 6);
  StallingStore stalling(store_, shard(2));
  LeaseConfig c = test_config("A");
  TakesWorker a(stalling, c, clock_, NoopMetricsSink::instance(), 1);
  ASSERT_EQ(a.run_take_pass().taken.size(), 6u);
  std::map<std::string, std::int64_t> before;
  for (int i = 0; i < 6; ++i) before[shard(i)] = store_.peek(shard(i))->lease_counter;
  RenewPassResult r;
  std::thread pass([&] { r = a.run_renew_pass(); });
  // While the stalled call hangs, every other lease is renewed.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool others_renewed = false;
  while (std::chrono::steady_clock::now() < deadline && !others_renewed) {
    others_renewed = true;
    for (int i = 0; i < 6; ++i) {
      if (i == 2) continue;
      if (store_.peek(shard(i))->lease_counter == before[shard(i)]) others_renewed = false;
    }
    if (!others_renewed) std::this_thread::yield();
  }
  EXPECT_TRUE(others_renewed) << "the other renewals waited behind the stalled one";
  EXPECT_EQ(store_.peek(shard(2))->lease_counter, before[shard(2)]);
  stalling.release();
  pass.join();
  EXPECT_EQ(r.renewed, 5);
  EXPECT_EQ(r.failed, 1);
  EXPECT_TRUE(a.holds(shard(2))) << "one failed renewal is not a lost lease";
}

// A handoff's completion that landed, its answer lost and the client's retry refused by the
// condition it had itself changed: it was reported as a lost lease ("taken by B"). Now it is
// the handoff it is.
TEST_F(CoordinatorTest, AHandoffWhoseRetryIsRefusedBecauseItLandedIsNoLoss) {
  add_free_leases(store_, 1);
  auto a = make("A");
  testing::RecordingListener listener;
  a->set_listener(&listener);
  ASSERT_EQ(a->run_take_pass().taken.size(), 1u);
  auto handing = store_.initiate_handoff(*store_.peek(shard(0)), "B");
  ASSERT_TRUE(handing.ok()) << handing.status();
  a->held().note_handoff(*handing);
  store_.fail_next(1, StatusCode::kConditionFailed, /*after_apply=*/true);
  const Status s = a->held().complete_handoff(shard(0));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(listener.lost().empty()) << listener.reasons().front();
  EXPECT_FALSE(a->holds(shard(0)));
  EXPECT_EQ(store_.peek(shard(0))->lease_owner, std::optional<std::string>("B"));
  EXPECT_FALSE(store_.peek(shard(0))->checkpoint_owner.has_value());
}

// A take that landed but whose answer was lost (a timeout after DynamoDB did the work): the
// table named this worker, but the worker did not hold the lease, so no one read the shard
// until the lease expired and another worker took it. Now the lease is read again after a
// failed take and held when the take landed.
TEST_F(CoordinatorTest, ATakeThatLandedThoughItsAnswerWasLostIsHeld) {
  add_free_leases(store_, 1);
  StallingStore losing(store_, "none");
  losing.lose_take_answer = true;
  TakesWorker a(losing, test_config("A"), clock_, NoopMetricsSink::instance(), 1);
  TakePassResult r = a.run_take_pass();
  EXPECT_EQ(store_.peek(shard(0))->lease_owner, std::optional<std::string>("A"));
  EXPECT_TRUE(a.holds(shard(0))) << "the table names A, but A does not hold it";
  EXPECT_EQ(r.taken, std::vector<std::string>{shard(0)});
}

// A checkpoint write that hangs past the lease's deadline (a half-open connection, the store's
// own timeout far longer than the hold): the renewals skipped the lease as "write in
// progress" for as long as the call hung, so it was never given up; other workers could take
// it meanwhile, and its past deadline made the renewer run every 10 ms. Now the first renewal
// past its deadline gives it up (its consumer is told), and the other leases go on.
TEST_F(CoordinatorTest, ALeaseWhoseCheckpointHangsPastItsDeadlineIsGivenUp) {
  add_free_leases(store_, 2);
  StallingStore stalling(store_, shard(0), /*checkpoints=*/true);
  LeaseConfig c = test_config("A");
  TakesWorker a(stalling, c, clock_, NoopMetricsSink::instance(), 1);
  testing::RecordingListener listener;
  a.set_listener(&listener);
  ASSERT_EQ(a.run_take_pass().taken.size(), 2u);
  CheckpointFields f;
  f.checkpoint = ExtendedSequenceNumber("4959000000000000000001");
  std::thread checkpoint([&] { (void)a.update_checkpoint(shard(0), f); });
  while (!stalling.stalling()) std::this_thread::yield();
  // Half the hold later: shard 1 is renewed, shard 0's checkpoint is still in flight.
  const auto hold = c.failover_time - c.effective_lost_lease_margin();
  clock_.advance(hold / 2);
  RenewPassResult r = a.run_renew_pass();
  EXPECT_EQ(r.renewed, 1);
  EXPECT_TRUE(a.holds(shard(0)));
  // Past shard 0's deadline (shard 1's is later).
  clock_.advance(hold / 2 + 1ms);
  r = a.run_renew_pass();
  EXPECT_FALSE(a.holds(shard(0))) << "kept though its deadline passed";
  EXPECT_TRUE(a.holds(shard(1)));
  EXPECT_EQ(listener.lost(), std::vector<std::string>{shard(0)});
  const auto next = a.next_deadline();
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(*next, clock_.now()) << "a past deadline left: the renewer would run at once";
  stalling.release();
  checkpoint.join();
}

}  // namespace
}  // namespace kcl::leases
