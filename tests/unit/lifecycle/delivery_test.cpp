// Each Delivery on its own (lifecycle/delivery.h), without a shard consumer: a recording
// DeliveryHost stands in for it (what the delivery asked: calls, checkpoint positions allowed
// and rewound, counts, backoffs, log lines) on a manual clock, with scripted processors.
//   - CallbackDelivery: a whole batch per process_records call; a failed call again after a
//     backoff (positions rewound), or skipped under kSkip; empty calls when idle.
//   - BisectingDelivery: a failing batch narrowed to the record that keeps failing, which goes
//     to the dead-letter sink; a refusing sink holds the record; a stop asked between parts.
//   - PacedDelivery: attach with the consumer's wake-up, pace() as the gate, hand_in moving the
//     records out, the shard's end held until drained, the bounded drain of a graceful stop.
//   - make_delivery_factory: which delivery each configuration gets.
#include "lifecycle/delivery.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kcl/dead_letter.h"
#include "lifecycle/bisecting_delivery.h"
#include "lifecycle/callback_delivery.h"
#include "lifecycle/paced_delivery.h"
#include "lifecycle/processor_calls.h"
#include "support/lease_test_util.h"
#include "support/null_checkpointer.h"

namespace kcl::lifecycle {
namespace {

using namespace std::chrono_literals;

Record record(int i) {
  Record r;
  r.set_shard_id("shardId-000000000000");
  r.set_sequence_number(std::to_string(100 + i));
  r.set_partition_key("k");
  r.set_data("r" + std::to_string(i));
  return r;
}

retrieval::FetchedBatch batch_of(int first, int count) {
  retrieval::FetchedBatch b;
  for (int i = first; i < first + count; ++i) {
    b.records.push_back(record(i));
    b.bytes += b.records.back().data().size();
  }
  b.millis_behind_latest = 42;
  return b;
}

// Accepts every checkpoint; the deliveries only pass it on.
using kcl::testing::NullCheckpointer;

// What a delivery asked of its consumer.
class RecordingHost final : public DeliveryHost {
 public:
  explicit RecordingHost(ManualClock& clock) : clock_(clock), calls_(clock) {}

  bool call_processor(const char* what, const std::function<void()>& call) override {
    callbacks.emplace_back(what);
    if (calls_.call(what, call)) return true;
    ++failures;
    return false;
  }
  const std::string& last_error() const override { return calls_.last_error(); }
  Checkpointer& checkpointer() override { return checkpointer_; }
  std::optional<ExtendedSequenceNumber> allow_checkpoint_at(const Record& last) override {
    std::optional<ExtendedSequenceNumber> before = allowed;
    allowed = ExtendedSequenceNumber(std::string(last.sequence_number()), 0);
    return before;
  }
  void rewind_checkpoint_to(const std::optional<ExtendedSequenceNumber>& previous) override {
    ++rewinds;
    allowed = previous;
  }
  void count_processed(std::size_t count, std::size_t bytes) override {
    processed += count;
    processed_bytes += bytes;
  }
  void count_dead_lettered() override { ++dead_lettered; }
  void count_skipped(std::size_t count) override { skipped += count; }
  SteadyTime backoff_after_failure() override {
    ++backoffs;
    return clock_.now() + 5s;
  }
  bool stop_asked() const override { return stop; }
  void log(LogLevel, const std::string& message) const override { lines.push_back(message); }
  MetricsSink& metrics() override { return metrics_; }
  MetricTags tags() const override { return MetricTags(tags_, 1); }
  SteadyTime now() const override { return clock_.now(); }
  const std::string& stream() const override { return stream_; }
  const std::string& shard_id() const override { return shard_; }

  bool logged(const std::string& text) const {
    for (const auto& l : lines) {
      if (l.find(text) != std::string::npos) return true;
    }
    return false;
  }

