// PullHub: the pull consumer's queue and watermark bookkeeping, on a manual clock, without a
// worker: out-of-order acks and the low watermark (sub-sequence numbers included), turns
// across shards, the per-shard bounds and the wake-ups that lift them (called without the
// hub's lock), waiting threads woken in turn, a lost lease, stuck records, checkpoint pacing,
// closing, and nack's dead-letter sink refusals.
#include "pull/pull_hub.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "base/repeat_report.h"
#include "metrics/metrics_registry.h"
#include "pull/pull_processor.h"
#include "support/captured_log.h"
#include "support/eventually.h"
#include "support/null_checkpointer.h"

namespace kcl::pull {
namespace {

using namespace std::chrono_literals;

std::string seq(int i) { return "4959000000000000000000000000000000" + std::to_string(100000 + i); }

Record record(const std::string& shard, int i, SubSequenceNumber sub = 0, std::size_t bytes = 10) {
  Record r;
  r.set_shard_id(shard);
  r.set_sequence_number(seq(i));
  r.set_sub_sequence_number(sub);
  r.set_aggregated(sub > 0);
  r.set_data(std::string(bytes, 'x'));
  return r;
}

// A dead-letter sink that refuses a letter while `refuse` says so (called from any thread).
class ScriptedSink final : public DeadLetterSink {
 public:
  explicit ScriptedSink(std::function<bool(const DeadLetter&)> refuse)
      : refuse_(std::move(refuse)) {}
  Status accept(const DeadLetter& letter) override {
    calls.fetch_add(1);
    return refuse_(letter) ? Status(StatusCode::kUnavailable, "down") : Status::Ok();
  }
  std::string name() const override { return "scripted"; }

  std::atomic<int> calls{0};

 private:
  const std::function<bool(const DeadLetter&)> refuse_;
};

class PullHubTest : public ::testing::Test {
 protected:
  std::shared_ptr<PullHub> make_hub(PullLimits limits = {}) {
    hub_ = std::make_shared<PullHub>(limits, clock_);
    return hub_;
  }
  // Opens and attaches a shard whose wake-ups are recorded.
  std::shared_ptr<PullShard> shard(const std::string& id) {
    auto s = hub_->open_shard(id);
    hub_->attach(*s, [this, id](Clock::MonoTime at) { wakes_[id].push_back(at); });
    return s;
  }
  // Hands a copy in (the hub moves the records out of what it is given).
  void hand_in(PullShard& s, std::vector<Record> batch, std::size_t batch_bytes = 0) {
    hub_->hand_in(s, batch, batch_bytes);
  }
  // Wake-ups asked for now (reading may go on), as opposed to those for a checkpoint due later.
  std::size_t wakes_now(const std::string& id) {
    return static_cast<std::size_t>(std::count(wakes_[id].begin(), wakes_[id].end(), clock_.now()));
  }
  std::vector<PulledRecord> take(std::size_t max = 1000) {
    return hub_->take(max, std::chrono::steady_clock::now());
  }

  // Whether another thread gets the hub's lock while the caller waits (at most 10 s): false
  // when the caller holds it. `reader` keeps that thread's future (its destructor would wait
  // for the lock).
  bool hub_lock_free(std::future<PullStats>& reader) {
    reader = std::async(std::launch::async, [this] { return hub_->stats(); });
    return reader.wait_for(10s) == std::future_status::ready;
  }

