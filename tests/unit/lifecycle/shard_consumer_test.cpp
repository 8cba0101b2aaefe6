// ShardConsumer, step by step on the test's thread: a scripted Kinesis (the fetcher tests'
// FakeKinesis) on a manual clock, a task pool without threads (its fetch task runs there, as
// in production), an in-memory lease table and a worker-takes worker that holds the lease. Covers
// the state machine: initialize at the checkpoint, delivery, shard end with and without the
// SHARD_END checkpoint, processor exceptions (retry and skip), waiting on parents, lease lost and
// shutdown at each stage, a deleted stream, and the counters the worker reports.
#include "lifecycle/shard_consumer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "leases/in_memory_lease_store.h"
#include "support/captured_log.h"
#include "support/consumer_context_builder.h"
#include "support/fetcher_fake_kinesis.h"
#include "support/kpl_builder.h"
#include "support/lease_test_util.h"

namespace kcl {
// Readable positions in test failure messages.
inline void PrintTo(const ExtendedSequenceNumber& position, std::ostream* os) {
  *os << position.to_string();
}
}  // namespace kcl

namespace kcl::lifecycle {
namespace {

using namespace std::chrono_literals;
using retrieval::testing::FakeKinesis;
using retrieval::testing::kShard;
using retrieval::testing::kStream;
using retrieval::testing::seq_number;

// What the processor does and saw. Used from the test's thread only (run() is called there).
struct Script {
  std::vector<std::string> events;  // "initialize <pos>", "process <n>", "shard_ended", ...
  std::vector<std::string> data;    // every record delivered, every time
  std::function<bool(std::span<const Record>)> throws;  // process_records throws when true
  int hold_shard_end = 0;     // shard_ended returns without checkpointing this many times
  int initialize_throws = 0;  // initialize throws this many times
  bool checkpoint_each_batch = true;
  bool checkpoint_on_shutdown = true;
  // Each batch's checkpoint names this sequence number instead of the batch's last record.
  std::string checkpoint_sequence;
  std::vector<Status> checkpoints;  // results of the checkpoints written
};

class ScriptedShardProcessor final : public RecordProcessor {
 public:
  explicit ScriptedShardProcessor(Script& s) : s_(s) {}
  void initialize(const InitializationInput& input) override {
    s_.events.push_back("initialize " + input.starting_position.to_string());
    if (s_.initialize_throws > 0) {
      --s_.initialize_throws;
      throw std::runtime_error("scripted initialize failure");
    }
  }
  void process_records(const ProcessRecordsInput& input) override {
    s_.events.push_back("process " + std::to_string(input.records.size()));
    for (const Record& r : input.records) s_.data.emplace_back(r.data());
    if (s_.throws && s_.throws(input.records)) throw std::runtime_error("scripted failure");
    if (!s_.checkpoint_sequence.empty()) {
      s_.checkpoints.push_back(input.checkpointer.checkpoint(s_.checkpoint_sequence, 0));
    } else if (s_.checkpoint_each_batch) {
      s_.checkpoints.push_back(input.checkpointer.checkpoint());
    }
  }
  void lease_lost() override { s_.events.push_back("lease_lost"); }
  void shard_ended(Checkpointer& cp) override {
    s_.events.push_back("shard_ended");
    if (s_.hold_shard_end > 0) {
      --s_.hold_shard_end;
      return;
    }
    s_.checkpoints.push_back(cp.checkpoint());
  }
  void shutdown_requested(Checkpointer& cp) override {
    s_.events.push_back("shutdown_requested");
    if (s_.checkpoint_on_shutdown) s_.checkpoints.push_back(cp.checkpoint());
  }

 private:
  Script& s_;
};

class ScriptedFactory final : public RecordProcessorFactory {
 public:
  explicit ScriptedFactory(Script& s) : s_(s) {}
  std::unique_ptr<RecordProcessor> create(std::string_view) override {
    return std::make_unique<ScriptedShardProcessor>(s_);
  }

 private:
  Script& s_;
};

bool contains(std::span<const Record> records, const std::string& data) {
  for (const Record& r : records) {
    if (r.data() == data) return true;
  }
  return false;
}

std::size_t count(const std::vector<std::string>& v, const std::string& x) {
  return static_cast<std::size_t>(std::count(v.begin(), v.end(), x));
}

class ShardConsumerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.stream = kStream;
    ctx_.kinesis = &client_;
    ctx_.store = &store_;
    ctx_.held = &coordinator_.held();
    ctx_.factory = &factory_;
    ctx_.logger = nullptr;
    ctx_.metrics = &NoopMetricsSink::instance();
    ctx_.clock = &fetch_clock_;
    ctx_.pool = &pool_;
    ctx_.initial_position = InitialPosition::trim_horizon();
    ctx_.retrieval.idle_time_between_calls = 100ms;
    ctx_.retrieval.min_call_interval = 10ms;
  }

  static LeaseConfig lease_config() {
    LeaseConfig c;
    c.application_name = "app";
    c.worker_id = "w1";
    c.assignment = LeaseAssignment::kWorkerTakes;
    return c;
  }

  void add_lease(const std::string& key,
                 ExtendedSequenceNumber checkpoint = ExtendedSequenceNumber::trim_horizon(),
                 std::vector<std::string> parents = {}) {
    Lease l;
    l.lease_key = key;
    l.checkpoint = std::move(checkpoint);
    l.parent_shard_ids = std::move(parents);
    ASSERT_TRUE(store_.create_lease_if_not_exists(l).ok());
  }

  // Takes every lease and makes the consumer of `key`.
  std::shared_ptr<ShardConsumer> consumer(const std::string& key = kShard) {
    auto pass = coordinator_.run_take_pass();
    EXPECT_TRUE(pass.status.ok()) << pass.status;
    auto held = coordinator_.held_lease(key);
    EXPECT_TRUE(held.has_value()) << key;
    if (!held) return nullptr;
    return std::make_shared<ShardConsumer>(ctx_.build(), *held);
  }

  // A consumer that read a closed shard of 3 records and called shard_ended() once, which
  // returned without checkpointing; the processor does so `refusals` times in all.
  std::shared_ptr<ShardConsumer> consumer_at_refused_shard_end(int refusals) {
    add_lease(kShard);
    fake_->add_records(3, "r");
    fake_->close_shard();
    script_.hold_shard_end = refusals;
    auto c = consumer();
    if (!c || !drive(*c, [&] { return count(script_.events, "shard_ended") == 1; })) {
      ADD_FAILURE() << "the consumer did not reach the shard's end";
      return nullptr;
    }
    return c;
  }

