// ConsumerSupervisor on its own, on a manual clock: an in-memory lease table, a worker-takes
// worker that holds the leases, a task pool without threads (run_due() on the test's thread)
// and a scripted records source per shard that never ends, ends the shard, or fails. Covers
// one consumer per held lease, a finished shard's sync request, a failed shard's restart after
// its backoff and its series of failures, a gone stream (stops a one-stream worker, asks a
// multi-stream one's sync), a lost lease, a stop, and that a stopping worker starts nothing.
#include "worker/consumer_supervisor.h"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <memory>
#include <string>

#include "leases/in_memory_lease_store.h"
#include "metrics/metrics_registry.h"
#include "retrieval/queued_records_source.h"
#include "support/captured_log.h"
#include "support/consumer_context_builder.h"
#include "support/lease_test_util.h"

namespace kcl::worker {
namespace {

using namespace std::chrono_literals;

// What a shard's source does: reads nothing for ever, ends the shard at once, or fails.
struct ShardScript {
  bool ends = false;
  Status failure;  // not ok: the source fails with it at its first step
};

class ScriptedSource final : public retrieval::QueuedRecordsSource {
 public:
  ScriptedSource(ShardScript script, const Clock& clock)
      : QueuedRecordsSource(10000, 1 << 20), script_(std::move(script)), clock_(clock) {}
  retrieval::FetchStep fetch_step() override {
    if (finished()) return retrieval::FetchStep{retrieval::FetchOutcome::kFinished};
    if (!script_.failure.ok()) return finish_with_error(script_.failure);
    if (script_.ends) return finish_at_shard_end(retrieval::FetchedBatch{});
    return retrieval::FetchStep{retrieval::FetchOutcome::kNoRecords, clock_.now() + 1s};
  }

 private:
  const ShardScript script_;
  const Clock& clock_;
};

// Checkpoints the shard's end and the final checkpoint of a stop; counts the stops.
class CheckpointingProcessor final : public RecordProcessor {
 public:
  explicit CheckpointingProcessor(int& shutdowns) : shutdowns_(shutdowns) {}
  void initialize(const InitializationInput&) override {}
  void process_records(const ProcessRecordsInput&) override {}
  void lease_lost() override {}
  void shard_ended(Checkpointer& cp) override { (void)cp.checkpoint(); }
  void shutdown_requested(Checkpointer& cp) override {
    ++shutdowns_;
    (void)cp.checkpoint();
  }

 private:
  int& shutdowns_;
};

class Factory final : public RecordProcessorFactory {
 public:
  std::unique_ptr<RecordProcessor> create(std::string_view) override {
    return std::make_unique<CheckpointingProcessor>(shutdowns);
  }
  int shutdowns = 0;
};

LeaseConfig lease_config() {
  LeaseConfig c;
  c.application_name = "app";
  c.worker_id = "w1";
  c.assignment = LeaseAssignment::kWorkerTakes;
  return c;
}

class ConsumerSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.stream = "orders";
    ctx_.store = &store_;
    ctx_.held = &takes_.held();
    ctx_.factory = &factory_;
    ctx_.clock = &clock_;
    ctx_.pool = &pool_;
    ctx_.records_source_factory = [this](const std::string&, const std::string& shard,
                                         const StartPosition&) {
      return std::make_shared<ScriptedSource>(scripts_[shard], clock_);
    };
  }

  void make_supervisor(bool multi_stream = false) {
    ConsumerSupervisor::Options options;
    options.multi_stream = multi_stream;
    options.restart_backoff = 5s;
    supervisor_ = std::make_unique<ConsumerSupervisor>(
        options, takes_.held(), pool_, clock_, NoopMetricsSink::instance(),
        [this](const Lease& lease) {
          ++made_[lease.lease_key];
          return std::make_shared<lifecycle::ShardConsumer>(ctx_.build(), lease);
        },
        [this](LogLevel level, const std::string& message) { log_.log(level, "test", message); });
  }

  // Lease `key` held here, its consumer running, and a handoff of it to w2 started by the
  // leader and noted.
  void start_handoff_to_w2(const std::string& key) {
    hold({key});
    make_supervisor();
    ASSERT_TRUE(look_until([&] { return supervisor_->consumer_count() == 1; }));
    auto handing = store_.initiate_handoff(*store_.peek(key), "w2");
    ASSERT_TRUE(handing.ok()) << handing.status();
    takes_.held().note_handoff(*handing);
  }