  ManualClock clock_;
  std::shared_ptr<PullHub> hub_;
  std::map<std::string, std::vector<Clock::MonoTime>> wakes_;
};

TEST_F(PullHubTest, WatermarkFollowsTheLowestUnacknowledgedRecordIncludingSubSequences) {
  make_hub();
  auto s = shard("A");
  // Two plain records, then an aggregate of three sub-records, then a plain record.
  std::vector<Record> batch = {record("A", 1),    record("A", 2),    record("A", 3, 0),
                               record("A", 3, 1), record("A", 3, 2), record("A", 4)};
  hand_in(*s, batch);
  auto taken = take();
  ASSERT_EQ(taken.size(), 6u);
  for (std::size_t i = 0; i < taken.size(); ++i) {
    EXPECT_EQ(taken[i].record().sequence_number(), batch[i].sequence_number());
    EXPECT_EQ(taken[i].record().sub_sequence_number(), batch[i].sub_sequence_number());
  }
  auto watermark = [&] {
    clock_.advance(2s);  // a checkpoint is due
    return hub_->pace(*s).checkpoint_at;
  };
  EXPECT_FALSE(watermark().has_value()) << "nothing acknowledged yet";
  ASSERT_TRUE(taken[1].ack().ok());
  ASSERT_TRUE(taken[3].ack().ok());
  EXPECT_FALSE(watermark().has_value()) << "record 1 still holds the watermark";
  ASSERT_TRUE(taken[0].ack().ok());
  auto w = watermark();
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(*w, ExtendedSequenceNumber(seq(2)));
  hub_->checkpoint_written(*s, *w);
  ASSERT_TRUE(taken[2].ack().ok());  // 3#0 and (already) 3#1: the aggregate up to 3#1
  w = watermark();
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(*w, ExtendedSequenceNumber(seq(3), 1));
  hub_->checkpoint_written(*s, *w);
  ASSERT_TRUE(taken[5].ack().ok());
  EXPECT_FALSE(watermark().has_value()) << "3#2 holds it";
  ASSERT_TRUE(taken[4].ack().ok());
  w = watermark();
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(*w, ExtendedSequenceNumber(seq(4)));
  hub_->checkpoint_written(*s, *w);
  EXPECT_TRUE(hub_->drained(*s));
  EXPECT_EQ(hub_->stats().acked, 6u);
}

TEST_F(PullHubTest, ARecordIsAcknowledgedAtMostOnce) {
  make_hub();
  auto s = shard("A");
  std::vector<Record> batch = {record("A", 1)};
  hand_in(*s, batch);
  auto taken = take();
  ASSERT_EQ(taken.size(), 1u);
  PulledRecord moved = std::move(taken[0]);
  EXPECT_EQ(taken[0].ack().code(), StatusCode::kFailedPrecondition) << "moved from";
  EXPECT_TRUE(moved.ack().ok());
  EXPECT_EQ(moved.ack().code(), StatusCode::kFailedPrecondition) << "acknowledged twice";
  EXPECT_EQ(hub_->stats().acked, 1u);
}

TEST_F(PullHubTest, ShardsTakeTurnsAndEachKeepsItsOrder) {
  make_hub();
  auto a = shard("A");
  auto b = shard("B");
  std::vector<Record> ra, rb;
  for (int i = 0; i < 50; ++i) ra.push_back(record("A", i));
  for (int i = 0; i < 3; ++i) rb.push_back(record("B", i));
  hand_in(*a, ra);
  hand_in(*b, rb);
  auto first = take(6);
  ASSERT_EQ(first.size(), 6u);
  std::size_t from_b = 0;
  for (const auto& r : first) from_b += r.record().shard_id() == "B";
  EXPECT_EQ(from_b, 3u) << "B's records are not held back behind A's fifty";
  auto rest = take();
  std::map<std::string, std::vector<std::string>> order;
  for (auto* v : {&first, &rest}) {
    for (const auto& r : *v) {
      order[std::string(r.record().shard_id())].emplace_back(r.record().sequence_number());
    }
  }
  for (auto& [id, seqs] : order) EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end())) << id;
  EXPECT_EQ(order["A"].size(), 50u);
}

TEST_F(PullHubTest, AShardAtItsBoundIsNotOfferedAndPausesUntilAnAckMakesRoom) {
  PullLimits limits;
  limits.max_unacked_per_shard = 4;
  make_hub(limits);
  auto a = shard("A");
  auto b = shard("B");
  std::vector<Record> ra, rb;
  for (int i = 0; i < 6; ++i) ra.push_back(record("A", i));
  rb.push_back(record("B", 0));
  hand_in(*a, ra);
  EXPECT_FALSE(hub_->pace(*a).accept_batch) << "6 buffered >= 4: reading pauses";
  auto taken = take();
  std::size_t from_a = 0;
  for (const auto& r : taken) from_a += r.record().shard_id() == "A";
  EXPECT_EQ(from_a, 4u) << "at most 4 taken and not acknowledged";
  EXPECT_TRUE(take().empty());
  hand_in(*b, rb);
  auto other = take();
  ASSERT_EQ(other.size(), 1u) << "the other shard goes on";
  EXPECT_EQ(other[0].record().shard_id(), "B");
  EXPECT_EQ(wakes_now("A"), 0u);
  ASSERT_TRUE(taken[0].ack().ok());
  auto more = take();
  ASSERT_EQ(more.size(), 1u) << "one ack, one more record of A";
  EXPECT_EQ(more[0].record().sequence_number(), seq(4));
  ASSERT_TRUE(taken[1].ack().ok());
  EXPECT_EQ(wakes_now("A"), 0u) << "1 buffered + 3 taken: reading stays paused";
  EXPECT_FALSE(hub_->pace(*a).accept_batch);
  ASSERT_TRUE(taken[2].ack().ok());
  EXPECT_EQ(wakes_now("A"), 1u) << "room again: the paused consumer is woken at once";
  EXPECT_TRUE(hub_->pace(*a).accept_batch);
}