  std::vector<std::string> callbacks;
  int failures = 0;
  std::optional<ExtendedSequenceNumber> allowed;
  int rewinds = 0;
  std::size_t processed = 0;
  std::size_t processed_bytes = 0;
  int dead_lettered = 0;
  std::size_t skipped = 0;
  int backoffs = 0;
  bool stop = false;
  mutable std::vector<std::string> lines;
  leases::testing::RecordingMetrics metrics_;

 private:
  ManualClock& clock_;
  ProcessorCalls calls_;
  NullCheckpointer checkpointer_;
  const std::string stream_ = "orders";
  const std::string shard_ = "shardId-000000000000";
  const MetricTag tags_[1] = {{"shard", "shardId-000000000000"}};
};

// process_records throws while `throws` says so for the records given.
struct ScriptedCalls {
  std::vector<std::vector<std::string>> batches;  // the data of each call, in order
  std::function<bool(std::span<const Record>)> throws;
};

class ScriptedProcessor final : public RecordProcessor {
 public:
  explicit ScriptedProcessor(ScriptedCalls& s) : s_(s) {}
  void initialize(const InitializationInput&) override {}
  void process_records(const ProcessRecordsInput& input) override {
    std::vector<std::string> data;
    for (const Record& r : input.records) data.emplace_back(r.data());
    s_.batches.push_back(std::move(data));
    if (s_.throws && s_.throws(input.records)) throw std::runtime_error("scripted failure");
  }
  void shard_ended(Checkpointer&) override {}
  void shutdown_requested(Checkpointer&) override {}

