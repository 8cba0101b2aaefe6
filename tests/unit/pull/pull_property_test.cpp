// The pull consumer's checkpoints under random schedules: a real ShardConsumer (step by step
// on the test's thread, its fetch task on a pool without threads) with the pull processor, a
// scripted Kinesis shard, an in-memory lease table and a worker-takes worker holding the
// lease, all on a manual clock. Each seed plays
// thousands of random steps: consumer steps, takes, acks in random order, new records, lease
// losses (the lease taken by another worker, then taken back: a new tenure), shutdowns with
// a restart (a new hub: records still held are cancelled), and the shard's end. After every
// step the stored checkpoint must
//   - never move backwards;
//   - never pass a record that was not acknowledged (in some tenure);
// and at the end, once every record is acknowledged, it equals the last record, then
// SHARD_END once the shard is closed.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "leases/in_memory_lease_store.h"
#include "lifecycle/shard_consumer.h"
#include "lifecycle/task_pool.h"
#include "pull/pull_hub.h"
#include "pull/pull_processor.h"
#include "support/consumer_context_builder.h"
#include "support/fetcher_fake_kinesis.h"
#include "support/lease_test_util.h"

namespace kcl::pull {
namespace {

using namespace std::chrono_literals;
using retrieval::testing::FakeKinesis;
using retrieval::testing::kShard;
using retrieval::testing::kStream;
using retrieval::testing::seq_number;

class PullPropertyTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ctx_.stream = kStream;
    ctx_.kinesis = &client_;
    ctx_.store = &store_;
    ctx_.held = &coordinator_.held();
    ctx_.logger = nullptr;
    ctx_.metrics = &NoopMetricsSink::instance();
    ctx_.clock = &clock_;
    ctx_.pool = &pool_;
    ctx_.initial_position = InitialPosition::trim_horizon();
    ctx_.retrieval.idle_time_between_calls = 100ms;
    ctx_.retrieval.min_call_interval = 10ms;
    ctx_.retrieval.max_records_per_call = 7;  // small batches: more interleavings
    Lease l;
    l.lease_key = kShard;
    ASSERT_TRUE(store_.create_lease_if_not_exists(l).ok());
    new_hub();
    new_consumer();
  }

  static LeaseConfig lease_config() {
    LeaseConfig c;
    c.application_name = "app";
    c.worker_id = "w1";
    c.assignment = LeaseAssignment::kWorkerTakes;
    return c;
  }

  // The per-shard bound: small, so that reading pauses often.
  virtual std::size_t max_unacked() const { return 12; }

  void new_hub() {
    PullLimits limits;
    limits.max_unacked_per_shard = max_unacked();
    limits.checkpoint_interval = 1s;
    hub_ = std::make_shared<PullHub>(limits, clock_);
    factory_ = std::make_unique<PullProcessorFactory>(hub_);
    ctx_.paced_factory = factory_.get();
  }

  void new_consumer() {
    auto pass = coordinator_.run_take_pass();
    ASSERT_TRUE(pass.status.ok()) << pass.status;
    auto held = coordinator_.held_lease(kShard);
    ASSERT_TRUE(held.has_value());
    consumer_ = std::make_shared<lifecycle::ShardConsumer>(ctx_.build(), *held);
  }

  Lease stored() {
    auto l = store_.get_lease(kShard);
    EXPECT_TRUE(l.ok() && l->has_value());
    return l.ok() && l->has_value() ? **l : Lease{};
  }

  void step_consumer() {
    if (!consumer_->done()) consumer_->run();
    pool_.run_due();  // the fetch task, as in production
    clock_.advance(std::chrono::milliseconds(rng_() % 600));
  }

  // The consumer's steps due now, without moving the clock.
  void run_due_now() {
    if (!consumer_->done()) consumer_->run();
    pool_.run_due();
  }

  void drive_until_done() {
    for (int i = 0; i < 100 && !consumer_->done(); ++i) step_consumer();
    ASSERT_TRUE(consumer_->done()) << lifecycle::to_string(consumer_->state());
  }

  void add_records(int n) {
    for (int i = 0; i < n; ++i) {
      const int index = added_++;
      index_of_[fake_->add_record("r" + std::to_string(index))] = index;
    }
  }

  void take() {
    auto got = hub_->take(1 + rng_() % 8, std::chrono::steady_clock::now());
    for (auto& r : got) {
      EXPECT_EQ(r.record().shard_id(), kShard);
      ++times_taken_[index_of_.at(std::string(r.record().sequence_number()))];
      held_.push_back(std::move(r));
    }
  }