TEST_F(PullHubTest, TheByteBoundPausesToo) {
  PullLimits limits;
  limits.max_unacked_bytes_per_shard = 1000;
  make_hub(limits);
  auto a = shard("A");
  std::vector<Record> ra = {record("A", 0, 0, 600), record("A", 1, 0, 600), record("A", 2, 0, 600)};
  hand_in(*a, ra);
  EXPECT_FALSE(hub_->pace(*a).accept_batch);
  auto taken = take();
  ASSERT_EQ(taken.size(), 2u) << "offered while less than 1000 bytes are taken";
  ASSERT_TRUE(taken[0].ack().ok());
  auto third = take();
  ASSERT_EQ(third.size(), 1u);
  EXPECT_FALSE(hub_->pace(*a).accept_batch) << "1200 bytes taken";
  ASSERT_TRUE(taken[1].ack().ok());
  EXPECT_TRUE(hub_->pace(*a).accept_batch) << "600 bytes taken";
}

// Records are views into their batch's body: the byte bound counts each record's share of
// what the batch holds (body and records), not only its data. Ten records of 10 B data in a
// batch holding 2,000 bytes count 200 B each.
TEST_F(PullHubTest, TheByteBoundCountsEachRecordsShareOfItsBatch) {
  PullLimits limits;
  limits.max_unacked_bytes_per_shard = 1000;
  make_hub(limits);
  auto a = shard("A");
  std::vector<Record> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(record("A", i, 0, 10));
  hand_in(*a, batch, 2000);
  EXPECT_FALSE(hub_->pace(*a).accept_batch) << "2,000 bytes held, though only 100 B of data";
  auto taken = take();
  ASSERT_EQ(taken.size(), 5u) << "offered while less than 1,000 bytes are taken";
  for (std::size_t i = 0; i < 3; ++i) ASSERT_TRUE(taken[i].ack().ok());
  auto rest = take();
  ASSERT_EQ(rest.size(), 3u) << "3 acked (600 B) make room for 3 more";
  for (auto& r : taken) (void)r.ack();
  for (auto& r : rest) (void)r.ack();
  auto last = take();
  ASSERT_EQ(last.size(), 2u);
  EXPECT_TRUE(hub_->pace(*a).accept_batch) << "400 B taken, nothing buffered";
}

TEST_F(PullHubTest, ALostLeaseDropsItsRecordsAndRefusesTheirAcks) {
  make_hub();
  auto a = shard("A");
  std::vector<Record> ra;
  for (int i = 0; i < 5; ++i) ra.push_back(record("A", i));
  hand_in(*a, ra);
  auto taken = take(2);
  ASSERT_EQ(taken.size(), 2u);
  hub_->finish(*a, /*lost=*/true);
  EXPECT_TRUE(take().empty()) << "nothing of a lost shard is delivered";
  EXPECT_EQ(taken[0].ack().code(), StatusCode::kLeaseLost);
  EXPECT_EQ(taken[1].ack().code(), StatusCode::kLeaseLost);
  PullStats st = hub_->stats();
  EXPECT_EQ(st.buffered, 0u);
  EXPECT_EQ(st.unacked, 0u);
  EXPECT_EQ(st.acked, 0u);
  EXPECT_EQ(st.shards, 0u);
}

TEST_F(PullHubTest, AStuckRecordIsReportedOnce) {
  PullLimits limits;
  limits.stuck_record_warning = 10s;
  make_hub(limits);
  auto a = shard("A");
  std::vector<Record> ra = {record("A", 0), record("A", 1)};
  hand_in(*a, ra);
  auto taken = take();
  ASSERT_TRUE(taken[1].ack().ok());
  clock_.advance(9s);
  EXPECT_FALSE(hub_->pace(*a).stuck_report.has_value());
  clock_.advance(2s);
  auto report = hub_->pace(*a).stuck_report;
  ASSERT_TRUE(report.has_value());
  EXPECT_NE(report->find(seq(0)), std::string::npos) << *report;
  EXPECT_NE(report->find("shard A"), std::string::npos) << *report;
  clock_.advance(60s);
  EXPECT_FALSE(hub_->pace(*a).stuck_report.has_value()) << "once";
  EXPECT_EQ(hub_->stats().stuck_records, 1u);
}