 private:
  ScriptedCalls& s_;
};

bool holds(std::span<const Record> records, const std::string& data) {
  for (const Record& r : records) {
    if (r.data() == data) return true;
  }
  return false;
}

class DeliveryTest : public ::testing::Test {
 protected:
  std::unique_ptr<RecordProcessor> processor() {
    return std::make_unique<ScriptedProcessor>(calls_);
  }
  ManualClock clock_;
  RecordingHost host_{clock_};
  ScriptedCalls calls_;
  ProcessingConfig processing_;
};

TEST_F(DeliveryTest, CallbackDeliversAWholeBatchAndCountsIt) {
  CallbackDelivery d(processor(), processing_);
  d.started(host_, [](SteadyTime) {});
  EXPECT_TRUE(d.gate(host_).accept);
  auto batch = batch_of(0, 3);
  EXPECT_EQ(d.deliver(host_, batch), std::nullopt);
  ASSERT_EQ(calls_.batches.size(), 1u);
  EXPECT_EQ(calls_.batches[0], (std::vector<std::string>{"r0", "r1", "r2"}));
  EXPECT_EQ(host_.allowed, ExtendedSequenceNumber("102"));
  EXPECT_EQ(host_.processed, 3u);
  EXPECT_EQ(host_.processed_bytes, 6u);
  EXPECT_EQ(host_.metrics_.gauge_of("consumer.millis_behind_latest"), 42);
  EXPECT_EQ(d.before_shard_end(host_), std::nullopt) << "nothing handed on to wait for";
  EXPECT_EQ(d.drain(host_, clock_.now() + 10s), std::nullopt);
}

TEST_F(DeliveryTest, CallbackDeliversAFailedBatchAgainAfterABackoff) {
  CallbackDelivery d(processor(), processing_);
  auto first = batch_of(0, 2);
  ASSERT_EQ(d.deliver(host_, first), std::nullopt);
  int throws_left = 3;
  calls_.throws = [&](std::span<const Record>) { return throws_left-- > 0; };
  auto second = batch_of(2, 2);
  EXPECT_EQ(d.deliver(host_, second), clock_.now() + 5s);
  EXPECT_EQ(host_.allowed, ExtendedSequenceNumber("101")) << "rewound to the first batch";
  EXPECT_TRUE(host_.logged("attempt 1")) << host_.lines.back();
  EXPECT_TRUE(d.deliver(host_, second).has_value());
  EXPECT_FALSE(host_.logged("attempt 2")) << "a failure that repeats is not logged each time";
  EXPECT_TRUE(d.deliver(host_, second).has_value());
  EXPECT_TRUE(host_.logged("again after a backoff (attempt 3)"));
  EXPECT_EQ(d.deliver(host_, second), std::nullopt);
  EXPECT_TRUE(host_.logged("delivered the 2 records at attempt 4")) << host_.lines.back();
  EXPECT_EQ(host_.lines.size(), 3u);
  EXPECT_EQ(host_.failures, 3);
  EXPECT_EQ(host_.rewinds, 3);
  EXPECT_EQ(host_.processed, 4u) << "counted once, when processed";
  EXPECT_EQ(host_.allowed, ExtendedSequenceNumber("103"));
}

TEST_F(DeliveryTest, AProcessorThatKeepsFailingFillsNoLog) {
  CallbackDelivery d(processor(), processing_);
  calls_.throws = [](std::span<const Record>) { return true; };
  auto batch = batch_of(0, 1);
  for (int i = 0; i < 150; ++i) ASSERT_TRUE(d.deliver(host_, batch).has_value());
  // Attempts 1, 3, 10 and 100, each with its count.
  ASSERT_EQ(host_.lines.size(), 4u);
  EXPECT_NE(host_.lines[3].find("(attempt 100)"), std::string::npos) << host_.lines[3];
  EXPECT_EQ(host_.failures, 150);
}

TEST_F(DeliveryTest, AnEmptyBatchThatKeepsFailingIsLoggedWithItsCount) {
  processing_.empty_batch_interval = 3s;
  CallbackDelivery d(processor(), processing_);
  d.started(host_, [](SteadyTime) {});
  calls_.throws = [](std::span<const Record>) { return true; };
  for (int i = 0; i < 12; ++i) {
    clock_.advance(3s);
    EXPECT_EQ(d.idle(host_), clock_.now() + 3s);
  }
  EXPECT_EQ(host_.failures, 12);
  ASSERT_EQ(host_.lines.size(), 3u);
  EXPECT_NE(host_.lines[0].find("(in an empty batch; 1 in a row)"), std::string::npos)
      << host_.lines[0];
  EXPECT_NE(host_.lines[2].find("(in an empty batch; 10 in a row)"), std::string::npos)
      << host_.lines[2];
}

TEST_F(DeliveryTest, CallbackSkipsABatchAfterMaxAttemptsUnderTheSkipPolicy) {
  processing_.on_processor_error = ProcessorErrorPolicy::kSkip;
  processing_.max_attempts_before_skip = 2;
  CallbackDelivery d(processor(), processing_);
  calls_.throws = [](std::span<const Record> r) { return holds(r, "r0"); };
  auto bad = batch_of(0, 2);
  EXPECT_TRUE(d.deliver(host_, bad).has_value());
  EXPECT_EQ(d.deliver(host_, bad), std::nullopt) << "skipped at the 2nd attempt";
  EXPECT_TRUE(host_.logged("skipping the batch of 2 records after 2 attempts"));
  EXPECT_EQ(host_.skipped, 2u) << "counted as skipped";
  EXPECT_EQ(host_.processed, 0u) << "not as processed";
  auto next = batch_of(2, 2);
  EXPECT_EQ(d.deliver(host_, next), std::nullopt);
  EXPECT_EQ(calls_.batches.size(), 3u);
  EXPECT_EQ(host_.processed, 2u);
  // A new batch starts its own count of attempts.
  calls_.throws = [](std::span<const Record> r) { return holds(r, "r4"); };
  auto again = batch_of(4, 1);
  EXPECT_TRUE(d.deliver(host_, again).has_value());
}

TEST_F(DeliveryTest, CallbackCallsAnIdleShardWithAnEmptyBatchAtTheInterval) {
  processing_.empty_batch_interval = 3s;
  CallbackDelivery d(processor(), processing_);
  d.started(host_, [](SteadyTime) {});
  const SteadyTime start = clock_.now();
  EXPECT_EQ(d.idle(host_), start + 3s) << "not due yet";
  EXPECT_TRUE(calls_.batches.empty());
  clock_.advance(3s);
  EXPECT_EQ(d.idle(host_), start + 6s);
  ASSERT_EQ(calls_.batches.size(), 1u);
  EXPECT_TRUE(calls_.batches[0].empty());
  // A delivery moves the next empty call on.
  clock_.advance(2s);
  auto batch = batch_of(0, 1);
  ASSERT_EQ(d.deliver(host_, batch), std::nullopt);
  EXPECT_EQ(d.idle(host_), clock_.now() + 3s);
  EXPECT_EQ(calls_.batches.size(), 2u);
}

TEST_F(DeliveryTest, CallbackWithoutAnIntervalIsNeverCalledIdle) {
  CallbackDelivery d(processor(), processing_);
  clock_.advance(1h);
  EXPECT_EQ(d.idle(host_), std::nullopt);
  EXPECT_TRUE(calls_.batches.empty());
}

struct Letters {
  std::vector<DeadLetter> accepted;
  int refuse = 0;
  std::shared_ptr<DeadLetterSink> sink() {
    return make_callback_dead_letter_sink([this](const DeadLetter& letter) {
      if (refuse > 0) {
        --refuse;
        return Status(StatusCode::kUnavailable, "scripted outage");
      }
      accepted.push_back(letter);
      return Status::Ok();
    });
  }
};

class BisectingTest : public DeliveryTest {
 protected:
  BisectingTest() {
    processing_.on_processor_error = ProcessorErrorPolicy::kDeadLetter;
    processing_.max_attempts_before_dead_letter = 2;
    processing_.dead_letter_sink = letters_.sink();
  }
  // Delivers `batch` until done (as the consumer does, one step after the other); the steps.
  int deliver_all(Delivery& d, retrieval::FetchedBatch& batch, int max_steps = 50) {
    for (int step = 1; step <= max_steps; ++step) {
      if (!d.deliver(host_, batch)) return step;
    }
    return -1;
  }
  Letters letters_;
};

TEST_F(BisectingTest, NarrowsAFailingBatchToItsRecordAndDeadLettersIt) {
  BisectingDelivery d(processor(), processing_);
  calls_.throws = [](std::span<const Record> r) { return holds(r, "r2"); };
  auto batch = batch_of(0, 4);
  ASSERT_GT(deliver_all(d, batch), 0);
  ASSERT_EQ(letters_.accepted.size(), 1u);
  const DeadLetter& letter = letters_.accepted[0];
  EXPECT_EQ(letter.record.data(), "r2");
  EXPECT_EQ(letter.stream, "orders");
  EXPECT_EQ(letter.shard_id, "shardId-000000000000");
  EXPECT_NE(letter.error.find("scripted failure"), std::string::npos) << letter.error;
  EXPECT_EQ(host_.dead_lettered, 1);
  EXPECT_EQ(host_.processed, 3u) << "r0, r1 and r3, each once";
  EXPECT_EQ(host_.allowed, ExtendedSequenceNumber("103"));
  // 2 x [0,4), [0,2) ok, [2,4) fails, [2,3) x 2 fail, [3,4) ok.
  const std::vector<std::vector<std::string>> expected{{"r0", "r1", "r2", "r3"},
                                                       {"r0", "r1", "r2", "r3"},
                                                       {"r0", "r1"},
                                                       {"r2", "r3"},
                                                       {"r2"},
                                                       {"r2"},
                                                       {"r3"}};
  EXPECT_EQ(calls_.batches, expected);
  EXPECT_EQ(host_.metrics_.count_of(
                "records.dead_lettered{stream=orders}{shard=shardId-000000000000}{sink=callback}"),
            1);
}

// r0 fails alone and r1, after it, succeeds (it vouches: r0 is poison), but the sink refuses
// r0: the shard waits, and no checkpoint may name r0, nor r1 after it, until it accepts.
TEST_F(BisectingTest, ARefusingSinkHoldsTheRecordUntilItAccepts) {
  processing_.max_attempts_before_dead_letter = 1;
  BisectingDelivery d(processor(), processing_);
  calls_.throws = [](std::span<const Record> r) { return holds(r, "r0"); };
  letters_.refuse = 3;
  auto batch = batch_of(0, 2);
  EXPECT_EQ(d.deliver(host_, batch), clock_.now() + 5s) << "refused: wait a backoff";
  EXPECT_EQ(host_.allowed, std::nullopt) << "a checkpoint may not name the refused record";
  EXPECT_EQ(host_.processed, 1u) << "r1 vouched for r0";
  EXPECT_TRUE(d.deliver(host_, batch).has_value());
  EXPECT_TRUE(d.deliver(host_, batch).has_value());
  EXPECT_EQ(d.deliver(host_, batch), std::nullopt) << "accepted at the 4th ask";
  EXPECT_EQ(letters_.accepted.size(), 1u);
  EXPECT_EQ(host_.allowed, ExtendedSequenceNumber("101"));
  EXPECT_TRUE(host_.logged("accepted record 100/0 after 3 refusals"));
  EXPECT_EQ(host_.metrics_.count_of("dead_letter.sink_failures{shard=shardId-000000000000}"), 3);
  // [0,2), [0,1), then [1,2); nothing is delivered again while the sink refuses.
  EXPECT_EQ(calls_.batches.size(), 3u);
}

// The first record fails alone; the record after it is delivered while it waits (a checkpoint
// may name neither) and succeeds, which makes it a poison record; it is dead-lettered, and
// only then may a checkpoint pass it.
TEST_F(BisectingTest, TheRecordsAfterAPoisonRecordVouchForItBeforeAnyCheckpointPassesIt) {
  BisectingDelivery d(processor(), processing_);
  std::vector<std::optional<ExtendedSequenceNumber>> allowed;  // in each call without r0
  calls_.throws = [&](std::span<const Record> r) {
    if (!holds(r, "r0")) allowed.push_back(host_.allowed);
    return holds(r, "r0");
  };
  auto batch = batch_of(0, 4);
  ASSERT_GT(deliver_all(d, batch), 0);
  ASSERT_EQ(letters_.accepted.size(), 1u);
  EXPECT_EQ(letters_.accepted[0].record.data(), "r0");
  EXPECT_EQ(letters_.accepted[0].attempts, 2 + 1 + 2);
  const std::vector<std::vector<std::string>> expected{{"r0", "r1", "r2", "r3"},
                                                       {"r0", "r1", "r2", "r3"},
                                                       {"r0", "r1"},
                                                       {"r0"},
                                                       {"r0"},
                                                       {"r1"},
                                                       {"r2", "r3"}};
  EXPECT_EQ(calls_.batches, expected);
  ASSERT_EQ(allowed.size(), 2u);
  EXPECT_EQ(allowed[0], std::nullopt) << "r1's call: r0 is not yet set aside";
  EXPECT_EQ(allowed[1], ExtendedSequenceNumber("103"));
  EXPECT_EQ(host_.processed, 3u);
  EXPECT_TRUE(host_.logged("(the records after it succeeded)"));
}

// Every call fails while what the processor depends on is out (its database down): each
// record fails alone and so do its neighbours, so no record is to blame and none is
// dead-lettered; the batch is delivered again as a whole after a backoff, the failures are
// logged once per series, and once the outage ends every record is processed once.
TEST_F(BisectingTest, AnOutageDeadLettersNothing) {
  BisectingDelivery d(processor(), processing_);
  bool down = true;
  calls_.throws = [&](std::span<const Record>) { return down; };
  auto batch = batch_of(0, 8);
  for (int step = 0; step < 300; ++step) {
    ASSERT_TRUE(d.deliver(host_, batch).has_value())
        << "done with the batch during the outage, at step " << step << "; dead-lettered "
        << letters_.accepted.size();
  }
  EXPECT_TRUE(letters_.accepted.empty());
  EXPECT_EQ(host_.dead_lettered, 0);
  EXPECT_EQ(host_.processed, 0u);
  EXPECT_EQ(host_.allowed, std::nullopt) << "a checkpoint may name nothing";
  EXPECT_TRUE(host_.logged("taken for an outage of what the processor depends on"));
  EXPECT_LE(host_.lines.size(), 12u) << "logged once per series";
  const std::size_t calls = calls_.batches.size();
  down = false;
  ASSERT_GT(deliver_all(d, batch), 0);
  EXPECT_TRUE(letters_.accepted.empty());
  EXPECT_EQ(host_.processed, 8u);
  EXPECT_EQ(calls_.batches.size(), calls + 1) << "the batch, whole";
  EXPECT_EQ(host_.allowed, ExtendedSequenceNumber("107"));
  EXPECT_TRUE(host_.logged("process_records succeeded again (8 records) after"));
}

// An outage lasting longer than dead_letter_outage_limit (since the last successful call):
// from then on a record that fails alone is dead-lettered although its neighbours fail too.
TEST_F(BisectingTest, AnOutageOutlastingItsLimitDeadLettersTheRecordsAfterAll) {
  processing_.dead_letter_outage_limit = 10min;
  BisectingDelivery d(processor(), processing_);
  calls_.throws = [](std::span<const Record>) { return true; };
  auto batch = batch_of(0, 4);
  for (int minute = 0; minute < 10; ++minute) {
    ASSERT_TRUE(d.deliver(host_, batch).has_value()) << "minute " << minute;
    clock_.advance(1min);
  }
  EXPECT_TRUE(letters_.accepted.empty()) << "within the limit";
  int steps = 0;
  while (d.deliver(host_, batch).has_value() && ++steps < 100) clock_.advance(1min);
  ASSERT_EQ(letters_.accepted.size(), 4u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(letters_.accepted[i].record.data(), "r" + std::to_string(i));
  EXPECT_EQ(host_.allowed, ExtendedSequenceNumber("103"));
  EXPECT_TRUE(host_.logged("dead_letter_outage_limit"));
}

// A part that keeps failing is logged the 1st, 3rd, 10th, 100th, ... time with its count,
// not at every retry; the call that ends the series says so.
TEST_F(BisectingTest, APartThatKeepsFailingFillsNoLog) {
  processing_.max_attempts_before_dead_letter = 100;
  BisectingDelivery d(processor(), processing_);
  int failures_left = 50;
  calls_.throws = [&](std::span<const Record>) { return failures_left-- > 0; };
  auto batch = batch_of(0, 4);
  for (int step = 0; step < 50; ++step) ASSERT_TRUE(d.deliver(host_, batch).has_value());
  std::vector<std::string> retries;
  for (const std::string& l : host_.lines) {
    if (l.find("again after a backoff") != std::string::npos) retries.push_back(l);
  }
  ASSERT_EQ(retries.size(), 3u) << "failures 1, 3 and 10 of 50";
  EXPECT_NE(retries[2].find("(attempt 10; failure 10 in a row"), std::string::npos) << retries[2];
  EXPECT_EQ(d.deliver(host_, batch), std::nullopt);
  EXPECT_TRUE(host_.logged("process_records succeeded again (4 records) after 50 failed calls"));
}

TEST_F(BisectingTest, AStopAskedBetweenPartsLeavesTheRestUndelivered) {
  BisectingDelivery d(processor(), processing_);
  calls_.throws = [](std::span<const Record> r) { return holds(r, "r3"); };
  auto batch = batch_of(0, 4);
  EXPECT_TRUE(d.deliver(host_, batch).has_value());  // [0,4) fails: backoff
  host_.stop = true;
  EXPECT_EQ(d.deliver(host_, batch), clock_.now()) << "run again at once: the stop is handled";
  EXPECT_EQ(calls_.batches.size(), 1u);
  EXPECT_EQ(host_.allowed, std::nullopt);
}

TEST_F(BisectingTest, ABatchThatSucceedsIsOneCall) {
  BisectingDelivery d(processor(), processing_);
  auto batch = batch_of(0, 5);
  EXPECT_EQ(deliver_all(d, batch), 1);
  EXPECT_EQ(calls_.batches.size(), 1u);
  EXPECT_EQ(host_.processed, 5u);
  EXPECT_TRUE(letters_.accepted.empty());
}

// A paced processor whose answers the test sets.
struct PacedScript {
  std::vector<std::string> calls;
  std::vector<std::string> handed_in;
  Pace pace;
  bool drained = true;
  PaceContext attached;
};

class ScriptedPaced final : public PacedRecordProcessor {
 public:
  explicit ScriptedPaced(PacedScript& s) : s_(s) {}
  void initialize(const InitializationInput&) override {}
  void process_records(const ProcessRecordsInput&) override { s_.calls.push_back("process"); }
  void shard_ended(Checkpointer&) override {}
  void shutdown_requested(Checkpointer&) override {}
  void attach(PaceContext context) override {
    s_.calls.push_back("attach");
    s_.attached = std::move(context);
  }
  void hand_in(std::vector<Record>& records, std::size_t) override {
    s_.calls.push_back("hand_in");
    for (Record& r : records) s_.handed_in.emplace_back(r.data());
    records.clear();  // moved out, as the pull processor does
  }
  Pace pace(Checkpointer&) override {
    s_.calls.push_back("pace");
    return s_.pace;
  }
  bool drained() override { return s_.drained; }
  void stop_offering() override { s_.calls.push_back("stop_offering"); }

 private:
  PacedScript& s_;
};

class PacedTest : public DeliveryTest {
 protected:
  std::unique_ptr<PacedDelivery> make() {
    PaceContext pace;
    pace.metrics = &host_.metrics_;
    pace.clock = &clock_;
    return std::make_unique<PacedDelivery>(std::make_unique<ScriptedPaced>(script_), processing_,
                                           pace);
  }
  PacedScript script_;
};

TEST_F(PacedTest, AttachesWithTheConsumersWakeUpAndTheWorkersClock) {
  auto d = make();
  std::optional<SteadyTime> woken;
  d->started(host_, [&](SteadyTime at) { woken = at; });
  ASSERT_EQ(script_.calls, std::vector<std::string>{"attach"});
  EXPECT_EQ(script_.attached.clock, &clock_);
  EXPECT_EQ(script_.attached.metrics, &host_.metrics_);
  EXPECT_EQ(script_.attached.tags.data(), host_.tags().data()) << "the consumer's own tags";
  EXPECT_EQ(script_.attached.tags.size(), host_.tags().size());
  ASSERT_TRUE(script_.attached.wake);
  script_.attached.wake(clock_.now() + 2s);
  EXPECT_EQ(woken, clock_.now() + 2s);
}

TEST_F(PacedTest, TheGateIsThePacersAnswer) {
  auto d = make();
  script_.pace = Pace{false, clock_.now() + 300ms};
  Gate g = d->gate(host_);
  EXPECT_FALSE(g.accept);
  EXPECT_EQ(g.next_call, clock_.now() + 300ms);
  script_.pace = Pace{true, std::nullopt};
  g = d->gate(host_);
  EXPECT_TRUE(g.accept);
  EXPECT_EQ(g.next_call, std::nullopt);
  EXPECT_EQ(d->idle(host_), std::nullopt) << "no empty batches for a paced processor";
}

TEST_F(PacedTest, HandsInTheBatchAndCountsWhatItHeldBeforeTheMove) {
  auto d = make();
  auto batch = batch_of(0, 3);
  EXPECT_EQ(d->deliver(host_, batch), std::nullopt);
  EXPECT_EQ(script_.handed_in, (std::vector<std::string>{"r0", "r1", "r2"}));
  EXPECT_TRUE(batch.records.empty()) << "moved out";
  EXPECT_EQ(host_.processed, 3u);
  EXPECT_EQ(host_.processed_bytes, 6u);
  EXPECT_EQ(host_.allowed, ExtendedSequenceNumber("102"));
  EXPECT_EQ(std::count(script_.calls.begin(), script_.calls.end(), "process"), 0);
}

TEST_F(PacedTest, TheShardsEndWaitsUntilEveryRecordHandedOnIsFinished) {
  auto d = make();
  script_.drained = false;
  script_.pace.next_call = clock_.now() + 200ms;
  EXPECT_EQ(d->before_shard_end(host_), clock_.now() + 200ms);
  script_.pace.next_call.reset();
  EXPECT_EQ(d->before_shard_end(host_), clock_.now() + 1s) << "looked at again within a second";
  script_.drained = true;
  EXPECT_EQ(d->before_shard_end(host_), std::nullopt);
}

TEST_F(PacedTest, AGracefulStopStopsOfferingOnceAndWaitsBoundedForTheRecordsHandedOn) {
  auto d = make();
  script_.drained = false;
  const SteadyTime until = clock_.now() + 1500ms;
  EXPECT_EQ(d->drain(host_, until), clock_.now() + 1s);
  clock_.advance(1s);
  EXPECT_EQ(d->drain(host_, until), until) << "at the bound at the latest";
  EXPECT_EQ(std::count(script_.calls.begin(), script_.calls.end(), "stop_offering"), 1);
  clock_.advance(500ms);
  EXPECT_EQ(d->drain(host_, until), std::nullopt) << "the bound passed";
  // Drained before the bound: done at once.
  script_.drained = true;
  EXPECT_EQ(make()->drain(host_, clock_.now() + 1h), std::nullopt);
}

TEST(DeliveryFactoryTest, EachConfigurationGetsItsDelivery) {
  ScriptedCalls calls;
  struct Factory final : RecordProcessorFactory {
    explicit Factory(ScriptedCalls& c) : c_(c) {}
    std::unique_ptr<RecordProcessor> create(std::string_view shard) override {
      if (shard == "none") return nullptr;
      return std::make_unique<ScriptedProcessor>(c_);
    }
    ScriptedCalls& c_;
  } callbacks(calls);
  PacedScript script;
  struct Paced final : PacedProcessorFactory {
    explicit Paced(PacedScript& s) : s_(s) {}
    std::unique_ptr<PacedRecordProcessor> create(std::string_view) override {
      return std::make_unique<ScriptedPaced>(s_);
    }
    PacedScript& s_;
  } paced(script);
  ProcessingConfig processing;
  auto made = make_delivery_factory(&callbacks, nullptr, processing, {})->create("s");
  EXPECT_NE(dynamic_cast<CallbackDelivery*>(made.get()), nullptr);
  EXPECT_EQ(dynamic_cast<BisectingDelivery*>(made.get()), nullptr);
  EXPECT_EQ(make_delivery_factory(&callbacks, nullptr, processing, {})->create("none"), nullptr)
      << "a factory that returns no processor gets no delivery";
  processing.on_processor_error = ProcessorErrorPolicy::kDeadLetter;
  made = make_delivery_factory(&callbacks, nullptr, processing, {})->create("s");
  EXPECT_NE(dynamic_cast<BisectingDelivery*>(made.get()), nullptr);
  // Paced wins over the error policy: a paced processor's failed hand-in is retried.
  made = make_delivery_factory(&callbacks, &paced, processing, {})->create("s");
  EXPECT_NE(dynamic_cast<PacedDelivery*>(made.get()), nullptr);
  EXPECT_EQ(make_delivery_factory(nullptr, nullptr, processing, {}), nullptr);
}

}  // namespace
}  // namespace kcl::lifecycle