  // Runs steps (the fetcher's clock moves 1 s after each) until `until` holds; false if it
  // did not within `max_steps`. Each step is one of the consumer's, then whatever the pool
  // has due (its fetch task, as in production).
  bool drive(ShardConsumer& c, const std::function<bool()>& until, int max_steps = 200) {
    for (int i = 0; i < max_steps; ++i) {
      if (until()) return true;
      step(c);
      fetch_clock_.advance(1s);
    }
    return until();
  }
  void step(ShardConsumer& c) {
    last_next_ = c.run();
    pool_.run_due();
  }

  Lease stored(const std::string& key = kShard) {
    auto l = store_.get_lease(key);
    EXPECT_TRUE(l.ok() && l->has_value());
    return l.ok() && l->has_value() ? **l : Lease{};
  }

  ManualClock lease_clock_;  // never moves: the lease stays held
  ManualClock fetch_clock_;  // moves as the test drives the consumer
  std::shared_ptr<FakeKinesis> fake_ = std::make_shared<FakeKinesis>(fetch_clock_);
  kinesis::KinesisClient client_{fake_};
  leases::InMemoryLeaseStore store_;
  leases::testing::TakesWorker coordinator_{store_, lease_config(), lease_clock_};
  Script script_;
  ScriptedFactory factory_{script_};
  TaskPool pool_{0, fetch_clock_};  // no threads: run_due() on the test's thread
  testing::ConsumerContextBuilder ctx_;
  std::atomic<std::uint64_t>& delivered_ = ctx_.records_delivered;
  std::atomic<std::uint64_t>& failures_ = ctx_.processor_failures;
  std::atomic<std::uint64_t>& corrupt_ = ctx_.corrupt_aggregates;
  std::optional<SteadyTime> last_next_;
};

TEST_F(ShardConsumerTest, DeliversTheShardThenCheckpointsShardEnd) {
  add_lease(kShard);
  fake_->add_records(10, "r");
  fake_->close_shard();
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return c->done(); }));
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kShardFinished);
  ASSERT_GE(script_.events.size(), 3u);
  EXPECT_EQ(script_.events.front(), "initialize TRIM_HORIZON");
  EXPECT_EQ(script_.events.back(), "shard_ended");
  std::vector<std::string> expected;
  for (int i = 0; i < 10; ++i) expected.push_back("r" + std::to_string(i));
  EXPECT_EQ(script_.data, expected);
  EXPECT_TRUE(stored().checkpoint.is_shard_end());
  EXPECT_EQ(delivered_.load(), 10u);
  EXPECT_EQ(failures_.load(), 0u);
  EXPECT_FALSE(pool_.scheduled_at(*c).has_value()) << "a done consumer is not queued";
  EXPECT_FALSE(c->run().has_value()) << "a done consumer asks not to run again";
}

TEST_F(ShardConsumerTest, StartsAfterTheCheckpoint) {
  add_lease(kShard, ExtendedSequenceNumber(seq_number(4)));
  fake_->add_records(10, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() >= 5; }));
  EXPECT_EQ(script_.events.front(), "initialize " + seq_number(4));
  EXPECT_EQ(script_.data, (std::vector<std::string>{"r5", "r6", "r7", "r8", "r9"}));
  EXPECT_EQ(c->state(), ConsumerState::kProcessing);
}

TEST_F(ShardConsumerTest, ShardEndedWithoutCheckpointIsAskedAgainUntilItCheckpoints) {
  auto c = consumer_at_refused_shard_end(3);
  ASSERT_TRUE(c);
  for (int call = 2; call <= 3; ++call) {
    EXPECT_EQ(c->state(), ConsumerState::kShardEnd);
    EXPECT_FALSE(stored().checkpoint.is_shard_end());
    const auto ran_at = fetch_clock_.now();  // the consumer runs on the context's clock
    last_next_ = c->run();
    EXPECT_EQ(count(script_.events, "shard_ended"), static_cast<std::size_t>(call));
    // Each refusal backs off (doubling from failure_backoff_base).
    ASSERT_TRUE(last_next_.has_value());
    EXPECT_GT(*last_next_, ran_at);
  }
  EXPECT_FALSE(c->done()) << "never skipped";
  ASSERT_TRUE(drive(
      *c, [&] { return c->done(); }, 3));
  EXPECT_EQ(count(script_.events, "shard_ended"), 4u);
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kShardFinished);
  EXPECT_TRUE(stored().checkpoint.is_shard_end());
}

TEST_F(ShardConsumerTest, ShardEndReachedBeforeShutdownIsStillCheckpointed) {
  auto c = consumer_at_refused_shard_end(1);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->state(), ConsumerState::kShardEnd);
  // Shutdown comes while shard_ended() is still to be retried: the shard end wins (its
  // children can start), and shutdown_requested() is not called on top of it.
  c->request_shutdown();
  ASSERT_TRUE(drive(
      *c, [&] { return c->done(); }, 3));
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kShardFinished);
  EXPECT_EQ(count(script_.events, "shard_ended"), 2u);
  EXPECT_EQ(count(script_.events, "shutdown_requested"), 0u);
  EXPECT_TRUE(stored().checkpoint.is_shard_end());
}

TEST_F(ShardConsumerTest, ShardEndNeverCheckpointedDoesNotHoldUpShutdown) {
  auto c = consumer_at_refused_shard_end(1000);
  ASSERT_TRUE(c);
  c->request_shutdown();
  // One more attempt, then the consumer stops; the next owner of the lease reads the shard's
  // end again (the checkpoint stays where the processor left it).
  ASSERT_TRUE(drive(
      *c, [&] { return c->done(); }, 2));
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kShutdown);
  EXPECT_EQ(count(script_.events, "shard_ended"), 2u);
  EXPECT_FALSE(stored().checkpoint.is_shard_end());
}

TEST_F(ShardConsumerTest, ProcessorExceptionDeliversTheSameBatchAgain) {
  add_lease(kShard);
  fake_->add_records(5, "r");
  int throws_left = 2;
  script_.throws = [&](std::span<const Record>) { return throws_left-- > 0; };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() >= 15; }));
  EXPECT_EQ(script_.data.size(), 15u);
  for (std::size_t i = 0; i < 15; ++i) EXPECT_EQ(script_.data[i], "r" + std::to_string(i % 5));
  EXPECT_EQ(failures_.load(), 2u);
  EXPECT_EQ(delivered_.load(), 5u) << "counted once, when processed";
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber(seq_number(4)));
}