  void ack_one() {
    if (held_.empty()) return;
    const std::size_t i = rng_() % held_.size();
    PulledRecord r = std::move(held_[i]);
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    const int index = index_of_.at(std::string(r.record().sequence_number()));
    const Status s = r.ack();
    if (s.ok()) {
      acked_ever_.insert(index);
    } else {
      // Only records of an ended tenure are refused.
      EXPECT_TRUE(s.code() == StatusCode::kLeaseLost || s.code() == StatusCode::kCancelled) << s;
    }
  }

  // Takes and acknowledges everything, up to `rounds` rounds, until the stored checkpoint is
  // `last`.
  void drain_to(const ExtendedSequenceNumber& last, int rounds) {
    for (int i = 0; i < rounds && stored().checkpoint != last; ++i) {
      step_consumer();
      take();
      while (!held_.empty()) ack_one();
      clock_.advance(1s);
      check();
      if (HasFatalFailure()) return;
    }
  }

  // Takes records until `n` were taken, acknowledging each as it comes but record `kept`,
  // which is moved to `straggler`.
  void take_all_acking_but(int kept, int n, std::optional<PulledRecord>& straggler) {
    for (int i = 0; i < 400 && static_cast<int>(times_taken_.size()) < n; ++i) {
      step_consumer();
      take();
      for (auto& r : held_) {
        const int index = index_of_.at(std::string(r.record().sequence_number()));
        if (index == kept) {
          straggler.emplace(std::move(r));
        } else {
          EXPECT_TRUE(r.ack().ok());
          acked_ever_.insert(index);
        }
      }
      held_.clear();
      check();
    }
  }

  // Another worker takes the lease; this one learns it at its next read of the lease (a
  // renewal would skip a lease checkpointed a moment ago on this frozen lease clock), then
  // takes the lease back once it is free again (a new tenure; records are delivered again
  // from the stored checkpoint).
  void lose_lease() {
    if (consumer_->done() || !coordinator_.holds(kShard)) return;
    auto b = store_.take_lease(stored(), "B");
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(coordinator_.refresh_held(kShard).status().code(), StatusCode::kLeaseLost);
    consumer_->notify_lease_lost();
    drive_until_done();
    check();
    ASSERT_TRUE(store_.evict_lease(*b).ok());
    ++losses_;
    new_consumer();
  }

  // The application shuts down (as PullConsumer::shutdown: close, some acks, the consumer's
  // shutdown, stop) and starts again with a new consumer.
  void shutdown_and_restart() {
    if (consumer_->done()) return;
    hub_->close();
    for (int i = 0, n = static_cast<int>(rng_() % 4); i < n; ++i) ack_one();
    // Without a wait for the records taken, or with one (it runs out: drive_until_done
    // acknowledges nothing).
    consumer_->request_shutdown(rng_() % 2 ? 0ms : 2s);
    drive_until_done();
    hub_->stop();
    check();
    ASSERT_TRUE(coordinator_.release(kShard).ok());
    ++restarts_;
    new_hub();
    new_consumer();
  }

  // The invariants, after every step.
  void check() {
    const ExtendedSequenceNumber now = stored().checkpoint;
    ASSERT_GE(now, last_stored_) << "moved backwards from " << last_stored_.to_string() << " to "
                                 << now.to_string();
    last_stored_ = now;
    if (now.is_sequence_number()) {
      const int upto = index_of_.at(now.sequence_number());
      for (int i = 0; i <= upto; ++i) {
        ASSERT_TRUE(acked_ever_.count(i))
            << "checkpoint " << now.to_string() << " passes record " << i << ", never acknowledged";
      }
    } else if (now.is_shard_end()) {
      ASSERT_EQ(static_cast<int>(acked_ever_.size()), added_) << "SHARD_END before every ack";
    }
  }