TEST_F(PullHubTest, CheckpointsComeAtMostOncePerIntervalAndAckWakesTheConsumerWhenDue) {
  PullLimits limits;
  limits.checkpoint_interval = 1s;
  make_hub(limits);
  auto a = shard("A");
  std::vector<Record> ra;
  for (int i = 0; i < 10; ++i) ra.push_back(record("A", i));
  hand_in(*a, ra);
  auto taken = take();
  const auto attached_at = clock_.now();
  ASSERT_TRUE(taken[0].ack().ok());
  ASSERT_EQ(wakes_["A"].size(), 1u) << "the watermark moved: a wake-up when a write is due";
  EXPECT_EQ(wakes_["A"][0], attached_at + 1s);
  ASSERT_TRUE(taken[1].ack().ok());
  EXPECT_EQ(wakes_["A"].size(), 1u) << "one wake-up pending is enough";
  auto d = hub_->pace(*a);
  EXPECT_FALSE(d.checkpoint_at.has_value()) << "not due yet";
  ASSERT_TRUE(d.next_call.has_value());
  EXPECT_EQ(*d.next_call, attached_at + 1s);
  clock_.advance(1s);
  d = hub_->pace(*a);
  ASSERT_TRUE(d.checkpoint_at.has_value());
  EXPECT_EQ(*d.checkpoint_at, ExtendedSequenceNumber(seq(1)));
  hub_->checkpoint_written(*a, *d.checkpoint_at);
  EXPECT_FALSE(hub_->pace(*a).checkpoint_at.has_value()) << "nothing moved since";
  ASSERT_TRUE(taken[2].ack().ok());
  clock_.advance(500ms);
  EXPECT_FALSE(hub_->pace(*a).checkpoint_at.has_value()) << "within the interval";
}

TEST_F(PullHubTest, ClosingStopsDeliveryAndMakesTheWatermarkDueAtOnce) {
  make_hub();
  auto a = shard("A");
  std::vector<Record> ra = {record("A", 0), record("A", 1), record("A", 2)};
  hand_in(*a, ra);
  auto taken = take(2);
  ASSERT_TRUE(taken[0].ack().ok());
  hub_->close();
  EXPECT_TRUE(take().empty());
  auto d = hub_->pace(*a);
  EXPECT_FALSE(d.accept_batch);
  ASSERT_TRUE(d.checkpoint_at.has_value()) << "closing: no waiting for the interval";
  EXPECT_EQ(*d.checkpoint_at, ExtendedSequenceNumber(seq(0)));
  EXPECT_EQ(hub_->stats().unacked, 1u);
  ASSERT_TRUE(taken[1].ack().ok());
  EXPECT_EQ(hub_->stats().unacked, 0u);
  EXPECT_EQ(*hub_->final_checkpoint(*a), ExtendedSequenceNumber(seq(1)));
  hub_->stop();
  EXPECT_EQ(taken.size(), 2u);
}