// A failed batch waits out its backoff though the fetch task keeps waking the consumer with
// new records (each answer wakes it at once): it was delivered again at every wake-up, about
// four times a second on a busy shard, whatever failure_backoff_base said.
TEST_F(ShardConsumerTest, AFailedBatchWaitsOutItsBackoffThoughNewRecordsWakeTheConsumer) {
  add_lease(kShard);
  ctx_.processing.failure_backoff_base = 10s;
  ctx_.processing.failure_backoff_max = 1h;
  fake_->add_records(1, "r");
  script_.throws = [](std::span<const Record>) { return true; };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return failures_.load() == 1; }));
  // 5 s of a record every 250 ms, the pool running whatever is due (the fetch task and the
  // consumer it wakes).
  for (int i = 0; i < 20; ++i) {
    fake_->add_records(1, "n");
    fetch_clock_.advance(250ms);
    pool_.run_due();
  }
  EXPECT_EQ(failures_.load(), 1u) << "delivered again before its backoff of 10 s";
  EXPECT_EQ(count(script_.data, "r0"), 1u);
  // Past the backoff it is delivered again.
  fetch_clock_.advance(6s);
  pool_.run_due();
  step(*c);
  EXPECT_EQ(count(script_.data, "r0"), 2u);
  EXPECT_EQ(failures_.load(), 2u);
}

TEST_F(ShardConsumerTest, SkipPolicyMovesOnAfterMaxAttempts) {
  add_lease(kShard);
  ctx_.retrieval.max_records_per_call = 5;
  ctx_.processing.on_processor_error = ProcessorErrorPolicy::kSkip;
  ctx_.processing.max_attempts_before_skip = 2;
  fake_->add_records(10, "r");
  script_.throws = [](std::span<const Record> records) { return contains(records, "r0"); };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return count(script_.data, "r9") == 1; }));
  EXPECT_EQ(count(script_.data, "r0"), 2u);
  EXPECT_EQ(count(script_.data, "r5"), 1u);
  EXPECT_EQ(failures_.load(), 2u);
}

TEST_F(ShardConsumerTest, ShutdownAfterAFailedBatchDoesNotCheckpointThatBatch) {
  // With kRetry the failed batch is not processed; a checkpoint() in shutdown_requested must
  // not mark it done, or the next owner would never see it.
  add_lease(kShard);
  ctx_.retrieval.max_records_per_call = 5;
  fake_->add_records(10, "r");
  script_.throws = [](std::span<const Record> records) { return contains(records, "r5"); };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return failures_.load() >= 1; }));
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber(seq_number(4)));
  c->request_shutdown();
  ASSERT_TRUE(drive(
      *c, [&] { return c->done(); }, 3));
  EXPECT_EQ(script_.events.back(), "shutdown_requested");
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kShutdown);
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber(seq_number(4)))
      << "the failed batch r5..r9 was checkpointed";
}

TEST_F(ShardConsumerTest, WaitsOnParentsUntilTheirLeasesHoldShardEnd) {
  const std::string parent = "shardId-000000000003";
  add_lease(parent, ExtendedSequenceNumber(seq_number(1)));
  add_lease(kShard, ExtendedSequenceNumber::trim_horizon(), {parent});
  fake_->add_records(2, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  for (int i = 0; i < 5; ++i) {
    last_next_ = c->run();
    ASSERT_TRUE(last_next_.has_value());
  }
  EXPECT_EQ(c->state(), ConsumerState::kWaitingOnParents);
  EXPECT_TRUE(script_.events.empty());

  leases::CheckpointFields fields;
  fields.checkpoint = ExtendedSequenceNumber::shard_end();
  ASSERT_TRUE(coordinator_.update_checkpoint(parent, fields).ok());
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() >= 2; }));
  EXPECT_EQ(script_.events.front(), "initialize TRIM_HORIZON");
}

TEST_F(ShardConsumerTest, AParentWithoutALeaseCountsAsFinished) {
  add_lease(kShard, ExtendedSequenceNumber::trim_horizon(), {"shardId-000000000003"});
  fake_->add_records(1, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() >= 1; }));
}

TEST_F(ShardConsumerTest, LeaseLostBeforeTheProcessorExistsEndsWithoutCallbacks) {
  const std::string parent = "shardId-000000000003";
  add_lease(parent, ExtendedSequenceNumber(seq_number(1)));
  add_lease(kShard, ExtendedSequenceNumber::trim_horizon(), {parent});
  auto c = consumer();
  ASSERT_TRUE(c);
  (void)c->run();
  c->notify_lease_lost();
  EXPECT_FALSE(c->run().has_value());
  EXPECT_TRUE(c->done());
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kLeaseLost);
  EXPECT_TRUE(script_.events.empty());
}

TEST_F(ShardConsumerTest, LeaseLostWhileProcessingCallsLeaseLostAndNothingElse) {
  add_lease(kShard);
  fake_->add_records(3, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() >= 3; }));
  c->notify_lease_lost();
  c->request_shutdown();  // lease lost wins: no checkpoint can be written anyway
  ASSERT_TRUE(drive(
      *c, [&] { return c->done(); }, 3));
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kLeaseLost);
  EXPECT_EQ(script_.events.back(), "lease_lost");
  EXPECT_EQ(count(script_.events, "shutdown_requested"), 0u);
}

TEST_F(ShardConsumerTest, LateCheckpointOfAnEarlierTenureIsRefusedAfterTheLeaseCameBack) {
  add_lease(kShard);
  fake_->add_records(5, "r");
  bool once = true;
  // While process_records runs, worker B takes the lease, reads further and checkpoints at
  // record 9, then hands the lease back; this worker notices the loss and takes the lease
  // again (a new tenure), so its coordinator holds it once more.
  script_.throws = [&](std::span<const Record>) {
    if (!once) return false;
    once = false;
    fake_->add_records(5, "s");
    auto b = store_.take_lease(stored(), "B");
    EXPECT_TRUE(b.ok()) << b.status();
    leases::CheckpointFields fields;
    fields.checkpoint = ExtendedSequenceNumber(seq_number(9));
    auto b2 = store_.update_checkpoint(*b, fields);
    EXPECT_TRUE(b2.ok()) << b2.status();
    EXPECT_TRUE(store_.evict_lease(*b2).ok());
    EXPECT_EQ(coordinator_.run_renew_pass().lost.size(), 1u);
    EXPECT_EQ(coordinator_.run_take_pass().taken.size(), 1u);
    return false;
  };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return !script_.checkpoints.empty(); }));
  // The old tenure's checkpoint at record 4 would have undercut B's record 9.
  EXPECT_EQ(script_.checkpoints.front().code(), StatusCode::kLeaseLost)
      << script_.checkpoints.front();
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber(seq_number(9)));
  EXPECT_TRUE(coordinator_.holds(kShard));
}

