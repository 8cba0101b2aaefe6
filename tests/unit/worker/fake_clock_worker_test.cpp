// A whole kcl::Worker on a fake clock: the in-memory lease table, a scripted records source
// (a batch per step, the next step due 200 ms of fake time later) and a scripted ListShards;
// the scheduler, the lease threads, the task pool and the consumers all wait on the
// injected ManualClock, so the run takes seconds of fake time and little real time. With
// any of them on real time the loop below could not finish.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "leases/in_memory_lease_store.h"
#include "lifecycle/shard_consumer.h"
#include "worker/worker_access.h"

namespace kcl::worker {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr int kShards = 2;
constexpr int kBatches = 5;
constexpr int kPerBatch = 4;

std::string shard_id(int i) { return "shardId-00000000000" + std::to_string(i); }
std::string seq(int batch, int i) { return std::to_string(1000 + batch * 100 + i); }

// ListShards: kShards closed shards without parents.
class ListShardsOnly final : public aws::AwsJsonClient {
 public:
  Result<std::string> call(std::string_view operation, std::string,
                           const aws::CallOptions&) override {
    if (operation != "ListShards") return Status(StatusCode::kInvalidArgument, "not scripted");
    json shards = json::array();
    for (int i = 0; i < kShards; ++i) {
      shards.push_back(
          {{"ShardId", shard_id(i)},
           {"HashKeyRange",
            {{"StartingHashKey", i == 0 ? "0" : "170141183460469231731687303715884105728"},
             {"EndingHashKey", i == 0 ? "170141183460469231731687303715884105727"
                                      : "340282366920938463463374607431768211455"}}},
           {"SequenceNumberRange",
            {{"StartingSequenceNumber", "1000"}, {"EndingSequenceNumber", "9999"}}}});
    }
    return json{{"Shards", shards}}.dump();
  }
  const std::string& endpoint() const override { return endpoint_; }
  const std::string& region() const override { return region_; }

 private:
  std::string endpoint_ = "http://fake";
  std::string region_ = "us-east-1";
};

// kBatches batches of kPerBatch records, then the shard's end; a step is due every 200 ms
// of the clock's time.
class ScriptedShard final : public retrieval::RecordsSource {
 public:
  ScriptedShard(std::string shard, const Clock& clock) : shard_(std::move(shard)), clock_(clock) {}
  retrieval::FetchStep fetch_step() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return retrieval::FetchStep{retrieval::FetchOutcome::kFinished};
    if (clock_.now() < due_) return retrieval::FetchStep{retrieval::FetchOutcome::kNotDue, due_};
    retrieval::FetchedBatch b;
    if (batch_ < kBatches) {
      for (int i = 0; i < kPerBatch; ++i) {
        Record r;
        r.set_shard_id(shard_);
        r.set_sequence_number(seq(batch_, i));
        r.set_partition_key("k");
        r.set_data(shard_ + "/" + std::to_string(batch_ * kPerBatch + i));
        b.records.push_back(std::move(r));
      }
      ++batch_;
    } else {
      b.shard_end = true;
      finished_ = true;
    }
    const std::size_t n = b.records.size();
    queue_.push_back(std::move(b));
    due_ = clock_.now() + 200ms;
    return retrieval::FetchStep{
        finished_ ? retrieval::FetchOutcome::kShardEnd : retrieval::FetchOutcome::kRecords,
        finished_ ? Clock::MonoTime::max() : due_, false, n};
  }
  std::optional<retrieval::FetchedBatch> take_batch() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) return std::nullopt;
    auto b = std::move(queue_.front());
    queue_.pop_front();
    return b;
  }
  bool has_room() const override { return true; }
  bool finished() const noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }
  bool drained() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_ && queue_.empty();
  }
  Status terminal_error() const override { return Status::Ok(); }
  std::size_t queued_records() const override { return 0; }
  std::size_t queued_bytes() const override { return 0; }
  std::int64_t millis_behind_latest() const noexcept override { return 0; }
  std::uint64_t corrupt_aggregates() const noexcept override { return 0; }

 private:
  const std::string shard_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::deque<retrieval::FetchedBatch> queue_;
  int batch_ = 0;
  bool finished_ = false;
  Clock::MonoTime due_{};
};

// Records what every shard's processor saw; checkpoints each batch and the shard's end.
class Recorder {
 public:
  void add(const std::string& shard, const std::string& data) {
    std::lock_guard<std::mutex> lock(mu_);
    seen_[shard].push_back(data);
  }
  std::map<std::string, std::vector<std::string>> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  std::atomic<int> shards_ended{0};

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::string>> seen_;
};