  // Leases of the given keys, all held by this worker.
  void hold(const std::vector<std::string>& keys) {
    for (const std::string& key : keys) {
      Lease l;
      l.lease_key = key;
      l.checkpoint = ExtendedSequenceNumber::trim_horizon();
      ASSERT_TRUE(store_.create_lease_if_not_exists(l).ok());
    }
    auto pass = takes_.run_take_pass();
    ASSERT_TRUE(pass.status.ok()) << pass.status;
    ASSERT_EQ(takes_.held_count(), keys.size());
  }

  // Looks, runs what the pool has due and moves the clock 100 ms, until `until` holds or
  // `looks` looks passed; what every look's ConsumersEnded said is gathered in ended_.
  bool look_until(const std::function<bool()>& until, int looks = 50, bool stopping = false) {
    for (int i = 0; i < looks; ++i) {
      if (until()) return true;
      ConsumersEnded e = supervisor_->reconcile(stopping);
      ended_.sync_streams.insert(e.sync_streams.begin(), e.sync_streams.end());
      if (e.fatal) ended_.fatal = e.fatal;
      pool_.run_due();
      clock_.advance(100ms);
    }
    return until();
  }

  ManualClock lease_clock_;  // never moves: the leases stay held
  ManualClock clock_;        // the consumers' and the supervisor's
  leases::InMemoryLeaseStore store_;
  leases::testing::TakesWorker takes_{store_, lease_config(), lease_clock_};
  lifecycle::TaskPool pool_{0, clock_};
  Factory factory_;
  std::map<std::string, ShardScript> scripts_;
  lifecycle::testing::ConsumerContextBuilder ctx_;
  std::map<std::string, int> made_;  // consumers made, by lease key
  testing::CapturedLog log_;
  ConsumersEnded ended_;
  std::unique_ptr<ConsumerSupervisor> supervisor_;
};

TEST_F(ConsumerSupervisorTest, OneConsumerForEachHeldLeaseAndNoMore) {
  hold({"shardId-0", "shardId-1", "shardId-2"});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return supervisor_->consumer_count() == 3; }));
  ASSERT_FALSE(look_until([] { return false; }, 5));
  EXPECT_EQ(supervisor_->consumer_count(), 3u);
  EXPECT_EQ(made_,
            (std::map<std::string, int>{{"shardId-0", 1}, {"shardId-1", 1}, {"shardId-2", 1}}));
  const auto states = supervisor_->shard_states();
  ASSERT_EQ(states.size(), 3u);
  EXPECT_EQ(states.at("shardId-1"), "processing");
  EXPECT_TRUE(ended_.sync_streams.empty());
  EXPECT_FALSE(ended_.fatal);
}

TEST_F(ConsumerSupervisorTest, AStoppingWorkerStartsNoConsumer) {
  hold({"shardId-0"});
  make_supervisor();
  ASSERT_FALSE(look_until([&] { return supervisor_->consumer_count() > 0; }, 5, true));
  EXPECT_TRUE(made_.empty());
}

TEST_F(ConsumerSupervisorTest, AFinishedShardAsksItsStreamsSyncAndIsNotReadAgain) {
  const std::string multi = "123456789012:orders:1700000000:shardId-0";
  scripts_["shardId-0"].ends = true;
  scripts_["shardId-1"].ends = true;
  hold({"shardId-0", multi});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return ended_.sync_streams.size() == 2; }));
  // A one-stream key names no stream: "" asks every stream's sync.
  EXPECT_EQ(ended_.sync_streams, (std::set<std::string>{"", "orders"}));
  ASSERT_FALSE(look_until([] { return false; }, 10));
  EXPECT_EQ(made_[multi], 1) << "a finished shard's lease, still held, is not read again";
  EXPECT_EQ(supervisor_->consumer_count(), 0u);
}