// A graceful stop of one shard (its lease handed off): the records buffered are dropped and
// no longer offered, the other shards go on, and the shard drains once every record taken
// is acknowledged, in any order; its watermark is then the last record taken, due at once,
// and the last ack wakes the consumer.
TEST_F(PullHubTest, StoppingOfferingDropsTheBufferedRecordsAndDrainsOnceTheTakenAreAcked) {
  make_hub();
  auto a = shard("A");
  auto b = shard("B");
  hand_in(*a, {record("A", 0), record("A", 1), record("A", 2), record("A", 3), record("A", 4)});
  hand_in(*b, {record("B", 0)});
  std::vector<PulledRecord> taken = take(5);  // A0 B0 A1 A2 A3: turns across the shards
  ASSERT_EQ(taken.size(), 5u);
  ASSERT_EQ(taken[1].record().shard_id(), "B");
  ASSERT_TRUE(taken[1].ack().ok());
  EXPECT_EQ(hub_->stats().buffered, 1u) << "A4";

  hub_->stop_offering(*a);
  EXPECT_EQ(hub_->stats().buffered, 0u) << "A4 dropped: the next owner reads it";
  EXPECT_EQ(hub_->unacked(*a), 4u);
  hand_in(*a, {record("A", 5)});
  hand_in(*b, {record("B", 1)});
  std::vector<PulledRecord> more = take();
  ASSERT_EQ(more.size(), 1u) << "nothing more of the stopping shard";
  EXPECT_EQ(more[0].record().shard_id(), "B");
  PaceDecision d = hub_->pace(*a);
  EXPECT_FALSE(d.accept_batch);
  EXPECT_FALSE(d.checkpoint_at.has_value()) << "nothing acknowledged yet";
  EXPECT_FALSE(hub_->drained(*a));

  // Out of order: A2, A3, then A0 moves the watermark (due at once), then A1 drains it.
  ASSERT_TRUE(taken[3].ack().ok());
  ASSERT_TRUE(taken[4].ack().ok());
  ASSERT_TRUE(taken[0].ack().ok());
  d = hub_->pace(*a);
  ASSERT_TRUE(d.checkpoint_at.has_value()) << "a stopping shard's watermark is due at once";
  EXPECT_EQ(*d.checkpoint_at, ExtendedSequenceNumber(seq(0)));
  hub_->checkpoint_written(*a, *d.checkpoint_at);
  EXPECT_FALSE(hub_->drained(*a));
  const std::size_t wakes_before = wakes_now("A");
  ASSERT_TRUE(taken[2].ack().ok());
  EXPECT_EQ(wakes_now("A"), wakes_before + 1) << "the last ack wakes the consumer";
  EXPECT_TRUE(hub_->drained(*a));
  EXPECT_EQ(hub_->unacked(*a), 0u);
  ASSERT_TRUE(hub_->final_checkpoint(*a).has_value());
  EXPECT_EQ(*hub_->final_checkpoint(*a), ExtendedSequenceNumber(seq(3))) << "the last taken";
  hub_->finish(*a, /*lost=*/false);
  EXPECT_EQ(hub_->stats().shards, 1u);
  EXPECT_EQ(hub_->stats().unacked, 1u) << "B1";
}

// The wait is bounded: a record still not acknowledged when the shard finishes holds the
// final watermark below it, and its late ack is refused (kCancelled) and writes nothing; the
// next owner delivers it (and only the records from it on) again.
TEST_F(PullHubTest, AStragglerHoldsTheFinalWatermarkAndItsLateAckIsCancelled) {
  make_hub();
  auto a = shard("A");
  hand_in(*a, {record("A", 0), record("A", 1), record("A", 2)});
  std::vector<PulledRecord> taken = take();
  hub_->stop_offering(*a);
  ASSERT_TRUE(taken[0].ack().ok());
  ASSERT_TRUE(taken[2].ack().ok());
  EXPECT_FALSE(hub_->drained(*a));
  EXPECT_EQ(hub_->unacked(*a), 1u);
  EXPECT_EQ(*hub_->final_checkpoint(*a), ExtendedSequenceNumber(seq(0)));
  hub_->finish(*a, /*lost=*/false);
  EXPECT_EQ(taken[1].ack().code(), StatusCode::kCancelled);
  EXPECT_EQ(hub_->stats().unacked, 0u);
}

TEST_F(PullHubTest, AcksAfterTheShardFinishedAreCancelled) {
  make_hub();
  auto a = shard("A");
  std::vector<Record> ra = {record("A", 0)};
  hand_in(*a, ra);
  auto taken = take();
  hub_->finish(*a, /*lost=*/false);
  EXPECT_EQ(taken[0].ack().code(), StatusCode::kCancelled);
}