class RecordingProcessor final : public RecordProcessor {
 public:
  explicit RecordingProcessor(Recorder& r) : r_(r) {}
  void initialize(const InitializationInput& in) override { shard_ = in.shard_id; }
  void process_records(const ProcessRecordsInput& in) override {
    for (const Record& rec : in.records) r_.add(shard_, std::string(rec.data()));
    EXPECT_TRUE(in.checkpointer.checkpoint().ok());
  }
  void shard_ended(Checkpointer& cp) override {
    EXPECT_TRUE(cp.checkpoint().ok());
    r_.shards_ended.fetch_add(1);
  }
  void shutdown_requested(Checkpointer& cp) override { (void)cp.checkpoint(); }

 private:
  Recorder& r_;
  std::string shard_;
};

class RecordingFactory final : public RecordProcessorFactory {
 public:
  explicit RecordingFactory(Recorder& r) : r_(r) {}
  std::unique_ptr<RecordProcessor> create(std::string_view) override {
    return std::make_unique<RecordingProcessor>(r_);
  }

 private:
  Recorder& r_;
};

// A worker reading the scripted shards through `factory`'s processors, all on `clock`.
std::unique_ptr<Worker> make_fake_clock_worker(ManualClock& clock,
                                               std::shared_ptr<leases::InMemoryLeaseStore> store,
                                               std::shared_ptr<RecordProcessorFactory> factory) {
  WorkerInternals internals;
  internals.kinesis = std::make_shared<kinesis::KinesisClient>(std::make_shared<ListShardsOnly>());
  internals.lease_store = store;
  internals.records_source_factory = [&clock](const std::string&, const std::string& shard,
                                              const StartPosition&) {
    return std::make_shared<ScriptedShard>(shard, clock);
  };
  WorkerConfig config;
  config.stream_name = "s";
  config.leases.application_name = "fake-clock-app";
  config.leases.worker_id = "w1";
  config.initial_position = InitialPosition::trim_horizon();
  config.processing.thread_pool_size = 2;
  // Fake time may run ahead of a busy machine's threads: a long failover keeps the lease
  // held however late the renew thread gets to run.
  config.leases.failover_time = 60s;
  Dependencies deps;
  deps.clock = &clock;
  return make_worker(config, std::move(factory), deps, internals);
}

// Moves fake time on in 50 ms steps until `done` holds (each step gives the worker's threads
// a moment of real time to react), at most 20,000 steps.
template <typename Done>
void advance_until(ManualClock& clock, Done done) {
  for (int i = 0; i < 20000 && !done(); ++i) {
    clock.advance(50ms);
    std::this_thread::sleep_for(100us);
  }
}

TEST(FakeClockWorkerTest, AWholeWorkerRunsOnFakeTime) {
  ManualClock clock;
  Recorder recorder;
  auto store = std::make_shared<leases::InMemoryLeaseStore>();
  auto worker = make_fake_clock_worker(clock, store, std::make_shared<RecordingFactory>(recorder));

  const auto real_start = std::chrono::steady_clock::now();
  const auto fake_start = clock.now();
  ASSERT_TRUE(worker->start().ok());
  advance_until(clock, [&] { return recorder.shards_ended.load() == kShards; });
  ASSERT_EQ(recorder.shards_ended.load(), kShards);
  auto done = worker->begin_shutdown();
  advance_until(clock, [&] { return done.wait_for(0s) == std::future_status::ready; });
  ASSERT_EQ(done.wait_for(0s), std::future_status::ready);
  EXPECT_TRUE(done.get().ok());
  const double real_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - real_start).count();
  const double fake_s = std::chrono::duration<double>(clock.now() - fake_start).count();
  std::printf("fake-clock worker: %.1f s of fake time in %.3f s of real time\n", fake_s, real_s);

  // Every record of each shard, in order, once.
  const auto seen = recorder.seen();
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kShards));
  for (int s = 0; s < kShards; ++s) {
    std::vector<std::string> expected;
    for (int i = 0; i < kBatches * kPerBatch; ++i)
      expected.push_back(shard_id(s) + "/" + std::to_string(i));
    EXPECT_EQ(seen.at(shard_id(s)), expected);
  }
  // Both leases hold SHARD_END and were handed back.
  auto leases = store->list_leases();
  ASSERT_TRUE(leases.ok());
  for (const Lease& l : *leases) {
    EXPECT_TRUE(l.checkpoint.is_shard_end()) << l.lease_key << " " << l.checkpoint.to_string();
    EXPECT_FALSE(l.lease_owner.has_value()) << l.lease_key;
  }
  // The run took far more fake time than the scripted source's 200 ms steps need in real
  // time: nothing waited on the real clock.
  EXPECT_GE(fake_s, kBatches * 0.2);
}