TEST_F(ShardConsumerTest, AProcessorWhoseInitializeThrewGetsNoOtherCallback) {
  for (bool shutdown : {true, false}) {
    SCOPED_TRACE(shutdown ? "shutdown" : "lease lost");
    Script script;
    script.initialize_throws = 1000;
    ScriptedFactory factory(script);
    ctx_.factory = &factory;
    const std::string key = shutdown ? kShard : "shardId-000000000099";
    add_lease(key);
    auto c = consumer(key);
    ASSERT_TRUE(c);
    ASSERT_TRUE(drive(*c, [&] { return !script.events.empty(); }));
    if (shutdown) {
      c->request_shutdown();
    } else {
      c->notify_lease_lost();
    }
    ASSERT_TRUE(drive(
        *c, [&] { return c->done(); }, 2));
    EXPECT_EQ(c->outcome(), shutdown ? ConsumerOutcome::kShutdown : ConsumerOutcome::kLeaseLost);
    EXPECT_EQ(count(script.events, "shutdown_requested"), 0u);
    EXPECT_EQ(count(script.events, "lease_lost"), 0u);
    ctx_.factory = &factory_;
  }
}

TEST_F(ShardConsumerTest, ShutdownWhileWaitingOnParentsEndsWithoutCallbacks) {
  const std::string parent = "shardId-000000000003";
  add_lease(parent, ExtendedSequenceNumber(seq_number(1)));
  add_lease(kShard, ExtendedSequenceNumber::trim_horizon(), {parent});
  auto c = consumer();
  ASSERT_TRUE(c);
  (void)c->run();
  c->request_shutdown();
  EXPECT_FALSE(c->run().has_value());
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kShutdown);
  EXPECT_TRUE(script_.events.empty());
}

TEST_F(ShardConsumerTest, ShutdownWhileProcessingCallsShutdownRequestedOnce) {
  add_lease(kShard);
  fake_->add_records(3, "r");
  script_.checkpoint_each_batch = false;
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() >= 3; }));
  c->request_shutdown();
  ASSERT_TRUE(drive(
      *c, [&] { return c->done(); }, 3));
  EXPECT_EQ(count(script_.events, "shutdown_requested"), 1u);
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kShutdown);
  // The final checkpoint is at the last record delivered.
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber(seq_number(2)));
}

TEST_F(ShardConsumerTest, DeletedStreamFailsWithNotFoundAfterShutdownRequested) {
  add_lease(kShard);
  fake_->add_records(3, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() >= 3; }));
  fake_->delete_stream();
  ASSERT_TRUE(drive(*c, [&] { return c->done(); }));
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kFailed);
  EXPECT_EQ(c->failure().code(), StatusCode::kNotFound) << c->failure();
  EXPECT_NE(c->failure().message().find(kStream), std::string::npos) << c->failure();
  EXPECT_EQ(count(script_.events, "shutdown_requested"), 1u);
}

TEST_F(ShardConsumerTest, CorruptAggregatesAreCountedWhileTheShardIsRead) {
  add_lease(kShard);
  const std::string corrupt = kcl::testing::with_bad_md5(
      kcl::testing::build_aggregate({{"a", std::nullopt, "x", {}}, {"b", std::nullopt, "y", {}}}));
  fake_->add_record(corrupt);
  fake_->add_record(kcl::testing::build_aggregate({{"a", std::nullopt, "ok", {}}}));
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() >= 2; }));
  EXPECT_EQ(script_.data, (std::vector<std::string>{corrupt, "ok"}));
  EXPECT_EQ(c->state(), ConsumerState::kProcessing);
  EXPECT_EQ(corrupt_.load(), 1u) << "counted while the shard is open, not only at its end";
}

}  // namespace
}  // namespace kcl::lifecycle

namespace kcl::lifecycle {
namespace {

// ProcessingConfig::empty_batch_interval: an idle shard's processor is called with an empty
// batch, so it can checkpoint the records it got before the shard went quiet.
TEST_F(ShardConsumerTest, AnIdleShardGetsEmptyBatchesAtTheIntervalAndTheyMayCheckpoint) {
  ctx_.processing.empty_batch_interval = 3s;
  script_.checkpoint_each_batch = false;
  add_lease(kShard);
  fake_->add_records(5, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 5; }));
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber::trim_horizon()) << "not yet";
  // Nothing more comes; within the interval an empty batch arrives, in which the processor
  // checkpoints the last record it was given.
  script_.checkpoint_each_batch = true;
  ASSERT_TRUE(drive(
      *c, [&] { return count(script_.events, "process 0") >= 1; }, 10));
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber(seq_number(4)));
  EXPECT_EQ(script_.data.size(), 5u) << "nothing delivered twice";
  // And again after each interval while the shard stays idle; never more often.
  const std::size_t empties = count(script_.events, "process 0");
  for (int i = 0; i < 9; ++i) {
    step(*c);
    fetch_clock_.advance(1s);
  }
  EXPECT_GE(count(script_.events, "process 0"), empties + 2);
  EXPECT_LE(count(script_.events, "process 0"), empties + 3);
}

TEST_F(ShardConsumerTest, WithoutAnIntervalAnIdleShardGetsNoEmptyBatch) {
  add_lease(kShard);
  fake_->add_records(2, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 2; }));
  for (int i = 0; i < 20; ++i) {
    step(*c);
    fetch_clock_.advance(1s);
  }
  EXPECT_EQ(count(script_.events, "process 0"), 0u);
}

// ProcessorErrorPolicy::kDeadLetter: a sink that keeps what it accepted, and refuses while
// `refuse` is above 0 (counting down).
struct LetterBox {
  std::vector<DeadLetter> letters;
  int refuse = 0;
  int refusals = 0;
  std::shared_ptr<DeadLetterSink> sink() {
    return make_callback_dead_letter_sink([this](const DeadLetter& letter) {
      if (refuse > 0) {
        --refuse;
        ++refusals;
        return Status(StatusCode::kUnavailable, "scripted sink outage");
      }
      letters.push_back(letter);
      return Status::Ok();
    });
  }
};