  const int seed_ = GetParam();
  std::mt19937 rng_{static_cast<std::mt19937::result_type>(seed_)};
  ManualClock lease_clock_;  // never moves: leases stay held until taken on purpose
  ManualClock clock_;
  lifecycle::TaskPool pool_{0, clock_};  // no threads: run_due() on the test's thread
  std::shared_ptr<FakeKinesis> fake_ = std::make_shared<FakeKinesis>(clock_);
  kinesis::KinesisClient client_{fake_};
  leases::InMemoryLeaseStore store_;
  leases::testing::TakesWorker coordinator_{store_, lease_config(), lease_clock_};
  lifecycle::testing::ConsumerContextBuilder ctx_;
  std::shared_ptr<PullHub> hub_;
  std::unique_ptr<PullProcessorFactory> factory_;
  std::shared_ptr<lifecycle::ShardConsumer> consumer_;
  std::vector<PulledRecord> held_;
  std::map<std::string, int> index_of_;
  std::map<int, int> times_taken_;  // record index -> how often next() returned it
  std::set<int> acked_ever_;
  int added_ = 0;
  int losses_ = 0;
  int restarts_ = 0;
  ExtendedSequenceNumber last_stored_ = ExtendedSequenceNumber::trim_horizon();
};

TEST_P(PullPropertyTest, CheckpointNeverPassesAnUnacknowledgedRecordNorMovesBack) {
  add_records(20);
  for (int step = 0; step < 4000; ++step) {
    const unsigned r = rng_() % 100;
    if (r < 30) {
      step_consumer();
    } else if (r < 50) {
      take();
    } else if (r < 82) {
      ack_one();
    } else if (r < 88) {
      add_records(1 + static_cast<int>(rng_() % 10));
    } else if (r < 89) {
      lose_lease();
    } else if (r < 90) {
      shutdown_and_restart();
    } else {
      clock_.advance(1s);
    }
    check();
    if (HasFatalFailure()) return;
  }
  // Drain: everything added is taken and acknowledged; the watermark reaches the last record.
  const ExtendedSequenceNumber last(seq_number(static_cast<std::size_t>(added_ - 1)));
  drain_to(last, 2000);
  if (HasFatalFailure()) return;
  EXPECT_EQ(stored().checkpoint, last);
  EXPECT_EQ(static_cast<int>(acked_ever_.size()), added_);
  // The shard ends: SHARD_END once all is acknowledged, and the consumer finishes.
  fake_->close_shard();
  for (int i = 0; i < 200 && !consumer_->done(); ++i) {
    step_consumer();
    take();
    while (!held_.empty()) ack_one();
    check();
    if (HasFatalFailure()) return;
  }
  EXPECT_TRUE(consumer_->done());
  EXPECT_EQ(consumer_->outcome(), lifecycle::ConsumerOutcome::kShardFinished);
  EXPECT_TRUE(stored().checkpoint.is_shard_end()) << stored().checkpoint.to_string();
  RecordProperty("lease_losses", losses_);
  RecordProperty("restarts", restarts_);
  RecordProperty("records", added_);
  EXPECT_GT(losses_ + restarts_, 0) << "the schedule exercised no tenure change";
}

// One record kept unacknowledged holds every record after it in the window (the watermark
// cannot pass them), and the window is bounded: with the default bound of 12 the records 12
// past the straggler would not be offered. These tests take all 30 records of the shard
// around a straggler, so the window holds them all.
class PullStragglerTest : public PullPropertyTest {
 protected:
  std::size_t max_unacked() const override { return 32; }
};

TEST_P(PullStragglerTest, ShardEndWaitsForEveryAckBeforeCheckpointingShardEnd) {
  add_records(30);
  fake_->close_shard();
  // Take everything and acknowledge every record as it comes, but one (a random one) that is
  // kept unacknowledged.
  const int kept = static_cast<int>(rng_() % 30);
  std::optional<PulledRecord> straggler;
  take_all_acking_but(kept, 30, straggler);
  ASSERT_EQ(acked_ever_.size(), 29u);
  ASSERT_TRUE(straggler.has_value());
  for (int i = 0; i < 50; ++i) {
    step_consumer();
    check();
  }
  EXPECT_FALSE(consumer_->done()) << "the shard's end waits for the last ack";
  EXPECT_FALSE(stored().checkpoint.is_shard_end());
  EXPECT_EQ(consumer_->state(), lifecycle::ConsumerState::kShardEnd);
  ASSERT_TRUE(straggler->ack().ok());
  acked_ever_.insert(kept);
  for (int i = 0; i < 10 && !consumer_->done(); ++i) step_consumer();
  EXPECT_EQ(consumer_->outcome(), lifecycle::ConsumerOutcome::kShardFinished);
  EXPECT_TRUE(stored().checkpoint.is_shard_end());
  check();
}