TEST_F(ConsumerSupervisorTest, AFailedShardRestartsAfterItsBackoffAndCountsTheSeries) {
  scripts_["shardId-0"].failure = Status(StatusCode::kPermissionDenied, "not allowed");
  hold({"shardId-0"});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return !supervisor_->failing_shards().empty(); }));
  const Clock::MonoTime failed_at = clock_.now();
  EXPECT_LE(supervisor_->next_restart(Clock::MonoTime::max()), failed_at + 5s);
  EXPECT_GT(supervisor_->next_restart(Clock::MonoTime::max()), failed_at);
  // Not before the backoff.
  ASSERT_FALSE(look_until([&] { return made_["shardId-0"] == 2; }, 40));
  ASSERT_TRUE(look_until([&] { return made_["shardId-0"] == 2; }, 20));
  ASSERT_TRUE(look_until([&] {
    auto f = supervisor_->failing_shards();
    return !f.empty() && f[0].consecutive_failures == 2;
  }));
  const auto failing = supervisor_->failing_shards();
  EXPECT_EQ(failing[0].shard_id, "shardId-0");
  EXPECT_EQ(failing[0].cause.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(supervisor_->shard_states().at("shardId-0"), "failing (2 in a row)");
  // The first failure is logged; the second only counted.
  int logged = 0;
  for (const auto& line : log_.lines()) logged += line.find("not allowed") != std::string::npos;
  EXPECT_EQ(logged, 1);
  EXPECT_FALSE(ended_.fatal);
}

// A consumer that fails at once, is restarted after its backoff and fails again never says
// anything itself for long enough to be judged: the loop is the stall, from its first failure,
// during the backoffs and while a restarted consumer has read nothing; it ends with a read.
TEST_F(ConsumerSupervisorTest, AShardInARestartLoopSignalsItsFailuresUntilARestartReads) {
  scripts_["shardId-0"].failure = Status(StatusCode::kPermissionDenied, "no kms:Decrypt");
  hold({"shardId-0", "shardId-1"});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return !supervisor_->failing_shards().empty(); }));
  const Clock::MonoTime began = clock_.now() - 100ms;  // the look that swept it
  const auto looping = [&](int failures) {
    const auto signals = supervisor_->stall_signals();
    const auto s = signals.find("shardId-0");
    if (s == signals.end() || !s->second) return ::testing::AssertionFailure() << "no signal";
    if (s->second->cause != lifecycle::kStallConsumerFailing) {
      return ::testing::AssertionFailure() << "cause " << s->second->cause;
    }
    if (s->second->since < began || s->second->since > began + 100ms) {
      return ::testing::AssertionFailure() << "since moved";
    }
    const std::string count =
        failures == 1 ? "failed 1 time," : "failed " + std::to_string(failures) + " times";
    if (s->second->detail.find(count) == std::string::npos ||
        s->second->detail.find("no kms:Decrypt") == std::string::npos) {
      return ::testing::AssertionFailure() << s->second->detail;
    }
    return ::testing::AssertionSuccess();
  };
  // Waiting for its restart: no consumer runs, the shard is still stalled by the loop.
  EXPECT_TRUE(looping(1));
  ASSERT_TRUE(look_until([&] { return made_["shardId-0"] == 2; }, 60));
  ASSERT_TRUE(look_until([&] {
    auto f = supervisor_->failing_shards();
    return !f.empty() && f[0].consecutive_failures == 2;
  }));
  EXPECT_TRUE(looping(2)) << "the loop's second failure";
  const auto healthy = supervisor_->stall_signals();
  ASSERT_TRUE(healthy.count("shardId-1"));
  EXPECT_FALSE(healthy.at("shardId-1")) << "a shard read without trouble is not stalled";
  // The next restart reads (an empty answer at the tip): the loop is over.
  scripts_["shardId-0"] = ShardScript{};
  ASSERT_TRUE(look_until([&] { return made_["shardId-0"] == 3; }, 60));
  ASSERT_TRUE(look_until([&] {
    const auto signals = supervisor_->stall_signals();
    return signals.count("shardId-0") && !signals.at("shardId-0");
  }));
}

TEST_F(ConsumerSupervisorTest, AFailedShardWhoseLeaseMovedIsNoLongerFailingHere) {
  scripts_["shardId-0"].failure = Status(StatusCode::kUnavailable, "throttled");
  hold({"shardId-0", "shardId-1"});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return !supervisor_->failing_shards().empty(); }));
  // Another worker takes the lease during the backoff.
  ASSERT_TRUE(takes_.held().lose("shardId-0", Status(StatusCode::kLeaseLost, "taken")));
  supervisor_->lease_lost("shardId-0");
  ASSERT_FALSE(look_until([] { return false; }, 5));
  EXPECT_TRUE(supervisor_->failing_shards().empty())
      << "a shard another worker reads is shown failing here";
  EXPECT_EQ(supervisor_->shard_states().count("shardId-0"), 0u);
  EXPECT_EQ(supervisor_->next_restart(Clock::MonoTime::max()), Clock::MonoTime::max());
  EXPECT_EQ(made_["shardId-0"], 1);
}