class DeadLetterConsumerTest : public ShardConsumerTest {
 protected:
  void use_dead_letters(int max_attempts = 3) {
    ctx_.processing.on_processor_error = ProcessorErrorPolicy::kDeadLetter;
    ctx_.processing.max_attempts_before_dead_letter = max_attempts;
    ctx_.processing.dead_letter_sink = box_.sink();
    ctx_.metrics = &metrics_;
  }
  LetterBox box_;
  leases::testing::RecordingMetrics metrics_;
};

TEST_F(DeadLetterConsumerTest, BisectsToTheFailingRecordDeadLettersItAndGoesOn) {
  add_lease(kShard);
  use_dead_letters(3);
  fake_->add_records(10, "r");
  script_.throws = [](std::span<const Record> records) { return contains(records, "r5"); };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(
      drive(*c, [&] { return stored().checkpoint == ExtendedSequenceNumber(seq_number(9)); }));
  ASSERT_EQ(box_.letters.size(), 1u);
  const DeadLetter& letter = box_.letters[0];
  EXPECT_EQ(letter.record.data(), "r5");
  EXPECT_EQ(letter.record.sequence_number(), seq_number(5));
  EXPECT_EQ(letter.shard_id, kShard);
  EXPECT_EQ(letter.stream, kStream);
  EXPECT_EQ(letter.attempts, 8) << "3 whole batch + [5,10) + [5,7) + 3 alone";
  EXPECT_NE(letter.error.find("scripted failure"), std::string::npos) << letter.error;
  // The calls: 3 x [0,10) fail, [0,5) ok, [5,10) fails, [5,7) fails, 3 x [5] fail, [6] ok,
  // [7,10) ok. Redeliveries are exactly those.
  EXPECT_EQ(count(script_.data, "r0"), 4u);
  EXPECT_EQ(count(script_.data, "r6"), 6u);
  EXPECT_EQ(count(script_.data, "r9"), 5u);
  EXPECT_EQ(count(script_.data, "r5"), 8u);
  EXPECT_EQ(delivered_.load(), 9u) << "each good record counted once, when processed";
  EXPECT_EQ(c->records_dead_lettered(), 1u);
  EXPECT_EQ(metrics_.count_of("records.dead_lettered{stream=" + std::string(kStream) +
                              "}{shard=" + std::string(kShard) + "}{sink=callback}"),
            1);
}

TEST_F(DeadLetterConsumerTest, ARefusingSinkHoldsTheShardAndItsCheckpoint) {
  add_lease(kShard);
  use_dead_letters(1);
  box_.refuse = 1000;
  fake_->add_records(10, "r");
  script_.throws = [](std::span<const Record> records) { return contains(records, "r5"); };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return box_.refusals >= 5; }));
  // [0,5) was processed and checkpointed, and r6, which vouched for r5 (it succeeded right
  // after r5 failed alone), was processed; no checkpoint passes r5 while the sink refuses.
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber(seq_number(4)));
  EXPECT_EQ(delivered_.load(), 6u);
  EXPECT_EQ(metrics_.count_of("dead_letter.sink_failures{shard=" + std::string(kShard) + "}"),
            box_.refusals);
  const int refusals = box_.refusals;
  box_.refuse = 0;  // the sink recovers: the shard goes on
  ASSERT_TRUE(
      drive(*c, [&] { return stored().checkpoint == ExtendedSequenceNumber(seq_number(9)); }));
  EXPECT_EQ(box_.refusals, refusals);
  ASSERT_EQ(box_.letters.size(), 1u);
  EXPECT_EQ(box_.letters[0].record.data(), "r5");
  EXPECT_EQ(delivered_.load(), 9u);
}

TEST_F(DeadLetterConsumerTest, ShutdownWhileTheSinkRefusesCheckpointsOnlyBeforeTheRecord) {
  add_lease(kShard);
  use_dead_letters(1);
  box_.refuse = 1000;
  script_.checkpoint_each_batch = false;  // only the final checkpoint() in shutdown_requested
  fake_->add_records(10, "r");
  script_.throws = [](std::span<const Record> records) { return contains(records, "r5"); };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return box_.refusals >= 2; }));
  c->request_shutdown();
  ASSERT_TRUE(drive(
      *c, [&] { return c->done(); }, 3));
  EXPECT_EQ(c->outcome(), ConsumerOutcome::kShutdown);
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber(seq_number(4)))
      << "the checkpoint passed a record its sink never accepted";
  EXPECT_TRUE(box_.letters.empty());
}

TEST_F(DeadLetterConsumerTest, ADeadLetteredLastRecordMayBeCheckpointedOnceAccepted) {
  add_lease(kShard);
  use_dead_letters(2);
  script_.checkpoint_each_batch = false;
  fake_->add_records(4, "r");
  script_.throws = [](std::span<const Record> records) { return contains(records, "r3"); };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return box_.letters.size() == 1; }));
  c->request_shutdown();
  ASSERT_TRUE(drive(
      *c, [&] { return c->done(); }, 3));
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber(seq_number(3)));
  EXPECT_EQ(box_.letters[0].attempts, 2 + 1 + 2);
}

// What the processor depends on is out (every call fails, say its database is down): no
// record is to blame, so nothing is dead-lettered and the checkpoint stays where it was; once
// it is back, every record is processed once.
TEST_F(DeadLetterConsumerTest, AnOutageOfWhatTheProcessorNeedsDeadLettersNothing) {
  add_lease(kShard);
  use_dead_letters(3);
  fake_->add_records(10, "r");
  bool down = true;
  script_.throws = [&](std::span<const Record>) { return down; };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(
      *c, [&] { return failures_.load() >= 20 || !box_.letters.empty(); }, 1000));
  EXPECT_TRUE(box_.letters.empty())
      << "dead-lettered " << box_.letters.front().record.data() << " during the outage";
  EXPECT_EQ(delivered_.load(), 0u);
  EXPECT_EQ(stored().checkpoint, ExtendedSequenceNumber::trim_horizon());
  down = false;
  ASSERT_TRUE(
      drive(*c, [&] { return stored().checkpoint == ExtendedSequenceNumber(seq_number(9)); }));
  EXPECT_TRUE(box_.letters.empty());
  EXPECT_EQ(delivered_.load(), 10u);
  EXPECT_EQ(c->records_dead_lettered(), 0u);
}