// A processor that calls Worker::shutdown() (which waits for the worker's threads, its own
// among them) gets kFailedPrecondition at once, and the worker still stops: the call begins
// the graceful stop instead of hanging the pool thread forever.
class StoppingProcessor final : public RecordProcessor {
 public:
  StoppingProcessor(std::atomic<Worker*>& worker, std::promise<Status>& answer)
      : worker_(worker), answer_(answer) {}
  void initialize(const InitializationInput&) override {}
  void process_records(const ProcessRecordsInput&) override {
    static std::once_flag once;
    std::call_once(once, [&] { answer_.set_value(worker_.load()->shutdown()); });
  }
  void shard_ended(Checkpointer& cp) override { (void)cp.checkpoint(); }
  void shutdown_requested(Checkpointer& cp) override { (void)cp.checkpoint(); }

 private:
  std::atomic<Worker*>& worker_;
  std::promise<Status>& answer_;
};

class StoppingFactory final : public RecordProcessorFactory {
 public:
  StoppingFactory(std::atomic<Worker*>& worker, std::promise<Status>& answer)
      : worker_(worker), answer_(answer) {}
  std::unique_ptr<RecordProcessor> create(std::string_view) override {
    return std::make_unique<StoppingProcessor>(worker_, answer_);
  }

 private:
  std::atomic<Worker*>& worker_;
  std::promise<Status>& answer_;
};

TEST(FakeClockWorkerTest, ShutdownInsideAProcessorBeginsTheStopAndSaysItDidNotWait) {
  ManualClock clock;
  std::atomic<Worker*> handle{nullptr};
  std::promise<Status> answer;
  std::future<Status> answered = answer.get_future();
  auto worker = make_fake_clock_worker(clock, std::make_shared<leases::InMemoryLeaseStore>(),
                                       std::make_shared<StoppingFactory>(handle, answer));
  handle.store(worker.get());
  ASSERT_TRUE(worker->start().ok());
  advance_until(clock, [&] { return answered.wait_for(0s) == std::future_status::ready; });
  ASSERT_EQ(answered.wait_for(0s), std::future_status::ready);
  const Status inside = answered.get();
  EXPECT_EQ(inside.code(), StatusCode::kFailedPrecondition) << inside.to_string();
  EXPECT_NE(inside.message().find("begin_shutdown()"), std::string::npos) << inside.to_string();

  std::optional<Status> stopped;
  advance_until(clock, [&] { return (stopped = worker->wait_for(0ms)).has_value(); });
  ASSERT_TRUE(stopped.has_value()) << "the worker did not stop";
  EXPECT_TRUE(stopped->ok()) << stopped->to_string();
  // From outside, shutdown() now just returns the same result.
  EXPECT_TRUE(worker->shutdown().ok());
}

// ListShards that keeps failing as a 503 would (retried at start), counting its calls.
class ListShardsUnavailable final : public aws::AwsJsonClient {
 public:
  Result<std::string> call(std::string_view, std::string, const aws::CallOptions&) override {
    ++calls;
    return Status(StatusCode::kUnavailable, "scripted: the service is unavailable");
  }
  const std::string& endpoint() const override { return endpoint_; }
  const std::string& region() const override { return region_; }
  std::atomic<int> calls{0};

 private:
  std::string endpoint_ = "http://fake";
  std::string region_ = "us-east-1";
};

std::unique_ptr<Worker> worker_that_cannot_list_shards(
    ManualClock& clock, std::shared_ptr<ListShardsUnavailable> kinesis, Recorder& recorder) {
  WorkerInternals internals;
  internals.kinesis = std::make_shared<kinesis::KinesisClient>(std::move(kinesis));
  internals.lease_store = std::make_shared<leases::InMemoryLeaseStore>();
  WorkerConfig config;
  config.stream_name = "s";
  config.leases.application_name = "fake-clock-app";
  config.leases.worker_id = "w1";
  Dependencies deps;
  deps.clock = &clock;
  return make_worker(config, std::make_shared<RecordingFactory>(recorder), deps, internals);
}