// A graceful handoff (request_shutdown with a drain bound, as the worker asks when the
// leader moves the lease): the shard stops offering records, the consumer waits for the
// records taken, acknowledged in random order, writes the watermark and ends; the next owner
// starts right after the last record taken. No record is taken twice, none is missed.
TEST_P(PullPropertyTest, AHandoffWaitsForTheRecordsTakenSoTheNextOwnerRedeliversNone) {
  add_records(60);
  for (int i = 0; i < 40 && times_taken_.size() < 25; ++i) {
    step_consumer();
    take();
  }
  ASSERT_GE(times_taken_.size(), 1u);
  for (int i = 0, n = static_cast<int>(held_.size()) / 2; i < n; ++i) ack_one();
  const int last_taken = times_taken_.rbegin()->first;
  consumer_->request_shutdown(10s);
  run_due_now();
  EXPECT_EQ(hub_->stats().buffered, 0u) << "the records buffered are not offered any more";
  take();
  EXPECT_EQ(times_taken_.rbegin()->first, last_taken) << "taken after the stop began";
  // The acks come in random order, with time passing, and the consumer waits for them.
  while (!held_.empty()) {
    EXPECT_FALSE(consumer_->done()) << held_.size() << " records still to acknowledge";
    ack_one();
    clock_.advance(std::chrono::milliseconds(rng_() % 500));
    run_due_now();
    check();
    if (HasFatalFailure()) return;
  }
  for (int i = 0; i < 5 && !consumer_->done(); ++i) run_due_now();  // woken by the last ack
  ASSERT_TRUE(consumer_->done());
  EXPECT_EQ(consumer_->outcome(), lifecycle::ConsumerOutcome::kShutdown);
  EXPECT_EQ(stored().checkpoint,
            ExtendedSequenceNumber(seq_number(static_cast<std::size_t>(last_taken))));

  // The next owner.
  hub_->stop();
  ASSERT_TRUE(coordinator_.release(kShard).ok());
  new_hub();
  new_consumer();
  const ExtendedSequenceNumber last(seq_number(59));
  drain_to(last, 400);
  if (HasFatalFailure()) return;
  EXPECT_EQ(stored().checkpoint, last);
  int twice = 0;
  for (const auto& [index, times] : times_taken_) twice += times > 1 ? 1 : 0;
  EXPECT_EQ(twice, 0) << "records taken again after the handoff";
  EXPECT_EQ(times_taken_.size(), 60u) << "records never taken";
}

// The wait is bounded: a record never acknowledged does not hold the handoff up past the
// bound; the final checkpoint stops below it, its late ack is refused (kCancelled), and the
// next owner delivers it again (and the records after it that it held back), nothing before.
TEST_P(PullStragglerTest, AHandoffWaitsNoLongerThanItsBoundForAStraggler) {
  add_records(30);
  // Every record taken and acknowledged as it comes, but one (a random one) kept.
  const int kept = static_cast<int>(rng_() % 30);
  std::optional<PulledRecord> straggler;
  take_all_acking_but(kept, 30, straggler);
  ASSERT_EQ(times_taken_.size(), 30u);
  ASSERT_TRUE(straggler.has_value());
  consumer_->request_shutdown(5s);
  const auto bound = clock_.now() + 5s;
  while (clock_.now() < bound) {
    run_due_now();
    EXPECT_FALSE(consumer_->done()) << "ended before the bound";
    clock_.advance(700ms);
  }
  for (int i = 0; i < 5 && !consumer_->done(); ++i) run_due_now();
  ASSERT_TRUE(consumer_->done());
  check();
  if (kept > 0) {
    EXPECT_EQ(stored().checkpoint,
              ExtendedSequenceNumber(seq_number(static_cast<std::size_t>(kept - 1))));
  }
  EXPECT_EQ(straggler->ack().code(), StatusCode::kCancelled);
  hub_->stop();
  ASSERT_TRUE(coordinator_.release(kShard).ok());
  new_hub();
  new_consumer();
  for (int i = 0; i < 400 && times_taken_[29] < 2; ++i) {
    step_consumer();
    take();
    while (!held_.empty()) ack_one();
  }
  for (const auto& [index, times] : times_taken_) {
    EXPECT_EQ(times, index >= kept ? 2 : 1) << "record " << index;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PullPropertyTest, ::testing::Range(1, 21));
INSTANTIATE_TEST_SUITE_P(Seeds, PullStragglerTest, ::testing::Range(1, 21));

}  // namespace
}  // namespace kcl::pull