TEST_F(ConsumerSupervisorTest, AFailedShardThatThenEndsIsNoLongerFailing) {
  scripts_["shardId-0"].failure = Status(StatusCode::kUnavailable, "throttled");
  hold({"shardId-0"});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return !supervisor_->failing_shards().empty(); }));
  ShardScript ends;
  ends.ends = true;
  scripts_["shardId-0"] = ends;  // the restart reads to the shard's end
  ASSERT_TRUE(look_until([&] { return ended_.sync_streams.count("") > 0; }, 100));
  ASSERT_FALSE(look_until([] { return false; }, 3));
  EXPECT_EQ(made_["shardId-0"], 2);
  EXPECT_TRUE(supervisor_->failing_shards().empty())
      << "a shard read to its end without a record is shown failing for ever";
  EXPECT_EQ(supervisor_->shard_states().count("shardId-0"), 0u);
}

TEST_F(ConsumerSupervisorTest, AGoneStreamStopsAOneStreamWorker) {
  scripts_["shardId-0"].failure = Status(StatusCode::kNotFound, "stream orders not found");
  scripts_["shardId-1"].failure = Status(StatusCode::kNotFound, "stream orders not found");
  hold({"shardId-0"});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return ended_.fatal.has_value(); }));
  EXPECT_EQ(ended_.fatal->code(), StatusCode::kNotFound);
  EXPECT_TRUE(ended_.sync_streams.empty());
}

// A fan-out consumer deregistered while the worker reads (the source ends with kUnavailable
// and forgets it): the shard is read again after the backoff, the worker goes on.
TEST_F(ConsumerSupervisorTest, AShardWhoseStreamConsumerVanishedIsReadAgain) {
  scripts_["shardId-0"].failure =
      Status(StatusCode::kUnavailable,
             "fan-out for orders/shardId-0: the stream consumer arn:c no longer exists (it is "
             "registered again): ResourceNotFoundException: Consumer arn:c not found.");
  hold({"shardId-0"});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return !supervisor_->failing_shards().empty(); }));
  scripts_["shardId-0"] = ShardScript{};
  ASSERT_TRUE(look_until([&] { return made_["shardId-0"] == 2; }, 100));
  EXPECT_FALSE(ended_.fatal);
}

TEST_F(ConsumerSupervisorTest, AGoneStreamOfSeveralAsksItsSync) {
  const std::string key = "123456789012:orders:1700000000:shardId-0";
  scripts_["shardId-0"].failure = Status(StatusCode::kNotFound, "stream orders not found");
  hold({key});
  make_supervisor(/*multi_stream=*/true);
  ASSERT_TRUE(look_until([&] { return !ended_.sync_streams.empty(); }));
  EXPECT_EQ(ended_.sync_streams, (std::set<std::string>{"orders"}));
  EXPECT_FALSE(ended_.fatal);
}

// A consumer that failed keeps its shard's series for its restart; when the lease goes
// elsewhere before that, they go too (a stale lag left here would hold an alarm).
TEST_F(ConsumerSupervisorTest, AFailedShardsSeriesGoWhenItsLeaseGoesBeforeTheRestart) {
  metrics::MetricsRegistry registry;
  ctx_.metrics = &registry;
  scripts_["shardId-0"].failure = Status(StatusCode::kPermissionDenied, "KMS key disabled");
  hold({"shardId-0"});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return !supervisor_->failing_shards().empty(); }));
  const std::array<MetricTag, 1> tags{{{"shard", "shardId-0"}}};
  registry.gauge("consumer.millis_behind_latest", 86400000, tags);
  ASSERT_NE(registry.prometheus_text().find("kcl_millis_behind_latest{shard=\"shardId-0\"}"),
            std::string::npos);
  ASSERT_TRUE(takes_.held().lose("shardId-0", Status(StatusCode::kLeaseLost, "taken")));
  ASSERT_FALSE(look_until([] { return false; }, 3));
  const std::string text = registry.prometheus_text();
  EXPECT_EQ(text.find("kcl_millis_behind_latest{shard=\"shardId-0\"}"), std::string::npos)
      << "a stale lag for a shard this worker no longer reads: " << text;
  EXPECT_EQ(made_["shardId-0"], 1);
}