TEST_F(PullHubTest, ConcurrentAcksInRandomOrderEndAtTheLastRecord) {
  make_hub();
  auto a = shard("A");
  std::vector<Record> ra;
  for (int i = 0; i < 4000; ++i) ra.push_back(record("A", i));
  hand_in(*a, ra);
  auto taken = take(4000);
  ASSERT_EQ(taken.size(), 4000u);
  std::shuffle(taken.begin(), taken.end(), std::mt19937(7));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = static_cast<std::size_t>(t); i < taken.size(); i += 4) {
        if (!taken[i].ack().ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  clock_.advance(2s);
  auto d = hub_->pace(*a);
  ASSERT_TRUE(d.checkpoint_at.has_value());
  EXPECT_EQ(*d.checkpoint_at, ExtendedSequenceNumber(seq(3999)));
  EXPECT_TRUE(hub_->drained(*a));
}

// Records acknowledged behind one that is not stay in the window (the watermark cannot pass
// them): the bound is on the window, so a stuck record holds its shard at the bound and
// shows up as lag, where counting only the records not acknowledged let the window grow
// for ever behind it.
TEST_F(PullHubTest, AStuckRecordHoldsItsShardAtTheBoundThoughTheRecordsAfterItAreAcked) {
  PullLimits limits;
  limits.max_unacked_per_shard = 4;
  make_hub(limits);
  auto a = shard("A");
  std::vector<Record> ra;
  for (int i = 0; i < 6; ++i) ra.push_back(record("A", i));
  hand_in(*a, ra);
  auto taken = take();
  ASSERT_EQ(taken.size(), 4u);
  for (std::size_t i = 1; i < 4; ++i) ASSERT_TRUE(taken[i].ack().ok());
  EXPECT_EQ(take().size(), 0u) << "record 0 holds 4 records in the window";
  EXPECT_FALSE(hub_->pace(*a).accept_batch) << "nor is more read";
  EXPECT_EQ(wakes_now("A"), 0u);
  ASSERT_TRUE(taken[0].ack().ok());
  EXPECT_EQ(wakes_now("A"), 1u) << "the watermark passed them: room again";
  EXPECT_EQ(take().size(), 2u);
}

// The wake-up an ack asks for is called without the hub's lock: it schedules the shard's
// consumer on the task pool, whose threads may hold the pool's lock while the last reference
// to a consumer goes (its processor then finishes its shard, taking the hub's lock).
TEST_F(PullHubTest, AnAckWakesTheConsumerWithoutHoldingTheHubsLock) {
  make_hub();
  auto a = hub_->open_shard("A");
  std::future<PullStats> reader;
  bool lock_free = false;
  hub_->attach(*a, [&](Clock::MonoTime) { lock_free = hub_lock_free(reader); });
  hand_in(*a, {record("A", 0)});
  auto taken = take();
  ASSERT_EQ(taken.size(), 1u);
  ASSERT_TRUE(taken[0].ack().ok());  // the watermark moved: a wake-up for its checkpoint
  ASSERT_TRUE(reader.valid()) << "no wake-up";
  reader.wait();
  EXPECT_TRUE(lock_free) << "the wake-up was called under the hub's lock";
}

// A shard with records for several waiting threads: each take that leaves a shard ready
// wakes the next waiting thread, so all of them get records at once (not one per batch while
// the others sleep until their deadline).
TEST_F(PullHubTest, ThreadsWaitingForRecordsAreWokenInTurnWhileRecordsAreLeft) {
  make_hub();
  auto a = shard("A");
  constexpr int kThreads = 3;
  std::atomic<int> waiting{0};
  std::atomic<int> served{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      waiting.fetch_add(1);
      if (hub_->take(1, std::chrono::steady_clock::now() + 60s).size() == 1) served.fetch_add(1);
    });
  }
  ASSERT_TRUE(kcl::testing::eventually([&] { return waiting.load() == kThreads; }));
  hand_in(*a, {record("A", 0), record("A", 1), record("A", 2)});
  EXPECT_TRUE(kcl::testing::eventually([&] { return served.load() == kThreads; }, 10s))
      << served.load() << " of " << kThreads << " threads woken";
  hub_->stop();  // frees the threads still waiting, so the test ends either way
  for (auto& th : threads) th.join();
}

// After close() (a drain) take() has nothing to hand out, and a puller calling it in a loop
// would spin: it waits until its deadline, or until stop().
TEST_F(PullHubTest, AClosedHubWaitsUntilTheDeadlineOrStop) {
  make_hub();
  auto a = shard("A");
  hand_in(*a, {record("A", 0)});
  hub_->close();
  const auto deadline = std::chrono::steady_clock::now() + 50ms;
  EXPECT_TRUE(hub_->take(1, deadline).empty());
  EXPECT_GE(std::chrono::steady_clock::now(), deadline) << "returned before its deadline";
  auto forever = std::async(std::launch::async, [&] {
    return hub_->take(1, std::chrono::steady_clock::time_point::max()).size();
  });
  EXPECT_EQ(forever.wait_for(100ms), std::future_status::timeout) << "returned at once";
  hub_->stop();
  ASSERT_EQ(forever.wait_for(10s), std::future_status::ready) << "stop() left it waiting";
  EXPECT_EQ(forever.get(), 0u);
}