// A record dead-lettered does not end the shard's series of failures: the next failure backs
// off from where the series was. (count_dead_lettered() ended it, so a processor failing
// record after record was retried at failure_backoff_base again after each record set aside.)
TEST_F(DeadLetterConsumerTest, ADeadLetterDoesNotResetTheFailureBackoff) {
  add_lease(kShard);
  use_dead_letters(2);
  ctx_.processing.failure_backoff_base = 1s;
  ctx_.processing.failure_backoff_max = 1h;
  ctx_.retrieval.max_records_per_call = 1;  // a batch per record
  fake_->add_records(4, "r");
  script_.throws = [](std::span<const Record> r) { return contains(r, "r1") || contains(r, "r2"); };
  auto c = consumer();
  ASSERT_TRUE(c);
  // r0 is processed; r1 fails twice alone (a backoff of 1 s between) and r0 before it
  // succeeded: r1 is dead-lettered (no backoff). Then r2 fails, each failure with a backoff.
  ASSERT_TRUE(drive(*c, [&] { return box_.letters.size() == 1; }));
  EXPECT_EQ(box_.letters[0].record.data(), "r1");
  // The consumer's own steps (its pool may have run some too): the n-th failure of r2 is the
  // (n+1)-th backoff of the series, 2^n s (a step before it is due delivers nothing).
  int measured = 0;
  for (int i = 0; i < 200 && measured < 4; ++i) {  // below failure_backoff_max
    const std::uint64_t before = failures_.load();
    const auto at = fetch_clock_.now();
    const std::optional<SteadyTime> next = c->run();
    if (failures_.load() == before + 1 && next) {
      const std::uint64_t of_r2 = failures_.load() - 2;
      EXPECT_EQ(*next - at, std::chrono::duration_cast<Clock::MonoTime::duration>(1s) *
                                (std::int64_t{1} << of_r2))
          << "failure " << of_r2 << " of r2";
      ++measured;
    }
    fetch_clock_.advance(1s);
  }
  EXPECT_GE(measured, 3);
  EXPECT_EQ(box_.letters.size(), 1u) << "r2: r1 before it was set aside, not processed";
}

// A sink that keeps refusing is asked again after a backoff that doubles with each refusal
// (so it was already: the refusals were one series).
TEST_F(DeadLetterConsumerTest, ARefusingSinkIsAskedAgainAfterAGrowingBackoff) {
  add_lease(kShard);
  use_dead_letters(1);
  ctx_.processing.failure_backoff_base = 1s;
  ctx_.processing.failure_backoff_max = 1h;
  box_.refuse = 6;
  fake_->add_records(4, "r");
  script_.throws = [](std::span<const Record> r) { return contains(r, "r3"); };
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return box_.refusals >= 1; }));
  // The consumer's own steps: the n-th refusal is the n-th backoff of the series, 2^(n-1) s.
  int measured = 0;
  for (int i = 0; i < 200 && box_.letters.empty(); ++i) {
    const int before = box_.refusals;
    const auto at = fetch_clock_.now();
    const std::optional<SteadyTime> next = c->run();
    if (box_.refusals == before + 1 && next) {
      EXPECT_EQ(*next - at, std::chrono::duration_cast<Clock::MonoTime::duration>(1s) *
                                (std::int64_t{1} << (box_.refusals - 1)))
          << "refusal " << box_.refusals;
      ++measured;
    }
    fetch_clock_.advance(1s);
  }
  EXPECT_GE(measured, 3);
  ASSERT_EQ(box_.letters.size(), 1u);
  EXPECT_EQ(box_.letters[0].record.data(), "r3");
}

// Checkpoints at each record it has processed; throws at `bad` while `failures_left` > 0, and,
// when `throw_on_refused`, at a checkpoint that is refused.
struct PerRecord {
  std::vector<std::string> refused;
  std::string bad;
  int failures_left = 0;
  bool throw_on_refused = false;
};

class PerRecordProcessor final : public RecordProcessor {
 public:
  explicit PerRecordProcessor(PerRecord& s) : s_(s) {}
  void initialize(const InitializationInput&) override {}
  void process_records(const ProcessRecordsInput& input) override {
    for (const Record& r : input.records) {
      if (r.data() == s_.bad && s_.failures_left > 0) {
        --s_.failures_left;
        throw std::runtime_error("a passing failure");
      }
      const Status st = input.checkpointer.checkpoint(r);
      if (!st.ok()) {
        s_.refused.push_back(std::string(r.data()) + ": " + st.to_string());
        if (s_.throw_on_refused) throw std::runtime_error("checkpoint refused: " + st.to_string());
      }
    }
  }
  void lease_lost() override {}
  void shard_ended(Checkpointer&) override {}
  void shutdown_requested(Checkpointer&) override {}

 private:
  PerRecord& s_;
};

class MidBatchCheckpointTest : public DeadLetterConsumerTest {
 protected:
  class Factory final : public RecordProcessorFactory {
   public:
    explicit Factory(PerRecord& s) : s_(s) {}
    std::unique_ptr<RecordProcessor> create(std::string_view) override {
      return std::make_unique<PerRecordProcessor>(s_);
    }

   private:
    PerRecord& s_;
  };
  // 10 records; the processor checkpoints r0..r5, then fails once at r6.
  void run_to_the_end() {
    add_lease(kShard);
    ctx_.factory = &factory_;
    fake_->add_records(10, "r");
    script_.data.clear();
    per_record_.bad = "r6";
    per_record_.failures_left = 1;
    auto c = consumer();
    ASSERT_TRUE(c);
    ASSERT_TRUE(
        drive(*c, [&] { return stored().checkpoint == ExtendedSequenceNumber(seq_number(9)); }))
        << "stuck at " << stored().checkpoint.to_string();
    for (const std::string& r : per_record_.refused) ADD_FAILURE() << "refused: " << r;
  }
  PerRecord per_record_;
  Factory factory_{per_record_};
};

// A call that failed after the processor checkpointed part of its batch: the batch delivered
// again starts after what it checkpointed, so none of its checkpoints is refused as moving
// back (a processor that treats a refused checkpoint as an error would never get past it).
TEST_F(MidBatchCheckpointTest, ARetryStartsAfterTheRecordsCheckpointedInTheFailedCall) {
  per_record_.throw_on_refused = true;
  run_to_the_end();
}

// Under dead letters too: the part delivered again starts after them, and a passing failure
// sends nothing to the sink.
TEST_F(MidBatchCheckpointTest, UnderDeadLettersNoCheckpointedRecordIsDeadLettered) {
  use_dead_letters(3);
  per_record_.throw_on_refused = true;
  run_to_the_end();
  for (const DeadLetter& l : box_.letters) ADD_FAILURE() << "dead-lettered " << l.record.data();
}