TEST_F(ConsumerSupervisorTest, ALostLeaseEndsItsConsumer) {
  metrics::MetricsRegistry registry;
  ctx_.metrics = &registry;
  hold({"shardId-0", "shardId-1"});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return supervisor_->consumer_count() == 2; }));
  // Quiet shards (no record yet): their lag is known all the same, from the reads.
  ASSERT_TRUE(look_until([&] {
    const std::string text = registry.prometheus_text();
    return text.find("kcl_millis_behind_latest{shard=\"shardId-0\"} 0\n") != std::string::npos &&
           text.find("kcl_millis_behind_latest{shard=\"shardId-1\"} 0\n") != std::string::npos;
  })) << registry.prometheus_text();
  ASSERT_TRUE(takes_.held().lose("shardId-0", Status(StatusCode::kLeaseLost, "taken")));
  supervisor_->lease_lost("shardId-0");
  ASSERT_TRUE(look_until([&] { return supervisor_->consumer_count() == 1; }));
  EXPECT_EQ(supervisor_->shard_states().count("shardId-0"), 0u);
  EXPECT_EQ(made_["shardId-0"], 1) << "a lease no longer held gets no new consumer";
  EXPECT_EQ(factory_.shutdowns, 0) << "a lost lease is not checkpointed";
  const std::string text = registry.prometheus_text();
  EXPECT_EQ(text.find("kcl_millis_behind_latest{shard=\"shardId-0\"}"), std::string::npos)
      << "no stale lag for a shard this worker no longer reads: " << text;
  EXPECT_NE(text.find("kcl_millis_behind_latest{shard=\"shardId-1\"} 0\n"), std::string::npos)
      << text;
}

TEST_F(ConsumerSupervisorTest, AHandoffNotedBeforeItsConsumerWasSeenStillStopsIt) {
  // The leader starts a handoff of a lease whose consumer a look is starting at that moment
  // (from a list of handoffs read just before): hand_off() finds no consumer, so only a later
  // look can ask it to finish. Then the handoff completes.
  start_handoff_to_w2("shardId-0");
  ASSERT_TRUE(look_until([&] {
    return store_.peek("shardId-0")->lease_owner == "w2" &&
           !store_.peek("shardId-0")->checkpoint_owner;
  })) << "the consumer was never asked to finish: the handoff never completed";
  EXPECT_EQ(factory_.shutdowns, 1) << "its processor checkpointed at shutdown_requested";
  EXPECT_FALSE(takes_.held().holds("shardId-0"));
}

// A handoff whose completion keeps failing (the lease table throttled): it was tried, and
// logged, at every look (each scheduler tick). Now it is tried after a growing backoff and
// its failures are logged once per series with a count; once the table answers it completes.
TEST_F(ConsumerSupervisorTest, AFailingHandoffCompletionIsTriedAfterABackoffAndLoggedOnce) {
  start_handoff_to_w2("shardId-0");
  store_.reset_stats();
  store_.fail_next(1000000, StatusCode::kUnavailable);
  // 40 looks, 100 ms apart.
  look_until([] { return false; }, 40);
  std::size_t lines = 0;
  for (const std::string& line : log_.lines()) {
    if (line.find("handing off lease shardId-0") != std::string::npos) ++lines;
  }
  EXPECT_LE(lines, 3u) << "logged at every look";
  EXPECT_LE(store_.stats().evicts, 12) << "tried at every look";
  EXPECT_GE(store_.stats().evicts, 3) << "not tried again";
  store_.fail_next(0);
  ASSERT_TRUE(look_until([&] {
    return store_.peek("shardId-0")->lease_owner == "w2" &&
           !store_.peek("shardId-0")->checkpoint_owner;
  })) << "the handoff never completed once the table answered";
  EXPECT_FALSE(takes_.held().holds("shardId-0"));
}

TEST_F(ConsumerSupervisorTest, StopAllAsksEveryConsumerForItsFinalCheckpoint) {
  hold({"shardId-0", "shardId-1"});
  make_supervisor();
  ASSERT_TRUE(look_until([&] { return supervisor_->consumer_count() == 2; }));
  const auto all = supervisor_->stop_all(0ms);
  ASSERT_EQ(all.size(), 2u);
  for (int i = 0; i < 20 && !(all[0]->done() && all[1]->done()); ++i) {
    pool_.run_due();
    clock_.advance(100ms);
  }
  EXPECT_TRUE(all[0]->done() && all[1]->done());
  EXPECT_EQ(factory_.shutdowns, 2);
}

}  // namespace
}  // namespace kcl::worker