// Likewise before start(), and a timeout too long to add to the time now
// (milliseconds::max(), which overflowed) waits for ever: until shutdown().
TEST(PullConsumerNextTest, BeforeStartNextWaitsUntilItsTimeoutOrShutdown) {
  PullConsumer consumer(PullConsumerConfig{}, Dependencies{});
  auto next = std::async(std::launch::async,
                         [&] { return consumer.next(std::chrono::milliseconds::max()); });
  EXPECT_EQ(next.wait_for(100ms), std::future_status::timeout) << "returned at once";
  ASSERT_TRUE(consumer.shutdown().ok());
  ASSERT_EQ(next.wait_for(10s), std::future_status::ready) << "shutdown() left it waiting";
  EXPECT_FALSE(next.get().has_value());
}

// A nack waiting to ask a refusing sink again ends as soon as its shard does (a handoff, a
// shutdown), not after its backoff.
TEST_F(PullHubTest, ANackWaitingForTheSinkEndsWhenItsShardDoes) {
  auto sink = std::make_shared<ScriptedSink>([](const DeadLetter&) { return true; });
  PullLimits limits;
  limits.dead_letter_sink = sink;
  limits.sink_backoff_base = 20s;
  limits.sink_backoff_max = 20s;
  make_hub(limits);
  auto a = shard("A");
  auto b = shard("B");
  hand_in(*a, {record("A", 0)});
  hand_in(*b, {record("B", 0)});
  auto taken = take();
  ASSERT_EQ(taken.size(), 2u);
  auto nack_a = std::async(std::launch::async, [&] { return taken[0].nack("poison"); });
  auto nack_b = std::async(std::launch::async, [&] { return taken[1].nack("poison"); });
  ASSERT_TRUE(kcl::testing::eventually([&] { return sink->calls.load() == 2; }));
  hub_->finish(*a, /*lost=*/false);
  ASSERT_EQ(nack_a.wait_for(10s), std::future_status::ready) << "finish(): waited out its backoff";
  EXPECT_EQ(nack_a.get().code(), StatusCode::kCancelled);
  hub_->stop();
  ASSERT_EQ(nack_b.wait_for(10s), std::future_status::ready) << "stop(): waited out its backoff";
  EXPECT_EQ(nack_b.get().code(), StatusCode::kCancelled);
}

// A sink refusing for a while is one series of refusals however many records are nacked
// meanwhile: logged at its 1st, 3rd, 10th... refusal with the count, and once when the sink
// accepts again; never under the hub's lock (a logger may block).
TEST_F(PullHubTest, SinkRefusalsAreOneSeriesAcrossRecordsLoggedOutsideTheLock) {
  constexpr std::size_t kRecords = 3;
  constexpr int kRefusals = 12;
  std::mutex mu;
  std::set<std::string> refused;  // every record is refused at least once
  int refusals = 0;
  auto sink = std::make_shared<ScriptedSink>([&](const DeadLetter& l) {
    std::lock_guard<std::mutex> lock(mu);
    if (refused.size() == kRecords && refusals >= kRefusals) return false;
    refused.insert(std::string(l.record.sequence_number()));
    ++refusals;
    return true;
  });
  PullLimits limits;
  limits.dead_letter_sink = sink;
  limits.sink_backoff_base = 1ms;
  limits.sink_backoff_max = 1ms;
  make_hub(limits);
  kcl::testing::CapturedLog log(LogLevel::kInfo);
  std::future<PullStats> reader;
  std::atomic<bool> probed{false};
  bool lock_free = true;
  struct Probe final : Logger {
    std::function<void(std::string_view)> fn;
    bool enabled(LogLevel) const override { return true; }
    void log(LogLevel, std::string_view, std::string_view m) override { fn(m); }
  } probe;
  probe.fn = [&](std::string_view m) {
    if (!probed.exchange(true)) lock_free = hub_lock_free(reader);
    log.log(LogLevel::kError, "", m);
  };
  auto a = hub_->open_shard("A");
  hub_->attach(
      *a, [](Clock::MonoTime) {}, nullptr, &probe);
  std::vector<Record> batch;
  for (std::size_t i = 0; i < kRecords; ++i) batch.push_back(record("A", static_cast<int>(i)));
  hand_in(*a, batch);
  auto taken = take();
  ASSERT_EQ(taken.size(), kRecords);
  std::vector<std::future<Status>> nacks;
  for (auto& r : taken) {
    nacks.push_back(std::async(std::launch::async, [&r] { return r.nack("poison"); }));
  }
  for (auto& n : nacks) ASSERT_TRUE(n.get().ok());
  if (reader.valid()) reader.wait();
  EXPECT_TRUE(lock_free) << "logged under the hub's lock";
  std::size_t refusal_lines = 0;
  std::size_t expected = 0;
  for (int n = 1; n <= refusals; ++n) expected += base::worth_reporting(n) ? 1 : 0;
  std::size_t recovered = 0;
  for (const std::string& line : log.lines()) {
    refusal_lines += line.find("refused") != std::string::npos ? 1 : 0;
    recovered += line.find("accepted again after " + std::to_string(refusals) + " refusals") !=
                         std::string::npos
                     ? 1
                     : 0;
  }
  EXPECT_EQ(refusal_lines, expected) << refusals << " refusals of " << kRecords << " records";
  EXPECT_EQ(recovered, 1u);
}