// A shutdown asked while start() is still retrying ends the start and the worker: the
// shutdown's future holds the start's failure (it waited for ever before).
TEST(FakeClockWorkerTest, AShutdownWhileStartingEndsWithTheStartsFailure) {
  ManualClock clock;
  Recorder recorder;
  auto kinesis = std::make_shared<ListShardsUnavailable>();
  auto worker = worker_that_cannot_list_shards(clock, kinesis, recorder);
  std::future<Status> started = std::async(std::launch::async, [&] { return worker->start(); });
  for (int i = 0; i < 100000 && kinesis->calls.load() == 0; ++i) {
    std::this_thread::sleep_for(100us);
  }
  ASSERT_GT(kinesis->calls.load(), 0) << "the start never listed the shards";
  std::shared_future<Status> done = worker->begin_shutdown();
  ASSERT_EQ(started.wait_for(30s), std::future_status::ready) << "start() did not end";
  const Status start_status = started.get();
  EXPECT_FALSE(start_status.ok());
  ASSERT_EQ(done.wait_for(30s), std::future_status::ready) << "the shutdown never ended";
  EXPECT_EQ(done.get().code(), start_status.code()) << done.get().to_string();
  EXPECT_EQ(worker->shutdown().code(), start_status.code());
}

// shutdown() before start(): the worker is done, and a start() after it is refused rather
// than running a worker whose end was already told.
TEST(FakeClockWorkerTest, AStartAfterAShutdownIsRefused) {
  ManualClock clock;
  Recorder recorder;
  auto worker = make_fake_clock_worker(clock, std::make_shared<leases::InMemoryLeaseStore>(),
                                       std::make_shared<RecordingFactory>(recorder));
  EXPECT_EQ(worker->shutdown().code(), StatusCode::kFailedPrecondition);
  const Status s = worker->start();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.to_string();
  EXPECT_NE(s.message().find("shut down before it was started"), std::string::npos) << s;
}

// A processor whose process_records never returns (a downstream call with no timeout): the
// graceful stop gives up on it after shutdown_timeout, hands its lease back and ends, with an
// error naming its shard. The stop waited for its pool thread for ever before, so shutdown()
// never returned.
class NeverReturningProcessor final : public RecordProcessor {
 public:
  NeverReturningProcessor(std::atomic<int>& entered, std::shared_future<void> release)
      : entered_(entered), release_(std::move(release)) {}
  void initialize(const InitializationInput&) override {}
  void process_records(const ProcessRecordsInput&) override {
    entered_.fetch_add(1);
    release_.wait();
  }
  void shard_ended(Checkpointer&) override {}
  void shutdown_requested(Checkpointer&) override {}

 private:
  std::atomic<int>& entered_;
  std::shared_future<void> release_;
};

class NeverReturningFactory final : public RecordProcessorFactory {
 public:
  NeverReturningFactory(std::atomic<int>& entered, std::shared_future<void> release)
      : entered_(entered), release_(std::move(release)) {}
  std::unique_ptr<RecordProcessor> create(std::string_view) override {
    return std::make_unique<NeverReturningProcessor>(entered_, release_);
  }

 private:
  std::atomic<int>& entered_;
  std::shared_future<void> release_;
};

TEST(FakeClockWorkerTest, AProcessorThatNeverReturnsDoesNotHoldUpTheStopForEver) {
  ManualClock clock;
  std::atomic<int> entered{0};
  std::promise<void> release;
  auto store = std::make_shared<leases::InMemoryLeaseStore>();
  auto worker = make_fake_clock_worker(
      clock, store, std::make_shared<NeverReturningFactory>(entered, release.get_future().share()));
  ASSERT_TRUE(worker->start().ok());
  advance_until(clock, [&] { return entered.load() == kShards; });
  ASSERT_EQ(entered.load(), kShards);
  std::shared_future<Status> done = worker->begin_shutdown();
  advance_until(clock, [&] { return done.wait_for(0s) == std::future_status::ready; });
  const bool ended = done.wait_for(0s) == std::future_status::ready;
  release.set_value();  // the callbacks return, so the worker's destructor can end
  ASSERT_TRUE(ended) << "shutdown() never returned";
  const Status s = done.get();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find(shard_id(0)), std::string::npos) << s;
  EXPECT_NE(s.message().find("did not finish within shutdown_timeout"), std::string::npos) << s;
  auto leases = store->list_leases();
  ASSERT_TRUE(leases.ok());
  for (const Lease& l : *leases) EXPECT_FALSE(l.lease_owner.has_value()) << l.lease_key;
}

}  // namespace
}  // namespace kcl::worker