// kSkip: skipped records are counted apart, not as processed.
TEST_F(DeadLetterConsumerTest, SkippedRecordsAreNotCountedAsProcessed) {
  add_lease(kShard);
  ctx_.processing.on_processor_error = ProcessorErrorPolicy::kSkip;
  ctx_.processing.max_attempts_before_skip = 2;
  ctx_.metrics = &metrics_;
  fake_->add_records(5, "r");
  script_.throws = [](std::span<const Record> r) { return contains(r, "r0"); };
  auto c = consumer();
  ASSERT_TRUE(c);
  const std::string shard = "{shard=" + std::string(kShard) + "}";
  ASSERT_TRUE(
      drive(*c, [&] { return metrics_.count_of("consumer.records_skipped" + shard) == 5; }));
  EXPECT_EQ(metrics_.count_of("consumer.records_processed" + shard), 0);
  EXPECT_EQ(c->records_delivered(), 0u);
}

// A shard end never checkpointed is retried after a backoff for ever; its error is logged once
// per series with the attempt's count, not at every attempt.
TEST_F(ShardConsumerTest, AShardEndNeverCheckpointedIsLoggedOncePerSeries) {
  kcl::testing::CapturedLog log(LogLevel::kError);
  ctx_.logger = &log;
  auto c = consumer_at_refused_shard_end(1000);
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(
      *c, [&] { return count(script_.events, "shard_ended") >= 50; }, 5000));
  std::vector<std::string> lines;
  for (const std::string& l : log.lines()) {
    if (l.find("was read to its end") != std::string::npos) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 3u) << "attempts 1, 3 and 10 of 50 or more";
  EXPECT_NE(lines[2].find("(attempt 10)"), std::string::npos) << lines[2];
}

// The processor checkpoints in shard_ended(), but the lease table refuses the write: the error
// names the refusal, not the processor (which did what it should).
TEST_F(ShardConsumerTest, AShardEndWhoseCheckpointFailsSaysWhyNotToCallCheckpoint) {
  kcl::testing::CapturedLog log(LogLevel::kError);
  ctx_.logger = &log;
  add_lease(kShard);
  fake_->add_records(3, "r");
  fake_->close_shard();
  script_.checkpoint_each_batch = false;
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return count(script_.events, "process 3") == 1; }));
  store_.fail_next(1000, StatusCode::kUnavailable);
  ASSERT_TRUE(drive(*c, [&] { return count(script_.events, "shard_ended") >= 1; }));
  std::vector<std::string> lines;
  for (const std::string& l : log.lines()) {
    if (l.find("was read to its end") != std::string::npos) lines.push_back(l);
  }
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("its checkpoint failed (UNAVAILABLE"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("Call checkpointer.checkpoint()"), std::string::npos) << lines[0];
  store_.fail_next(0);
  EXPECT_FALSE(stored().checkpoint.is_shard_end());
}

}  // namespace
}  // namespace kcl::lifecycle

namespace kcl::lifecycle {
namespace {

// stall_signal(): what the worker's stall detector sees of a consumer.
TEST_F(ShardConsumerTest, AShardIdleAtTheTipSignalsNothing) {
  add_lease(kShard);
  fake_->add_records(3, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 3; }));
  for (int i = 0; i < 10; ++i) {
    step(*c);
    fetch_clock_.advance(1s);
    auto s = c->stall_signal(fetch_clock_.now());
    EXPECT_FALSE(s.has_value()) << s->cause << ": " << s->detail;
  }
}

TEST_F(ShardConsumerTest, RecordsBehindTheTipWithNoneDeliveredSignalNoProgressSinceTheyWaited) {
  add_lease(kShard);
  fake_->add_records(3, "r");
  script_.throws = [](std::span<const Record>) { return true; };  // never gets through
  fake_->set_millis_behind(5000);
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return count(script_.events, "process 3") >= 1; }));
  const auto first_look = fetch_clock_.now();
  auto s = c->stall_signal(first_look);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->cause, kStallNoProgress);
  EXPECT_EQ(s->since, first_look);
  ASSERT_TRUE(drive(*c, [&] { return count(script_.events, "process 3") >= 3; }));
  s = c->stall_signal(fetch_clock_.now());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->since, first_look) << "still waiting since the first look";
  EXPECT_NE(s->detail.find("5000 ms behind the tip"), std::string::npos) << s->detail;
}

// A processor whose initialize() keeps throwing: the shard is never read, so neither lag nor
// queued records showed anything, and no stall was signalled (no kcl_shard_stalled, /readyz
// ready). Now the series of failed initializations is a stall of its own.
TEST_F(ShardConsumerTest, AnInitializeThatKeepsFailingSignalsAStallSinceItsFirstFailure) {
  add_lease(kShard);
  fake_->add_records(2, "r");
  script_.initialize_throws = 1000;
  auto c = consumer();
  ASSERT_TRUE(c);
  const auto first = fetch_clock_.now();
  ASSERT_TRUE(drive(*c, [&] { return count(script_.events, "initialize TRIM_HORIZON") >= 3; }));
  auto s = c->stall_signal(fetch_clock_.now());
  ASSERT_TRUE(s.has_value()) << "a shard that never initializes signals nothing";
  EXPECT_EQ(s->cause, kStallConsumerFailing);
  EXPECT_LE(first, s->since);
  EXPECT_LT(s->since, fetch_clock_.now() - std::chrono::seconds(1)) << "since its first failure";
  EXPECT_NE(s->detail.find("initializing failed 3 times in a row"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("scripted initialize failure"), std::string::npos) << s->detail;
  script_.initialize_throws = 0;
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 2; }));
  EXPECT_FALSE(c->stall_signal(fetch_clock_.now()).has_value());
}

