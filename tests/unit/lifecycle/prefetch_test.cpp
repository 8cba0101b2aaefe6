// Real, bounded prefetch: a shard consumer on a TaskPool runs its records source in a fetch
// task of its own, so the next call is in flight while the processor works on a batch, and
// a processor that stalls stops the fetching at the prefetch bound instead of growing
// memory. A scripted records source stands in for Kinesis (a call takes `call_time`).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "leases/in_memory_lease_store.h"
#include "lifecycle/shard_consumer.h"
#include "lifecycle/task_pool.h"
#include "support/consumer_context_builder.h"
#include "support/lease_test_util.h"

namespace kcl::lifecycle {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr const char* kShardId = "shardId-000000000000";

// Batches of `records_per_call` records, endless; each call (fetch step that fetches) takes
// `call_time`; the queue holds at most `bound` records before a step waits for a take
// (the ShardFetcher's rule: the bound is checked before a call).
class ScriptedSource final : public retrieval::RecordsSource {
 public:
  ScriptedSource(std::size_t records_per_call, std::size_t bound,
                 std::chrono::milliseconds call_time)
      : per_call_(records_per_call), bound_(bound), call_time_(call_time) {}

  retrieval::FetchStep fetch_step() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queued_records_ >= bound_) {
        return retrieval::FetchStep{retrieval::FetchOutcome::kQueueFull, Clock::MonoTime::max(),
                                    true};
      }
    }
    calls_started_.fetch_add(1);
    cv_.notify_all();
    std::this_thread::sleep_for(call_time_);  // the round trip of a GetRecords call
    retrieval::FetchedBatch b;
    for (std::size_t i = 0; i < per_call_; ++i) {
      Record r;
      r.set_shard_id(kShardId);
      r.set_sequence_number(std::to_string(1000 + next_++));
      r.set_partition_key("k");
      r.set_data(std::string(100, 'x'));
      b.bytes += r.data().size();
      b.records.push_back(std::move(r));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queued_records_ += b.records.size();
      max_queued_ = std::max(max_queued_, queued_records_);
      queue_.push_back(std::move(b));
    }
    return retrieval::FetchStep{retrieval::FetchOutcome::kRecords, Clock::MonoTime{}, false,
                                per_call_};
  }
  std::optional<retrieval::FetchedBatch> take_batch() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) return std::nullopt;
    auto b = std::move(queue_.front());
    queue_.pop_front();
    queued_records_ -= b.records.size();
    return b;
  }
  bool has_room() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return queued_records_ < bound_;
  }
  bool finished() const noexcept override { return false; }
  bool drained() const override { return false; }
  Status terminal_error() const override { return Status::Ok(); }
  std::size_t queued_records() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return queued_records_;
  }
  std::size_t queued_bytes() const override { return queued_records() * 100; }
  std::int64_t millis_behind_latest() const noexcept override { return 0; }
  std::uint64_t corrupt_aggregates() const noexcept override { return 0; }

  // Waits until at least `n` calls have started; false after `limit`.
  bool wait_calls_started(int n, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return calls_started_.load() >= n; });
  }
  int calls_started() const { return calls_started_.load(); }
  std::size_t max_queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_queued_;
  }

 private:
  const std::size_t per_call_;
  const std::size_t bound_;
  const std::chrono::milliseconds call_time_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<retrieval::FetchedBatch> queue_;
  std::size_t queued_records_ = 0;
  std::size_t max_queued_ = 0;
  std::atomic<int> calls_started_{0};
  std::uint64_t next_ = 0;  // fetch_step's thread only
};

// Calls `on_batch(batch number)` for each batch; thread-safe counters.
class HookProcessor final : public RecordProcessor {
 public:
  explicit HookProcessor(std::function<void(int)> on_batch) : on_batch_(std::move(on_batch)) {}
  void initialize(const InitializationInput&) override {}
  void process_records(const ProcessRecordsInput& in) override {
    on_batch_(batches_++);
    (void)in;
  }
  void shard_ended(Checkpointer& cp) override { (void)cp.checkpoint(); }
  void shutdown_requested(Checkpointer&) override {}

 private:
  std::function<void(int)> on_batch_;
  int batches_ = 0;  // calls for one shard are never concurrent
};

class HookFactory final : public RecordProcessorFactory {
 public:
  explicit HookFactory(std::function<void(int)> on_batch) : on_batch_(std::move(on_batch)) {}
  std::unique_ptr<RecordProcessor> create(std::string_view) override {
    return std::make_unique<HookProcessor>(on_batch_);
  }

 private:
  std::function<void(int)> on_batch_;
};

class PrefetchTest : public ::testing::Test {
 protected:
  static LeaseConfig lease_config() {
    LeaseConfig c;
    c.application_name = "app";
    c.worker_id = "w1";
    c.assignment = LeaseAssignment::kWorkerTakes;
    return c;
  }

  // Starts the consumer of the only shard on the pool, reading from `source`.
  void start(std::shared_ptr<ScriptedSource> source, std::function<void(int)> on_batch) {
    Lease l;
    l.lease_key = kShardId;
    ASSERT_TRUE(store_.create_lease_if_not_exists(l).ok());
    ASSERT_TRUE(coordinator_.run_take_pass().status.ok());
    auto held = coordinator_.held_lease(kShardId);
    ASSERT_TRUE(held.has_value());
    factory_ = std::make_unique<HookFactory>(std::move(on_batch));
    ctx_.stream = "s";
    ctx_.store = &store_;
    ctx_.held = &coordinator_.held();
    ctx_.factory = factory_.get();
    ctx_.metrics = &NoopMetricsSink::instance();
    ctx_.clock = &SystemClock::instance();
    ctx_.pool = &pool_;
    ctx_.initial_position = InitialPosition::trim_horizon();
    ctx_.records_source_factory = [source](const std::string&, const std::string&,
                                           const StartPosition&) {
      return std::static_pointer_cast<retrieval::RecordsSource>(source);
    };
    consumer_ = std::make_shared<ShardConsumer>(ctx_.build(), *held);
    pool_.schedule_now(consumer_);
  }