// A worker of several streams: the unacked gauge carries the consumer's tags (the stream
// too), so the same shard id of two streams stays two series and the consumer's end forgets
// it with the rest of the shard's series.
TEST_F(PullHubTest, TheUnackedGaugeCarriesTheConsumersTagsAndIsForgottenWithThem) {
  make_hub();
  metrics::MetricsRegistry registry;
  kcl::testing::NullCheckpointer checkpointer;
  const MetricTag orders[] = {{"shard", "shardId-000000000000"}, {"stream", "orders"}};
  const MetricTag payments[] = {{"shard", "shardId-000000000000"}, {"stream", "payments"}};
  std::vector<std::unique_ptr<PullProcessor>> processors;
  for (const auto* tags : {orders, payments}) {
    auto p = std::make_unique<PullProcessor>(hub_, "shardId-000000000000");
    lifecycle::PaceContext context;
    context.wake = [](Clock::MonoTime) {};
    context.metrics = &registry;
    context.clock = &clock_;
    context.tags = MetricTags(tags, 2);
    p->attach(std::move(context));
    processors.push_back(std::move(p));
  }
  std::vector<Record> batch{record("shardId-000000000000", 1), record("shardId-000000000000", 2)};
  processors[0]->hand_in(batch, 0);
  ASSERT_EQ(take().size(), 2u);
  for (auto& p : processors) (void)p->pace(checkpointer);
  const std::string text = registry.prometheus_text();
  EXPECT_NE(
      text.find(R"(kcl_pull_unacked_records{shard="shardId-000000000000",stream="orders"} 2)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(R"(kcl_pull_unacked_records{shard="shardId-000000000000",stream="payments"} 0)"),
      std::string::npos)
      << text;
  registry.forget(MetricTags(orders, 2));
  const std::string after = registry.prometheus_text();
  EXPECT_EQ(after.find(R"(stream="orders")"), std::string::npos) << after;
  EXPECT_NE(after.find(R"(stream="payments")"), std::string::npos) << after;
}

// A SHARD_END checkpoint that keeps failing (the consumer calls shard_ended() again after
// each backoff) is one series: logged at its 1st, 3rd and 10th failure with the count, not once
// per attempt; a lost lease ends the shard at once.
TEST_F(PullHubTest, AShardEndCheckpointThatKeepsFailingIsLoggedOncePerSeries) {
  make_hub();
  struct Failing final : kcl::testing::NullCheckpointer {
    using NullCheckpointer::checkpoint;
    StatusCode code = StatusCode::kUnavailable;
    Status checkpoint() override { return Status(code, "throttled"); }
  } failing;
  kcl::testing::CapturedLog log(LogLevel::kInfo);
  PullProcessor p(hub_, "shardId-000000000000");
  lifecycle::PaceContext context;
  context.wake = [](Clock::MonoTime) {};
  context.clock = &clock_;
  context.logger = &log;
  p.attach(std::move(context));
  for (int i = 0; i < 12; ++i) p.shard_ended(failing);
  auto lines = log.lines();
  ASSERT_EQ(lines.size(), 3u) << "12 failed attempts";
  EXPECT_NE(lines[2].find("10 times in a row"), std::string::npos) << lines[2];
  EXPECT_EQ(hub_->stats().shards, 1u) << "the shard ended although SHARD_END was not written";
  failing.code = StatusCode::kLeaseLost;
  p.shard_ended(failing);
  EXPECT_EQ(hub_->stats().shards, 0u) << "a lost lease did not end the shard";
}

}  // namespace
}  // namespace kcl::pull