// The lag gauge of a shard whose reads fail from the start: it read 0 (caught up) from the
// consumer's first idle step, clearing lag alarms exactly when nothing is read. And after a
// batch, an idle step with the same lag as the one published before the batch published
// nothing, leaving the batch's lag standing.
TEST_F(ShardConsumerTest, TheLagGaugeWaitsForAnAnswerAndFollowsTheLagAfterABatch) {
  leases::testing::RecordingMetrics metrics;
  ctx_.metrics = &metrics;
  add_lease(kShard);
  fake_->fail_next("GetShardIterator", FakeKinesis::throttled("GetShardIterator"), 5);
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return fake_->calls_of("GetShardIterator").size() >= 5; }));
  EXPECT_EQ(metrics.gauge_of("consumer.millis_behind_latest"), -1)
      << "a lag published before any answer";
  // Caught up, then a batch 5 s behind, then caught up again with nothing more to deliver.
  ASSERT_TRUE(drive(*c, [&] { return metrics.gauge_of("consumer.millis_behind_latest") == 0; }));
  fake_->set_millis_behind(5000);
  fake_->add_records(2, "r");
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 2; }));
  EXPECT_EQ(metrics.gauge_of("consumer.millis_behind_latest"), 5000);
  fake_->set_millis_behind(0);
  ASSERT_TRUE(drive(*c, [&] { return metrics.gauge_of("consumer.millis_behind_latest") == 0; }))
      << "the batch's lag stood after the shard caught up";
}

TEST_F(ShardConsumerTest, ReadsFailingInARowSignalThrottledWithTheLastError) {
  add_lease(kShard);
  fake_->add_records(2, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 2; }));
  fake_->fail_next("GetRecords", FakeKinesis::throttled(), 1000);
  ASSERT_TRUE(drive(*c, [&] { return fake_->calls_of("GetRecords").size() > 6; }));
  auto s = c->stall_signal(fetch_clock_.now());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->cause, kStallThrottled);
  EXPECT_NE(s->detail.find("GetRecords failed"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("times in a row"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("Rate exceeded"), std::string::npos) << s->detail;
  EXPECT_LT(s->since, fetch_clock_.now());
}

TEST_F(ShardConsumerTest, AThrottlingSeriesIsLoggedOnceNotPerRetry) {
  kcl::testing::CapturedLog log(LogLevel::kInfo);
  ctx_.logger = &log;
  add_lease(kShard);
  fake_->add_records(2, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 2; }));
  auto lines_with = [&](const std::string& text) {
    std::size_t n = 0;
    for (const auto& line : log.lines()) n += line.find(text) != std::string::npos ? 1 : 0;
    return n;
  };
  // A series of 6 throttles, then records again: the first failure and the 3rd (with its
  // count) are logged, and the end of the series; not the other retries.
  fake_->fail_next("GetRecords", FakeKinesis::throttled(), 6);
  fake_->add_records(1, "after");
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 3; }));
  EXPECT_EQ(lines_with("GetRecords failed"), 2u);
  EXPECT_EQ(lines_with("GetRecords failed 3 times in a row"), 1u);
  EXPECT_EQ(lines_with("Rate exceeded"), 2u);
  EXPECT_EQ(lines_with("GetRecords recovered after 6 failures"), 1u);
  // A second series of one: one line for it, one for its end.
  fake_->fail_next("GetRecords", FakeKinesis::throttled(), 1);
  fake_->add_records(1, "later");
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 4; }));
  EXPECT_EQ(lines_with("GetRecords failed"), 3u);
  EXPECT_EQ(lines_with("GetRecords recovered after 1 failure in"), 1u);
  ctx_.logger = nullptr;
}

TEST_F(ShardConsumerTest, AnInitializeThatKeepsThrowingIsLoggedOnceNotPerRetry) {
  kcl::testing::CapturedLog log(LogLevel::kInfo);
  ctx_.logger = &log;
  Script script;
  script.initialize_throws = 12;
  ScriptedFactory factory(script);
  ctx_.factory = &factory;
  add_lease(kShard);
  fake_->add_records(1, "r");
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(
      *c, [&] { return script.data.size() == 1; }, 2000));
  EXPECT_EQ(count(script.events, "initialize TRIM_HORIZON"), 13u);
  std::vector<std::string> failures;
  for (const auto& line : log.lines()) {
    if (line.find("scripted initialize failure") != std::string::npos) failures.push_back(line);
  }
  // 12 failures in a row: the 1st, 3rd and 10th are logged, each with its count.
  ASSERT_EQ(failures.size(), 3u) << ::testing::PrintToString(log.lines());
  EXPECT_NE(failures[0].find("(attempt 1;"), std::string::npos) << failures[0];
  EXPECT_NE(failures[1].find("(attempt 3;"), std::string::npos) << failures[1];
  EXPECT_NE(failures[2].find("(attempt 10;"), std::string::npos) << failures[2];
  ctx_.logger = nullptr;
  ctx_.factory = &factory_;
}

TEST_F(ShardConsumerTest, AChildWaitingOnItsParentSignalsWhichParentAndItsHolder) {
  const std::string parent = "shardId-000000000003";
  add_lease(parent, ExtendedSequenceNumber(seq_number(1)));
  add_lease(kShard, ExtendedSequenceNumber::trim_horizon(), {parent});
  auto c = consumer();  // takes both leases: the parent is held by w1
  ASSERT_TRUE(c);
  for (int i = 0; i < 3; ++i) last_next_ = c->run();
  auto s = c->stall_signal(fetch_clock_.now());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->cause, kStallWaitingForParent);
  EXPECT_NE(s->detail.find("waiting for parent " + parent), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("held by worker w1"), std::string::npos) << s->detail;
  EXPECT_NE(s->detail.find("checkpoint " + seq_number(1)), std::string::npos) << s->detail;
}

TEST_F(ShardConsumerTest, ARejectedCheckpointSignalsUntilOneIsAccepted) {
  add_lease(kShard);
  fake_->add_records(2, "r");
  // A checkpoint past the records delivered is refused.
  script_.checkpoint_sequence = seq_number(50);
  auto c = consumer();
  ASSERT_TRUE(c);
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 2; }));
  ASSERT_FALSE(script_.checkpoints.empty());
  ASSERT_FALSE(script_.checkpoints.back().ok());
  auto s = c->stall_signal(fetch_clock_.now());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->cause, kStallCheckpointRejected);
  EXPECT_NE(s->detail.find("rejected: " + script_.checkpoints.back().to_string()),
            std::string::npos)
      << s->detail;
  // The next batch's checkpoint is accepted: nothing in the way any more.
  script_.checkpoint_sequence.clear();
  fake_->add_records(1, "s");
  ASSERT_TRUE(drive(*c, [&] { return script_.data.size() == 3; }));
  ASSERT_TRUE(script_.checkpoints.back().ok()) << script_.checkpoints.back();
  auto after = c->stall_signal(fetch_clock_.now());
  EXPECT_FALSE(after.has_value()) << after->cause << ": " << after->detail;
}

}  // namespace
}  // namespace kcl::lifecycle