  void TearDown() override {
    {
      std::lock_guard<std::mutex> lock(gate_mu_);
      gate_open_ = true;  // a processor held at the gate returns (also after a failed ASSERT)
    }
    gate_cv_.notify_all();
    if (consumer_) consumer_->request_shutdown();
    pool_.stop();
  }

  // What the processors' callbacks touch lives here, not in a test body: the pool may run a
  // callback until TearDown() has stopped it.
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool gate_open_ = false;
  std::shared_ptr<ScriptedSource> source_;
  std::atomic<int> batches_{0};
  std::atomic<int> overlapped_{0};
  std::atomic<bool> stalled_{false};
  Steady::time_point t0_{};
  std::atomic<Steady::rep> done_at_{0};

  ManualClock lease_clock_;  // never moves: the lease stays held
  leases::InMemoryLeaseStore store_;
  leases::testing::TakesWorker coordinator_{store_, lease_config(), lease_clock_};
  TaskPool pool_{3};
  std::unique_ptr<HookFactory> factory_;
  testing::ConsumerContextBuilder ctx_;
  std::shared_ptr<ShardConsumer> consumer_;
};

// While the processor works on batch i, the call for a later batch has already started.
// (A consumer that fetched only between batches would never see that: each wait below
// would run into its deadline.)
TEST_F(PrefetchTest, TheNextCallIsInFlightWhileTheProcessorWorks) {
  constexpr int kBatches = 10;
  source_ = std::make_shared<ScriptedSource>(100, 100, 5ms);
  start(source_, [this](int i) {
    // Only the first kBatches are looked at: a later one may still be in this callback when
    // the pool stops below, and then no call can start while it waits.
    if (i >= kBatches) return;
    // Batch i came from call i+1; the next call is number i+2.
    if (source_->wait_calls_started(i + 2, 10s)) overlapped_.fetch_add(1);
    batches_.fetch_add(1);
  });
  for (int i = 0; i < 500 && batches_.load() < kBatches; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(batches_.load(), kBatches);
  pool_.stop();  // no callback runs past this point
  EXPECT_EQ(overlapped_.load(), kBatches);
}

// A processor that takes as long as a call: with the call in flight meanwhile, a batch
// costs about max(call, processing), not their sum. Prints the figures.
TEST_F(PrefetchTest, AProcessorAsSlowAsACallDoesNotHalveThroughput) {
  constexpr auto kCall = 20ms;
  constexpr int kBatches = 25;
  source_ = std::make_shared<ScriptedSource>(100, 100, kCall);
  t0_ = Steady::now();
  start(source_, [this, kCall](int) {
    std::this_thread::sleep_for(kCall);  // processing takes a round trip
    if (batches_.fetch_add(1) + 1 == kBatches) done_at_.store((Steady::now() - t0_).count());
  });
  for (int i = 0; i < 1000 && batches_.load() < kBatches; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GE(batches_.load(), kBatches);
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(Steady::duration(done_at_.load())).count();
  const double serial_ms = kBatches * 2.0 * static_cast<double>(kCall.count());
  const double overlapped_ms = (kBatches + 1) * static_cast<double>(kCall.count());
  std::printf(
      "prefetch: %d batches, call %lld ms, processing %lld ms: %.0f ms "
      "(serial would take %.0f ms, fully overlapped %.0f ms); %.2f of serial\n",
      kBatches, static_cast<long long>(kCall.count()), static_cast<long long>(kCall.count()),
      elapsed_ms, serial_ms, overlapped_ms, elapsed_ms / serial_ms);
  EXPECT_LT(elapsed_ms, 0.8 * serial_ms);
}

// A stalled processor: fetching stops at the bound (the queue holds at most the bound plus
// the call that was allowed just below it), and no call is made while it stays stalled.
TEST_F(PrefetchTest, AStalledProcessorStopsFetchingAtTheBound) {
  constexpr std::size_t kPerCall = 100, kBound = 250;
  source_ = std::make_shared<ScriptedSource>(kPerCall, kBound, 1ms);
  auto& source = source_;
  auto& stalled = stalled_;
  start(source_, [this](int) {
    stalled_.store(true);
    std::unique_lock<std::mutex> lock(gate_mu_);
    gate_cv_.wait(lock, [&] { return gate_open_; });
  });
  // Wait until the queue reached the bound while the first batch is stuck in the processor.
  for (int i = 0; i < 1000 && !(stalled.load() && source->queued_records() >= kBound); ++i) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(stalled.load());
  ASSERT_GE(source->queued_records(), kBound);
  const int calls = source->calls_started();
  // Time passes; the fetch task waits for a take and makes no call.
  for (int i = 0; i < 20; ++i) {
    pool_.schedule_now(consumer_);  // nudges change nothing while the processor is stuck
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(source->calls_started(), calls);
  EXPECT_LE(source->max_queued(), kBound + kPerCall - 1);
  std::printf(
      "stalled processor: %d calls, at most %zu records queued (bound %zu, %zu per "
      "call) plus the batch in the processor\n",
      calls, source->max_queued(), kBound, kPerCall);
}

}  // namespace
}  // namespace kcl::lifecycle
